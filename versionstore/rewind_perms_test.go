package versionstore

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"ckptfs/internal/backing"
	"ckptfs/internal/ckpt"
)

// permTree is the tree as a daemon running as an ordinary user sees it:
// it says it changes the tree as uid (ckpt.Creds), who owns nothing in
// it (every file is the test's). With refuse set, a change of what is in
// the directory refuse fails with EACCES, as the kernel's would, once
// allow such changes went through: a permission the rewind's check did
// not foresee (uid 0: it passes every check).
type permTree struct {
	*backing.Tree
	uid    uint32
	refuse string
	allow  int
	errno  syscall.Errno // of a refusal; 0: EACCES
}

// permUID is the user a permTree's daemon runs as.
const permUID = 4242

func (p *permTree) Creds() (uint32, []uint32) { return p.uid, []uint32{p.uid} }

// refused is the error of op on path (nil: let it through).
func (p *permTree) refused(op, path string) error {
	if p.refuse == "" {
		return nil
	}
	if _, ok := ckpt.Under(path, p.refuse); !ok || path == p.refuse && op != "remove" {
		return nil
	}
	if p.allow > 0 {
		p.allow--
		return nil
	}
	errno := p.errno
	if errno == 0 {
		errno = syscall.EACCES
	}
	return &os.PathError{Op: op, Path: path, Err: errno}
}

func (p *permTree) RemoveAll(path string) error {
	if err := p.refused("remove", path); err != nil {
		return err
	}
	return p.Tree.RemoveAll(path)
}

func (p *permTree) Mkdir(path string, mode uint32) error {
	if err := p.refused("mkdir", path); err != nil {
		return err
	}
	return p.Tree.Mkdir(path, mode)
}

func (p *permTree) Symlink(target, path string) error {
	if err := p.refused("symlink", path); err != nil {
		return err
	}
	return p.Tree.Symlink(target, path)
}

func (p *permTree) WriteFile(path string, st ckpt.State, r io.Reader) error {
	if err := p.refused("create", path); err != nil {
		return err
	}
	return p.Tree.WriteFile(path, st, r)
}

func (p *permTree) Hardlink(from, to string) error {
	if err := p.refused("link", to); err != nil {
		return err
	}
	return p.Tree.Hardlink(from, to)
}

func (p *permTree) Rename(from, to string) error {
	if err := p.refused("rename", from); err != nil {
		return err
	}
	if err := p.refused("rename", to); err != nil {
		return err
	}
	return p.Tree.Rename(from, to)
}

func (p *permTree) Exchange(a, b string) error {
	if err := p.refused("rename", a); err != nil {
		return err
	}
	if err := p.refused("rename", b); err != nil {
		return err
	}
	return p.Tree.Exchange(a, b)
}

func (p *permTree) Mknod(path string, st ckpt.State) error {
	if err := p.refused("mknod", path); err != nil {
		return err
	}
	return p.Tree.Mknod(path, st)
}

// recordPrior records the state path has now, as the overlay does before
// it changes it.
func recordPrior(t *testing.T, s *Store, tree *backing.Tree, path string) {
	t.Helper()
	st, ino, err := tree.LstatInode(path)
	if err != nil {
		t.Fatal(err)
	}
	c := ckpt.Capture{Path: path, Prior: st}
	if st.Type == ckpt.Regular {
		c.Open = func() (*os.File, error) { return tree.Open(path) }
	}
	if st.Type.Linkable() {
		c.Inode = ino
	}
	if err := s.Record(c, ckpt.Program{Comm: "test"}); err != nil {
		t.Fatal(err)
	}
}

// permFixture is a tree whose top directory anyone may write (0777), on
// a store with a closed turn; prep makes the tree before it, change
// makes (and records) the changes of the turn after it, which it ends.
// It returns the tree and the closed turn's number.
func permFixture(t *testing.T, prep func(root string), change func(s *Store, tree *backing.Tree, root string)) (*Store, *backing.Tree, string, uint64) {
	t.Helper()
	s, tree, root := offlineFixture(t)
	if err := os.Chmod(root, 0o777); err != nil {
		t.Fatal(err)
	}
	prep(root)
	closed := closedThenOpen(t, s)
	change(s, tree, root)
	if _, err := s.End(""); err != nil {
		t.Fatal(err)
	}
	return s, tree, root, closed.Num
}

