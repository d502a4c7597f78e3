package versionstore

import (
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"ckptfs/internal/backing"
	"ckptfs/internal/ckpt"
)

// linkedFixture: a and b hard links of one file ("one") at turn 0, or
// with linkedLater only a ("one") at turn 0 and b linked to it in turn 1;
// turn 1 then writes "two" through a, so both names read "two" now.
func linkedFixture(t *testing.T, linkedLater bool) (*Store, *backing.Tree, *sim) {
	t.Helper()
	root := t.TempDir()
	s := NewTestStore(t)
	tree, err := backing.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tree.Close() })
	m := &sim{t: t, root: root, tree: tree, store: s}
	writeFile(t, m.abs("a"), []byte("one"))
	if !linkedLater {
		if err := os.Link(m.abs("a"), m.abs("b")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Begin(ckpt.KindAgent, "write through a", ""); err != nil {
		t.Fatal(err)
	}
	if linkedLater {
		m.capture("b", false)
		if err := os.Link(m.abs("a"), m.abs("b")); err != nil {
			t.Fatal(err)
		}
	}
	m.captureAll("a", false)
	writeFile(t, m.abs("a"), []byte("two"))
	if _, err := s.End(""); err != nil {
		t.Fatal(err)
	}
	return s, tree, m
}

// checkLinked fails unless the files hold want (path: bytes) and p and q
// share an inode exactly when linked says.
func checkLinked(t *testing.T, m *sim, want map[string]string, p, q string, linked bool) {
	t.Helper()
	for f, w := range want {
		if b, err := os.ReadFile(filepath.Join(m.root, f)); err != nil || string(b) != w {
			t.Errorf("%s = %q, %v; want %q", f, b, err, w)
		}
	}
	if got := sameInode(m, p, q); got != linked {
		t.Errorf("%s and %s share an inode: %v, want %v", p, q, got, linked)
	}
}

// A restore of one name of a hard-linked file gives that name its bytes
// then on an inode of its own, and the names it did not restore keep
// theirs: the restore says so (SplitLinks), its dry run the same. Naming
// every name keeps them linked, as they were then, and splits nothing.
func TestRestoreOfOneHardLinkSaysItSplits(t *testing.T) {
	for _, later := range []bool{false, true} {
		name := "linked then and now"
		if later {
			name = "linked since"
		}
		t.Run(name, func(t *testing.T) {
			s, tree, m := linkedFixture(t, later)
			want := []LinkSplit{{Path: "a", Names: []string{"b"}}}
			dry, err := s.Rewind(0, tree, RewindOptions{Paths: []string{"a"}, DryRun: true})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(dry.SplitLinks, want) {
				t.Errorf("dry run: split links %+v, want %+v", dry.SplitLinks, want)
			}
			res, err := s.Rewind(0, tree, RewindOptions{Paths: []string{"a"}})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(res.SplitLinks, want) {
				t.Errorf("restore: split links %+v, want %+v", res.SplitLinks, want)
			}
			checkLinked(t, m, map[string]string{"a": "one", "b": "two"}, "a", "b", false)
		})
	}
	t.Run("every name", func(t *testing.T) {
		s, tree, m := linkedFixture(t, false)
		for _, dry := range []bool{true, false} {
			res, err := s.Rewind(0, tree, RewindOptions{Paths: []string{"a", "b"}, DryRun: dry})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.SplitLinks) != 0 {
				t.Errorf("dry run %v: split links %+v, want none", dry, res.SplitLinks)
			}
		}
		checkLinked(t, m, map[string]string{"a": "one", "b": "one"}, "a", "b", true)
	})
}

