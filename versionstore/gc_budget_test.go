package versionstore

import (
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"testing"
	"time"

	"ckptfs/internal/backing"
	"ckptfs/internal/ckpt"
)

// budgetHistory makes a store's turns, each rewriting one file with 4 MiB
// of new bytes, for the budget's tests.
type budgetHistory struct {
	t    *testing.T
	s    *Store
	tree *backing.Tree
	root string
	rng  *rand.Rand
}

// newBudgetHistory writes each of names with 4 MiB before any turn.
func newBudgetHistory(t *testing.T, names ...string) *budgetHistory {
	s, tree, root := offlineFixture(t)
	h := &budgetHistory{t: t, s: s, tree: tree, root: root, rng: rand.New(rand.NewSource(1))}
	for _, n := range names {
		writeFile(t, filepath.Join(root, n), h.data())
	}
	return h
}

func (h *budgetHistory) data() []byte {
	b := make([]byte, 4<<20)
	h.rng.Read(b)
	return b
}

// turn rewrites name in a turn of its own and returns the turn and the
// new bytes.
func (h *budgetHistory) turn(name string) (uint64, []byte) {
	h.t.Helper()
	tn, _ := h.s.Begin(ckpt.KindAgent, "", "")
	captureFile(h.t, h.s, h.tree, name)
	b := h.data()
	writeFile(h.t, filepath.Join(h.root, name), b)
	if _, err := h.s.End(""); err != nil {
		h.t.Fatal(err)
	}
	return tn.Num, b
}

// gc pins pins, sets pol, and runs a dry run and then the gc.
func (h *budgetHistory) gc(pol ckpt.Policy, pins ...uint64) (dry, rep ckpt.GCReport) {
	h.t.Helper()
	for _, n := range pins {
		if _, err := h.s.Pin(n, ""); err != nil {
			h.t.Fatal(err)
		}
	}
	if err := h.s.SetPolicy(pol); err != nil {
		h.t.Fatal(err)
	}
	dry, err := h.s.GC(GCOptions{DryRun: true})
	if err != nil {
		h.t.Fatal(err)
	}
	if rep, err = h.s.GC(GCOptions{}); err != nil {
		h.t.Fatal(err)
	}
	return dry, rep
}

// keptNums is the numbers of the turns s keeps.
func keptNums(t *testing.T, s *Store) map[uint64]bool {
	t.Helper()
	kept, err := s.keptTurns()
	if err != nil {
		t.Fatal(err)
	}
	has := map[uint64]bool{}
	for _, k := range kept {
		has[k.Num] = true
	}
	return has
}

// Past a pin, over the budget, merges that free nothing are not made:
// each turn after the pin changes its own file once, so merging them
// drops no record, and the turns stay to be rewound to.
func TestBudgetMergesNothingThatFreesNothing(t *testing.T) {
	var names []string
	for i := range 8 {
		names = append(names, fmt.Sprint("f", i))
	}
	h := newBudgetHistory(t, names...)
	var turns []uint64
	for _, n := range names {
		tn, _ := h.turn(n)
		turns = append(turns, tn)
	}
	dry, rep := h.gc(ckpt.Policy{KeepSize: 8 << 20}, turns[0])
	t.Logf("dry: merged %d, after %d MiB; gc: merged %d (forgot %v), %d MiB -> %d MiB; kept %d turns", dry.Merged, dry.After>>20, rep.Merged, rep.Forgot, rep.Before>>20, rep.After>>20, len(keptNums(t, h.s)))
	if rep.Merged != 0 || dry.Merged != 0 {
		t.Errorf("gc merged %d turns away (the dry run: %d), which frees nothing", rep.Merged, dry.Merged)
	}
}

// Past a pin, over the budget, no merge is added when the start's move
// and the policy's own (class) merges bring the store within its budget:
// turn x, between two pins, stays.
func TestBudgetMergesNoMoreThanNeeded(t *testing.T) {
	h := newBudgetHistory(t, "p", "x", "q", "h", "u", "m")
	p, _ := h.turn("p")
	x, _ := h.turn("x")
	q, _ := h.turn("q")
	h.turn("h") // Y
	h.turn("h") // Z: Y merged into it (the same class) frees h's middle version
	h.turn("u")
	h.turn("m")
	time.Sleep(10 * time.Millisecond)
	budget := h.s.StoreBytes() - 5<<20 // the start's move to p frees 4 MiB (p's own), Y's merge 4 more
	_, rep := h.gc(ckpt.Policy{KeepSize: budget, KeepTurns: 1, KeepAge: time.Nanosecond, KeepHourly: -1, KeepDaily: -1}, p, q)
	t.Logf("forgot %v (merged %d), %d KiB -> %d KiB, budget %d KiB", rep.Forgot, rep.Merged, rep.Before>>10, rep.After>>10, budget>>10)
	for _, n := range rep.Forgot {
		if n == x {
			t.Errorf("turn %d was merged into pinned turn %d, which the budget did not need", x, q)
		}
	}
}

// Over its budget, a pin that stops the start of history does not stop
// the budget: the oldest turns after the pin that the policy may forget
// are merged into the kept turns after them, as few as bring the store
// back within it. The pinned turn, the newest and its undo stay exact.
func TestBudgetMergesPastAPin(t *testing.T) {
	h := newBudgetHistory(t, "f0", "f1")
	versions := map[uint64][2][]byte{} // each turn's end: f0, f1
	var cur [2][]byte
	for i := range cur {
		cur[i], _ = os.ReadFile(filepath.Join(h.root, fmt.Sprint("f", i)))
	}
	var turns []uint64
	for i := range 10 {
		n, b := h.turn(fmt.Sprint("f", i%2))
		cur[i%2] = b
		versions[n] = cur
		turns = append(turns, n)
	}
	budget := int64(24 << 20)
	dry, rep := h.gc(ckpt.Policy{KeepSize: budget}, turns[0])
	if rep.Merged == 0 || rep.Merged != dry.Merged || rep.After > budget {
		t.Fatalf("gc merged %d turns (the dry run: %d); the store %d MiB -> %d MiB, budget %d MiB", rep.Merged, dry.Merged, rep.Before>>20, rep.After>>20, budget>>20)
	}
	if rep.Merged > 6 {
		t.Errorf("gc merged %d turns; 5 freed enough", rep.Merged)
	}
	kept := keptNums(t, h.s)
	for _, n := range []uint64{turns[0], turns[8], turns[9]} {
		if !kept[n] {
			t.Fatalf("turn %d (pinned, or the newest, or its undo) was forgotten", n)
		}
	}
	for _, n := range []uint64{turns[0], turns[8], turns[9]} {
		if _, err := h.s.Rewind(n, h.tree, RewindOptions{}); err != nil {
			t.Fatal(err)
		}
		for i := range 2 {
			if got, _ := os.ReadFile(filepath.Join(h.root, fmt.Sprint("f", i))); !bytes.Equal(got, versions[n][i]) {
				t.Errorf("f%d after the rewind to turn %d is not as it was then", i, n)
			}
		}
	}
}