func mkdirMode(t *testing.T, p string, mode os.FileMode) {
	t.Helper()
	if err := os.Mkdir(p, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil { // past the umask
		t.Fatal(err)
	}
}

// TestRewindRefusesWhatItsUserMayNotChange: a rewind, its dry run, a
// restore and a revert whose plan changes what the daemon's user may not
// (the entries of a directory of another user's it may not write, as a
// private mount's daemon may not those of root's; a file's mode it does
// not own; another user's file in a sticky directory) refuse before they
// change anything or open a turn, in one line naming the path and why.
// Such a rewind used to fail half-way and leave its turn open.
func TestRewindRefusesWhatItsUserMayNotChange(t *testing.T) {
	owner := os.Geteuid()
	rootdir := fmt.Sprintf("rootdir is owned by uid %d and not writable by you (uid %d)", owner, permUID)
	for _, tc := range []struct {
		name    string
		prep    func(t *testing.T, root string)
		change  func(t *testing.T, s *Store, tree *backing.Tree, root string)
		restore string // a path to restore too ("": none)
		why     string
		them    bool
	}{{
		name: "made in a directory not its own",
		prep: func(t *testing.T, root string) {},
		change: func(t *testing.T, s *Store, tree *backing.Tree, root string) {
			recordPrior(t, s, tree, "rootdir")
			mkdirMode(t, filepath.Join(root, "rootdir"), 0o755)
			recordPrior(t, s, tree, "rootdir/f")
			writeFile(t, filepath.Join(root, "rootdir/f"), []byte("r"))
		},
		restore: "rootdir",
		why:     rootdir,
	}, {
		name: "moved out of a directory not its own",
		prep: func(t *testing.T, root string) {
			mkdirMode(t, filepath.Join(root, "rootdir"), 0o755)
			writeFile(t, filepath.Join(root, "rootdir/f"), []byte("r"))
		},
		change: func(t *testing.T, s *Store, tree *backing.Tree, root string) {
			commit, err := s.RecordRename("rootdir/f", "f", false, ckpt.Program{Comm: "test"})
			if err != nil {
				t.Fatal(err)
			}
			err = os.Rename(filepath.Join(root, "rootdir/f"), filepath.Join(root, "f"))
			commit(err == nil)
			if err != nil {
				t.Fatal(err)
			}
		},
		restore: "rootdir",
		why:     rootdir,
	}, {
		name: "another user's file in a sticky directory",
		prep: func(t *testing.T, root string) { mkdirMode(t, filepath.Join(root, "tmp"), os.ModeSticky|0o777) },
		change: func(t *testing.T, s *Store, tree *backing.Tree, root string) {
			recordPrior(t, s, tree, "tmp/g")
			writeFile(t, filepath.Join(root, "tmp/g"), []byte("g"))
		},
		restore: "tmp/g",
		why:     fmt.Sprintf("tmp/g is owned by uid %d, not by you (uid %d), in the sticky directory tmp", owner, permUID),
	}, {
		name: "the mode of another user's file, and a directory not its own",
		prep: func(t *testing.T, root string) { writeFile(t, filepath.Join(root, "m"), []byte("m")) },
		change: func(t *testing.T, s *Store, tree *backing.Tree, root string) {
			st, err := tree.Lstat("m")
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Record(ckpt.Capture{Path: "m", Prior: st, MetaOnly: true}, ckpt.Program{Comm: "test"}); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(filepath.Join(root, "m"), 0o600); err != nil {
				t.Fatal(err)
			}
			recordPrior(t, s, tree, "rootdir")
			mkdirMode(t, filepath.Join(root, "rootdir"), 0o755)
			recordPrior(t, s, tree, "rootdir/f")
			writeFile(t, filepath.Join(root, "rootdir/f"), []byte("r"))
		},
		why:  fmt.Sprintf("m is owned by uid %d, not by you (uid %d): its mode cannot be set (and 1 more like it)", owner, permUID),
		them: true,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			s, tree, root, closed := permFixture(t,
				func(root string) { tc.prep(t, root) },
				func(s *Store, tree *backing.Tree, root string) { tc.change(t, s, tree, root) })
			pt := &permTree{Tree: tree, uid: permUID}
			before := takeSnapshot(t, root)
			latest := s.Latest()
			it := "it"
			if tc.them {
				it = "them"
			}
			type run struct {
				what, noun string
				do         func() error
			}
			runs := []run{
				{fmt.Sprintf("rewind to turn %d", closed), "rewind", func() error {
					_, err := s.Rewind(closed, pt, RewindOptions{})
					return err
				}},
				{fmt.Sprintf("rewind to turn %d", closed), "rewind", func() error {
					_, err := s.Rewind(closed, pt, RewindOptions{DryRun: true})
					return err
				}},
				{fmt.Sprintf("undo turn %d", closed+1), "undo", func() error {
					_, err := s.Rewind(closed, pt, RewindOptions{Undo: true})
					return err
				}},
				{fmt.Sprintf("revert of turn %d", closed+1), "revert", func() error {
					_, err := s.Revert(closed+1, pt, RevertOptions{})
					return err
				}},
				{fmt.Sprintf("revert of turn %d", closed+1), "revert", func() error {
					_, err := s.Revert(closed+1, pt, RevertOptions{DryRun: true})
					return err
				}},
			}
			if tc.restore != "" {
				for _, dry := range []bool{false, true} {
					runs = append(runs, run{fmt.Sprintf("restore of %s from turn %d", tc.restore, closed), "restore", func() error {
						_, err := s.Rewind(closed, pt, RewindOptions{Paths: []string{tc.restore}, DryRun: dry})
						return err
					}})
				}
			}
			for i, r := range runs {
				err := r.do()
				a := "a"
				if r.noun == "undo" {
					a = "an"
				}
				want := fmt.Sprintf("%s refused: %s; %s %s running as you cannot change %s; nothing changed", r.what, tc.why, a, r.noun, it)
				if err == nil || err.Error() != want || !errors.Is(err, ErrDenied) || !errors.Is(err, fs.ErrPermission) {
					t.Errorf("%d: %s: %v\nwant: %s", i, r.what, err, want)
				}
				if got := takeSnapshot(t, root); diffSnap(before, got) != "" {
					t.Fatalf("%d: %s changed the tree:\n%s", i, r.what, diffSnap(before, got))
				}
				if cur, ok := s.Current(); ok || s.Latest() != latest {
					t.Fatalf("%d: %s left turn %d open %v (latest %d, was %d)", i, r.what, cur.Num, ok, s.Latest(), latest)
				}
			}
			// Root's daemon does it.
			if _, err := s.Rewind(closed, &permTree{Tree: tree}, RewindOptions{}); err != nil {
				t.Fatalf("root's rewind: %v", err)
			}
		})
	}
}

