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
	if _, err := s.Begin(ckpt.KindAgent, "closed", ""); err != nil {
		t.Fatal(err)
	}
	c, err := s.End("")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Begin(ckpt.KindAgent, "open", ""); err != nil {
		t.Fatal(err)
	}
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
			dir := s.dir
			s.Close()
			s2, err := Open(dir, Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer s2.Close()
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
			dir := s.dir
			s.Close()
			s2, err := Open(dir, Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer s2.Close()
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
