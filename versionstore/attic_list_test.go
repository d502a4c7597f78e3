package versionstore

import (
	"os"
	"path/filepath"
	"testing"

	"ckptfs/internal/ckpt"
)

// TestGCRemovesAtticFilesOfForgottenTurns: the attic is listed afresh by
// every gc and du, not only by the first listing of the store's life (a
// directory handle read to its end lists nothing more).
func TestGCRemovesAtticFilesOfForgottenTurns(t *testing.T) {
	s, root := atticStore(t)
	tree := openTree(t, root)
	writeFile(t, filepath.Join(root, "f"), []byte("prior bytes"))
	for i := 0; i < 2; i++ {
		if _, err := s.Begin(ckpt.KindAgent, "rm f", ""); err != nil {
			t.Fatal(err)
		}
		if err := s.Record(linkedCapture(t, tree, "f"), ckpt.Program{Comm: "rm"}); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(filepath.Join(root, "f")); err != nil {
			t.Fatal(err)
		}
		if _, err := s.End(""); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(root, "f"), []byte("again"))
	}
	if ref := contentOf(t, s, 1, "f"); ref.Attic == "" {
		t.Fatalf("the unlink's capture %+v is not in the attic", ref)
	}
	du, err := s.Usage()
	if err != nil {
		t.Fatal(err)
	}
	if len(du.Turns) != 2 || du.Turns[0].Bytes == 0 || du.Turns[1].Bytes == 0 {
		t.Errorf("du per turn %+v, want the blocks of turns 1 and 2's attic files", du.Turns)
	}
	if _, err := s.Forget([]uint64{0}, ckpt.ReasonForget); err != nil {
		t.Fatal(err)
	}
	rep, err := s.GC(GCOptions{NoPolicy: true})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Attic != 1 {
		t.Errorf("gc removed %d attic files, want turn 1's", rep.Attic)
	}
	if n := atticNames(t, s); len(n) != 1 {
		t.Errorf("attic after gc: %v, want turn 2's file alone", n)
	}
}

// contentOf returns the content ref of the prior record of p in turn n.
func contentOf(t *testing.T, s *Store, n uint64, p string) *contentRef {
	t.Helper()
	var ref *contentRef
	err := s.scanEvents(0, s.Events(), func(r *record) (bool, error) {
		if r.Turn == n && r.Path == p && r.Op == opPrior {
			ref = r.Content
			return false, nil
		}
		return true, nil
	})
	if err != nil || ref == nil {
		t.Fatalf("no prior record of %s in turn %d (%v)", p, n, err)
	}
	return ref
}

func atticNames(t *testing.T, s *Store) []string {
	t.Helper()
	names, err := s.atticNames()
	if err != nil {
		t.Fatal(err)
	}
	return names
}
