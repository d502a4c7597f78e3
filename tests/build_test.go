package tests

import (
	"context"
	"fmt"
	mrand "math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"ckptfs/turnctl"
)

// buildOp is one output a worker produced (or deleted), with the
// boundaries around it: s boundaries had returned before it began, e had
// begun by the time it returned.
type buildOp struct {
	path    string
	content string // "" deleted
	s, e    int64
}

// TestParallelBuildTurns: a make -j like load (workers writing objects to
// temporary files and renaming them into place, replacing and deleting
// them) while turns begin and end as fast as the control socket allows.
// Every operation must land in exactly one turn: rewinding to the turn
// closed at boundary j gives, for every output, the result of its last
// operation that returned before j began, or of one still running across
// j — never anything begun after j returned, never a torn file. Each
// turn's show lists only outputs some operation could have changed then.
// The whole load runs under a watchdog (no deadlock) and the daemon log is
// checked for races: the daemon is built with -race for this test.
func TestParallelBuildTurns(t *testing.T) {
	seed := testSeed(t)
	workers, opsPer, boundaries, rewinds := scale(t, 6, 8), scale(t, 60, 1500), scale(t, 30, 300), scale(t, 6, 20)
	dir := t.TempDir()
	// make test runs the daemon under the race detector; make test-long,
	// not built with -race, keeps the plain daemon (CKPTFS_RACE=1 for both).
	mount := mountRaceDaemon
	if long(t) {
		mount = mountProject
	}
	m := mount(t, dir)
	c := control(t, m)
	ctx := context.Background()
	for w := 0; w < workers; w++ {
		if err := os.MkdirAll(filepath.Join(dir, fmt.Sprintf("out/w%d", w)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Begin(ctx, turnctl.BeginRequest{Label: "build"}); err != nil {
		t.Fatal(err)
	}
	var started, done atomic.Int64           // boundaries begun, returned
	var ctlFinished atomic.Bool              // the workers stop with the boundaries
	closedAt := make([]uint64, boundaries+1) // boundary -> turn it closed, 0: none
	stopWatch := watchdog(t, m, time.Duration(scale(t, 90, 900))*time.Second, fmt.Sprintf("parallel build (seed %d)", seed))
	logs := make([][]buildOp, workers)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := mrand.New(mrand.NewSource(seed + int64(w)))
			for i := 0; i < opsPer && !ctlFinished.Load(); i++ {
				p := fmt.Sprintf("out/w%d/o%d.o", w, rng.Intn(15))
				op := buildOp{path: p, s: done.Load()}
				var err error
				if rng.Intn(5) == 0 {
					err = os.Remove(filepath.Join(dir, p))
					if os.IsNotExist(err) {
						continue // nothing changed
					}
				} else {
					op.content = fmt.Sprintf("w%d op%d %s\n", w, i, strings.Repeat("x", rng.Intn(3000)))
					tmp := filepath.Join(dir, fmt.Sprintf("out/w%d/.tmp%d", w, i))
					if err = os.WriteFile(tmp, []byte(op.content), 0o644); err == nil {
						err = os.Rename(tmp, filepath.Join(dir, p))
					}
				}
				op.e = started.Load()
				if err != nil {
					t.Errorf("worker %d: %v", w, err)
					return
				}
				logs[w] = append(logs[w], op)
			}
		}()
	}
	ctlDone := make(chan struct{})
	go func() {
		defer close(ctlDone)
		defer ctlFinished.Store(true)
		rng := mrand.New(mrand.NewSource(seed))
		for j := 1; j <= boundaries; j++ {
			time.Sleep(time.Duration(rng.Intn(3000)) * time.Microsecond)
			started.Add(1)
			if j%2 == 0 {
				b, err := c.Begin(ctx, turnctl.BeginRequest{})
				if err != nil {
					t.Errorf("begin: %v", err)
					return
				}
				if b.Closed != nil {
					closedAt[j] = b.Closed.Num
				}
			} else {
				e, err := c.End(ctx, turnctl.EndRequest{})
				if err != nil {
					t.Errorf("end: %v", err)
					return
				}
				closedAt[j] = e.Turn.Num
			}
			done.Add(1)
		}
	}()
	wg.Wait()
	<-ctlDone
	stopWatch()
	if t.Failed() {
		t.FailNow()
	}
	if open := openTurn(t, c); open != 0 {
		if _, err := c.End(ctx, turnctl.EndRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	nops := 0
	for _, l := range logs {
		nops += len(l)
	}

	// allowed: the states path may have at the cut of boundary j.
	allowed := func(ops []buildOp, j int64) map[string]bool {
		ok := map[string]bool{"": true} // absent until some op returned before j
		for _, op := range ops {
			switch {
			case op.e < j: // returned before j began
				ok = map[string]bool{op.content: true}
			case op.s < j: // ran across j
				ok[op.content] = true
			}
		}
		return ok
	}
	byPath := map[string][]buildOp{}
	for _, l := range logs {
		for _, op := range l {
			byPath[op.path] = append(byPath[op.path], op)
		}
	}
	// Each turn's show: only outputs an operation could have changed in
	// it (between the previous closing boundary and this one).
	prev := int64(0)
	var closing []int
	for j := 1; j <= boundaries; j++ {
		if closedAt[j] == 0 {
			continue
		}
		closing = append(closing, j)
		sh, err := c.Show(ctx, turnctl.ShowRequest{Turn: fmt.Sprint(closedAt[j])})
		if err != nil {
			t.Fatalf("show %d: %v", closedAt[j], err)
		}
		for _, ch := range sh.Changes {
			if !strings.HasSuffix(ch.Path, ".o") {
				continue
			}
			could := false
			for _, op := range byPath[ch.Path] {
				if op.e >= prev && op.s < int64(j) {
					could = true
				}
			}
			if !could {
				t.Errorf("turn %d (boundaries %d..%d) shows %s %s, which no operation changed then", closedAt[j], prev, j, ch.Kind, ch.Path)
			}
		}
		prev = int64(j)
	}
	nclosing := len(closing)
	// Rewind to a sample of boundaries and check every output.
	rng := mrand.New(mrand.NewSource(seed))
	rng.Shuffle(len(closing), func(a, b int) { closing[a], closing[b] = closing[b], closing[a] })
	if len(closing) > rewinds {
		closing = closing[:rewinds]
	}
	// Newest first: a rewind undoes every event after its target, so
	// each one goes back a little further.
	sort.Sort(sort.Reverse(sort.IntSlice(closing)))
	for _, j := range closing {
		if _, err := c.Rewind(ctx, turnctl.RewindRequest{Turn: fmt.Sprint(closedAt[j])}); err != nil {
			t.Fatalf("rewind %d: %v", closedAt[j], err)
		}
		for p, ops := range byPath {
			b, err := os.ReadFile(filepath.Join(dir, p))
			got := string(b)
			if os.IsNotExist(err) {
				got = ""
			} else if err != nil {
				t.Fatal(err)
			}
			if ok := allowed(ops, int64(j)); !ok[got] {
				t.Errorf("rewound to turn %d (boundary %d): %s holds %.20q; allowed: %d states", closedAt[j], j, p, got, len(ok))
			}
		}
		if t.Failed() {
			t.FailNow()
		}
	}
	t.Logf("%d operations by %d workers across %d boundaries (%d closed a turn); %d rewinds checked", nops, workers, boundaries, nclosing, len(closing))
}

var raceDaemon struct {
	once sync.Once
	path string
	err  error
}

// mountRaceDaemon is mountProject with a daemon built with -race (once
// per test binary; the race-instrumented packages are in the build cache
// already when the tests run under -race).
func mountRaceDaemon(t *testing.T, dir string, args ...string) *Mount {
	t.Helper()
	if os.Getenv("CKPTFS_RACE") != "" {
		return mountProject(t, dir, args...) // every daemon is built with -race
	}
	raceDaemon.once.Do(func() {
		raceDaemon.path = filepath.Join(binDir, "ckptfs-race")
		cmd := exec.Command("go", "build", "-race", "-o", raceDaemon.path, "./cmd/ckptfs")
		cmd.Dir = moduleRoot()
		if out, err := cmd.CombinedOutput(); err != nil {
			raceDaemon.err = fmt.Errorf("build ckptfs -race: %v\n%s", err, out)
		}
	})
	if raceDaemon.err != nil {
		t.Fatal(raceDaemon.err)
	}
	saved := ckptfsBin
	ckptfsBin = raceDaemon.path // `ckptfs mount` starts its own binary as the daemon
	defer func() { ckptfsBin = saved }()
	return mountProject(t, dir, args...)
}
