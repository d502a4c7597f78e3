package versionstore

import (
	"errors"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"testing"
	"time"

	"ckptfs/internal/backing"
	"ckptfs/internal/ckpt"
)

// TestRecordReclaimsBeforeRefusing: the store's disk is nearly full (a
// disk of the store's size plus 10 MiB, diskOf); a capture that does not
// fit first has the store forget what its retention policy lets go and
// reclaim that content, and then lands instead of refusing the write. The
// kept turn still reads back exactly.
func TestRecordReclaimsBeforeRefusing(t *testing.T) {
	// Keep only the last turn (the windows, no thinning), whatever the size.
	s, tree, root, random := newestOnlyFixture(t, 1<<40)
	content := func() []byte { return random(16 << 20) }
	f := filepath.Join(root, "f")
	writeFile(t, f, content())
	var last []byte
	for i := 0; i < 7; i++ {
		s.Begin(ckpt.KindAgent, "", "")
		captureFile(t, s, tree, "f")
		last = content()
		writeFile(t, f, last)
		if _, err := s.End(""); err != nil {
			t.Fatal(err)
		}
	}
	// A disk 10 MiB larger than the store: the next capture of f needs 16
	// (and, once refused, a ballast's margin more before the store takes
	// captures again: the 5 turns forgotten free 80 MiB).
	diskFreeing(t, s, 10<<20)
	s.Begin(ckpt.KindAgent, "", "")
	if err := recordFile(s, tree, "f", ckpt.Program{Comm: "test"}); err != nil {
		if errors.Is(err, ckpt.ErrStoreFull) {
			t.Fatalf("the capture was refused without reclaiming first: %v", err)
		}
		t.Fatal(err)
	}
	if start := s.startTurn(); start != 6 {
		t.Errorf("history starts at turn %d; the policy keeps only turn 7 and its undo", start)
	}
	// Turn 7's end, the prior state just recorded, reads back exactly.
	rc, _, err := s.OpenAt(7, "f", tree)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	got, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(last) {
		t.Errorf("f at turn 7: %d bytes, not the %d bytes it had", len(got), len(last))
	}
}

// TestGrownSignalsEachGrowthStep: the store signals on Grown once it has
// kept another growthStep of content (the daemon's gc then looks at the
// budget at once, not at its next tick), one signal pending at most.
func TestGrownSignalsEachGrowthStep(t *testing.T) {
	s := NewTestStore(t)
	root := t.TempDir()
	tree := openTree(t, root)
	pending := func() bool { return growthPending(s) }
	s.Begin(ckpt.KindAgent, "", "")
	for i, want := range []bool{false, true, false, true} {
		p := fmt.Sprint("f", i)
		writeFile(t, filepath.Join(root, p), make([]byte, growthStep/2))
		captureFile(t, s, tree, p)
		if got := pending(); got != want {
			t.Fatalf("after %d captures of half a growth step: signal %v, want %v", i+1, got, want)
		}
	}
}

// TestGrownSignalsAtTheEndOfATurnThatKept: the end of a turn that kept
// content signals Grown however little it kept (what the budget needs
// forgotten may be forgettable only once the turn is closed); the end of
// one that kept none does not.
func TestGrownSignalsAtTheEndOfATurnThatKept(t *testing.T) {
	s := NewTestStore(t)
	root := t.TempDir()
	tree := openTree(t, root)
	pending := func() bool { return growthPending(s) }
	writeFile(t, filepath.Join(root, "f"), []byte("some bytes"))
	s.Begin(ckpt.KindAgent, "", "")
	captureFile(t, s, tree, "f")
	if pending() {
		t.Fatal("a signal for 10 bytes kept, before the turn's end")
	}
	if _, err := s.End(""); err != nil {
		t.Fatal(err)
	}
	if !pending() {
		t.Error("no signal at the end of a turn that kept bytes")
	}
	s.Begin(ckpt.KindAgent, "", "")
	if _, err := s.End(""); err != nil {
		t.Fatal(err)
	}
	if pending() {
		t.Error("a signal at the end of a turn that kept nothing")
	}
}

// TestUsageLargestCountsAVersionOnce: a file kept by many range records in
// one turn is one version among the largest, of the bytes they hold
// together.
func TestUsageLargestCountsAVersionOnce(t *testing.T) {
	s := NewTestStore(t)
	s.rangeFrom = 0
	root := t.TempDir()
	tree := openTree(t, root)
	writeFile(t, filepath.Join(root, "big"), make([]byte, 1<<20))
	writeFile(t, filepath.Join(root, "small"), make([]byte, 100))
	s.Begin(ckpt.KindAgent, "", "")
	st, ino, _ := tree.LstatInode("big")
	for i := int64(0); i < 6; i++ {
		off := i * 64 << 10
		c := ckpt.Capture{Path: "big", Prior: st, Inode: ino, Range: &ckpt.ByteRange{Off: off, End: off + 4096},
			Open: func() (*os.File, error) { return tree.Open("big") }}
		if err := s.Record(c, ckpt.Program{Comm: "test"}); err != nil {
			t.Fatal(err)
		}
	}
	captureFile(t, s, tree, "small")
	if _, err := s.End(""); err != nil {
		t.Fatal(err)
	}
	u, err := s.Usage()
	if err != nil {
		t.Fatal(err)
	}
	want := []ckpt.FileUsage{{Path: "big", Turn: 1, Bytes: 6 * 4096}, {Path: "small", Turn: 1, Bytes: 100}}
	if fmt.Sprint(u.Largest) != fmt.Sprint(want) {
		t.Errorf("largest versions %v, want %v", u.Largest, want)
	}
}

// growthPending takes a signal of s.Grown, if one is pending.
func growthPending(s *Store) bool {
	select {
	case <-s.Grown():
		return true
	default:
		return false
	}
}

// newestOnlyFixture opens a store whose policy keeps only the newest turn
// (and its undo, no thinning) under a budget of keepSize bytes, over a
// fresh tree at root, with random contents of n bytes from a fixed seed.
func newestOnlyFixture(t *testing.T, keepSize int64) (s *Store, tree *backing.Tree, root string, random func(n int) []byte) {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "store"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.SetPolicy(ckpt.Policy{KeepSize: keepSize, KeepTurns: 1, KeepAge: time.Nanosecond, KeepHourly: -1, KeepDaily: -1}); err != nil {
		t.Fatal(err)
	}
	root = t.TempDir()
	rng := rand.New(rand.NewSource(1))
	return s, openTree(t, root), root, func(n int) []byte {
		b := make([]byte, n)
		rng.Read(b)
		return b
	}
}

// diskFreeing makes s's disk (diskOf) free bytes larger than the store is
// now: what the store frees is free again, what it takes is taken.
func diskFreeing(t *testing.T, s *Store, free int64) {
	disk := s.StoreBytes() + free
	diskOf = func(s *Store) (int64, int64) { return disk - s.StoreBytes(), disk }
	t.Cleanup(func() { diskOf = nil })
}
