package tests

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"os"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"ckptfs/turnctl"
)

// history is what a test knows of a mount's turns: the whole tree at the
// end of each closed turn, taken with the writers quiesced.
type history struct {
	t      *testing.T
	dir    string
	m      *Mount
	states map[uint64]map[string]entry
}

func newHistory(t *testing.T, dir string) *history {
	return &history{t: t, dir: dir, states: map[uint64]map[string]entry{0: tree(t, dir)}}
}

// known returns the turns with a recorded state, in order.
func (h *history) known() []uint64 {
	var ns []uint64
	for n := range h.states {
		ns = append(ns, n)
	}
	sort.Slice(ns, func(i, j int) bool { return ns[i] < ns[j] })
	return ns
}

// knownStates is known without the turns whose state is not known (nil).
func (h *history) knownStates() []uint64 {
	var ns []uint64
	for _, n := range h.known() {
		if h.states[n] != nil {
			ns = append(ns, n)
		}
	}
	return ns
}

// openTurn returns the number of the open turn, 0 if none.
func openTurn(t *testing.T, c *turnctl.Client) uint64 {
	t.Helper()
	st, err := c.Status(context.Background(), turnctl.StatusRequest{})
	if err != nil {
		t.Fatalf("status: %v", err)
	}
	if st.Open && st.Turn != nil {
		return st.Turn.Num
	}
	return 0
}

// rewindCheck rewinds to turn n and checks the tree is that turn's state;
// the rewind's own turn gets the same state.
func (h *history) rewindCheck(c *turnctl.Client, n uint64, why string) {
	t := h.t
	t.Helper()
	if open := openTurn(t, c); open != 0 {
		h.states[open] = tree(t, h.dir) // the rewind closes it as it is
	}
	var stop func()
	if os.Getenv("DIAG") != "" {
		stop = watchdog(t, h.m, 4*time.Second, "rewind")
	}
	r, err := c.Rewind(context.Background(), turnctl.RewindRequest{Turn: fmt.Sprint(n)})
	if stop != nil {
		stop()
	}
	if err != nil {
		t.Fatalf("%s: rewind %d: %v", why, n, err)
	}
	sameTree(t, fmt.Sprintf("%s: after rewind to turn %d", why, n), h.states[n], tree(t, h.dir))
	if r.Turn != nil {
		h.states[r.Turn.Num] = h.states[n]
	}
}

// loadWorkers runs fsx workers on one shared tree (no plain twin: they race
// on the same names), each for ops operations.
func loadWorkers(ws []*fsxWorker, dir string, ops int) {
	var wg sync.WaitGroup
	for _, w := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.runOn(dir, ops, nil)
		}()
	}
	wg.Wait()
}

// runOn applies n operations (n < 0: until stop is set) to one root only,
// ignoring their results.
func (w *fsxWorker) runOn(root string, n int, stop *atomic.Bool) {
	for i := 0; n < 0 || i < n; i++ {
		if stop != nil && stop.Load() {
			return
		}
		op, _, fn := w.randomOp()
		fn(0, root)
		w.counts[op]++
	}
}

// TestHistoryUnderLoad: several writers run random operations on one
// shared tree at once; between rounds (writers quiesced) come random
// begins, ends (so manual turns happen too) and rewinds to random earlier
// turns. After every rewind the tree must equal the state recorded when
// that turn closed, byte for byte; at the end every known turn is rewound
// to once more, in random order.
func TestHistoryUnderLoad(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewSource(seed))
	rounds := scale(t, 20, 300)
	workers := 3
	if n, err := strconv.Atoi(os.Getenv("CKPTFS_LOAD_WORKERS")); err == nil && n > 0 {
		workers = n
	}
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"a": "a0", "d/a": "da0", "d/e/a": "dea0", "f/g/h": "fgh0"})
	m := mountProject(t, dir)
	c := control(t, m)
	ctx := context.Background()
	h := newHistory(t, dir)
	h.m = m
	ws := make([]*fsxWorker, workers)
	for i := range ws {
		ws[i] = newFsxWorker(seed+int64(i)+1, ".", [2]string{dir, dir})
	}
	t.Cleanup(func() {
		for _, w := range ws {
			w.closeAll()
		}
	})
	rewinds, boundaries := 0, 0
	start := time.Now()
	for r := 0; r < rounds; r++ {
		stop := watchdog(t, m, 60*time.Second, fmt.Sprintf("round %d (seed %d)", r, seed))
		loadWorkers(ws, dir, 20+rng.Intn(80))
		s := tree(t, dir)
		switch x := rng.Intn(10); {
		case x < 4:
			b, err := c.Begin(ctx, turnctl.BeginRequest{Label: fmt.Sprintf("round %d", r)})
			if err != nil {
				t.Fatalf("begin: %v", err)
			}
			if b.Closed != nil {
				h.states[b.Closed.Num] = s
			}
			boundaries++
		case x < 6:
			e, err := c.End(ctx, turnctl.EndRequest{})
			var te *turnctl.Error
			if errors.As(err, &te) && openTurn(t, c) == 0 {
				break // no turn open: nothing to end
			}
			if err != nil {
				t.Fatalf("end: %v", err)
			}
			h.states[e.Turn.Num] = s
			boundaries++
		default:
			known := h.known()
			h.rewindCheck(c, known[rng.Intn(len(known))], fmt.Sprintf("round %d (seed %d)", r, seed))
			rewinds++
		}
		stop()
	}
	t.Logf("rounds done in %v", time.Since(start).Round(time.Millisecond))
	known := h.known()
	rng.Shuffle(len(known), func(i, j int) { known[i], known[j] = known[j], known[i] })
	if len(known) > scale(t, 8, 60) {
		known = known[:scale(t, 8, 60)]
	}
	for _, n := range known {
		h.rewindCheck(c, n, fmt.Sprintf("final sweep (seed %d)", seed))
		rewinds++
	}
	total := 0
	for _, w := range ws {
		for _, v := range w.counts {
			total += v
		}
	}
	t.Logf("%d operations by %d writers, %d boundaries, %d rewinds checked, %d turns known, in %v", total, workers, boundaries, rewinds, len(h.states), time.Since(start).Round(time.Millisecond))
}

