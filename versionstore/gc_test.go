package versionstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"ckptfs/internal/backing"
	"ckptfs/internal/ckpt"
	"ckptfs/internal/crashpoint"
)

// checkNoGarbage checks that every chunk and attic file in the store is
// named by an event (after a gc that ran to its end, with nothing
// recorded since), and that Verify finds every named one.
func checkNoGarbage(t *testing.T, s *Store) {
	t.Helper()
	m, err := s.mark(func() bool { return false }, nil)
	if err != nil {
		t.Fatal(err)
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixChunk}, UpperBound: upper(prefixChunk)})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		if !m.chunks[[32]byte(it.Key()[1:])] {
			t.Fatalf("chunk %x is referenced by no event and was not reclaimed", it.Key()[1:9])
		}
		n++
	}
	it.Close()
	if n != len(m.chunks) {
		t.Fatalf("%d chunks referenced, %d stored", len(m.chunks), n)
	}
	if s.attic != nil {
		names := atticNames(t, s)
		for _, name := range names {
			if !m.attic[name] {
				t.Fatalf("attic file %s is referenced by no event and was not reclaimed", name)
			}
		}
	}
	checkVerify(t, s)
}

func checkVerify(t *testing.T, s *Store) {
	t.Helper()
	rep, err := s.Verify()
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Corrupt) > 0 {
		t.Fatalf("verify: %v", rep.Corrupt)
	}
}

func openTree(t *testing.T, root string) *backing.Tree {
	t.Helper()
	tree, err := backing.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tree.Close() })
	return tree
}

