package versionstore

import (
	"errors"
	"math/rand"
	"path/filepath"
	"testing"

	"ckptfs/internal/ckpt"
)

// TestReclaimOnAFullDiskMayForgetTheUndo: the disk is nearly full and
// the only content the store could give back is the prior state of the
// newest turn (its undo), which the policy keeps over its budget. A
// write the store refuses fails in the project with ENOSPC: a full disk
// must let the undo go (as it did before the policy kept it) rather than
// fail the user's write.
func TestReclaimOnAFullDiskMayForgetTheUndo(t *testing.T) {
	s, tree, root, random := newestOnlyFixture(t, 1)
	content := func() []byte { return random(16 << 20) }
	f := filepath.Join(root, "f")
	writeFile(t, f, content())
	s.Begin(ckpt.KindAgent, "", "")
	captureFile(t, s, tree, "f")
	writeFile(t, f, content())
	if _, err := s.End(""); err != nil {
		t.Fatal(err)
	}
	diskFreeing(t, s, 10<<20)
	s.Begin(ckpt.KindAgent, "", "")
	if err := recordFile(s, tree, "f", ckpt.Program{Comm: "test"}); err != nil {
		if errors.Is(err, ckpt.ErrStoreFull) {
			t.Fatalf("the write was refused (ENOSPC) while the store held 16 MiB it could forget: %v (history starts at %d)", err, s.startTurn())
		}
		t.Fatal(err)
	}
	if start := s.startTurn(); start == 0 {
		t.Errorf("the write landed but history still starts at turn 0: the undo of turn 1 was not let go")
	}
}

// TestGCDueAfterAGCThatCouldDoNothing: over its budget only by what the
// policy must keep (the undo of the newest turn), a gc forgets nothing
// and frees nothing; GCDue must not then say at once that a gc is due
// again (the background gc would read the whole store twice a minute,
// urgently, for nothing).
func TestGCDueAfterAGCThatCouldDoNothing(t *testing.T) {
	s, tree, root := offlineFixture(t)
	rng := rand.New(rand.NewSource(1))
	b := make([]byte, 4<<20)
	rng.Read(b)
	writeFile(t, filepath.Join(root, "f"), b)
	s.Begin(ckpt.KindAgent, "", "")
	captureFile(t, s, tree, "f")
	rng.Read(b)
	writeFile(t, filepath.Join(root, "f"), b)
	s.End("")
	if err := s.SetPolicy(ckpt.Policy{KeepSize: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	rep, err := s.GC(GCOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Forgot) > 0 || rep.Freed() > 0 {
		t.Fatalf("the gc did something, where the policy keeps all it could forget: %+v", rep)
	}
	if due, why, _ := s.GCDue(); due {
		t.Errorf("a gc that could do nothing is due again at once: %s", why)
	}
}

// TestReclaimKeepsTheUndoWhenItWouldNotMakeRoom: the disk is nearly full,
// and forgetting the undo of the newest turn would free 4 MiB, far less
// than the refused write needs (its file's 16 MiB). The write fails with
// ENOSPC either way; letting the undo go then would lose it for nothing
// (the undo gives way only for the user's write).
func TestReclaimKeepsTheUndoWhenItWouldNotMakeRoom(t *testing.T) {
	s, tree, root, content := newestOnlyFixture(t, 1)
	f := filepath.Join(root, "f")
	writeFile(t, f, content(4<<20))
	s.Begin(ckpt.KindAgent, "", "")
	captureFile(t, s, tree, "f")
	writeFile(t, f, content(16<<20))
	if _, err := s.End(""); err != nil {
		t.Fatal(err)
	}
	diskFreeing(t, s, 2<<20)
	s.Begin(ckpt.KindAgent, "", "")
	if err := recordFile(s, tree, "f", ckpt.Program{Comm: "test"}); !errors.Is(err, ckpt.ErrStoreFull) {
		t.Fatalf("Record: %v, want the store full (16 MiB needed, 2 MiB free, 4 MiB to forget)", err)
	}
	if start := s.startTurn(); start != 0 {
		t.Fatalf("the refused write let the undo of turn 1 go for nothing: history starts at turn %d, want 0", start)
	}
}
