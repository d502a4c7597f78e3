package turnctl

import (
	"encoding/json"
	"testing"

	"ckptfs/internal/ckpt"
)

// The wire names a file's type as people read it (the JSON it had when
// the type was a string), and its owner.
func TestFileStateTypeIsItsNameOnTheWire(t *testing.T) {
	for _, typ := range []ckpt.Type{ckpt.Regular, ckpt.Dir, ckpt.Symlink, ckpt.Special, ckpt.FIFO, ckpt.Socket, ckpt.CharDevice, ckpt.BlockDevice} {
		in := FileState{Type: typ, Mode: "0644", UID: 1000, GID: 100, Size: 3, Target: "t"}
		b, err := json.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		want := `{"type":"` + typ.String() + `","mode":"0644","uid":1000,"gid":100,"size":3,"target":"t"}`
		if string(b) != want {
			t.Errorf("%v: %s, want %s", typ, b, want)
		}
		var out FileState
		if err := json.Unmarshal(b, &out); err != nil || out != in {
			t.Errorf("%s: decoded %+v, %v; want %+v", b, out, err, in)
		}
	}
	var fs FileState
	if err := json.Unmarshal([]byte(`{"type":"blob","mode":"0644"}`), &fs); err == nil {
		t.Errorf("an unknown type decoded as %v", fs.Type)
	}
}
