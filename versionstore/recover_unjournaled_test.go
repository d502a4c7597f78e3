package versionstore

import (
	"strings"
	"testing"

	"ckptfs/internal/backing"
	"ckptfs/internal/ckpt"
)

// An action's turn that no journal goes with is closed at the next start:
// as cut short when it holds nothing, and saying that what it holds came
// after when changes went into it (an action that failed to start in a
// daemon that went on). A second start finds it closed, its label said
// once.
func TestRecoverClosesUnjournaledTurns(t *testing.T) {
	root := t.TempDir()
	tree, err := backing.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	defer tree.Close()
	for _, c := range []struct {
		name   string
		record bool
		suffix string
	}{{"empty", false, cutShort}, {"with changes", true, cutShortLater}} {
		t.Run(c.name, func(t *testing.T) {
			s := NewTestStore(t)
			if _, err := s.Begin(ckpt.KindRewind, "rewind to 0", ""); err != nil {
				t.Fatal(err)
			}
			if c.record {
				recordBytes(t, s, "f", []byte("later"))
			}
			for i := 0; i < 2; i++ {
				if did, err := s.Recover(tree); did || err != nil {
					t.Fatalf("Recover: %v %v", did, err)
				}
			}
			if cur, open := s.Current(); open {
				t.Fatalf("turn %d still open", cur.Num)
			}
			tu, _ := s.Turn(1)
			if tu.Label != "rewind to 0"+c.suffix || strings.Count(tu.Label, "(") != 1 {
				t.Errorf("label %q", tu.Label)
			}
		})
	}
}
