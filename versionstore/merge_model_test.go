package versionstore

import (
	"errors"
	"fmt"
	"math/rand"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"ckptfs/internal/ckpt"
)

// runMergeStepsModel: random turns made of steps, with moves and links; random
// merges (forget in the middle), thinning gcs, rewinds to turns and steps,
// rewinds undone; every kept point resolves exactly after each round.
func runMergeStepsModel(t *testing.T, seed int64, s *Store, root string, link bool, rounds int) {
	tree := openTree(t, root)
	rng := rand.New(rand.NewSource(seed))
	m := &sim{t: t, rng: rand.New(rand.NewSource(seed + 1)), root: root, tree: tree, store: s, link: link}
	m.moves = seed%2 == 0
	m.flat = seed%3 == 0
	m.dirOver = seed%5 < 3
	if m.ranges = seed%3 == 1; m.ranges {
		s.rangeFrom = 0
	}
	h := &keptHistory{}
	h.add(0, takeSnapshot(t, root))
	work := func() {
		for k := 0; k < 1+rng.Intn(3); k++ {
			tn, _ := s.Begin(ckpt.KindAgent, "", "")
			steps := 1 + rng.Intn(3)
			for st := 0; st < steps; st++ {
				for i := 0; i < 1+rng.Intn(8); i++ {
					m.step()
				}
				if st < steps-1 && rng.Intn(2) == 0 {
					sp, ok, err := s.Step("Edit", "")
					if err != nil {
						t.Fatal(err)
					}
					if ok {
						h.add(StepPoint(tn.Num, sp.Num), takeSnapshot(t, root))
					}
				}
			}
			tn, err := s.End("")
			if err != nil {
				t.Fatal(err)
			}
			h.add(tn.Num, takeSnapshot(t, root))
		}
	}
	rewind := func(j int) {
		before := takeSnapshot(t, root)
		res, err := s.Rewind(h.turns[j], tree, RewindOptions{})
		if err != nil {
			t.Fatalf("seed %d: rewind to %s: %v", seed, PointName(h.turns[j]), err)
		}
		got := takeSnapshot(t, root)
		if d := diffSnap(h.snaps[j], got); d != "" {
			t.Fatalf("seed %d: rewind to %s: the tree differs:\n%s", seed, PointName(h.turns[j]), d)
		}
		if len(res.Changes) > 0 {
			h.add(res.Turn.Num-1, before) // already there, harmless duplicate
			h.add(res.Turn.Num, got)
		}
	}
	for round := 0; round < rounds; round++ {
		work()
		switch op := rng.Intn(9); op {
		case 0, 1, 2: // merge
			kept, err := s.keptTurns()
			if err != nil {
				t.Fatal(err)
			}
			if len(kept) < 3 {
				break
			}
			var list []uint64
			for _, k := range kept[1 : len(kept)-1] {
				if rng.Intn(3) == 0 {
					list = append(list, k.Num)
				}
			}
			if len(list) == 0 {
				list = append(list, kept[1+rng.Intn(len(kept)-2)].Num)
			}
			if _, err := s.Forget(list, ckpt.ReasonForget); err != nil && !errors.Is(err, ErrPinned) {
				t.Fatalf("seed %d: forget %v: %v", seed, list, err)
			}
		case 3: // thinning
			pol := ckpt.Policy{KeepTurns: 1 + rng.Intn(6), KeepAge: time.Nanosecond, KeepHourly: 0, KeepDaily: -1}
			if err := s.SetPolicy(pol); err != nil {
				t.Fatal(err)
			}
			if _, err := s.GC(GCOptions{}); err != nil {
				t.Fatalf("seed %d: gc: %v", seed, err)
			}
			checkNoGarbage(t, s)
		case 4, 5, 6: // rewinds
			for i := 0; i < 1+rng.Intn(3); i++ {
				rewind(rng.Intn(len(h.turns)))
			}
		case 8: // a revert or a restore, then a step-free turn: new kinds of turn to merge
			j := rng.Intn(len(h.turns))
			if j == 0 {
				break
			}
			if rng.Intn(2) == 0 {
				res, err := s.Revert(h.turns[j], tree, RevertOptions{Markers: true})
				if err == nil && res.Turn.Num != 0 {
					h.add(res.Turn.Num, takeSnapshot(t, root))
				} else if err != nil && !errors.Is(err, ErrConflict) && !errors.Is(err, ErrTurnNotFound) && !errors.Is(err, ErrNotOnLine) {
					t.Fatalf("seed %d: revert %s: %v", seed, PointName(h.turns[j]), err)
				}
			} else {
				p := strings.Split(m.randPath(), "/")[0]
				res, err := s.Rewind(h.turns[j], tree, RewindOptions{Paths: []string{p}})
				if err != nil {
					t.Fatalf("seed %d: restore %s from %s: %v", seed, p, PointName(h.turns[j]), err)
				}
				if res.Turn.Num != 0 {
					h.add(res.Turn.Num, takeSnapshot(t, root))
				}
			}
		case 7:
			if _, err := s.GC(GCOptions{NoPolicy: true}); err != nil {
				t.Fatal(err)
			}
			checkNoGarbage(t, s)
		}
		h.sync(t, s)
		checkHistory(t, s, tree, h.snaps, h.turns)
	}
	for _, j := range []int{0, len(h.turns) - 1} {
		rewind(j)
	}
	if _, err := s.GC(GCOptions{NoPolicy: true}); err != nil {
		t.Fatal(err)
	}
	checkNoGarbage(t, s)
}

// TestMergeStepsModel: random turns of random steps (moves, links and
// directories renamed over empty ones on some seeds), with random merges,
// thinning and plain gcs, rewinds to turns and steps, reverts and
// restores: after each round every kept turn and step resolves exactly
// and, after a gc, no garbage is left (runMergeStepsModel). CKPTFS_SEED=N
// replays one seed.
func TestMergeStepsModel(t *testing.T) {
	from, n, rounds := int64(1), int64(4), 30
	switch {
	case longRun():
		n, rounds = 40, 60
	case raceEnabled:
		rounds = 15
	}
	if v, err := strconv.ParseInt(os.Getenv("CKPTFS_SEED"), 10, 64); err == nil {
		from, n = v, 1
	}
	for seed := from; seed < from+n; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			if seed%2 == 1 {
				s, root := atticStore(t)
				runMergeStepsModel(t, seed, s, root, true, rounds)
			} else {
				runMergeStepsModel(t, seed, NewTestStore(t), t.TempDir(), false, rounds)
			}
		})
	}
}
