package versionstore

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"ckptfs/internal/backing"
	"ckptfs/internal/ckpt"
	"ckptfs/internal/crashpoint"
)

// fillingTree fails a rewind part-way: after k writes of stored bytes
// into the tree, the store's disk is full (diskOf: headroom free) or,
// with treeErr, the next write into the tree fails with it.
type fillingTree struct {
	ckpt.Tree
	s       *Store
	k, n    int
	full    *bool
	treeErr error
}

func (f *fillingTree) WriteFile(p string, st ckpt.State, r io.Reader) error {
	if f.n == f.k && f.treeErr != nil {
		f.n++
		return &os.PathError{Op: "write", Path: p, Err: f.treeErr}
	}
	if err := f.Tree.WriteFile(p, st, r); err != nil {
		return err
	}
	if f.n++; f.n == f.k && f.treeErr == nil {
		*f.full = true
		f.s.mu.Lock()
		f.s.spaceAt = time.Time{} // the next capture looks again
		f.s.mu.Unlock()
	}
	return nil
}

// failureFixture is rollbackFixture with every byte sound: x, y and z
// as at the end of turn closed, then rewritten (v1, modes 0600-0602) in
// the open turn after it. The store's disk (diskOf) has room until the
// returned tree makes it full (or, with treeErr, fails) after the first
// write of a rewind.
func failureFixture(t *testing.T, treeErr error) (s *Store, ft *fillingTree, root string, closed uint64, before map[string]fileState) {
	t.Helper()
	s, tree, root := offlineFixture(t)
	for _, p := range []string{"x", "y", "z"} {
		writeFile(t, filepath.Join(root, p), []byte(p+" v0 "+strings.Repeat(p, 3000)))
	}
	c := closedThenOpen(t, s)
	for i, p := range []string{"x", "y", "z"} {
		captureFile(t, s, tree, p)
		writeFile(t, filepath.Join(root, p), []byte(p+" v1"))
		if err := os.Chmod(filepath.Join(root, p), os.FileMode(0o600+i)); err != nil {
			t.Fatal(err)
		}
	}
	full := new(bool)
	diskOf = func(s *Store) (int64, int64) {
		if *full {
			return headroom, 1 << 40
		}
		return 1 << 39, 1 << 40
	}
	t.Cleanup(func() { diskOf = nil })
	return s, &fillingTree{Tree: tree, s: s, k: 1, full: full, treeErr: treeErr}, root, c.Num, treeFiles(t, root)
}

// runFailing runs how ("rewind", "undo", "restore", "revert") of the
// fixture's turns on ft, and returns its error and what it names itself
// in one ("rewind to turn 2").
func runFailing(t *testing.T, s *Store, ft ckpt.Tree, how string, closed uint64) (what string, err error) {
	t.Helper()
	switch how {
	case "rewind":
		_, err = s.Rewind(closed, ft, RewindOptions{})
		what = fmt.Sprintf("rewind to turn %d", closed)
	case "undo":
		if _, err := s.End(""); err != nil {
			t.Fatal(err)
		}
		_, err = s.Rewind(closed, ft, RewindOptions{Undo: true})
		what = fmt.Sprintf("undo turn %d", closed+1)
	case "restore":
		_, err = s.Rewind(closed, ft, RewindOptions{Paths: []string{"x", "y", "z"}})
		what = fmt.Sprintf("restore of x y z from turn %d", closed)
	case "revert":
		if _, err := s.End(""); err != nil {
			t.Fatal(err)
		}
		_, err = s.Revert(closed+1, ft, RevertOptions{})
		what = fmt.Sprintf("revert of turn %d", closed+1)
	}
	return what, err
}

// undoneByFailure checks that the rewind that failed with err left the
// tree as before it (bytes and modes), no journal, and no open turn: its
// turn is closed, says it was undone, and draws no fork (no Target).
func undoneByFailure(t *testing.T, s *Store, root string, err error, before map[string]fileState) *RolledBackError {
	t.Helper()
	var rb *RolledBackError
	if !errors.As(err, &rb) {
		t.Fatalf("err %v, want a RolledBackError", err)
	}
	if errors.Is(err, ErrCorrupt) {
		t.Errorf("err %v matches ErrCorrupt: no bytes were lost", err)
	}
	after := treeFiles(t, root)
	for p, want := range before {
		got, ok := after[p]
		if !ok || string(got.data) != string(want.data) || got.mode != want.mode {
			t.Errorf("%s after the failed rewind: %.12q %v, want %.12q %v", p, got.data, got.mode, want.data, want.mode)
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			t.Errorf("the failed rewind left %s behind", p)
		}
	}
	if _, closer, err := s.db.Get(keyJournal); err != pebble.ErrNotFound {
		if err == nil {
			closer.Close()
		}
		t.Errorf("a journal is left after the failed rewind (%v)", err)
	}
	if cur, ok := s.Current(); ok {
		t.Errorf("turn %d (%s %q) is still open after the failed rewind", cur.Num, cur.Kind, cur.Label)
	}
	tn, terr := s.Turn(rb.Turn)
	if terr != nil {
		t.Fatal(terr)
	}
	if tn.Open || !strings.Contains(tn.Label, "undone") || strings.Count(tn.Label, "undone") != 1 {
		t.Errorf("the failed rewind's turn %d: open %v, label %q; want closed, saying undone once", tn.Num, tn.Open, tn.Label)
	}
	if p, _ := tn.Parent(); tn.Rewound() || p != tn.Prev() {
		t.Errorf("the failed rewind's turn %d draws a fork: parent %d, want %d", tn.Num, p, tn.Prev())
	}
	return rb
}