func writeFile(t *testing.T, p string, data []byte) {
	t.Helper()
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// captureFile records the prior state of the regular file p, its bytes
// copied.
func captureFile(t *testing.T, s *Store, tree *backing.Tree, p string) {
	t.Helper()
	captureFileBy(t, s, tree, p, ckpt.Program{Comm: "test"})
}

// captureFileBy is captureFile by program who.
func captureFileBy(t *testing.T, s *Store, tree *backing.Tree, p string, who ckpt.Program) {
	t.Helper()
	if err := recordFile(s, tree, p, who); err != nil {
		t.Fatal(err)
	}
}

// recordFile records the prior state of the regular file p by who, its
// bytes copied, and returns Record's error.
func recordFile(s *Store, tree *backing.Tree, p string, who ckpt.Program) error {
	st, ino, err := tree.LstatInode(p)
	if err != nil {
		return err
	}
	c := ckpt.Capture{Path: p, Prior: st, Inode: ino, Open: func() (*os.File, error) { return tree.Open(p) }}
	return s.Record(c, who)
}

// keptHistory keeps the turns a test may still rewind to, and the tree at
// the end of each.
type keptHistory struct {
	turns []uint64
	snaps []snapshot
}

func (h *keptHistory) add(n uint64, sn snapshot) {
	h.turns = append(h.turns, n)
	h.snaps = append(h.snaps, sn)
}

// sync drops the points the store no longer holds: forgotten or merged
// turns, and steps whose turn lost them (a merge).
func (h *keptHistory) sync(t *testing.T, s *Store) {
	t.Helper()
	has := keptNums(t, s)
	var turns []uint64
	var snaps []snapshot
	for i, p := range h.turns {
		n, k := SplitPoint(p)
		if !has[n] {
			continue
		}
		if k > 0 {
			if _, err := s.stepEnd(p); err != nil {
				continue
			}
		}
		turns, snaps = append(turns, p), append(snaps, h.snaps[i])
	}
	h.turns, h.snaps = turns, snaps
}

// trim drops the turns below start.
func (h *keptHistory) trim(start uint64) {
	i := 0
	for i < len(h.turns) && h.turns[i] < start {
		i++
	}
	h.turns, h.snaps = h.turns[i:], h.snaps[i:]
}

// undoTurn is the kept turn before the newest one that changed
// something (MaxUint64: none).
func undoTurn(kept []ckpt.Turn) uint64 {
	for i := len(kept) - 1; i > 0; i-- {
		if !kept[i].Empty() {
			return kept[i-1].Num
		}
	}
	return math.MaxUint64
}

// runGCModel builds a random history and applies random pins, forgets,
// policies and gcs to it: after each, every kept turn resolves exactly
// and a random one rewinds exactly, every forgotten one is refused, no
// pinned turn is forgotten, and after a gc no chunk or attic file is left
// that no event names.
func runGCModel(t *testing.T, seed int64, s *Store, root string, link bool, rounds int) {
	tree := openTree(t, root)
	rng := rand.New(rand.NewSource(seed))
	m := &sim{t: t, rng: rand.New(rand.NewSource(seed + 1)), root: root, tree: tree, store: s, link: link}
	h := &keptHistory{}
	h.add(0, takeSnapshot(t, root))
	pins := map[uint64]bool{}
	work := func() {
		for k := 0; k < 1+rng.Intn(3); k++ {
			s.Begin(ckpt.KindAgent, "", "")
			for i := 0; i < 1+rng.Intn(12); i++ {
				m.step()
			}
			tn, err := s.End("")
			if err != nil {
				t.Fatal(err)
			}
			h.add(tn.Num, takeSnapshot(t, root))
		}
	}
	forgets, gcs := 0, 0
	for round := 0; round < rounds; round++ {
		work()
		start := s.HistoryStart().Turn
		switch op := rng.Intn(9); op {
		case 0: // pin a kept turn
			n := h.turns[rng.Intn(len(h.turns))]
			if _, err := s.Pin(n, "model"); err != nil {
				t.Fatalf("seed %d: pin %d: %v", seed, n, err)
			}
			pins[n] = true
		case 1: // unpin one
			for n := range pins {
				if err := s.Unpin(n); err != nil {
					t.Fatalf("seed %d: unpin %d: %v", seed, n, err)
				}
				delete(pins, n)
				break
			}
		case 2, 3: // forget a prefix
			kept, err := s.keptTurns()
			if err != nil {
				t.Fatal(err)
			}
			latest := s.Latest()
			k := 1 + rng.Intn(len(kept)+1)
			to := latest + 1
			if k < len(kept) {
				to = kept[k].Num
			}
			var list []uint64
			for _, kt := range kept[:min(k, len(kept))] {
				list = append(list, kt.Num)
			}
			_, err = s.Forget(list, ckpt.ReasonForget)
			blocked := k >= len(kept)
			for _, n := range list {
				blocked = blocked || pins[n]
			}
			switch {
			case blocked && err == nil:
				t.Fatalf("seed %d: forget %d-%d should be refused (pins %v, latest %d)", seed, start, to-1, pins, latest)
			case !blocked && err != nil:
				t.Fatalf("seed %d: forget %d-%d: %v", seed, start, to-1, err)
			case err == nil:
				forgets++
				if got := s.HistoryStart().Turn; got != to {
					t.Fatalf("seed %d: history starts at %d, want %d", seed, got, to)
				}
			}
		case 7, 8: // forget turns in the middle: merged into the next kept
			kept, err := s.keptTurns()
			if err != nil {
				t.Fatal(err)
			}
			if len(kept) < 3 {
				break
			}
			var list []uint64
			for _, k := range kept[1:] {
				if rng.Intn(3) == 0 {
					list = append(list, k.Num)
				}
			}
			if len(list) == 0 {
				list = append(list, kept[1+rng.Intn(len(kept)-1)].Num)
			}
			blocked := slices.Contains(list, kept[len(kept)-1].Num)
			for _, n := range list {
				blocked = blocked || pins[n]
			}
			before := s.HistoryStart()
			_, err = s.Forget(list, ckpt.ReasonForget)
			switch {
			case blocked && err == nil:
				t.Fatalf("seed %d: forget %v should be refused (pins %v, kept %d-%d)", seed, list, pins, start, kept[len(kept)-1].Num)
			case !blocked && err != nil:
				t.Fatalf("seed %d: forget %v: %v", seed, list, err)
			case err == nil:
				forgets++
				for _, n := range list {
					if _, err := s.Resolve(fmt.Sprint(n)); !errors.Is(err, ErrForgotten) {
						t.Fatalf("seed %d: turn %d merged away resolves: %v", seed, n, err)
					}
				}
			}
			if err != nil {
				now, kerr := s.keptTurns()
				if kerr != nil {
					t.Fatal(kerr)
				}
				if len(now) != len(kept) || s.HistoryStart() != before {
					t.Fatalf("seed %d: a refused forget changed history: %d kept turns, %d before", seed, len(now), len(kept))
				}
			}
			h.sync(t, s)
		case 4, 5: // a policy, and gc
			pol := ckpt.Policy{KeepTurns: 1 + rng.Intn(6), KeepAge: time.Nanosecond, KeepHourly: -1, KeepDaily: -1}
			thin := rng.Intn(2) == 0
			if thin {
				pol.KeepHourly = 0 // the default: every turn here ended this hour
			}
			if rng.Intn(3) == 0 {
				pol.KeepSize = 1 + int64(rng.Intn(200<<10))
			}
			if err := s.SetPolicy(pol); err != nil {
				t.Fatal(err)
			}
			rep, err := s.GC(GCOptions{NoPolicy: op == 5})
			if err != nil {
				t.Fatalf("seed %d: gc: %v", seed, err)
			}
			gcs++
			if rep.Stopped != "" {
				t.Fatalf("seed %d: gc stopped: %s", seed, rep.Stopped)
			}
			checkNoGarbage(t, s)
			h.sync(t, s)
			if op == 4 && thin && pol.KeepSize == 0 {
				// Of the turns older than the window, the start and
				// the last one before the window, pins, and the turn
				// the undo of the newest change goes back to (and the
				// last one before it) are kept.
				kept, err := s.keptTurns()
				if err != nil {
					t.Fatal(err)
				}
				latest, undo := s.Latest(), undoTurn(kept)
				for i, k := range kept {
					inWindow := latest-k.Num < uint64(pol.KeepTurns) || i == len(kept)-1 || k.Num == undo
					lastOld := i+1 < len(kept) && (latest-kept[i+1].Num < uint64(pol.KeepTurns) || pins[kept[i+1].Num] || i+1 == len(kept)-1 || kept[i+1].Num == undo)
					if i > 0 && !inWindow && !lastOld && !pins[k.Num] {
						t.Fatalf("seed %d: thinning kept turn %d (keep %d of %d turns)", seed, k.Num, pol.KeepTurns, latest)
					}
				}
			}
			if op == 4 && !thin {
				latest := s.Latest()
				// The window's first turn, or the turn the undo of the
				// newest turn that changed something goes back to.
				kept, err := s.keptTurns()
				if err != nil {
					t.Fatal(err)
				}
				from := min(latest+1-uint64(pol.KeepTurns), undoTurn(kept))
				if st := s.HistoryStart().Turn; st < from && pol.KeepSize == 0 {
					ok := false
					for n := st; n < from; n++ {
						ok = ok || pins[n]
					}
					if !ok && !pins[st] {
						t.Fatalf("seed %d: policy keeps %d turns, history starts at %d of %d", seed, pol.KeepTurns, st, latest)
					}
				}
			}
		case 6: // a rewind to a kept turn
			j := rng.Intn(len(h.turns))
			res, err := s.Rewind(h.turns[j], tree, RewindOptions{})
			if err != nil {
				t.Fatalf("seed %d: rewind to %d: %v", seed, h.turns[j], err)
			}
			got := takeSnapshot(t, root)
			if d := diffSnap(h.snaps[j], got); d != "" {
				t.Fatalf("seed %d: rewind to kept turn %d (history starts at %d): the tree differs:\n%s", seed, h.turns[j], s.HistoryStart().Turn, d)
			}
			if len(res.Changes) > 0 {
				h.add(res.Turn.Num, got)
			}
		}
		start = s.HistoryStart().Turn
		for n := range pins {
			if n < start {
				t.Fatalf("seed %d: pinned turn %d was forgotten (history starts at %d)", seed, n, start)
			}
		}
		if start > 0 {
			if _, err := s.Resolve(fmt.Sprint(start - 1)); !errors.Is(err, ErrForgotten) {
				t.Fatalf("seed %d: turn %d below the start resolves: %v", seed, start-1, err)
			}
		}
		h.trim(start)
		checkHistory(t, s, tree, h.snaps, h.turns)
	}
	// The oldest kept turn rewinds exactly, and so does the newest.
	for _, j := range []int{0, len(h.turns) - 1} {
		if _, err := s.Rewind(h.turns[j], tree, RewindOptions{}); err != nil {
			t.Fatal(err)
		}
		if d := diffSnap(h.snaps[j], takeSnapshot(t, root)); d != "" {
			t.Fatalf("seed %d: rewind to %d: the tree differs:\n%s", seed, h.turns[j], d)
		}
	}
	if _, err := s.GC(GCOptions{NoPolicy: true}); err != nil {
		t.Fatal(err)
	}
	checkNoGarbage(t, s)
	t.Logf("seed %d: %d forgets, %d gcs, history starts at %d of %d", seed, forgets, gcs, s.HistoryStart().Turn, s.Latest())
}

func gcRounds() int {
	switch {
	case longRun():
		return 150
	case raceEnabled:
		return 20
	}
	return 40
}

func TestGCModelMemStore(t *testing.T) {
	defer func(k int) { gcBatchKeys = k }(gcBatchKeys)
	gcBatchKeys = 3 // many batches, runs and range deletions
	for seed := int64(1); seed <= 3; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			runGCModel(t, seed, NewTestStore(t), t.TempDir(), false, gcRounds())
		})
	}
}

