package versionstore

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"ckptfs/internal/ckpt"
)

// A rewind that removes or replaces a directory leaves the unversioned
// paths below it (another project's store, --exclude) as they are, with
// the directories above them: it neither records them (this history
// would hold another project's store, and a later rewind across this one
// write stale bytes back over it) nor removes them.
func TestRewindLeavesUnversionedBelowARemovedDirectory(t *testing.T) {
	s := NewTestStore(t)
	root := t.TempDir()
	tree := openTree(t, root)
	s.SetUnversioned(func(p string, isDir bool) bool {
		return strings.Contains(p, "/.ckptfs/") || isDir && strings.HasSuffix(p, "/.ckptfs") || strings.HasSuffix(p, ".o")
	})
	abs := func(p string) string { return filepath.Join(root, p) }
	capture := func(p string) {
		t.Helper()
		st, err := tree.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		c := ckpt.Capture{Path: p, Prior: st}
		if st.Type == ckpt.Regular {
			c.Open = func() (*os.File, error) { return tree.Open(p) }
		}
		if err := s.Record(c, ckpt.Program{Comm: "test"}); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, abs("f"), []byte("f at 0\n"))

	// Turn 1: sub/ and what is below it are new, and f becomes a directory.
	if _, err := s.Begin(ckpt.KindAgent, "one", ""); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"sub", "sub/a", "sub/b", "sub/b/c", "f"} {
		capture(p)
	}
	if err := os.MkdirAll(abs("sub/b"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, abs("sub/a"), []byte("a\n"))
	writeFile(t, abs("sub/b/c"), []byte("c\n"))
	if err := os.Remove(abs("f")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(abs("f"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := s.End(""); err != nil {
		t.Fatal(err)
	}
	// Unversioned paths appear below them, as no capture sees them.
	for _, p := range []string{"sub/.ckptfs/db/000001.log", "sub/b/x.o", "f/.ckptfs/ballast"} {
		if err := os.MkdirAll(filepath.Dir(abs(p)), 0o700); err != nil {
			t.Fatal(err)
		}
		writeFile(t, abs(p), []byte(p))
	}
	inodes := map[string]uint64{}
	for _, p := range []string{"sub/.ckptfs/db/000001.log", "sub/b/x.o", "f/.ckptfs/ballast", "sub/.ckptfs", "f/.ckptfs"} {
		var st unix.Stat_t
		if err := unix.Lstat(abs(p), &st); err != nil {
			t.Fatal(err)
		}
		inodes[p] = st.Ino
	}

	res, err := s.Rewind(0, tree, RewindOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The versioned paths are gone; the unversioned ones are the same
	// files, and the directories above them stay (f too, which cannot
	// become the file it was while it holds another project's store).
	for _, p := range []string{"sub/a", "sub/b/c"} {
		if _, err := os.Lstat(abs(p)); !os.IsNotExist(err) {
			t.Errorf("%s after the rewind: %v, want it gone", p, err)
		}
	}
	for p, ino := range inodes {
		var st unix.Stat_t
		if err := unix.Lstat(abs(p), &st); err != nil || st.Ino != ino {
			t.Errorf("%s after the rewind: inode %d (%v), want %d, left as it was", p, st.Ino, err, ino)
		}
		if strings.HasPrefix(p, "sub/.ckptfs/db/") || p == "sub/b/x.o" || p == "f/.ckptfs/ballast" {
			if b, err := os.ReadFile(abs(p)); err != nil || string(b) != p {
				t.Errorf("%s after the rewind: %q, %v", p, b, err)
			}
		}
	}
	// No record of the rewind's turn names them.
	if res.Turn.Num == 0 {
		t.Fatal("the rewind recorded no turn")
	}
	err = s.scanEvents(res.Turn.FirstSeq, res.Turn.LastSeq+1, func(r *record) (bool, error) {
		if strings.Contains(r.Path, ".ckptfs") || strings.HasSuffix(r.Path, ".o") {
			t.Errorf("the rewind recorded %s %s", r.Op, r.Path)
		}
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// No journal is left for Recover to run again at every start.
	if recovered, err := s.Recover(tree); err != nil || recovered {
		t.Errorf("Recover after the rewind: %v, %v; want nothing to do", recovered, err)
	}
}
