package versionstore

import (
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

// reviewFixture: a store and tree with unversioned paths as a mount has
// them (another project's store: a directory named .ckptfs below the
// root, and what lies below it; --exclude build/).
func reviewFixture(t *testing.T) (*Store, *backing.Tree, *sim) {
	t.Helper()
	s := NewTestStore(t)
	root := t.TempDir()
	tree := openTree(t, root)
	s.SetUnversioned(func(p string, isDir bool) bool {
		for _, el := range strings.Split(p, "/") {
			if el == ".ckptfs" || el == "build" {
				return true
			}
		}
		return false
	})
	return s, tree, &sim{t: t, root: root, tree: tree, store: s}
}

func (m *sim) turn(label string, fn func()) ckpt.Turn {
	m.t.Helper()
	if _, err := m.store.Begin(ckpt.KindAgent, label, ""); err != nil {
		m.t.Fatal(err)
	}
	fn()
	tn, err := m.store.End("")
	if err != nil {
		m.t.Fatal(err)
	}
	return tn
}

func inoOf(t *testing.T, p string) uint64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

// A directory made under a temporary name and renamed into place (as
// many tools do), which later holds another project's store: a rewind to
// before it leaves the store where it is, in the directory the dry run
// says it leaves, and does not move it to the temporary name.
func TestReviewRewindLeavesAStoreInARenamedDirectoryInPlace(t *testing.T) {
	s, tree, m := reviewFixture(t)
	m.turn("make lib", func() {
		m.capture("lib.tmp", false)
		if err := os.Mkdir(m.abs("lib.tmp"), 0o755); err != nil {
			t.Fatal(err)
		}
		m.capture("lib.tmp/x", false)
		writeFile(t, m.abs("lib.tmp/x"), []byte("x\n"))
		mvRecorded(m, "lib.tmp", "lib")
	})
	// lib becomes a project of its own.
	if err := os.MkdirAll(m.abs("lib/.ckptfs/db"), 0o700); err != nil {
		t.Fatal(err)
	}
	writeFile(t, m.abs("lib/.ckptfs/db/000001.log"), []byte("lib's history"))
	ino := inoOf(t, m.abs("lib/.ckptfs/db/000001.log"))

	dry, err := s.Rewind(0, tree, RewindOptions{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Rewind(0, tree, RewindOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d, r := changeList(dry.Changes), changeList(res.Changes); !slices.Equal(d, r) {
		t.Errorf("the dry run lists %q, the rewind %q", d, r)
	}
	if !reflect.DeepEqual(dry.Left, res.Left) {
		t.Errorf("the dry run leaves %+v, the rewind left %+v", dry.Left, res.Left)
	}
	if _, err := os.Lstat(m.abs("lib.tmp")); !os.IsNotExist(err) {
		t.Errorf("lib.tmp after the rewind: %v, want it absent (it was not there at turn 0)", err)
	}
	if b, err := os.ReadFile(m.abs("lib/.ckptfs/db/000001.log")); err != nil || string(b) != "lib's history" || inoOf(t, m.abs("lib/.ckptfs/db/000001.log")) != ino {
		t.Errorf("lib's store after the rewind: %q, %v; want it where it was, the same file", b, err)
	}
	if _, err := os.Lstat(m.abs("lib/x")); !os.IsNotExist(err) {
		t.Errorf("lib/x after the rewind: %v, want it gone", err)
	}
}

// A rewind never records nor removes an unversioned path, also one that
// the reverse pass moved, with the directory holding it, to a name that
// the fix-up pass then removes.
func TestReviewRewindNeverRecordsAnUnversionedPathMovedWithItsDirectory(t *testing.T) {
	s, tree, m := reviewFixture(t)
	m.turn("d.txt, moved to c and back", func() {
		m.capture("d.txt", false)
		writeFile(t, m.abs("d.txt"), []byte("d\n"))
		mvRecorded(m, "d.txt", "c")
		mvRecorded(m, "c", "d.txt")
	})
	m.turn("mkdir c", func() {
		m.capture("c", false)
		if err := os.Mkdir(m.abs("c"), 0o755); err != nil {
			t.Fatal(err)
		}
	})
	if err := os.MkdirAll(m.abs("c/.ckptfs"), 0o700); err != nil {
		t.Fatal(err)
	}
	writeFile(t, m.abs("c/.ckptfs/ballast"), []byte("c's history"))

	dry, err := s.Rewind(0, tree, RewindOptions{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Rewind(0, tree, RewindOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d, r := changeList(dry.Changes), changeList(res.Changes); !slices.Equal(d, r) {
		t.Errorf("the dry run lists %q, the rewind %q", d, r)
	}
	if !reflect.DeepEqual(dry.Left, res.Left) {
		t.Errorf("the dry run leaves %+v, the rewind left %+v", dry.Left, res.Left)
	}
	err = s.scanEvents(res.Turn.FirstSeq, res.Turn.LastSeq+1, func(r *record) (bool, error) {
		if strings.Contains(r.Path, ".ckptfs") {
			t.Errorf("the rewind recorded %s %s", r.Op, r.Path)
		}
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(m.abs("c/.ckptfs/ballast")); err != nil || string(b) != "c's history" {
		t.Errorf("c's store after the rewind: %q, %v; want it left where it was", b, err)
	}
	if _, err := os.Lstat(m.abs("d.txt")); !os.IsNotExist(err) {
		t.Errorf("d.txt after the rewind: %v, want it absent", err)
	}
}

var _ = filepath.Join

// show of a turn that renamed a directory (made under a temporary name)
// never lists the unversioned paths that appeared in it since: another
// project's store, an --exclude'd build/.
func TestReviewShowOfADirectoryRenameListsNoUnversionedPath(t *testing.T) {
	s, tree, m := reviewFixture(t)
	tn := m.turn("make lib", func() {
		m.capture("lib.tmp", false)
		if err := os.Mkdir(m.abs("lib.tmp"), 0o755); err != nil {
			t.Fatal(err)
		}
		m.capture("lib.tmp/x", false)
		writeFile(t, m.abs("lib.tmp/x"), []byte("x\n"))
		mvRecorded(m, "lib.tmp", "lib")
	})
	for _, p := range []string{"lib/.ckptfs/db/000001.log", "lib/build/out.bin"} {
		if err := os.MkdirAll(filepath.Dir(m.abs(p)), 0o700); err != nil {
			t.Fatal(err)
		}
		writeFile(t, m.abs(p), []byte(p))
	}
	for _, b := range []uint64{tn.Num, Now} {
		cs, err := s.Changes(0, b, tree)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cs {
			if strings.Contains(c.Path, ".ckptfs") || strings.Contains(c.Path, "build") {
				t.Errorf("Changes(0, %d) lists %s %s", b, c.Kind, c.Path)
			}
		}
	}
}

// a and b one inode at turn 0; since, b was made a copy of its own (same
// bytes) and a chmodded. A restore of b alone cannot link it to a again
// (a keeps its mode now, the restore leaves it alone): whatever it
// lists, it must do, and the same restore again must do nothing and
// make no turn.
func TestReviewRestoreOfALinkItCannotMakeIsANoOp(t *testing.T) {
	s, tree, m := reviewFixture(t)
	writeFile(t, m.abs("a"), []byte("x\n"))
	if err := os.Link(m.abs("a"), m.abs("b")); err != nil {
		t.Fatal(err)
	}
	m.turn("b a copy, chmod a", func() {
		m.captureAll("b", false)
		if err := os.Remove(m.abs("b")); err != nil {
			t.Fatal(err)
		}
		writeFile(t, m.abs("b"), []byte("x\n"))
		m.captureAll("a", true)
		if err := os.Chmod(m.abs("a"), 0o600); err != nil {
			t.Fatal(err)
		}
	})
	n0, _ := s.Turns(0)
	for i := range 3 {
		dry, err := s.Rewind(0, tree, RewindOptions{Paths: []string{"b"}, DryRun: true})
		if err != nil {
			t.Fatal(err)
		}
		res, err := s.Rewind(0, tree, RewindOptions{Paths: []string{"b"}})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("restore %d: dry run %q split %+v; restore %q split %+v, turn %d", i+1, changeList(dry.Changes), dry.SplitLinks, changeList(res.Changes), res.SplitLinks, res.Turn.Num)
		if d, r := changeList(dry.Changes), changeList(res.Changes); !slices.Equal(d, r) {
			t.Errorf("restore %d: the dry run lists %q, the restore %q", i+1, d, r)
		}
		if res.Turn.Num != 0 && len(res.Changes) == 0 {
			t.Errorf("restore %d made turn %d, which changed nothing", i+1, res.Turn.Num)
		}
	}
	if n, _ := s.Turns(0); len(n) > len(n0)+1 {
		t.Errorf("three restores of b made %d turns", len(n)-len(n0))
	}
}

// A directory made and then chmodded after the target, holding an
// --exclude'd build/ since (and a file made with it): the rewind leaves it (its dry run says so and
// lists no change of it), so it must not change its mode either: the
// reverse pass undoes the chmod of a directory it then leaves.
func TestReviewRewindLeavesTheModeOfADirectoryItLeaves(t *testing.T) {
	s, tree, m := reviewFixture(t)
	m.turn("mkdir out", func() {
		m.capture("out", false)
		if err := os.Mkdir(m.abs("out"), 0o755); err != nil {
			t.Fatal(err)
		}
		m.capture("f", false)
		writeFile(t, m.abs("f"), []byte("f\n"))
	})
	m.turn("chmod out", func() {
		m.capture("out", false)
		if err := os.Chmod(m.abs("out"), 0o700); err != nil {
			t.Fatal(err)
		}
	})
	if err := os.MkdirAll(m.abs("out/build"), 0o755); err != nil {
		t.Fatal(err)
	}
	dry, err := s.Rewind(0, tree, RewindOptions{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Rewind(0, tree, RewindOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d, r := changeList(dry.Changes), changeList(res.Changes); !slices.Equal(d, r) {
		t.Errorf("the dry run lists %q, the rewind %q", d, r)
	}
	if fi, err := os.Stat(m.abs("out")); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("out after the rewind: %v, %v; want it left as it was, 0700", fi.Mode(), err)
	}
}
