package versionstore

import (
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"testing"
	"time"

	"ckptfs/internal/ckpt"
)

// Past a pin, over the budget, merges that free nothing are not made:
// each turn after the pin changes its own file once, so merging them
// drops no record, and the turns stay to be rewound to.
func TestBudgetMergesNothingThatFreesNothing(t *testing.T) {
	s, tree, root := offlineFixture(t)
	rng := rand.New(rand.NewSource(1))
	const n = 8
	for i := 0; i < n; i++ {
		b := make([]byte, 4<<20)
		rng.Read(b)
		writeFile(t, filepath.Join(root, fmt.Sprint("f", i)), b)
	}
	var turns []uint64
	for i := 0; i < n; i++ {
		tn, _ := s.Begin(ckpt.KindAgent, "", "")
		name := fmt.Sprint("f", i)
		captureFile(t, s, tree, name)
		b := make([]byte, 4<<20)
		rng.Read(b)
		writeFile(t, filepath.Join(root, name), b)
		if _, err := s.End(""); err != nil {
			t.Fatal(err)
		}
		turns = append(turns, tn.Num)
	}
	if _, err := s.Pin(turns[0], ""); err != nil {
		t.Fatal(err)
	}
	if err := s.SetPolicy(ckpt.Policy{KeepSize: 8 << 20}); err != nil {
		t.Fatal(err)
	}
	dry, err := s.GC(GCOptions{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := s.GC(GCOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kept, _ := s.keptTurns()
	t.Logf("dry: merged %d, after %d MiB; gc: merged %d (forgot %v), %d MiB -> %d MiB; kept %d turns", dry.Merged, dry.After>>20, rep.Merged, rep.Forgot, rep.Before>>20, rep.After>>20, len(kept))
	if rep.Merged != 0 || dry.Merged != 0 {
		t.Errorf("gc merged %d turns away (the dry run: %d), which frees nothing", rep.Merged, dry.Merged)
	}
}

// Past a pin, over the budget, no merge is added when the start's move
// and the policy's own (class) merges bring the store within its budget:
// turn x, between two pins, stays.
func TestBudgetMergesNoMoreThanNeeded(t *testing.T) {
	s, tree, root := offlineFixture(t)
	rng := rand.New(rand.NewSource(1))
	data := func() []byte { b := make([]byte, 4<<20); rng.Read(b); return b }
	for _, n := range []string{"p", "x", "q", "h", "u", "m"} {
		writeFile(t, filepath.Join(root, n), data())
	}
	turn := func(name string) uint64 {
		tn, _ := s.Begin(ckpt.KindAgent, "", "")
		captureFile(t, s, tree, name)
		writeFile(t, filepath.Join(root, name), data())
		if _, err := s.End(""); err != nil {
			t.Fatal(err)
		}
		return tn.Num
	}
	p := turn("p")
	x := turn("x")
	q := turn("q")
	turn("h") // Y
	turn("h") // Z: Y merged into it (the same class) frees h's middle version
	turn("u")
	turn("m")
	for _, n := range []uint64{p, q} {
		if _, err := s.Pin(n, ""); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(10 * time.Millisecond)
	budget := s.StoreBytes() - 5<<20 // the start's move to p frees 4 MiB (p's own), Y's merge 4 more
	if err := s.SetPolicy(ckpt.Policy{KeepSize: budget, KeepTurns: 1, KeepAge: time.Nanosecond, KeepHourly: -1, KeepDaily: -1}); err != nil {
		t.Fatal(err)
	}
	rep, err := s.GC(GCOptions{})
	if err != nil {
		t.Fatal(err)
	}
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
	s, tree, root := offlineFixture(t)
	rng := rand.New(rand.NewSource(1))
	versions := map[uint64][2][]byte{} // each turn's end: f0, f1
	cur := [2][]byte{}
	for i := range cur {
		cur[i] = make([]byte, 4<<20)
		rng.Read(cur[i])
		writeFile(t, filepath.Join(root, fmt.Sprint("f", i)), cur[i])
	}
	var turns []uint64
	for i := 0; i < 10; i++ {
		n, _ := s.Begin(ckpt.KindAgent, "", "")
		name := fmt.Sprint("f", i%2)
		captureFile(t, s, tree, name)
		b := make([]byte, 4<<20)
		rng.Read(b)
		cur[i%2] = b
		writeFile(t, filepath.Join(root, name), b)
		if _, err := s.End(""); err != nil {
			t.Fatal(err)
		}
		versions[n.Num] = cur
		turns = append(turns, n.Num)
	}
	if _, err := s.Pin(turns[0], ""); err != nil {
		t.Fatal(err)
	}
	budget := int64(24 << 20)
	if err := s.SetPolicy(ckpt.Policy{KeepSize: budget}); err != nil {
		t.Fatal(err)
	}
	dry, err := s.GC(GCOptions{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := s.GC(GCOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Merged == 0 || rep.Merged != dry.Merged || rep.After > budget {
		t.Fatalf("gc merged %d turns (the dry run: %d); the store %d MiB -> %d MiB, budget %d MiB", rep.Merged, dry.Merged, rep.Before>>20, rep.After>>20, budget>>20)
	}
	if rep.Merged > 6 {
		t.Errorf("gc merged %d turns; 5 freed enough", rep.Merged)
	}
	kept, err := s.keptTurns()
	if err != nil {
		t.Fatal(err)
	}
	keptNum := map[uint64]bool{}
	for _, k := range kept {
		keptNum[k.Num] = true
	}
	for _, n := range []uint64{turns[0], turns[8], turns[9]} {
		if !keptNum[n] {
			t.Fatalf("turn %d (pinned, or the newest, or its undo) was forgotten", n)
		}
	}
	for _, n := range []uint64{turns[0], turns[8], turns[9]} {
		if _, err := s.Rewind(n, tree, RewindOptions{}); err != nil {
			t.Fatal(err)
		}
		for i := range 2 {
			if got, _ := os.ReadFile(filepath.Join(root, fmt.Sprint("f", i))); !bytes.Equal(got, versions[n][i]) {
				t.Errorf("f%d after the rewind to turn %d is not as it was then", i, n)
			}
		}
	}
}
