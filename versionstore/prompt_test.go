package versionstore

import (
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"ckptfs/internal/ckpt"
)

// A turn's whole text is kept apart from its record: Turn has it, Turns
// (log) does not, the record never holds it, a relabelling Adopt replaces
// it, and forgetting the turn drops it.
func TestTurnPromptIsKept(t *testing.T) {
	s := NewTestStore(t)
	const text = "Fix it\n\nall of it"
	b, err := s.Begin(ckpt.KindAgent, text, "")
	if err != nil || b.Label != "Fix it" || b.Prompt != text {
		t.Fatalf("Begin: %v %+v", err, b)
	}
	if _, err := s.End(""); err != nil {
		t.Fatal(err)
	}
	if tu, err := s.Turn(1); err != nil || tu.Label != "Fix it" || tu.Prompt != text {
		t.Fatalf("Turn(1): %v %+v", err, tu)
	}
	if ts, err := s.Turns(0); err != nil || ts[0].Num != 1 || ts[0].Prompt != "" {
		t.Fatalf("Turns: %v %+v", err, ts)
	}
	if tu, err := s.storedTurn(1); err != nil || tu.Prompt != "" {
		t.Fatalf("the record holds the prompt: %v %+v", err, tu)
	}
	// A manual turn that changed nothing, adopted by a begin with one line.
	s.Begin(ckpt.KindManual, "", "")
	if tu, err := s.Adopt(ckpt.KindAgent, "one\nline more", ""); err != nil || tu.Num != 2 || tu.Prompt != "one\nline more" {
		t.Fatalf("Adopt: %v %+v", err, tu)
	}
	if _, err := s.Adopt(ckpt.KindAgent, "x", ""); err == nil {
		t.Fatal("Adopt of a labelled turn")
	}
	s.End("")
	s.Begin(ckpt.KindAgent, "three", "")
	s.End("")
	if _, err := s.Forget([]uint64{0, 1}, ckpt.ReasonForget); err != nil {
		t.Fatal(err)
	}
	if _, closer, err := s.db.Get(textKey(1)); err != pebble.ErrNotFound {
		if err == nil {
			closer.Close()
		}
		t.Errorf("the prompt of a forgotten turn is still stored (%v)", err)
	}
	if tu, err := s.Turn(2); err != nil || tu.Prompt != "one\nline more" {
		t.Errorf("Turn(2) after forget: %v %+v", err, tu)
	}
}
