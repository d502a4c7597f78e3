package versionstore

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"ckptfs/internal/backing"
	"ckptfs/internal/ckpt"
)

// A capture keeps a file's bytes by linking its inode into the attic,
// and a crash cuts off the unlink (or the rename over it) that would
// have taken the tree's name away: the inode keeps both names. Recover
// gives the attic its own copy before the tree is served, so a write to
// the tree's file afterwards leaves history as it was. (The crash test's
// seed 1796011076219532839 found this: "attic file 1 changed size".)
func TestRecoverUnsharesAnAtticLinkACrashLeftInTheTree(t *testing.T) {
	for _, killed := range []bool{false, true} {
		t.Run(fmt.Sprint("recovery killed at recover.unshared: ", killed), func(t *testing.T) {
			testUnshare(t, killed)
		})
	}
}

func testUnshare(t *testing.T, killedOnce bool) {
	s, tree, root := offlineFixture(t)
	writeFile(t, filepath.Join(root, "f"), []byte("old"))
	if _, err := s.Begin(ckpt.KindAgent, "", ""); err != nil {
		t.Fatal(err)
	}
	if err := s.Record(linkedCapture(t, tree, "f"), ckpt.Program{Comm: "rm"}); err != nil {
		t.Fatal(err)
	}
	var fst unix.Stat_t
	if err := unix.Lstat(filepath.Join(root, "f"), &fst); err != nil || fst.Nlink != 2 {
		t.Fatalf("the capture did not link f into the attic: nlink %d %v", fst.Nlink, err)
	}
	// Killed here: f was never unlinked.
	s2 := reopened(t, s)
	if killedOnce {
		if p, err := untilCrash(t, "recover.unshared", func() error { _, err := s2.Recover(tree); return err }); p == "" {
			t.Fatalf("Recover was not killed at recover.unshared: %v", err)
		}
		s2 = reopened(t, s2)
	}
	if _, err := s2.Recover(tree); err != nil {
		t.Fatal(err)
	}
	if killedOnce {
		// The copy was committed, the old attic name not yet removed:
		// no record names it, and the gc removes it.
		if _, err := s2.GC(GCOptions{NoPolicy: true}); err != nil {
			t.Fatal(err)
		}
	}
	if err := unix.Lstat(filepath.Join(root, "f"), &fst); err != nil || fst.Nlink != 1 {
		t.Errorf("after Recover f still shares its inode: nlink %d %v", fst.Nlink, err)
	}
	writeFile(t, filepath.Join(root, "f"), []byte("written after the restart"))
	if b, err := versionBytes(t, s2, 0, "f", tree); err != nil || string(b) != "old" {
		t.Errorf("f at turn 0: %q %v, want \"old\"", b, err)
	}
	if rep, err := s2.Verify(); err != nil || len(rep.Corrupt) > 0 {
		t.Errorf("verify: %+v %v", rep, err)
	}
}

// linkedCapture is the capture of regular file p about to lose its last
// name, as the overlay makes it: offering the store its inode to link
// into the attic.
func linkedCapture(t *testing.T, tree *backing.Tree, p string) ckpt.Capture {
	t.Helper()
	st, ino, err := tree.LstatInode(p)
	if err != nil {
		t.Fatal(err)
	}
	return ckpt.Capture{Path: p, Prior: st, Inode: ino,
		Open: func() (*os.File, error) { return tree.Open(p) },
		Link: func(dir *os.File, name string) error { return tree.Link(p, dir, name) }}
}