func TestGCModelAtticStore(t *testing.T) {
	for seed := int64(11); seed <= 12; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			s, root := atticStore(t)
			runGCModel(t, seed, s, root, true, gcRounds())
		})
	}
}

// TestGCWithConcurrentCaptures: captures that find their chunks stored
// already (hasChunk) while a gc deletes them as garbage must never end up
// naming a deleted chunk.
func TestGCWithConcurrentCaptures(t *testing.T) {
	defer func(k int) { gcBatchKeys = k }(gcBatchKeys)
	gcBatchKeys = 2
	// A capture that found a chunk stored holds off every gc batch until
	// its event is committed.
	found := 0
	testHookChunkFound = func(s *Store) {
		found++
		if s.contentMu.TryLock() {
			s.contentMu.Unlock()
			t.Error("a capture relies on a stored chunk without holding off gc")
		}
	}
	defer func() { testHookChunkFound = nil }()
	s := NewTestStore(t)
	root := t.TempDir()
	tree := openTree(t, root)
	rng := rand.New(rand.NewSource(5))
	// A few contents of several chunks each, used again and again.
	var pool [][]byte
	for i := 0; i < 6; i++ {
		b := make([]byte, 200<<10)
		rng.Read(b)
		pool = append(pool, b)
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	gcs := 0
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			if _, err := s.GC(GCOptions{NoPolicy: true}); err != nil && !errors.Is(err, ErrBusy) {
				t.Error(err)
				return
			}
			gcs++
		}
	}()
	want := map[uint64][]byte{}
	iters := 120
	if raceEnabled {
		iters = 50
	}
	for i := 0; i < iters; i++ {
		s.Begin(ckpt.KindAgent, "", "")
		p := filepath.Join(root, "f")
		if st, _ := tree.Lstat("f"); st.Exists() {
			captureFile(t, s, tree, "f")
		}
		data := pool[rng.Intn(len(pool))]
		writeFile(t, p, data)
		tn, _ := s.End("")
		want[tn.Num] = data
		if i%5 == 4 {
			var list []uint64
			for n := s.HistoryStart().Turn; n+2 < tn.Num; n++ {
				list = append(list, n)
			}
			if len(list) > 0 {
				if _, err := s.Forget(list, ckpt.ReasonForget); err != nil && !errors.Is(err, ErrBusy) {
					t.Fatal(err)
				}
			}
		}
	}
	close(done)
	wg.Wait()
	checkVerify(t, s)
	start := s.HistoryStart().Turn
	for n, data := range want {
		if n < start {
			continue
		}
		rc, _, err := s.OpenAt(n, "f", tree)
		if err != nil {
			t.Fatalf("turn %d: %v", n, err)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || !bytes.Equal(b, data) {
			t.Fatalf("turn %d: bytes differ (%v)", n, err)
		}
	}
	if _, err := s.GC(GCOptions{NoPolicy: true}); err != nil {
		t.Fatal(err)
	}
	checkNoGarbage(t, s)
	if found == 0 {
		t.Error("no capture found its chunks stored")
	}
	t.Logf("%d gcs alongside, %d chunks found stored", gcs, found)
}

