package versionstore

import (
	"testing"

	"ckptfs/internal/ckpt"
)

// Names that are not UTF-8 come back byte for byte, not as U+FFFD.
func TestInvalidUTF8NamesKept(t *testing.T) {
	s := NewTestStore(t)
	s.Begin(ckpt.KindAgent, "", "")
	name, target := "bad\xff\xfename", "to\xc3"
	recordBytes(t, s, name, []byte("data"))
	if err := s.Record(ckpt.Capture{Path: "ln\x80", Prior: ckpt.State{Type: ckpt.Symlink, Mode: 0o777, Target: target}}, ckpt.Program{}); err != nil {
		t.Fatal(err)
	}
	commit, err := s.RecordRename(name, "other\xfa", false, ckpt.Program{})
	if err != nil {
		t.Fatal(err)
	}
	commit(true)
	s.End("")
	var got []record
	s.scanEvents(1, 100, func(r *record) (bool, error) { got = append(got, *r); return true, nil })
	if len(got) != 3 || got[0].Path != name || got[1].Path != "ln\x80" || got[1].State.Target != target ||
		got[2].Path != name || got[2].To != "other\xfa" {
		t.Fatalf("records read back: %+v", got)
	}
	if b, err := versionBytes(t, s, 0, name, nil); err != nil || string(b) != "data" {
		t.Fatalf("%q at 0: %q %v", name, b, err)
	}
}
