package versionstore

import (
	"errors"
	"fmt"
	"math/rand"
	rand2 "math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"ckptfs/internal/backing"
	"ckptfs/internal/ckpt"
)

// partialTree is a failingTree whose last RemoveAll of a directory, the
// one killed, removes part of it first: a kill -9 inside the removal.
type partialTree struct {
	failingTree
	root string
	rng  *rand.Rand
}

func (f *partialTree) RemoveAll(p string) error {
	if fi, err := os.Lstat(filepath.Join(f.root, p)); f.budget <= 0 && err == nil && fi.IsDir() {
		if ents, _ := os.ReadDir(filepath.Join(f.root, p)); len(ents) > 0 && f.rng.Intn(2) == 0 {
			os.RemoveAll(filepath.Join(f.root, p, ents[f.rng.Intn(len(ents))].Name()))
		}
	}
	if err := f.spend(); err != nil {
		return err
	}
	return f.Tree.RemoveAll(p)
}

// TestCrashAtEveryStepOfRewind kills a rewind after every possible number
// of tree mutations (and inside a directory's removal), then kills the
// recovery too at a random step, and checks that the final recovery leaves
// exactly the target turn's tree.
func TestCrashAtEveryStepOfRewind(t *testing.T) {
	seeds := 20
	if raceEnabled {
		seeds = 6 // every step of 6 histories, in both modes
	}
	if s := os.Getenv("CKPTFS_CRASH_SEEDS"); s != "" {
		fmt.Sscan(s, &seeds) // 800 passed in both modes (3000 in replay mode)
	}
	first := int64(1)
	if s := os.Getenv("CKPTFS_CRASH_SEED"); s != "" {
		fmt.Sscan(s, &first)
		seeds = int(first)
	}
	for _, net := range []bool{false, true} {
		t.Run(map[bool]string{false: "replay", true: "net"}[net], func(t *testing.T) {
			if net {
				// Every rewind by the fix-up pass alone.
				defer func(l func(int, int) uint64) { replayLimit = l }(replayLimit)
				replayLimit = func(int, int) uint64 { return 0 }
			}
			for seed := first; seed <= int64(seeds); seed++ {
				for budget := 0; ; budget++ {
					done := crashRewindAt(t, seed, budget)
					if done || t.Failed() {
						break
					}
				}
			}
		})
	}
}

// crashRewindAt builds seed's history, crashes a rewind after budget
// mutations, and reports whether the rewind finished within the budget.
func crashRewindAt(t *testing.T, seed int64, budget int) bool {
	t.Helper()
	rng := rand.New(rand.NewSource(seed))
	m, mem := newCrashSim(t, seed)
	defer m.tree.Close()
	s, root, tree := m.store, m.root, m.tree
	turns, snaps := m.buildHistory(rng, 10, 15)
	j := rng.Intn(len(turns) - 1)
	what := fmt.Sprintf("seed %d, rewind to %d, crash after %d mutations", seed, turns[j], budget)
	ft := &partialTree{failingTree: failingTree{Tree: tree, budget: budget}, root: root, rng: rand.New(rand.NewSource(int64(budget)))}
	err := killable(func() error {
		_, err := s.Rewind(turns[j], ft, RewindOptions{})
		return err
	})
	if err == nil {
		defer s.Close()
		if d := diffSnap(snaps[j], takeSnapshot(t, root)); d != "" {
			stop, _ := s.endSeq(turns[j])
			t.Logf("stop=%d turns=%v events:\n%s", stop, turns, s.dumpEvents(1, ""))
			cs, err := s.Changes(Now, turns[j], tree)
			t.Logf("changes now->%d: %+v %v", turns[j], cs, err)
			for _, p := range []string{"a", "b", "a/b", "b/b"} {
				st, err := s.StateAt(turns[j], p, tree)
				t.Logf("StateAt(%d, %s) = %v %v; snap %v", turns[j], p, st, err, snaps[j][p])
			}
			t.Fatalf("%s: finished, but the tree is not the target:\n%s", what, d)
		}
		return true
	}
	if !errors.Is(err, errCrash) {
		t.Fatalf("%s: %v", what, err)
	}
	// kill -9: everything written survives.
	keep := vfs.CrashCloneCfg{UnsyncedDataPercent: 100, RNG: rand2.New(rand2.NewPCG(3, 4))}
	clone := mem.CrashClone(keep)
	s.Close()
	s2 := openOn(t, clone)
	// The recovery is killed too, now and then.
	if rng.Intn(2) == 0 {
		ft2 := &partialTree{failingTree: failingTree{Tree: tree, budget: rng.Intn(budget + 2)}, root: root, rng: rand.New(rand.NewSource(int64(budget) + 1))}
		if err := killable(func() error { _, err := s2.Recover(ft2); return err }); err != nil && !errors.Is(err, errCrash) {
			t.Fatalf("%s: first recovery: %v", what, err)
		} else if err != nil {
			what += fmt.Sprintf(", recovery crashed after %d", ft2.budget)
			clone = clone.CrashClone(keep)
			s2.Close()
			s2 = openOn(t, clone)
		}
	}
	defer s2.Close()
	if _, err := s2.Recover(tree); err != nil {
		t.Fatalf("%s: recover: %v", what, err)
	}
	if d := diffSnap(snaps[j], takeSnapshot(t, root)); d != "" {
		stop, _ := s2.endSeq(turns[j])
		t.Logf("stop=%d turns=%v events:\n%s", stop, turns, s2.dumpEvents(1, ""))
		t.Fatalf("%s: after recovery the tree is not the target:\n%s", what, d)
	}
	// Leftover temporaries would be visible files.
	filepath.Walk(root, func(p string, info os.FileInfo, err error) error {
		if err == nil && len(info.Name()) >= len(backing.TempPrefix) && info.Name()[:len(backing.TempPrefix)] == backing.TempPrefix {
			t.Errorf("%s: temporary left behind: %s", what, p)
		}
		return nil
	})
	_ = ckpt.Join
	return false
}
