package versionstore

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"ckptfs/internal/ckpt"
)

// offlineLinkFixture builds, as the overlay records it, the history of a
// file N that had a second name H for one turn:
//
//	turn 1: N = "a\n"
//	turn 2: ln N H
//	turn 3: N replaced by a copy (cp N N.tmp && mv N.tmp N): N and H
//	        are separate inodes again
//	turn 4: other = "x\n"
//
// then an edit of N while unmounted ("off\n" appended), recorded as turn 5
// with N's bytes at the end of turn 4 never captured.
func offlineLinkFixture(t *testing.T) *sim {
	s, tree, root := offlineFixture(t)
	m := &sim{t: t, store: s, tree: tree, root: root}
	turn := func(fn func()) {
		t.Helper()
		if _, err := s.Begin(ckpt.KindAgent, "", ""); err != nil {
			t.Fatal(err)
		}
		fn()
		if _, err := s.End(""); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p, data string) {
		m.capture(p, false)
		if err := os.WriteFile(m.abs(p), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	turn(func() { write("N", "a\n") })
	turn(func() {
		m.capture("H", false)
		if err := os.Link(m.abs("N"), m.abs("H")); err != nil {
			t.Fatal(err)
		}
	})
	turn(func() {
		write("N.tmp", "a\n")
		m.capture("N", true)
		mvRecorded(m, "N.tmp", "N")
	})
	turn(func() { write("other", "x\n") })
	if err := s.SaveManifest(tree, nil, nil); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(m.abs("N"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("off\n")
	f.Close()
	if res, err := s.RecordOffline(tree, nil, nil, false); err != nil || res.Lost != 1 || res.Turn.Num != 5 {
		t.Fatalf("offline check: %+v, %v; want N lost, as turn 5", res, err)
	}
	return m
}

// linkState describes N and H on disk: their bytes, and whether they are
// one inode.
func linkState(t *testing.T, m *sim) string {
	t.Helper()
	var out []string
	for _, p := range []string{"N", "H"} {
		b, err := os.ReadFile(m.abs(p))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%s=%q", p, b))
	}
	var a, b unix.Stat_t
	if unix.Lstat(m.abs("N"), &a) != nil || unix.Lstat(m.abs("H"), &b) != nil {
		t.Fatal("stat")
	}
	if a.Ino == b.Ino {
		out = append(out, fmt.Sprintf("one inode (nlink %d)", a.Nlink))
	} else {
		out = append(out, fmt.Sprintf("separate inodes (nlink %d, %d)", a.Nlink, b.Nlink))
	}
	return strings.Join(out, " ")
}

// listChanges renders changes as "kind path" lines.
func listChanges(cs []Change) string {
	var out []string
	for _, c := range cs {
		out = append(out, string(c.Kind)+" "+c.Path)
	}
	return strings.Join(out, ", ")
}

// rewindBoth runs a dry run and then the rewind to n, and fails unless
// both say the same (changes and paths not restored).
func rewindBoth(t *testing.T, m *sim, n uint64) RewindResult {
	t.Helper()
	dry, err := m.store.Rewind(n, m.tree, RewindOptions{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	res, err := m.store.Rewind(n, m.tree, RewindOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d, r := listChanges(dry.Changes), listChanges(res.Changes); d != r || !slices.Equal(dry.NotRestored, res.NotRestored) {
		t.Fatalf("rewind to %d: the dry run says %q, not restored %q; the rewind did %q, not restored %q",
			n, d, dry.NotRestored, r, res.NotRestored)
	}
	return res
}

// A rewind across an edit made while unmounted never writes into a path
// whose bytes at the target were never captured: it leaves them as they
// were before the rewind, and says so, as its dry run does. The earlier
// rewind's records of the path (bytes it had after the offline edit) are
// not its bytes at the target.
func TestRewindLeavesLostPathAsItWas(t *testing.T) {
	m := offlineLinkFixture(t)
	rewindBoth(t, m, 2)
	if got, want := linkState(t, m), `N="a\n" H="a\n" one inode (nlink 2)`; got != want {
		t.Fatalf("after the rewind to 2: %s, want %s", got, want)
	}
	res := rewindBoth(t, m, 4)
	// N keeps its bytes of before the rewind ("a\n", not the offline
	// edit's "a\noff\n"); at turn 4 it was not H's inode.
	if got, want := linkState(t, m), `N="a\n" H="a\n" separate inodes (nlink 1, 1)`; got != want {
		t.Fatalf("after the rewind to 4: %s, want %s", got, want)
	}
	if !slices.Equal(res.NotRestored, []string{"N"}) {
		t.Fatalf("not restored: %q, want N", res.NotRestored)
	}
	if b, _ := os.ReadFile(filepath.Join(m.root, "other")); string(b) != "x\n" {
		t.Fatalf("other = %q", b)
	}
}

// At turn 3, N and H were separate inodes; H is fully known then. A
// rewind to 3 from a tree where they are one inode gives them separate
// inodes again, though N's bytes are left as they are.
func TestRewindSplitsLostPathFromOtherNames(t *testing.T) {
	m := offlineLinkFixture(t)
	rewindBoth(t, m, 2)
	res := rewindBoth(t, m, 3)
	if got, want := linkState(t, m), `N="a\n" H="a\n" separate inodes (nlink 1, 1)`; got != want {
		t.Fatalf("after the rewind to 3: %s, want %s", got, want)
	}
	if !slices.Equal(res.NotRestored, []string{"N"}) {
		t.Fatalf("not restored: %q, want N", res.NotRestored)
	}
	if got, want := listChanges(res.Changes), "link N"; got != want {
		t.Fatalf("rewind to 3 changed %q, want %q", got, want)
	}
}

// A restore of N alone from turn 3 (nothing undone first: the link pass
// alone parts it) leaves N's bytes and gives it an inode of its own.
func TestRestorePartsLostPathFromOtherNames(t *testing.T) {
	m := offlineLinkFixture(t)
	rewindBoth(t, m, 2)
	opts := RewindOptions{DryRun: true, Paths: []string{"N"}}
	dry, err := m.store.Rewind(3, m.tree, opts)
	if err != nil {
		t.Fatal(err)
	}
	opts.DryRun = false
	res, err := m.store.Rewind(3, m.tree, opts)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := linkState(t, m), `N="a\n" H="a\n" separate inodes (nlink 1, 1)`; got != want {
		t.Fatalf("after the restore of N from 3: %s, want %s", got, want)
	}
	for _, r := range []RewindResult{dry, res} {
		if got := listChanges(r.Changes); got != "link N" || !slices.Equal(r.NotRestored, []string{"N"}) {
			t.Fatalf("restore of N from 3: changes %q, not restored %q; want link N, N", got, r.NotRestored)
		}
	}
}

// A turn that gave each of two names of one inode an inode of its own
// lists both names' link changes, also after a later edit of one of them
// made while unmounted (whose bytes at the end of the turn were then
// never captured, but whose inode is still known).
func TestTurnChangesOfLinksKeptAfterOfflineEdit(t *testing.T) {
	s, tree, root := offlineFixture(t)
	m := &sim{t: t, store: s, tree: tree, root: root}
	turn := func(fn func()) {
		t.Helper()
		if _, err := s.Begin(ckpt.KindAgent, "", ""); err != nil {
			t.Fatal(err)
		}
		fn()
		if _, err := s.End(""); err != nil {
			t.Fatal(err)
		}
	}
	copyOver := func(p string) { // cp p p.tmp && mv p.tmp p
		m.capture(p+".tmp", false)
		os.WriteFile(m.abs(p+".tmp"), []byte("a\n"), 0o644)
		m.capture(p, true)
		mvRecorded(m, p+".tmp", p)
	}
	turn(func() {
		m.capture("f", false)
		os.WriteFile(m.abs("f"), []byte("a\n"), 0o644)
		m.capture("g", false)
		os.Link(m.abs("f"), m.abs("g"))
	})
	turn(func() { copyOver("f"); copyOver("g") })
	kinds := func() map[string]ckpt.ChangeKind {
		cs, err := s.TurnChanges(2, tree)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]ckpt.ChangeKind{}
		for _, c := range cs {
			out[c.Path] = c.Kind
		}
		return out
	}
	if k := kinds(); k["f"] != ckpt.Relinked || k["g"] != ckpt.Relinked || len(k) != 2 {
		t.Fatalf("turn 2 changed %v, want f and g relinked", k)
	}
	if err := s.SaveManifest(tree, nil, nil); err != nil {
		t.Fatal(err)
	}
	f, _ := os.OpenFile(m.abs("f"), os.O_WRONLY|os.O_APPEND, 0)
	f.WriteString("off\n")
	f.Close()
	if res, err := s.RecordOffline(tree, nil, nil, false); err != nil || res.Lost != 1 {
		t.Fatalf("offline check: %+v, %v; want f lost", res, err)
	}
	if k := kinds(); k["g"] != ckpt.Relinked || k["f"] == "" || len(k) != 2 {
		t.Fatalf("after the offline edit of f, turn 2 changed %v, want f and g (g relinked)", k)
	}
}

// Names of one inode changed while unmounted, its bytes left alone: a
// link made and another removed (the link count as before), a link
// removed, a name replaced by a new file (sed -i). The inode's ctime
// moved, which the changed names explain: its bytes are not taken for
// written. A name that left it is recorded with the bytes the inode
// still holds under its other names, and a rewind to the turn before
// gives every name back its bytes and the inode they shared.
func TestOfflineNamesOfAnInodeKeepItsBytes(t *testing.T) {
	for _, c := range []struct {
		name    string
		offline func(t *testing.T, root string)
		changes string // the offline turn's
	}{
		{"a link made, another removed", func(t *testing.T, root string) {
			if err := os.Link(filepath.Join(root, "s"), filepath.Join(root, "sub", "s3")); err != nil {
				t.Fatal(err)
			}
			os.Remove(filepath.Join(root, "sub", "s2"))
		}, "deleted sub/s2, added sub/s3"},
		{"a link removed", func(t *testing.T, root string) {
			os.Remove(filepath.Join(root, "sub", "s2"))
		}, "deleted sub/s2"},
		{"a name replaced", func(t *testing.T, root string) {
			writeFile(t, filepath.Join(root, "sub", "tmp"), []byte("new\n"))
			if err := os.Rename(filepath.Join(root, "sub", "tmp"), filepath.Join(root, "sub", "s2")); err != nil {
				t.Fatal(err)
			}
		}, "modified sub/s2"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, tree, root := offlineFixture(t)
			m := &sim{t: t, store: s, tree: tree, root: root}
			os.Mkdir(filepath.Join(root, "sub"), 0o755)
			writeFile(t, filepath.Join(root, "s"), []byte("solo\n"))
			if err := os.Link(filepath.Join(root, "s"), filepath.Join(root, "sub", "s2")); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Begin(ckpt.KindAgent, "", ""); err != nil {
				t.Fatal(err)
			}
			m.captureAll("s", false)
			f, err := os.OpenFile(m.abs("s"), os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.WriteString("more\n")
			f.Close()
			n, err := s.End("")
			if err != nil {
				t.Fatal(err)
			}
			names := []string{"s", "sub/s2", "sub/s3"}
			want := linkGroups(t, root, names...)
			if err := s.SaveManifest(tree, nil, nil); err != nil {
				t.Fatal(err)
			}
			c.offline(t, root)
			res, err := s.RecordOffline(tree, nil, nil, false)
			if err != nil || res.Lost != 0 {
				t.Fatalf("offline check: %+v, %v; want no bytes lost", res, err)
			}
			cs, err := s.TurnChanges(res.Turn.Num, tree)
			if err != nil {
				t.Fatal(err)
			}
			if got := changeKinds(cs); strings.ReplaceAll(got, "<-", "") != c.changes {
				t.Errorf("the offline turn: %s, want %s", got, c.changes)
			}
			rewindBoth(t, m, n.Num)
			if got := linkGroups(t, root, names...); got != want {
				t.Errorf("after the rewind to turn %d: %s\nwant: %s", n.Num, got, want)
			}
		})
	}
}

// failOpenTree is a tree whose file bad cannot be opened (EACCES).
type failOpenTree struct {
	ckpt.Tree
	bad string
}

func (f failOpenTree) Open(p string) (*os.File, error) {
	if p == f.bad {
		return nil, &os.PathError{Op: "open", Path: p, Err: os.ErrPermission}
	}
	return f.Tree.Open(p)
}

// A name of a two-name inode removed while unmounted, the other name
// unreadable (another user's 0600 file): the removed name's bytes are
// lost, and the check goes on.
func TestOfflineOtherNameUnreadableLeavesTheBytesLost(t *testing.T) {
	s, tree, root := offlineFixture(t)
	writeFile(t, filepath.Join(root, "s"), []byte("solo\n"))
	if err := os.Link(filepath.Join(root, "s"), filepath.Join(root, "s2")); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveManifest(tree, nil, nil); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(root, "s2"))
	res, err := s.RecordOffline(failOpenTree{tree, "s"}, nil, nil, false)
	if err != nil || res.Lost != 1 || res.Paths != 1 {
		t.Fatalf("offline check: %+v, %v; want s2 recorded, its bytes lost", res, err)
	}
}
