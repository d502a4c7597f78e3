package versionstore

import (
	"errors"
	"fmt"
	"math/rand"
	rand2 "math/rand/v2"
	"os"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestCrashInLinkPass kills rewinds of histories made mostly of hard
// links after every number of tree mutations (so inside their link
// passes too), recovers, and checks the tree, which paths share an inode
// included, and that the recovered rewind can be undone.
func TestCrashInLinkPass(t *testing.T) {
	seeds := 8
	if raceEnabled {
		seeds = 3
	}
	if s := os.Getenv("CKPTFS_CRASH_SEEDS"); s != "" {
		fmt.Sscan(s, &seeds)
	}
	for seed := int64(1); seed <= int64(seeds); seed++ {
		for budget := 0; ; budget++ {
			if crashLinksAt(t, seed, budget) || t.Failed() {
				break
			}
		}
	}
}

// crashLinksAt builds seed's history, crashes a rewind after budget
// mutations and recovers (kill -9). It reports whether the rewind
// finished within the budget.
func crashLinksAt(t *testing.T, seed int64, budget int) bool {
	t.Helper()
	rng := rand.New(rand.NewSource(seed))
	m, mem := newCrashSim(t, seed)
	defer m.tree.Close()
	m.linkOps, m.flat = 4, true
	turns, snaps := m.buildHistory(rng, 10, 20)
	j := rng.Intn(len(turns) - 1)
	what := fmt.Sprintf("seed %d, rewind to %d, crash after %d mutations", seed, turns[j], budget)
	before := takeSnapshot(t, m.root)
	ft := &failingTree{Tree: m.tree, budget: budget}
	err := killable(func() error {
		_, err := m.store.Rewind(turns[j], ft, RewindOptions{})
		return err
	})
	if err == nil {
		defer m.store.Close()
		if d := diffSnap(snaps[j], takeSnapshot(t, m.root)); d != "" {
			t.Fatalf("%s: finished, but the tree is not the target:\n%s", what, d)
		}
		return true
	}
	if !errors.Is(err, errCrash) {
		t.Fatalf("%s: %v", what, err)
	}
	clone := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 100, RNG: rand2.New(rand2.NewPCG(5, 6))})
	m.store.Close()
	s2 := openOn(t, clone)
	defer s2.Close()
	if _, err := s2.Recover(m.tree); err != nil {
		t.Fatalf("%s: recover: %v", what, err)
	}
	if d := diffSnap(snaps[j], takeSnapshot(t, m.root)); d != "" {
		t.Fatalf("%s: after recovery the tree is not the target:\n%s", what, d)
	}
	rt, err := s2.Turn(s2.Latest())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s2.Rewind(rt.Num-1, m.tree, RewindOptions{}); err != nil {
		t.Fatalf("%s: undo: %v", what, err)
	}
	if d := diffSnap(before, takeSnapshot(t, m.root)); d != "" {
		t.Fatalf("%s: undoing the recovered rewind:\n%s", what, d)
	}
	return false
}
