package versionstore

import (
	"encoding/json"
	"slices"
	"testing"

	"ckptfs/internal/bytejson"
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

// A record's link names are bytes too, and a record goes through
// bytejson (as every record but events does) as through encoding/json:
// the names it keeps as bytes itself are not rewritten first.
func TestRecordLinkNamesKept(t *testing.T) {
	in := &record{Turn: 1, Op: opPrior, Path: "caf\xe9", To: "x\xff", Links: []string{"th\xe9", "ok"},
		State: ckpt.State{Type: ckpt.Symlink, Target: "t\xfe"}}
	for name, marshal := range map[string]func(any) ([]byte, error){"encoding/json": json.Marshal, "bytejson": bytejson.Marshal} {
		data, err := marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		var r, n record
		if err := decodeRecord(1, data, &r); err != nil {
			t.Fatal(err)
		}
		if r.Path != in.Path || r.To != in.To || !slices.Equal(r.Links, in.Links) || r.State.Target != in.State.Target {
			t.Errorf("%s: %s reads back as %+v", name, data, r)
		}
		if err := decodeNamesOnly(1, data, &n); err != nil || n.Path != in.Path || n.To != in.To {
			t.Errorf("%s: names of %s read back as %q %q (%v)", name, data, n.Path, n.To, err)
		}
	}
}

// A name holding the text \ufffd beside one that is not UTF-8: the event
// keeps both as they are (its JSON's "\\ufffd" is no replaced byte).
func TestEventNamesBesideEscapeText(t *testing.T) {
	s := NewTestStore(t)
	s.Begin(ckpt.KindAgent, "", "")
	commit, err := s.RecordRename(`a\ufffd`, "caf\xe9", false, ckpt.Program{})
	if err != nil {
		t.Fatal(err)
	}
	commit(true)
	if err := s.Record(ckpt.Capture{Path: "caf\xe9 link", Prior: ckpt.State{Type: ckpt.Symlink, Mode: 0o777, Target: `..\ufffd` + "\xfe"}}, ckpt.Program{}); err != nil {
		t.Fatal(err)
	}
	s.End("")
	var got []record
	s.scanEvents(1, 100, func(r *record) (bool, error) { got = append(got, *r); return true, nil })
	if len(got) != 2 || got[0].Path != `a\ufffd` || got[0].To != "caf\xe9" || got[1].Path != "caf\xe9 link" || got[1].State.Target != `..\ufffd`+"\xfe" {
		t.Fatalf("events read back: %+v", got)
	}
}
