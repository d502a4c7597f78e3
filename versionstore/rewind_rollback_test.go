package versionstore

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"ckptfs/internal/backing"
	"ckptfs/internal/ckpt"
)

// rollbackFixture: x, y and z as they were at the end of turn closed
// (v0), then rewritten (v1) in the open turn after it, with y's v0 chunk
// lost. A rewind to closed undoes z first, then fails on y. It returns
// the tree's bytes and modes as they are (v1).
func rollbackFixture(t *testing.T) (s *Store, tree *backing.Tree, root string, closed uint64, before map[string]fileState) {
	t.Helper()
	s, tree, root = offlineFixture(t)
	v0 := func(p string) []byte { return []byte(p + " v0 " + strings.Repeat(p, 3000)) }
	for _, p := range []string{"x", "y", "z"} {
		writeFile(t, filepath.Join(root, p), v0(p))
	}
	c := closedThenOpen(t, s)
	for i, p := range []string{"x", "y", "z"} {
		captureFile(t, s, tree, p)
		writeFile(t, filepath.Join(root, p), []byte(p+" v1"))
		if err := os.Chmod(filepath.Join(root, p), os.FileMode(0o600+i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.db.Delete(chunkKey(sha256Of(v0("y"))), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	return s, tree, root, c.Num, treeFiles(t, root)
}

type fileState struct {
	data []byte
	mode os.FileMode
}

func treeFiles(t *testing.T, root string) map[string]fileState {
	t.Helper()
	m := map[string]fileState{}
	ents, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		p := filepath.Join(root, e.Name())
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		m[e.Name()] = fileState{data, fi.Mode()}
	}
	return m
}

// rolledBack checks that err says the rewind was undone, and that the
// tree is as before it, with no journal left and the turn saying so.
func rolledBack(t *testing.T, s *Store, root string, err error, before map[string]fileState) {
	t.Helper()
	var rb *RolledBackError
	if !errors.As(err, &rb) || !errors.Is(err, ErrCorrupt) {
		t.Fatalf("err %v, want a RolledBackError matching ErrCorrupt", err)
	}
	after := treeFiles(t, root)
	for p, want := range before {
		got, ok := after[p]
		if !ok || !bytes.Equal(got.data, want.data) || got.mode != want.mode {
			t.Errorf("%s after the rollback: %q %v, want %q %v", p, got.data, got.mode, want.data, want.mode)
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			t.Errorf("the rollback left %s behind", p)
		}
	}
	if _, closer, err := s.db.Get(keyJournal); err != pebble.ErrNotFound {
		if err == nil {
			closer.Close()
		}
		t.Errorf("a journal is left after the rollback (%v)", err)
	}
	if cur, ok := s.Current(); ok {
		t.Errorf("turn %d is still open after the rollback", cur.Num)
	}
	tn, err := s.Turn(rb.Turn)
	if err != nil {
		t.Fatal(err)
	}
	if tn.Kind != ckpt.KindRewind && tn.Kind != ckpt.KindRevert || !strings.Contains(tn.Label, "undone") {
		t.Errorf("the rolled back turn: %v %q", tn.Kind, tn.Label)
	}
}

// TestRewindRollsBackOverALostChunk: a chunk is found missing only as a
// rewind, a restore or a revert reads it, after it has changed other
// paths. It then undoes what it changed, so the tree is exactly as before
// it, and no journal is left (it used to stop half-way, and Recover then
// failed at every start); a restore of a path whose bytes are sound
// still works.
func TestRewindRollsBackOverALostChunk(t *testing.T) {
	for _, how := range []string{"rewind", "restore", "revert"} {
		t.Run(how, func(t *testing.T) {
			s, tree, root, closed, before := rollbackFixture(t)
			var err error
			switch how {
			case "rewind":
				_, err = s.Rewind(closed, tree, RewindOptions{})
			case "restore":
				_, err = s.Rewind(closed, tree, RewindOptions{Paths: []string{"x", "y", "z"}})
			case "revert":
				if _, err := s.End(""); err != nil {
					t.Fatal(err)
				}
				_, err = s.Revert(closed+1, tree, RevertOptions{})
			}
			rolledBack(t, s, root, err, before)
			s2 := reopened(t, s)
			if ok, err := s2.Recover(tree); ok || err != nil {
				t.Fatalf("recover after the rollback: journal %v, %v; want none", ok, err)
			}
			if _, err := s2.Rewind(closed, tree, RewindOptions{Paths: []string{"z"}}); err != nil {
				t.Fatal(err)
			}
			if got, _ := os.ReadFile(filepath.Join(root, "z")); !bytes.HasPrefix(got, []byte("z v0 ")) {
				t.Errorf("the restore of z after the rollback: %.8q", got)
			}
		})
	}
}

// TestRecoverRollsBack: a rewind killed before its first step is finished
// by Recover, which meets the lost chunk and rolls back instead; a
// rollback killed half-way is finished by the next Recover. Either way
// Recover returns a RolledBackError and leaves the tree as before the
// rewind, and the next Recover finds nothing to do.
func TestRecoverRollsBack(t *testing.T) {
	for _, point := range []string{"rewind.journaled", "rewind.rollback", "rewind.step@3"} {
		t.Run(point, func(t *testing.T) {
			s, tree, root, closed, before := rollbackFixture(t)
			got, err := untilCrash(t, point, func() error {
				_, err := s.Rewind(closed, tree, RewindOptions{})
				return err
			})
			if got == "" {
				t.Fatalf("the rewind was not killed at %s: %v", point, err)
			}
			s2 := reopened(t, s)
			ok, err := s2.Recover(tree)
			if !ok {
				t.Fatalf("recover found no journal (%v)", err)
			}
			rolledBack(t, s2, root, err, before)
			if ok, err := s2.Recover(tree); ok || err != nil {
				t.Fatalf("second recover: journal %v, %v; want none", ok, err)
			}
		})
	}
}

// TestRewindCapturesDoNotReuseADamagedChunk: the chunk of y's v0 is
// damaged (present, wrong bytes), and w, created in the open turn, is a
// copy of y's v0. The rewind removes w first, capturing its bytes: the
// capture must not take the damaged chunk for w's (a rollback would then
// read it and fail too, w's bytes lost); it stores the sound bytes again,
// which repairs y's version, and the rewind completes exactly.
func TestRewindCapturesDoNotReuseADamagedChunk(t *testing.T) {
	s, tree, root := offlineFixture(t)
	y0 := []byte("y v0 " + strings.Repeat("y", 9000))
	writeFile(t, filepath.Join(root, "y"), y0)
	closed := closedThenOpen(t, s)
	captureFile(t, s, tree, "y")
	writeFile(t, filepath.Join(root, "y"), []byte("y v1"))
	captureFile(t, s, tree, "w")               // absent
	writeFile(t, filepath.Join(root, "w"), y0) // cp of the old y
	if _, err := s.End(""); err != nil {
		t.Fatal(err)
	}
	// Bit rot: the chunk is there, its bytes are not those of its sum.
	bad := append([]byte{codecRaw}, y0...)
	bad[10] ^= 1
	if err := s.db.Set(chunkKey(sha256Of(y0)), bad, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Rewind(closed.Num, tree, RewindOptions{}); err != nil {
		t.Fatalf("rewind: %v", err)
	}
	if got, _ := os.ReadFile(filepath.Join(root, "y")); !bytes.Equal(got, y0) {
		t.Errorf("y after the rewind: %d bytes, want its %d of v0", len(got), len(y0))
	}
	if _, err := os.Lstat(filepath.Join(root, "w")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("w after the rewind: %v, want it gone", err)
	}
	if rep, err := s.Verify(); err != nil || len(rep.Corrupt) > 0 {
		t.Errorf("verify after the rewind: %+v %v", rep, err)
	}
}

// TestRolledBackRewindIsNoFork: a whole-tree rewind that was rolled back
// left the tree as the turn before it did, not as at its target: the
// timeline (Turn.Parent, what log --graph, the UI's lanes and the JSON
// "parent" draw) must continue from the previous turn, not fork at the
// target. The turn keeps Target, so Rewound() says its end state is the
// target's.
func TestRolledBackRewindIsNoFork(t *testing.T) {
	s, tree, _, closed, _ := rollbackFixture(t)
	_, err := s.Rewind(closed, tree, RewindOptions{})
	var rb *RolledBackError
	if !errors.As(err, &rb) {
		t.Fatalf("err %v, want a RolledBackError", err)
	}
	tn, err := s.Turn(rb.Turn)
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := tn.Parent(); tn.Rewound() || p != tn.Prev() {
		t.Errorf("rolled back turn %d (%q, target %v): Rewound %v, parent %d; want no rewind, parent %d",
			tn.Num, tn.Label, *tn.Target, tn.Rewound(), p, tn.Prev())
	}
}

// TestRollbackKilledBeforeItsEnd: the rollback's label is written with
// its journal, so a rollback that a kill cut short and Recover finished
// says "undone" once.
func TestRollbackKilledBeforeItsEnd(t *testing.T) {
	s, tree, _, closed, _ := rollbackFixture(t)
	if got, err := untilCrash(t, "rewind.ended", func() error {
		_, err := s.Rewind(closed, tree, RewindOptions{})
		return err
	}); got == "" {
		t.Fatalf("not killed: %v", err)
	}
	s2 := reopened(t, s)
	_, err := s2.Recover(tree)
	var rb *RolledBackError
	if !errors.As(err, &rb) {
		t.Fatalf("recover: %v", err)
	}
	tn, _ := s2.Turn(rb.Turn)
	if n := strings.Count(tn.Label, "undone"); n != 1 {
		t.Errorf("label %q says undone %d times", tn.Label, n)
	}
}

// TestRollbackThatFailsEndsTheTurn: when the rollback meets unreadable
// bytes too, nothing a later start could do would differ: the turn ends
// as it is ("not all undone"), no journal is left, and the error says
// the tree is left partly rewound.
func TestRollbackThatFailsEndsTheTurn(t *testing.T) {
	s, tree, root, closed, _ := rollbackFixture(t)
	// z's restore goes through; y's fails, and so does every later
	// write of stored bytes: the rollback's of z. (With k 1, z's own
	// restore failed, and the rollback had nothing to write: z was as
	// its record says.)
	ct := &corruptTree{Tree: tree, k: 2, always: true}
	_, err := s.Rewind(closed, ct, RewindOptions{})
	var rb *RolledBackError
	if !errors.As(err, &rb) || rb.Incomplete == nil || !errors.Is(err, ErrCorrupt) {
		t.Fatalf("err %v, want an incomplete RolledBackError", err)
	}
	if cur, ok := s.Current(); ok {
		t.Errorf("turn %d left open", cur.Num)
	}
	tn, err := s.Turn(rb.Turn)
	if err != nil || !strings.Contains(tn.Label, "not all undone") {
		t.Errorf("the turn: %q %v", tn.Label, err)
	}
	if _, closer, err := s.db.Get(keyJournal); err != pebble.ErrNotFound {
		if err == nil {
			closer.Close()
		}
		t.Errorf("a journal is left (%v)", err)
	}
	if ok, err := s.Recover(tree); ok || err != nil {
		t.Errorf("recover: journal %v, %v; want none", ok, err)
	}
	if got, _ := os.ReadFile(filepath.Join(root, "y")); string(got) != "y v1" {
		t.Errorf("y: %.8q, want it as before (its restore failed)", got)
	}
}

// reopened closes s and opens its store again (closed at the test's end).
func reopened(t *testing.T, s *Store) *Store {
	t.Helper()
	dir := s.dir
	s.Close()
	s2, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s2.Close() })
	return s2
}