// TestAtticUnlinkRacesWriter: an unlink whose prior bytes the store keeps
// by hard-linking the inode into its attic races a writer that opens,
// truncates or links the same file by path. Whatever wins, the attic copy
// must never change: verify stays clean and a rewind restores every file.
func TestAtticUnlinkRacesWriter(t *testing.T) {
	n := scale(t, 300, 3000)
	dir := t.TempDir()
	m := mountProject(t, dir)
	c := control(t, m)
	ctx := context.Background()
	if _, err := c.Begin(ctx, turnctl.BeginRequest{}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		writeTree(t, dir, map[string]string{fmt.Sprintf("f%d", i): fmt.Sprintf("original %d\n", i)})
	}
	end, err := c.End(ctx, turnctl.EndRequest{})
	if err != nil {
		t.Fatal(err)
	}
	want := tree(t, dir)
	if _, err := c.Begin(ctx, turnctl.BeginRequest{}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		p := fmt.Sprintf("%s/f%d", dir, i)
		wg.Add(2)
		go func() {
			defer wg.Done()
			os.Remove(p)
		}()
		go func() {
			defer wg.Done()
			switch i % 3 {
			case 0:
				if f, err := os.OpenFile(p, os.O_WRONLY, 0); err == nil {
					f.WriteAt([]byte("CLOBBERED"), 0)
					f.Close()
				}
			case 1:
				os.Truncate(p, 1)
			default:
				if os.Link(p, p+".link") == nil {
					os.WriteFile(p+".link", []byte("CLOBBERED"), 0o644)
				}
			}
		}()
	}
	wg.Wait()
	if _, err := c.End(ctx, turnctl.EndRequest{}); err != nil {
		t.Fatal(err)
	}
	v, err := c.Verify(ctx, turnctl.VerifyRequest{})
	if err != nil || !v.OK {
		t.Fatalf("verify after the races: %+v %v", v, err)
	}
	if _, err := c.Rewind(ctx, turnctl.RewindRequest{Turn: fmt.Sprint(end.Turn.Num)}); err != nil {
		t.Fatalf("rewind: %v", err)
	}
	sameTree(t, "after rewinding past the races", want, tree(t, dir))
}

// watchdog dumps the daemon's goroutines (SIGQUIT: the Go runtime prints
// every stack and exits) into the test log if stop is not called within d,
// so a deadlock fails the test with its stacks instead of hanging it.
// With the daemon gone, blocked requests fail and the test goes on to fail.
// The timer never outlives the test (a round that ends in t.Fatal skips
// its stop): the test's cleanup stops it, or waits for its report.
func watchdog(t *testing.T, m *Mount, d time.Duration, what string) (stop func()) {
	t.Helper()
	pid := m.PID(t)
	fired := make(chan struct{})
	timer := time.AfterFunc(d, func() {
		defer close(fired)
		// The daemon's stderr is <store>/daemon.log, hidden by the mount:
		// read it through the daemon's own fd.
		f, err := os.Open(fmt.Sprintf("/proc/%d/fd/2", pid))
		syscall.Kill(pid, syscall.SIGQUIT)
		for i := 0; i < 500 && alive(pid); i++ {
			time.Sleep(10 * time.Millisecond)
		}
		if err != nil {
			t.Errorf("%s: no progress in %v; daemon log: %v", what, d, err)
			return
		}
		defer f.Close()
		b, _ := io.ReadAll(f)
		if i := bytes.LastIndex(b, []byte("SIGQUIT")); i >= 0 {
			b = b[i:]
		}
		t.Errorf("%s: no progress in %v; the daemon's goroutines:\n%s", what, d, b)
	})
	var once sync.Once
	stop = func() {
		once.Do(func() {
			if !timer.Stop() {
				<-fired
			}
		})
	}
	t.Cleanup(stop)
	return stop
}