// TestRewindThatFailsPartWayChangesNothing: the store's disk fills up
// after a rewind, undo, restore or revert passed its space check and
// changed one path (a capture of the state it replaces is refused:
// ckpt.ErrStoreFull). It used to stop there, the tree half rewound, its
// turn left open with a Target, so the user's next edits went into a
// "rewind" turn forked at the target, and the error named an internal
// event. It must undo what it changed, leave no open turn (the next
// capture opens a manual one), and say in one line what failed and that
// nothing changed.
func TestRewindThatFailsPartWayChangesNothing(t *testing.T) {
	for _, how := range []string{"rewind", "undo", "restore", "revert"} {
		t.Run(how, func(t *testing.T) {
			s, ft, root, closed, before := failureFixture(t, nil)
			what, err := runFailing(t, s, ft, how, closed)
			if *ft.full == false {
				t.Fatalf("the disk never filled (%v)", err)
			}
			undoneByFailure(t, s, root, err, before)
			if !errors.Is(err, ckpt.ErrStoreFull) {
				t.Errorf("err %v does not match ckpt.ErrStoreFull", err)
			}
			want := regexp.MustCompile("^" + regexp.QuoteMeta(what) + ` failed: the store is full \([0-9.]+ [KMGT]?i?B free\); nothing changed$`)
			if !want.MatchString(err.Error()) {
				t.Errorf("err %q, want it to match %s", err, want)
			}
			*ft.full = false // space is back
			s.mu.Lock()
			s.spaceAt = time.Time{}
			s.mu.Unlock()
			writeFile(t, filepath.Join(root, "u"), []byte("user edit"))
			captureFile(t, s, ft.Tree.(*backing.Tree), "u")
			if cur, ok := s.Current(); !ok || cur.Kind != ckpt.KindManual {
				t.Errorf("the user's edit went into turn %d of kind %s (%q), want a new manual turn", cur.Num, cur.Kind, cur.Label)
			}
			s2 := reopened(t, s)
			if ok, err := s2.Recover(ft.Tree); ok || err != nil {
				t.Errorf("recover after the failed rewind: journal %v, %v; want none", ok, err)
			}
		})
	}
}

// TestRewindThatFailsOnTheTreeChangesNothing: the same when it is the
// project's disk that fails a write of the rewind (ENOSPC from the tree):
// undone, and the error says what failed.
func TestRewindThatFailsOnTheTreeChangesNothing(t *testing.T) {
	s, ft, root, closed, before := failureFixture(t, syscall.ENOSPC)
	what, err := runFailing(t, s, ft, "rewind", closed)
	undoneByFailure(t, s, root, err, before)
	if !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("err %v does not match ENOSPC", err)
	}
	if !strings.HasPrefix(err.Error(), what+" failed: ") || !strings.HasSuffix(err.Error(), "; nothing changed") || strings.Contains(err.Error(), "event") {
		t.Errorf("err %q, want %q, what failed, and that nothing changed", err, what+" failed: ")
	}
}

// TestFailedRewindsRollbackKilled: a rollback of a rewind the full store
// stopped, killed before it starts undoing, half-way, or after its turn
// closed, is finished by the next Recover (the store still full): the
// tree is as before the rewind, no turn is open, and Recover says the
// rewind was undone (matching ckpt.ErrStoreFull, not ErrCorrupt).
func TestFailedRewindsRollbackKilled(t *testing.T) {
	for _, point := range []string{"rewind.rollback", "rewind.step@3", "rewind.planned", "rewind.ended"} {
		t.Run(point, func(t *testing.T) {
			s, ft, root, closed, before := failureFixture(t, nil)
			got, err := untilCrash(t, point, func() error {
				_, err := s.Rewind(closed, ft, RewindOptions{})
				return err
			})
			if got == "" {
				t.Fatalf("the rewind was not killed at %s: %v", point, err)
			}
			if !*ft.full {
				t.Fatalf("killed at %s before the disk filled", point)
			}
			s2 := reopened(t, s)
			ok, err := s2.Recover(ft.Tree)
			if !ok {
				t.Fatalf("recover found no journal (%v)", err)
			}
			undoneByFailure(t, s2, root, err, before)
			if !errors.Is(err, ckpt.ErrStoreFull) || !strings.Contains(err.Error(), "nothing changed") {
				t.Errorf("recover: %v; want the rewind's failure, store full, nothing changed", err)
			}
			if ok, err := s2.Recover(ft.Tree); ok || err != nil {
				t.Errorf("second recover: journal %v, %v; want none", ok, err)
			}
		})
	}
}

