package versionstore

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"ckptfs/internal/backing"
	"ckptfs/internal/ckpt"
)

// A rewind that removes or replaces a directory leaves the unversioned
// paths below it (another project's store, --exclude) as they are, with
// the directories above them: it neither records them (this history
// would hold another project's store, and a later rewind across this one
// write stale bytes back over it) nor removes them.
func TestRewindLeavesUnversionedBelowARemovedDirectory(t *testing.T) {
	s, tree, root := unversionedBelowDirs(t)
	abs := func(p string) string { return filepath.Join(root, p) }
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

// unversionedBelowDirs makes a store whose turn 1 made sub/ (sub/a,
// sub/b/c) and turned the file f into a directory, with unversioned paths
// below them since (sub/.ckptfs/db/000001.log and f/.ckptfs/ballast, the
// stores of projects inside this one; sub/b/x.o, an --exclude of *.o),
// and returns it with its tree and the tree's root.
func unversionedBelowDirs(t *testing.T) (*Store, *backing.Tree, string) {
	t.Helper()
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
	return s, tree, root
}

// changeList is cs as "kind path" lines (a rename "renamed from -> path").
func changeList(cs []Change) []string {
	var out []string
	for _, c := range cs {
		if c.From != "" {
			out = append(out, fmt.Sprintf("%s %s -> %s", c.Kind, c.From, c.Path))
			continue
		}
		out = append(out, fmt.Sprintf("%s %s", c.Kind, c.Path))
	}
	return out
}

// A directory a rewind (or a restore) leaves because it holds unversioned
// paths is not in its dry run's list nor in its own, both name it, and a
// rewind that has nothing else to do is a no-op, however often it is
// asked for: no empty turns.
func TestRewindOfDirectoriesHoldingUnversionedAgreesWithItsDryRun(t *testing.T) {
	f := Left{Path: "f", Then: ckpt.Regular, Unversioned: []string{"f/.ckptfs"}}
	sub := Left{Path: "sub", Then: ckpt.Absent, Unversioned: []string{"sub/.ckptfs", "sub/b/x.o"}}
	subB := Left{Path: "sub/b", Then: ckpt.Absent, Unversioned: []string{"sub/b/x.o"}}
	for _, tc := range []struct {
		name     string
		paths    []string
		wantLeft []Left
	}{
		{"rewind", nil, []Left{f, sub, subB}},
		{"restore", []string{"sub"}, []Left{sub, subB}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, tree, root := unversionedBelowDirs(t)
			dry, err := s.Rewind(0, tree, RewindOptions{Paths: tc.paths, DryRun: true})
			if err != nil {
				t.Fatal(err)
			}
			res, err := s.Rewind(0, tree, RewindOptions{Paths: tc.paths})
			if err != nil {
				t.Fatal(err)
			}
			want := []string{"deleted sub/a", "deleted sub/b/c"}
			if got := changeList(dry.Changes); !slices.Equal(got, want) {
				t.Errorf("the dry run lists %q, want %q", got, want)
			}
			if got := changeList(res.Changes); !slices.Equal(got, want) {
				t.Errorf("the rewind lists %q, want %q", got, want)
			}
			for _, p := range []string{"sub", "sub/b", "f"} {
				if fi, err := os.Lstat(filepath.Join(root, p)); err != nil || !fi.IsDir() {
					t.Errorf("%s after the rewind: %v, want the directory left", p, err)
				}
			}
			if !reflect.DeepEqual(dry.Left, tc.wantLeft) {
				t.Errorf("the dry run leaves %+v, want %+v", dry.Left, tc.wantLeft)
			}
			if !reflect.DeepEqual(res.Left, tc.wantLeft) {
				t.Errorf("the rewind left %+v, want %+v", res.Left, tc.wantLeft)
			}
			turns, err := s.Turns(0)
			if err != nil {
				t.Fatal(err)
			}
			for i := range 2 {
				again, err := s.Rewind(0, tree, RewindOptions{Paths: tc.paths})
				if err != nil {
					t.Fatal(err)
				}
				if again.Turn.Num != 0 || len(again.Changes) > 0 {
					t.Errorf("rewind %d again: turn %d, changes %q; want nothing done", i+2, again.Turn.Num, changeList(again.Changes))
				}
				if !reflect.DeepEqual(again.Left, tc.wantLeft) {
					t.Errorf("rewind %d again leaves %+v, want %+v", i+2, again.Left, tc.wantLeft)
				}
			}
			if after, err := s.Turns(0); err != nil || len(after) != len(turns) {
				t.Errorf("the repeated rewinds made %d turns (%v), want none", len(after)-len(turns), err)
			}
		})
	}
}

// A Left names the first ten unversioned paths below it, sorted, and
// counts the others.
func TestRewindLeftNamesTenUnversionedPaths(t *testing.T) {
	s, tree, root := unversionedBelowDirs(t)
	for i := range 11 {
		writeFile(t, filepath.Join(root, fmt.Sprintf("sub/b/x%02d.o", i)), nil)
	}
	res, err := s.Rewind(0, tree, RewindOptions{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	objs := []string{"sub/b/x.o"} // sorted: '.' < '0'
	for i := range 11 {
		objs = append(objs, fmt.Sprintf("sub/b/x%02d.o", i))
	}
	want := []Left{
		{Path: "f", Then: ckpt.Regular, Unversioned: []string{"f/.ckptfs"}},
		{Path: "sub", Then: ckpt.Absent, Unversioned: append([]string{"sub/.ckptfs"}, objs[:9]...), More: 3},
		{Path: "sub/b", Then: ckpt.Absent, Unversioned: objs[:10], More: 2},
	}
	if !reflect.DeepEqual(res.Left, want) {
		t.Errorf("the dry run leaves %+v, want %+v", res.Left, want)
	}
}

// A revert of the turn that made the directories that now hold
// unversioned paths leaves them as a rewind does: its dry run and its
// own list name the same changes, without them, and both say it left
// them.
func TestRevertOfDirectoriesHoldingUnversionedAgreesWithItsDryRun(t *testing.T) {
	s, tree, root := unversionedBelowDirs(t)
	dry, err := s.Revert(1, tree, RevertOptions{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Revert(1, tree, RevertOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"deleted sub/a", "deleted sub/b/c"}
	if got := changeList(dry.Changes); !slices.Equal(got, want) {
		t.Errorf("the dry run lists %q, want %q", got, want)
	}
	if got := changeList(res.Changes); !slices.Equal(got, want) {
		t.Errorf("the revert lists %q, want %q", got, want)
	}
	for _, p := range []string{"sub", "sub/b", "f"} {
		if fi, err := os.Lstat(filepath.Join(root, p)); err != nil || !fi.IsDir() {
			t.Errorf("%s after the revert: %v, want the directory left", p, err)
		}
	}
	wantLeft := []Left{
		{Path: "f", Then: ckpt.Regular, Unversioned: []string{"f/.ckptfs"}},
		{Path: "sub", Then: ckpt.Absent, Unversioned: []string{"sub/.ckptfs", "sub/b/x.o"}},
		{Path: "sub/b", Then: ckpt.Absent, Unversioned: []string{"sub/b/x.o"}},
	}
	if !reflect.DeepEqual(dry.Left, wantLeft) || !reflect.DeepEqual(res.Left, wantLeft) {
		t.Errorf("left: dry run %+v, revert %+v; want %+v", dry.Left, res.Left, wantLeft)
	}
}
