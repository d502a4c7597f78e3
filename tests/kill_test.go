package tests

import (
	"context"
	"crypto/rand"
	"fmt"
	mrand "math/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"ckptfs/turnctl"
)

// TestKillAtRandomMoments SIGKILLs the daemon at random moments — during
// writes by several writers, at a turn boundary, during a rewind, during
// a burst of large writes that makes Pebble flush and compact — and
// remounts each time. The mount must come back without repair, a rewind
// cut short must be finished or rolled back (the tree is its target or
// what it was, never a mix), and every closed turn must still rewind
// exactly to the state recorded when it closed. make test kills 4 times,
// make test-long 52.
//
// A kill into a rewind once left a tree that was neither the target nor
// the start. Three store bugs a crash test found since (versionstore's
// TestCrashAtEveryStepOfRewind) could each do that; and the rewind's
// target was once drawn from turns whose state the test does not know.
// The last cause, about 1 run in 5 with CKPTFS_KILLS=30 and
// CKPTFS_KILL_KINDS=writes,rewind, was an exchange recorded but never
// made (by a writer or by the rewind itself), which Recover kept; such a
// kill cannot be replayed, so TestCrashPointsOfTheDaemon kills at named
// crash points chosen by its seed instead.
func TestKillAtRandomMoments(t *testing.T) {
	seed := testSeed(t)
	rng := mrand.New(mrand.NewSource(seed))
	kills := scale(t, 4, 52)
	if n, err := strconv.Atoi(os.Getenv("CKPTFS_KILLS")); err == nil {
		kills = n
	}
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"a": "a0", "d/a": "da0", "d/e/a": "dea0", "f/g/h": "fgh0"})
	m := mountProject(t, dir)
	c := control(t, m)
	ctx := context.Background()
	h := newHistory(t, dir)
	h.m = m
	ws := make([]*fsxWorker, 2)
	for i := range ws {
		ws[i] = newFsxWorker(seed+int64(i)+1, ".", [2]string{dir, dir})
	}
	t.Cleanup(func() {
		for _, w := range ws {
			w.closeAll()
		}
	})
	kinds := map[string]int{}
	checked := 0
	for k := 0; k < kills; k++ {
		// A turn open, some work in it.
		s := tree(t, dir)
		b, err := c.Begin(ctx, turnctl.BeginRequest{Label: fmt.Sprintf("kill %d", k)})
		if err != nil {
			t.Fatalf("begin: %v", err)
		}
		if b.Closed != nil {
			h.states[b.Closed.Num] = s
		}
		loadWorkers(ws, dir, 30)
		open := b.Turn.Num
		pre := tree(t, dir)

		kindList := []string{"writes", "boundary", "rewind", "churn"}
		if k := os.Getenv("CKPTFS_KILL_KINDS"); k != "" {
			kindList = strings.Split(k, ",") // to chase one kind
		}
		kind := kindList[k%len(kindList)]
		kinds[kind]++
		var target uint64
		done := make(chan error, 1)
		var stop atomic.Bool
		var wg sync.WaitGroup
		delay := time.Duration(rng.Intn(300)) * time.Millisecond
		switch kind {
		case "writes":
			for _, w := range ws {
				wg.Add(1)
				go func() {
					defer wg.Done()
					w.runOn(dir, -1, &stop)
				}()
			}
		case "boundary":
			h.states[open] = pre // Begin or End closes it as it is
			delay = time.Duration(rng.Intn(5000)) * time.Microsecond
			go func() {
				var err error
				if rng.Intn(2) == 0 {
					_, err = c.Begin(ctx, turnctl.BeginRequest{})
				} else {
					_, err = c.End(ctx, turnctl.EndRequest{})
				}
				done <- err
			}()
		case "rewind":
			h.states[open] = pre     // the rewind closes it as it is
			known := h.knownStates() // a turn whose state the test knows
			target = known[rng.Intn(len(known))]
			go func() {
				_, err := c.Rewind(ctx, turnctl.RewindRequest{Turn: fmt.Sprint(target)})
				done <- err
			}()
		case "churn":
			// Unique bytes (no dedup) several times over the memtable
			// size in make test-long, so that Pebble flushes and compacts.
			size := scale(t, 2<<20, 4<<20)
			delay = time.Duration(rng.Intn(scale(t, 1500, 6000))) * time.Millisecond
			wg.Add(1)
			go func() {
				defer wg.Done()
				buf := make([]byte, size)
				for i := 0; !stop.Load(); i++ {
					rand.Read(buf)
					if os.WriteFile(filepath.Join(dir, fmt.Sprintf("churn%d", i%4)), buf, 0o644) != nil {
						return
					}
					if i%4 == 3 {
						c.Begin(ctx, turnctl.BeginRequest{}) // a boundary: the next writes are captured again
					}
				}
			}()
		}
		time.Sleep(delay)
		m.kill(t)
		stop.Store(true)
		wg.Wait()
		for _, w := range ws {
			w.closeAll()
		}
		if kind == "writes" || kind == "churn" {
			done <- nil
		}
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("kill %d (%s): the control call did not return after the kill", k, kind)
		}

		m = mountProject(t, dir)
		h.m = m
		c = control(t, m)
		got := tree(t, dir)
		if kind == "rewind" && !equalTrees(got, pre) {
			sameTree(t, fmt.Sprintf("kill %d into a rewind to %d (seed %d): neither finished nor rolled back", k, target, seed), h.states[target], got)
		}
		// A turn closed by now that the test has no state for closed
		// with the tree as it is now (the one open at the kill, a
		// rewind's own turn), except the churn's own boundaries, whose
		// states the test does not know (nil: not checked).
		lg, err := c.Log(ctx, turnctl.LogRequest{})
		if err != nil {
			t.Fatalf("log after remount: %v", err)
		}
		for _, tn := range lg.Turns {
			if _, ok := h.states[tn.Num]; !ok && !tn.Open {
				if kind == "churn" && tn.Num != lg.Turns[0].Num {
					h.states[tn.Num] = nil
				} else {
					h.states[tn.Num] = got
				}
			}
		}
		if long(t) {
			t.Logf("kill %d (%s after %v): remounted, %d turns", k, kind, delay, len(h.states))
		}
		// Two random closed turns rewind exactly.
		for i := 0; i < 2; i++ {
			known := h.knownStates()
			n := known[rng.Intn(len(known))]
			h.rewindCheck(c, n, fmt.Sprintf("kill %d (%s, after %v; seed %d)", k, kind, delay, seed))
			checked++
		}
	}
	// Every turn with a known state, once more.
	known := h.knownStates()
	rng.Shuffle(len(known), func(i, j int) { known[i], known[j] = known[j], known[i] })
	if len(known) > scale(t, 6, 80) {
		known = known[:scale(t, 6, 80)]
	}
	for _, n := range known {
		h.rewindCheck(c, n, fmt.Sprintf("final sweep (seed %d)", seed))
		checked++
	}
	t.Logf("%d kill points survived %v; %d rewinds checked, %d turns", kills, kinds, checked, len(h.states))
}