// A restore of one name of a hard-linked file whose mode changed since
// gives it its mode then, on an inode of its own: the name it does not
// restore keeps the inode and its mode now, so the restore cannot link
// the path back to it.
func TestRestoreOfOneHardLinkGivesItsMode(t *testing.T) {
	root := t.TempDir()
	s := NewTestStore(t)
	tree, err := backing.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	defer tree.Close()
	m := &sim{t: t, root: root, tree: tree, store: s}
	writeFile(t, m.abs("a"), []byte("one"))
	if err := os.Link(m.abs("a"), m.abs("b")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Begin(ckpt.KindAgent, "chmod a", ""); err != nil {
		t.Fatal(err)
	}
	m.captureAll("a", true)
	if err := os.Chmod(m.abs("a"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.End(""); err != nil {
		t.Fatal(err)
	}
	want := []LinkSplit{{Path: "a", Names: []string{"b"}}}
	for _, dry := range []bool{true, false} {
		res, err := s.Rewind(0, tree, RewindOptions{Paths: []string{"a"}, DryRun: dry})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(res.SplitLinks, want) {
			t.Errorf("dry run %v: split links %+v, want %+v", dry, res.SplitLinks, want)
		}
	}
	for f, mode := range map[string]os.FileMode{"a": 0o644, "b": 0o600} {
		if fi, err := os.Stat(m.abs(f)); err != nil || fi.Mode().Perm() != mode {
			t.Errorf("%s: %v, %v; want mode %v", f, fi.Mode(), err, mode)
		}
	}
	checkLinked(t, m, map[string]string{"a": "one", "b": "one"}, "a", "b", false)
}

// A restored path that had then, and has now, the inode of a name nothing
// since touched (which no record names: the path's own state then lies
// at another name, exchanged since) stays on it: the restore looks up the
// inode's names, and that one keeps the inode for the path as it was.
func TestRestoreKeepsTheLinkOfAnUntouchedName(t *testing.T) {
	root := t.TempDir()
	s := NewTestStore(t)
	tree, err := backing.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	defer tree.Close()
	m := &sim{t: t, root: root, tree: tree, store: s}
	writeFile(t, m.abs("b"), []byte("x"))
	writeFile(t, m.abs("d"), []byte("other"))
	if err := os.Link(m.abs("b"), m.abs("c")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Begin(ckpt.KindAgent, "exchange b and d, link c to b", ""); err != nil {
		t.Fatal(err)
	}
	ib, _ := tree.Ident("b")
	id, _ := tree.Ident("d")
	commit, err := s.RecordExchange("b", "d", ib, id, ckpt.Program{Comm: "mv"})
	if err != nil {
		t.Fatal(err)
	}
	err = tree.Exchange("b", "d")
	commit(err == nil)
	if err != nil {
		t.Fatal(err)
	}
	m.capture("b", true)
	if err := os.Remove(m.abs("b")); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(m.abs("c"), m.abs("b")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.End(""); err != nil {
		t.Fatal(err)
	}
	// b, c and d are now one inode, which b and c were at turn 0 (b then
	// is d now). The restore of b cannot unlink d, which it does not
	// restore; it keeps b on the inode it shares with c, as it did then.
	for _, dry := range []bool{true, false} {
		res, err := s.Rewind(0, tree, RewindOptions{Paths: []string{"b"}, DryRun: dry})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.SplitLinks) != 0 {
			t.Errorf("dry run %v: split links %+v, want none", dry, res.SplitLinks)
		}
	}
	checkLinked(t, m, map[string]string{"b": "x", "c": "x"}, "b", "c", true)
}

// A restore's dry run names the links the restore then splits, over
// random histories made mostly of hard links, restoring one or two names
// to a random turn; the restored paths are as they were then, bytes,
// modes and which of them share an inode.
func TestRestoreSplitsAsItsDryRunSays(t *testing.T) {
	seeds := 60
	if raceEnabled {
		seeds = 20
	}
	for seed := int64(1); seed <= int64(seeds); seed++ {
		rng := rand.New(rand.NewSource(seed))
		m, _ := newCrashSim(t, seed)
		m.linkOps, m.flat = 4, true
		turns, snaps := m.buildHistory(rng, 6, 12)
		for k := 0; k < 8; k++ {
			j := rng.Intn(len(turns))
			paths := []string{m.randPath()}
			if rng.Intn(2) == 0 {
				paths = append(paths, m.randPath())
			}
			what := fmt.Sprintf("seed %d: restore %v from %d", seed, paths, turns[j])
			dry, err := m.store.Rewind(turns[j], m.tree, RewindOptions{Paths: paths, DryRun: true})
			if err != nil {
				t.Fatalf("%s: dry run: %v", what, err)
			}
			res, err := m.store.Rewind(turns[j], m.tree, RewindOptions{Paths: paths})
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			if !reflect.DeepEqual(dry.SplitLinks, res.SplitLinks) {
				t.Errorf("%s: the dry run says it splits %+v, the restore split %+v", what, dry.SplitLinks, res.SplitLinks)
			}
			got := takeSnapshot(t, m.root)
			if w, g := groupsUnder(snaps[j], paths[0]), groupsUnder(got, paths[0]); w != g {
				t.Errorf("%s: the paths below %s share inodes as %s, want %s", what, paths[0], g, w)
			}
			for _, p := range paths {
				if w, g := snaps[j][p], got[p]; !sameEntry(w, g) {
					t.Errorf("%s: %s = %v, want %v", what, p, g, w)
				}
			}
		}
		m.store.Close()
		m.tree.Close()
	}
}