// TestRewindDoesWhatItsUserMayChange: a plan whose changes are all in
// directories the daemon's user may write (0777, not its own), and moves
// a directory not its own within one of them (its entries move with it:
// none of them changes), is not refused, and runs.
func TestRewindDoesWhatItsUserMayChange(t *testing.T) {
	var want snapshot
	s, tree, root, closed := permFixture(t, func(root string) {
		mkdirMode(t, filepath.Join(root, "d"), 0o755)
		writeFile(t, filepath.Join(root, "d/f"), []byte("f"))
		writeFile(t, filepath.Join(root, "x"), []byte("x v0"))
		want = takeSnapshot(t, root)
	}, func(s *Store, tree *backing.Tree, root string) {
		commit, err := s.RecordRename("d", "e", false, ckpt.Program{Comm: "test"})
		if err != nil {
			t.Fatal(err)
		}
		err = os.Rename(filepath.Join(root, "d"), filepath.Join(root, "e"))
		commit(err == nil)
		if err != nil {
			t.Fatal(err)
		}
		captureFile(t, s, tree, "x")
		writeFile(t, filepath.Join(root, "x"), []byte("x v1"))
		recordPrior(t, s, tree, "y")
		writeFile(t, filepath.Join(root, "y"), []byte("y"))
	})
	pt := &permTree{Tree: tree, uid: permUID}
	res, err := s.Rewind(closed, pt, RewindOptions{DryRun: true})
	if err != nil {
		t.Fatalf("dry run: %v", err)
	}
	var kinds []string
	for _, c := range res.Changes {
		kinds = append(kinds, fmt.Sprintf("%s %s<-%s", c.Kind, c.Path, c.From))
	}
	if got := strings.Join(kinds, ", "); got != "renamed d<-e, renamed d/f<-e/f, modified x<-, deleted y<-" {
		t.Errorf("the dry run's changes: %s", got)
	}
	if _, err := s.Rewind(closed, pt, RewindOptions{}); err != nil {
		t.Fatalf("rewind: %v", err)
	}
	if d := diffSnap(want, takeSnapshot(t, root)); d != "" {
		t.Errorf("after the rewind:\n%s", d)
	}
}