// unsavedFixture is failureFixture on a store whose next WAL fsync
// fails (errEIO) once the crash point spec is hit, and works again after
// that.
func unsavedFixture(t *testing.T, spec string) (s *Store, tree *backing.Tree, root string, closed uint64, before map[string]fileState, failed *int) {
	t.Helper()
	var armed atomic.Bool
	nfailed := 0
	s, tog := faultStore(t, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if op.Kind != errorfs.OpFileSync || !strings.HasSuffix(op.Path, ".log") || !armed.CompareAndSwap(true, false) {
			return nil
		}
		nfailed++
		return errEIO
	}))
	t.Cleanup(func() { s.Close() })
	root = t.TempDir()
	tree, err := backing.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tree.Close() })
	for _, p := range []string{"x", "y", "z"} {
		writeFile(t, filepath.Join(root, p), []byte(p+" v0"))
	}
	c := closedThenOpen(t, s)
	for i, p := range []string{"x", "y", "z"} {
		captureFile(t, s, tree, p)
		writeFile(t, filepath.Join(root, p), []byte(p+" v1"))
		if err := os.Chmod(filepath.Join(root, p), os.FileMode(0o600+i)); err != nil {
			t.Fatal(err)
		}
	}
	tog.On() // from here, armed picks the sync to fail
	disarm, err := crashpoint.Arm(spec, func(string) { armed.Store(true) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(disarm)
	return s, tree, root, c.Num, treeFiles(t, root), &nfailed
}

// TestRewindWhoseJournalCannotBeSavedChangesNothing: the disk fails a
// rewind, undo, restore or revert right after its turn was opened: the
// fsync of its journal's commit (a commit whose sync fails is applied in
// Pebble all the same), or Begin's own sync (the turn committed, not
// synced). It used to return the bare I/O error with its turn left open
// (Target set, after the journal), so the user's next edits went into a
// "rewind" turn forked at the target, and the journal was left for the
// next start to run the rewind the user was told had failed. It must
// end as any rewind that fails does: nothing changed, no journal, the
// turn closed and saying so, one line naming what failed and that
// nothing changed; and the same rewind works once the disk does.
func TestRewindWhoseJournalCannotBeSavedChangesNothing(t *testing.T) {
	for _, when := range []string{"journal", "begin"} {
		for _, how := range []string{"rewind", "undo", "restore", "revert"} {
			t.Run(how+"/"+when, func(t *testing.T) {
				spec, reason := "rewind.begun", "its plan could not be saved: injected: input/output error"
				if when == "begin" {
					// Begin's commit; undo and revert End the open
					// turn first (runFailing).
					spec, reason = "turn.committed", `turn \d+ opened, but the log could not be synced to disk: injected: input/output error`
					if how == "undo" || how == "revert" {
						spec += "@2"
					}
				}
				s, tree, root, closed, before, failed := unsavedFixture(t, spec)
				what, err := runFailing(t, s, tree, how, closed)
				if *failed != 1 {
					t.Fatalf("%d fsyncs failed, want 1 (%v)", *failed, err)
				}
				undoneByFailure(t, s, root, err, before)
				if !errors.Is(err, syscall.EIO) {
					t.Errorf("err %v does not match EIO", err)
				}
				want := regexp.MustCompile("^" + regexp.QuoteMeta(what) + " failed: " + reason + "; nothing changed$")
				if !want.MatchString(err.Error()) {
					t.Errorf("err %q, want it to match %s", err, want)
				}
				if ok, err := s.Recover(tree); ok || err != nil {
					t.Errorf("recover after the failed rewind: journal %v, %v; want none", ok, err)
				}
				// The disk works again: a rewind to the same point goes
				// through.
				if _, err := s.Rewind(closed, tree, RewindOptions{}); err != nil {
					t.Fatalf("a later rewind: %v", err)
				}
				after := treeFiles(t, root)
				for _, p := range []string{"x", "y", "z"} {
					if got := string(after[p].data); got != p+" v0" {
						t.Errorf("%s after the later rewind: %q, want %q", p, got, p+" v0")
					}
				}
				if cur, ok := s.Current(); ok {
					t.Errorf("turn %d is open after the later rewind", cur.Num)
				}
			})
		}
	}
}

// TestRewindWhoseEndCannotBeSyncedIsDone: the disk fails the fsync of
// the log right after a rewind, undo, restore or revert closed its turn
// (End committed the turn, then could not sync). The tree is rewound and
// the turn closed: the rewind is done, and must say so, with the sync
// failure as a warning. It used to return the error, as if it had
// failed, and leave its journal for the next start to find. After a
// restart nothing is redone or undone, the turn is in the log as a
// finished rewind, and undoing it puts the tree back as before it.
func TestRewindWhoseEndCannotBeSyncedIsDone(t *testing.T) {
	for _, how := range []string{"rewind", "undo", "restore", "revert"} {
		t.Run(how, func(t *testing.T) {
			// The rewind's End commits the second turn record, after
			// Begin's; undo and revert End the open turn first.
			spec := "turn.committed@2"
			if how == "undo" || how == "revert" {
				spec = "turn.committed@3"
			}
			s, tree, root, closed, before, failed := unsavedFixture(t, spec)
			var turn ckpt.Turn
			var warning string
			var err error
			switch how {
			case "rewind", "restore":
				opts := RewindOptions{}
				if how == "restore" {
					opts.Paths = []string{"x", "y", "z"}
				}
				var res RewindResult
				res, err = s.Rewind(closed, tree, opts)
				turn, warning = res.Turn, res.Warning
			case "undo", "revert":
				if _, err := s.End(""); err != nil {
					t.Fatal(err)
				}
				if how == "undo" {
					var res RewindResult
					res, err = s.Rewind(closed, tree, RewindOptions{Undo: true})
					turn, warning = res.Turn, res.Warning
				} else {
					var res RevertResult
					res, err = s.Revert(closed+1, tree, RevertOptions{})
					turn, warning = res.Turn, res.Warning
				}
			}
			if *failed != 1 {
				t.Fatalf("%d fsyncs failed, want 1 (%v)", *failed, err)
			}
			if err != nil {
				t.Fatalf("the rewind is done, but it returned %v", err)
			}
			want := regexp.MustCompile(`^the store's log could not be synced to disk: injected: input/output error; a power loss may lose the record of turn \d+$`)
			if !want.MatchString(warning) {
				t.Errorf("warning %q, want it to match %s", warning, want)
			}
			if turn.Num == 0 || turn.Open || strings.Contains(turn.Label, "undone") {
				t.Errorf("the rewind's turn: %+v, want it closed and done", turn)
			}
			rewound := func(s *Store, when string) {
				t.Helper()
				after := treeFiles(t, root)
				for _, p := range []string{"x", "y", "z"} {
					if got := after[p]; !strings.HasPrefix(string(got.data), p+" v0") || got.mode != 0o644 {
						t.Errorf("%s %s: %.12q %v, want %q 0644", p, when, got.data, got.mode, p+" v0")
					}
				}
				if _, closer, err := s.db.Get(keyJournal); err != pebble.ErrNotFound {
					if err == nil {
						closer.Close()
					}
					t.Errorf("a journal is left %s (%v)", when, err)
				}
				if cur, ok := s.Current(); ok {
					t.Errorf("turn %d is open %s", cur.Num, when)
				}
				tn, err := s.Turn(turn.Num)
				if err != nil {
					t.Fatal(err)
				}
				if tn.Open || tn.Label != turn.Label || s.Latest() != turn.Num {
					t.Errorf("%s: turn %d open %v, label %q, latest %d; want turn %d closed, %q, the latest", when, tn.Num, tn.Open, tn.Label, s.Latest(), turn.Num, turn.Label)
				}
			}
			rewound(s, "after the rewind")
			// A restart finds nothing to finish.
			fs := s.wal.FS
			s.Close()
			s2, err := Open("/store", Options{FS: fs})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s2.Close() })
			if ok, err := s2.Recover(tree); ok || err != nil {
				t.Errorf("recover after the rewind: journal %v, %v; want none", ok, err)
			}
			rewound(s2, "after a restart")
			// Undoing it puts back what it replaced.
			if _, err := s2.Rewind(turn.Num-1, tree, RewindOptions{Undo: true}); err != nil {
				t.Fatalf("undo of the rewind: %v", err)
			}
			after := treeFiles(t, root)
			for p, want := range before {
				if got := after[p]; string(got.data) != string(want.data) || got.mode != want.mode {
					t.Errorf("%s after undoing the rewind: %.12q %v, want %.12q %v", p, got.data, got.mode, want.data, want.mode)
				}
			}
		})
	}
}
