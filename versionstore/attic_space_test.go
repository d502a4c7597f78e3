package versionstore

import (
	"os"
	"path/filepath"
	"testing"

	"ckptfs/internal/ckpt"
	"ckptfs/internal/xfstest"
)

// TestStoreBytesOfClones: on XFS the budget counts an attic clone by what
// it does not share with the live file (nothing, just made), by its
// extents once the live file was rewritten, and two attic files holding
// the same extents (a clone, and the file itself once removed) once.
func TestStoreBytesOfClones(t *testing.T) {
	s, tree, root := cloneStore(t, xfstest.Mount(t, 1280<<20))
	const size = 64 << 20
	big := filepath.Join(root, "big")
	writeRandom(t, big, size, 1)
	turn := func(fn func()) {
		if _, err := s.Begin(ckpt.KindAgent, "", ""); err != nil {
			t.Fatal(err)
		}
		fn()
		if _, err := s.End(""); err != nil {
			t.Fatal(err)
		}
	}
	mnt := filepath.Dir(root)
	grewBy := func(what string, before int64, lo, hi int64) int64 {
		t.Helper()
		xfstest.Sync(t, mnt)
		now := s.StoreBytes()
		if d := now - before; d < lo || d > hi {
			t.Errorf("%s: the store's size grew by %d KiB, want %d to %d KiB", what, d>>10, lo>>10, hi>>10)
		}
		return now
	}
	xfstest.Sync(t, mnt)
	n := s.StoreBytes()
	turn(func() { captureFile(t, s, tree, "big") })
	if ref := contentOf(t, s, 1, "big"); ref.Attic == "" {
		t.Fatalf("big's capture %+v is not in the attic", ref)
	}
	n = grewBy("a clone of a 64 MiB file", n, 0, 2<<20)
	// Rewritten in place: the clone holds the old blocks alone now.
	writeRandom(t, big, size, 2)
	n = grewBy("the live file rewritten", n, size-(2<<20), size+(2<<20))
	// A second clone, then the file removed: its inode goes into the
	// attic and shares every block with that clone; they count once.
	turn(func() { captureFile(t, s, tree, "big") })
	n = grewBy("a second clone", n, 0, 2<<20)
	turn(func() {
		st, ino, err := tree.LstatInode("big")
		if err != nil {
			t.Fatal(err)
		}
		c := ckpt.Capture{Path: "big", Prior: st, Inode: ino,
			Link: func(dir *os.File, name string) error { return tree.Link("big", dir, name) }}
		if err := s.Record(c, ckpt.Program{Comm: "rm"}); err != nil {
			t.Fatal(err)
		}
		os.Remove(big)
	})
	grewBy("the file removed into the attic", n, size-(2<<20), size+(2<<20))
}

func TestCoveredTwice(t *testing.T) {
	ext := []extentOf{{0, 10, true}, {5, 20, true}, {8, 9, true}, {30, 40, true}, {35, 36, true}, {50, 60, true}}
	if got := coveredTwice(ext); got != 5+1 { // [5,10) and [35,36)
		t.Errorf("coveredTwice = %d, want 6", got)
	}
}
