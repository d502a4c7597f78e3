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

// A change inside .git is one whose path is there, or for a rename, one
// of whose ends is: both are summed up as git's, and a patch leaves both
// out (git apply refuses either end inside .git).
func TestFileChangeInGitDir(t *testing.T) {
	for _, c := range []struct {
		path, from string
		want       bool
	}{
		{".git", "", true},
		{".git/objects/ec/90", "", true},
		{".gitignore", "", false},
		{"sub/.git/HEAD", "", false}, // a nested repository's: the project's own files
		{"a.txt", "", false},
		{"y", ".git/x", true},
		{".git/x", "y", true},
		{"z", "y", false},
	} {
		fc := FileChange{Path: c.path, From: c.from}
		if c.from != "" {
			fc.Kind = ckpt.Renamed
		}
		if got := fc.InGitDir(); got != c.want {
			t.Errorf("%q from %q: InGitDir %v, want %v", c.path, c.from, got, c.want)
		}
	}
}