// TestCrashPointsOfGC kills a forget and a gc at their crash points (each
// hit of each point, and the compaction): the reopened store starts its
// history at the old start or the new one, every kept turn resolves
// exactly, and a gc then leaves no garbage and verify passes.
func TestCrashPointsOfGC(t *testing.T) {
	defer func(k int) { gcBatchKeys = k }(gcBatchKeys)
	gcBatchKeys = 4
	for _, seed := range crashSeeds(4) {
		rng := rand.New(rand.NewSource(seed))
		m, mem := newCrashSim(t, seed)
		turns, snaps := m.buildHistory(rng, 12, 12)
		s := m.store
		if seed%2 == 0 {
			if _, err := s.Forget([]uint64{0, 1}, ckpt.ReasonForget); err != nil {
				t.Fatal(err)
			}
		}
		old := s.HistoryStart().Turn
		to := old + 2 + uint64(rng.Intn(6))
		// Odd seeds thin (every turn here ended this hour): the start
		// stays, the turns between it and the window merge into the last.
		pol := ckpt.Policy{KeepTurns: int(s.Latest() - to + 1), KeepAge: time.Nanosecond, KeepHourly: -1, KeepDaily: -1}
		if seed%2 == 1 {
			pol.KeepHourly = 0
		}
		if err := s.SetPolicy(pol); err != nil {
			t.Fatal(err)
		}
		// Count the hits of a whole gc on a copy of the store; what it
		// keeps is what every gc after a kill must end with.
		probe, _ := killClone(t, mem)
		stop := crashpoint.Trace()
		_, err := probe.GC(GCOptions{})
		want, kerr := probe.keptTurns()
		if kerr != nil {
			t.Fatal(kerr)
		}
		to = probe.HistoryStart().Turn
		var trace []string
		for _, p := range stop() {
			if strings.HasPrefix(p, "gc.") || strings.HasPrefix(p, "forget.") {
				trace = append(trace, p)
			}
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(trace) == 0 {
			t.Fatal("gc passed no crash point")
		}
		for hit := 1; hit <= len(trace); hit++ {
			c, cmem := killClone(t, mem)
			point, err := untilCrash(t, fmt.Sprintf("gc.*,forget.*@%d", hit), func() error {
				_, err := c.GC(GCOptions{})
				return err
			})
			if err != nil {
				t.Fatalf("seed %d hit %d: %v", seed, hit, err)
			}
			r, _ := killClone(t, cmem)
			start := r.HistoryStart().Turn
			if start != old && start != to {
				t.Fatalf("seed %d: killed at %s: history starts at %d, want %d or %d", seed, point, start, old, to)
			}
			h := &keptHistory{turns: turns, snaps: snaps}
			h.sync(t, r)
			checkHistory(t, r, m.tree, h.snaps, h.turns)
			if _, err := r.GC(GCOptions{}); err != nil {
				t.Fatalf("seed %d: gc after a kill at %s: %v", seed, point, err)
			}
			if got := r.HistoryStart().Turn; got != to {
				t.Fatalf("seed %d: after a kill at %s and a gc, history starts at %d, want %d", seed, point, got, to)
			}
			if got, err := r.keptTurns(); err != nil || len(got) != len(want) {
				t.Fatalf("seed %d: after a kill at %s and a gc, %d turns are kept, want %d (%v)", seed, point, len(got), len(want), err)
			}
			checkNoGarbage(t, r)
			r.Close()
		}
		t.Logf("seed %d: %d crash points of a gc (%v)", seed, len(trace), trace)
	}
}

// A gc or a forget while a rewind runs, and a forget of the open turn or
// of the newest closed one, are refused with a clear error and change
// nothing.
func TestGCAndForgetRefusals(t *testing.T) {
	s := NewTestStore(t)
	for i := 0; i < 3; i++ {
		s.Begin(ckpt.KindAgent, "", "")
		s.End("")
	}
	s.Begin(ckpt.KindAgent, "open", "")
	s.rewindMu.Lock() // as a rewind does
	if _, err := s.GC(GCOptions{}); !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), "rewind") {
		t.Fatalf("gc while a rewind runs: %v", err)
	}
	if _, err := s.Forget([]uint64{0}, ckpt.ReasonForget); !errors.Is(err, ErrBusy) {
		t.Fatalf("forget while a rewind runs: %v", err)
	}
	s.rewindMu.Unlock()
	if _, err := s.Forget([]uint64{0, 1, 2, 3, 4}, ckpt.ReasonForget); !errors.Is(err, ErrOpenTurn) || !strings.Contains(err.Error(), "open") {
		t.Fatalf("forget of the open turn: %v", err)
	}
	if _, err := s.Forget([]uint64{0, 1, 2, 3}, ckpt.ReasonForget); !errors.Is(err, ErrOpenTurn) || !strings.Contains(err.Error(), "newest closed") {
		t.Fatalf("forget of the newest closed turn: %v", err)
	}
	if h := s.HistoryStart(); h.Turn != 0 {
		t.Fatalf("a refused forget moved the start to %d", h.Turn)
	}
	if _, err := s.Forget([]uint64{0, 1, 2}, ckpt.ReasonForget); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pin(1, ""); !errors.Is(err, ErrForgotten) {
		t.Fatalf("pin of a forgotten turn: %v", err)
	}
	if _, err := s.Resolve("0"); !errors.Is(err, ErrForgotten) || !strings.Contains(err.Error(), "history starts at turn 3") {
		t.Fatalf("resolve of a forgotten turn: %v", err)
	}
}