// TestRollbackLeavesWhatTheRewindNeverChanged: a rewind fails half-way
// on a change it may not make after all (EACCES: a directory of root's,
// in a private mount, which no check foresaw): the removal of rootdir/f,
// whose prior state it had recorded first, as every step does. Its
// rollback undid that record too, writing back the bytes of a file that
// had never changed, into the directory it may not write: it failed the
// same way ("create rootdir/f: permission denied"), and left the turn
// open for the next start. Undoing a record of a file still as recorded
// has nothing to do: the rollback must undo the rest (a) and end the
// turn, the tree as before.
func TestRollbackLeavesWhatTheRewindNeverChanged(t *testing.T) {
	s, tree, root, closed := permFixture(t, func(root string) {
		writeFile(t, filepath.Join(root, "a"), []byte("a v0"))
	}, func(s *Store, tree *backing.Tree, root string) {
		recordPrior(t, s, tree, "rootdir")
		mkdirMode(t, filepath.Join(root, "rootdir"), 0o755)
		recordPrior(t, s, tree, "rootdir/f")
		writeFile(t, filepath.Join(root, "rootdir/f"), []byte("r"))
		captureFile(t, s, tree, "a") // after: the reverse pass undoes it first
		writeFile(t, filepath.Join(root, "a"), []byte("a v1"))
	})
	before := takeSnapshot(t, root)
	pt := &permTree{Tree: tree, refuse: "rootdir"}
	_, err := s.Rewind(closed, pt, RewindOptions{})
	var rb *RolledBackError
	if !errors.As(err, &rb) || rb.Incomplete != nil || !errors.Is(err, syscall.EACCES) {
		t.Fatalf("err %v, want a rewind rolled back to its end", err)
	}
	want := fmt.Sprintf("rewind to turn %d failed: remove rootdir/f: permission denied; nothing changed", closed)
	if err.Error() != want {
		t.Errorf("err %q, want %q", err, want)
	}
	if d := diffSnap(before, takeSnapshot(t, root)); d != "" {
		t.Errorf("after the failed rewind:\n%s", d)
	}
	endedTurn(t, s, tree, rb.Turn, "failed half-way, undone")
}

// TestRollbackThatCannotUndoEndsTheTurn: a rewind writes rootdir/y, then
// may not write rootdir/x (EACCES), nor rootdir/y again to undo it. That
// rollback used to fail "the next start finishes it", leaving the turn
// open with its journal: the user's next edits went into the "rewind"
// turn, and every later start ran the rollback again, to fail again. It
// must end the turn as it is, saying so, as one that meets lost bytes.
func TestRollbackThatCannotUndoEndsTheTurn(t *testing.T) {
	s, tree, root, closed := permFixture(t, func(root string) {
		mkdirMode(t, filepath.Join(root, "rootdir"), 0o755)
		writeFile(t, filepath.Join(root, "rootdir/x"), []byte("x v0"))
		writeFile(t, filepath.Join(root, "rootdir/y"), []byte("y v0"))
	}, func(s *Store, tree *backing.Tree, root string) {
		for _, p := range []string{"rootdir/x", "rootdir/y"} {
			captureFile(t, s, tree, p)
			writeFile(t, filepath.Join(root, p), []byte(p+" v1"))
		}
	})
	pt := &permTree{Tree: tree, refuse: "rootdir", allow: 1}
	_, err := s.Rewind(closed, pt, RewindOptions{})
	var rb *RolledBackError
	if !errors.As(err, &rb) || rb.Incomplete == nil || !errors.Is(err, syscall.EACCES) {
		t.Fatalf("err %v, want a rollback that could not end", err)
	}
	if want := fmt.Sprintf("rewind to turn %d failed: create rootdir/x: permission denied; undoing what it had changed failed too (", closed); !strings.HasPrefix(err.Error(), want) ||
		!strings.HasSuffix(err.Error(), fmt.Sprintf("): the tree is left partly rewound (turn %d)", rb.Turn)) {
		t.Errorf("err %q, want it to start %q and say the tree is left partly rewound", err, want)
	}
	endedTurn(t, s, tree, rb.Turn, "failed half-way, undone, not all undone")
	if got, _ := os.ReadFile(filepath.Join(root, "rootdir/y")); string(got) != "y v0" {
		t.Errorf("rootdir/y: %q, want it as the rewind left it", got)
	}
}

