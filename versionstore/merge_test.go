package versionstore

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"ckptfs/internal/backing"
	"ckptfs/internal/ckpt"
)

// countKeys counts the keys with prefix p.
func countKeys(t *testing.T, s *Store, p byte) int {
	t.Helper()
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{p}, UpperBound: upper(p)})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		n++
	}
	return n
}

// catAt reads path as it was at the end of turn n.
func catAt(t *testing.T, s *Store, n uint64, path string, live ckpt.Tree) string {
	t.Helper()
	r, _, err := s.OpenAt(n, path, live)
	if err != nil {
		t.Fatalf("cat %s at %d: %v", path, n, err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// rewrittenEachTurn makes a store and a tree whose file f holds "v0" and
// is rewritten in each of turns 1..n (turn k, ref rk) to content(k).
func rewrittenEachTurn(t *testing.T, n int, content func(k int) string) (*Store, *backing.Tree, string) {
	t.Helper()
	s := NewTestStore(t)
	root := t.TempDir()
	tree := openTree(t, root)
	f := filepath.Join(root, "f")
	writeFile(t, f, []byte("v0"))
	for k := 1; k <= n; k++ {
		if _, err := s.Begin(ckpt.KindAgent, fmt.Sprintf("turn %d", k), fmt.Sprintf("r%d", k)); err != nil {
			t.Fatal(err)
		}
		captureFile(t, s, tree, "f")
		writeFile(t, f, []byte(content(k)))
		if _, err := s.End(""); err != nil {
			t.Fatal(err)
		}
	}
	return s, tree, root
}

// TestForgetInTheMiddleMergesAndFrees: a file rewritten in every turn;
// forgetting turns 2-4 merges them into 5. The records of f that 3, 4 and
// 5 made are ones no kept turn needs: they are dropped, and gc reclaims
// their chunks. Turns 1, 5 and 6 still read and rewind exactly, turn 5's
// changes start at the end of 1, and the forgotten turns are refused.
func TestForgetInTheMiddleMergesAndFrees(t *testing.T) {
	s, tree, root := rewrittenEachTurn(t, 6, func(k int) string { return fmt.Sprint("v", k) })
	f := filepath.Join(root, "f")
	events, chunks := countKeys(t, s, prefixEvent), countKeys(t, s, prefixChunk)
	if _, err := s.Forget([]uint64{4, 2, 3}, ckpt.ReasonForget); err != nil {
		t.Fatal(err)
	}
	if got := countKeys(t, s, prefixEvent); got != events-3 {
		t.Fatalf("%d events after the merge, want %d (3 dropped)", got, events-3)
	}
	for _, n := range []uint64{2, 3, 4} {
		if _, err := s.Resolve(fmt.Sprint(n)); !errors.Is(err, ErrForgotten) {
			t.Fatalf("turn %d resolves after it was merged: %v", n, err)
		}
		if _, err := s.Resolve(fmt.Sprintf("ref:r%d", n)); err == nil {
			t.Fatalf("the ref of merged turn %d still resolves", n)
		}
		if _, err := s.Turn(n); !errors.Is(err, ErrForgotten) {
			t.Fatalf("turn %d after the merge: %v", n, err)
		}
	}
	t5, err := s.Turn(5)
	if err != nil {
		t.Fatal(err)
	}
	if t5.MergedFrom != 2 || t5.Prev() != 1 || t5.Label != "turn 5" {
		t.Fatalf("turn 5 after the merge: %+v", t5)
	}
	if p, _ := t5.Parent(); p != 1 {
		t.Fatalf("turn 5's parent is %d, want 1", p)
	}
	cs, err := s.TurnChanges(5, tree)
	if err != nil || len(cs) != 1 || cs[0].Path != "f" || cs[0].Kind != ckpt.Modified {
		t.Fatalf("turn 5's changes: %+v, %v", cs, err)
	}
	for n, want := range map[uint64]string{0: "v0", 1: "v1", 5: "v5", 6: "v6"} {
		if got := catAt(t, s, n, "f", tree); got != want {
			t.Fatalf("f at %d: %q, want %q", n, got, want)
		}
	}
	if _, err := s.GC(GCOptions{NoPolicy: true}); err != nil {
		t.Fatal(err)
	}
	if got := countKeys(t, s, prefixChunk); got != chunks-3 {
		t.Fatalf("%d chunks after gc, want %d (v2-v4 reclaimed)", got, chunks-3)
	}
	checkNoGarbage(t, s)
	// A second merge over the first: 5 into 6 carries MergedFrom on.
	if _, err := s.Forget([]uint64{5}, ckpt.ReasonForget); err != nil {
		t.Fatal(err)
	}
	t6, err := s.Turn(6)
	if err != nil || t6.MergedFrom != 2 || t6.Prev() != 1 {
		t.Fatalf("turn 6 after the second merge: %+v, %v", t6, err)
	}
	for _, n := range []uint64{1, 0} {
		if _, err := s.Rewind(n, tree, RewindOptions{}); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(f); string(b) != fmt.Sprintf("v%d", n) {
			t.Fatalf("after a rewind to %d f holds %q", n, b)
		}
	}
	if _, err := s.Rewind(6, tree, RewindOptions{}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(f); string(b) != "v6" {
		t.Fatalf("after a rewind to 6 f holds %q", b)
	}
}

// TestForgetRefusalsChangeNothing: a pinned turn, the newest turn, the turn
// the open turn continues from, a merged one and one that does not exist
// are refused with nothing forgotten, also when other turns were named.
func TestForgetRefusalsChangeNothing(t *testing.T) {
	s, _, _ := rewrittenEachTurn(t, 5, func(k int) string { return fmt.Sprint("v", k) })
	if _, err := s.Pin(3, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Forget([]uint64{1}, ckpt.ReasonForget); err != nil {
		t.Fatal(err)
	}
	s.Begin(ckpt.KindAgent, "", "")
	events := countKeys(t, s, prefixEvent)
	for _, c := range []struct {
		turns []uint64
		want  error
	}{
		{[]uint64{2, 3}, ErrPinned},
		{[]uint64{4, 5}, ErrOpenTurn},
		{[]uint64{6}, ErrOpenTurn},
		{[]uint64{2, 1}, ErrForgotten},
		{[]uint64{2, 9}, ErrTurnNotFound},
	} {
		if _, err := s.Forget(c.turns, ckpt.ReasonForget); !errors.Is(err, c.want) {
			t.Fatalf("forget %v: %v, want %v", c.turns, err, c.want)
		}
		kept, err := s.keptTurns()
		if err != nil {
			t.Fatal(err)
		}
		if len(kept) != 6 || countKeys(t, s, prefixEvent) != events || s.HistoryStart().Turn != 0 {
			t.Fatalf("forget %v was refused but changed history: %d kept", c.turns, len(kept))
		}
	}
}

// TestThinningDryRunCountsWhatMergesFree: a policy that thins turns 1-4
// into 5 (all ended this hour; 7 is the window, 6 kept as its undo) frees
// the four versions of f only the dropped records named; the dry run says
// so before, to the byte, and the gc then does it.
func TestThinningDryRunCountsWhatMergesFree(t *testing.T) {
	s, tree, _ := rewrittenEachTurn(t, 7, func(k int) string { return fmt.Sprintf("version %d of f", k) })
	if err := s.SetPolicy(ckpt.Policy{KeepTurns: 1, KeepAge: time.Nanosecond}); err != nil {
		t.Fatal(err)
	}
	chunks := countKeys(t, s, prefixChunk)
	dry, err := s.GC(GCOptions{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(dry.Forgot) != "[1 2 3 4]" || dry.Merged != 4 || dry.Start != nil || dry.ChunkBytes <= 0 {
		t.Fatalf("dry run: %+v", dry)
	}
	if got := countKeys(t, s, prefixChunk); got != chunks {
		t.Fatalf("a dry run changed the store: %d chunks, %d before", got, chunks)
	}
	rep, err := s.GC(GCOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(rep.Forgot) != "[1 2 3 4]" || rep.Merged != 4 || rep.Chunks != 4 || rep.ChunkBytes != dry.ChunkBytes {
		t.Fatalf("gc: %+v; the dry run said %+v", rep, dry)
	}
	t5, err := s.Turn(5)
	if err != nil || t5.MergedFrom != 1 {
		t.Fatalf("turn 5 after thinning: %+v, %v", t5, err)
	}
	for n, want := range map[uint64]string{0: "v0", 5: "version 5 of f", 6: "version 6 of f", 7: "version 7 of f"} {
		if got := catAt(t, s, n, "f", tree); got != want {
			t.Fatalf("f at %d: %q, want %q", n, got, want)
		}
	}
	checkNoGarbage(t, s)
}