// The store's size counts what its Pebble logs hold, not the space
// preallocated ahead of their writes: a flush (a gc makes one) starts a
// new log, and a gc that freed space would report the store grown.
func TestStoreBytesLeaveOutLogPreallocation(t *testing.T) {
	s, _, _ := offlineFixture(t)
	s.Begin(ckpt.KindAgent, "", "")
	recordBytes(t, s, "a", []byte("a"))
	s.End("")
	before := s.StoreBytes()
	if err := s.db.Flush(); err != nil {
		t.Fatal(err)
	}
	s.Begin(ckpt.KindAgent, "", "")
	recordBytes(t, s, "b", []byte("b"))
	s.End("")
	if grew := s.StoreBytes() - before; grew > 4<<20 {
		t.Errorf("a flush and one small record grew the store by %d KiB", grew>>10)
	}
}

// Nor does it count the obsolete logs Pebble keeps to reuse (up to three
// of a memtable's size), which no gc can free: over a small budget, the
// policy forgot history for them.
func TestStoreBytesLeaveOutRecycledLogs(t *testing.T) {
	s, _, _ := offlineFixture(t)
	data := make([]byte, 1<<20)
	for i := 0; i < 70; i++ { // small contents go through the log
		rand.Read(data)
		s.Begin(ckpt.KindAgent, "", "")
		recordBytes(t, s, fmt.Sprint("f", i), data)
		s.End("")
	}
	if err := s.db.Flush(); err != nil {
		t.Fatal(err)
	}
	s.awaitObsolete()
	m := s.db.Metrics()
	if m.WAL.ObsoleteFiles == 0 || m.WAL.ObsoletePhysicalSize < 16<<20 {
		t.Fatalf("Pebble keeps %d obsolete logs (%d bytes); the test needs some", m.WAL.ObsoleteFiles, m.WAL.ObsoletePhysicalSize)
	}
	want := int64(m.Table.Local.LiveSize + m.BlobFiles.Local.LiveSize + m.WAL.Size)
	if got := s.StoreBytes(); got > want+8<<20 {
		t.Errorf("the store counts %d MiB; its tables and live logs hold %d MiB (%d MiB of obsolete logs kept to reuse)", got>>20, want>>20, m.WAL.ObsoletePhysicalSize>>20)
	}
}