// TestRollbackThatCannotUndoForWantOfSpaceIsLeftForTheNextStart: as
// above, but the writes fail for want of space, which a later start may
// have back: the rollback's journal is kept and its turn left open, and
// the next start, with the space back, finishes undoing it.
func TestRollbackThatCannotUndoForWantOfSpaceIsLeftForTheNextStart(t *testing.T) {
	s, tree, root, closed := permFixture(t, func(root string) {
		mkdirMode(t, filepath.Join(root, "rootdir"), 0o755)
		writeFile(t, filepath.Join(root, "rootdir/x"), []byte("x v0"))
		writeFile(t, filepath.Join(root, "rootdir/y"), []byte("y v0"))
	}, func(s *Store, tree *backing.Tree, root string) {
		for _, p := range []string{"rootdir/x", "rootdir/y"} {
			captureFile(t, s, tree, p)
			writeFile(t, filepath.Join(root, p), []byte(p+" v1"))
		}
	})
	pt := &permTree{Tree: tree, refuse: "rootdir", allow: 1, errno: syscall.ENOSPC}
	_, err := s.Rewind(closed, pt, RewindOptions{})
	if err == nil || !strings.Contains(err.Error(), "undoing what it had changed failed too, the next start finishes it") {
		t.Fatalf("err %v, want a rollback left for the next start", err)
	}
	if _, ok := s.Current(); !ok {
		t.Fatal("the rewind's turn was closed: the next start has nothing to finish")
	}
	s2 := reopened(t, s)
	if ok, err := s2.Recover(tree); !ok || err == nil {
		t.Fatalf("recover: journal %v, %v; want the rollback finished", ok, err)
	}
	for _, p := range []string{"rootdir/x", "rootdir/y"} {
		if got, _ := os.ReadFile(filepath.Join(root, p)); string(got) != p+" v1" {
			t.Errorf("%s after the next start: %q, want it as before the rewind", p, got)
		}
	}
	if cur, ok := s2.Current(); ok {
		t.Errorf("turn %d (%q) left open after the next start", cur.Num, cur.Label)
	}
}

// endedTurn checks that the failed rewind's turn n is closed with a
// label ending in suffix, that no journal is left, and that a restart
// finds nothing to finish.
func endedTurn(t *testing.T, s *Store, tree ckpt.Tree, n uint64, suffix string) {
	t.Helper()
	if cur, ok := s.Current(); ok {
		t.Errorf("turn %d (%q) left open", cur.Num, cur.Label)
	}
	tn, err := s.Turn(n)
	if err != nil || tn.Open || !strings.HasSuffix(tn.Label, ": "+suffix) {
		t.Errorf("turn %d: open %v, label %q (%v); want it closed, ending %q", n, tn.Open, tn.Label, err, suffix)
	}
	if _, closer, err := s.db.Get(keyJournal); err != pebble.ErrNotFound {
		if err == nil {
			closer.Close()
		}
		t.Errorf("a journal is left (%v)", err)
	}
	s2 := reopened(t, s)
	if ok, err := s2.Recover(tree); ok || err != nil {
		t.Errorf("recover: journal %v, %v; want none", ok, err)
	}
}