// The store's size is its settled size: tables that a compaction has
// replaced but an open iterator still holds (as a compaction holds its
// input until its output is installed) do not count, or a gc that
// looked at that moment would forget turns for space about to be free.
func TestStoreBytesLeaveOutReplacedTables(t *testing.T) {
	s, _, _ := offlineFixture(t)
	data := make([]byte, 8<<20)
	rand.Read(data)
	s.Begin(ckpt.KindAgent, "", "")
	recordBytes(t, s, "a", data)
	s.End("")
	if err := s.db.Flush(); err != nil {
		t.Fatal(err)
	}
	it, err := s.db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	held := it.First() // the iterator holds the tables of this version
	// Rewrite every table: the ones the iterator reads stay on disk.
	if err := s.db.Compact(context.Background(), []byte{0}, []byte{0xff}, true); err != nil {
		t.Fatal(err)
	}
	m := s.db.Metrics()
	if !held || m.Table.Local.ZombieSize < 4<<20 {
		t.Fatalf("the iterator holds %d bytes of replaced tables; the test needs some", m.Table.Local.ZombieSize)
	}
	during := s.StoreBytes()
	it.Close()
	s.awaitObsolete()
	after := s.StoreBytes()
	if d := during - after; d > 1<<20 || d < -(1<<20) {
		t.Errorf("the store counts %d KiB while an iterator holds %d KiB of replaced tables, %d KiB after", during>>10, m.Table.Local.ZombieSize>>10, after>>10)
	}
}

// Over its budget, the policy forgets turns up to the one before the
// newest closed turn that changed something, never that one too: the
// newest turn can always be undone, what its prior states cost aside.
// Empty turns after it change nothing of that.
func TestBudgetKeepsTheUndoOfTheNewestTurn(t *testing.T) {
	s, tree, root := offlineFixture(t)
	rng := rand.New(rand.NewSource(1))
	f := filepath.Join(root, "f")
	versions := [][]byte{}
	next := func() []byte {
		b := make([]byte, 4<<20)
		rng.Read(b)
		versions = append(versions, b)
		return b
	}
	writeFile(t, f, next())
	var turns []uint64
	for i := 0; i < 4; i++ {
		n, _ := s.Begin(ckpt.KindAgent, "", "")
		captureFile(t, s, tree, "f")
		writeFile(t, f, next())
		if _, err := s.End(""); err != nil {
			t.Fatal(err)
		}
		turns = append(turns, n.Num)
	}
	s.Begin(ckpt.KindAgent, "", "") // an empty turn after the last change
	s.End("")
	if err := s.SetPolicy(ckpt.Policy{KeepSize: 1, KeepTurns: 1, KeepAge: time.Nanosecond, KeepHourly: -1, KeepDaily: -1}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GC(GCOptions{}); err != nil {
		t.Fatal(err)
	}
	undo := turns[len(turns)-2] // the state before the newest change
	if st := s.HistoryStart().Turn; st != undo {
		t.Fatalf("history starts at turn %d; the undo of turn %d needs turn %d", st, turns[len(turns)-1], undo)
	}
	if _, err := s.Rewind(undo, tree, RewindOptions{}); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(f); !bytes.Equal(got, versions[len(versions)-2]) {
		t.Errorf("f after the rewind to turn %d is not as it was then", undo)
	}
}
