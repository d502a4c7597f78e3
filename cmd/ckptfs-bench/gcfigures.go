package main

// The retention figures (issue 15, "Numbers"; `--only gc`): each on
// mounts of its own under WORK/gc, made with a retention policy, run
// after the session and before the other configurations start.
//
//  1. budget: N turns each write 50 MB of new random data in a new file
//     and delete the previous turn's, under --keep-size 1GiB
//     --keep-turns 5 --keep-age 1s; the store's size (as StoreBytes in
//     versionstore/policy.go counts it: its files' blocks, ballast aside)
//     after every turn, against the budget. Only the daemon's background
//     gc runs.
//  2. foreground: sed -i over the sed workload's files while a
//     `turnctl gc` reclaims about 1 GiB of chunks of forgotten turns, and
//     while the daemon's background gc (made due by a budget of 1 byte)
//     does the same, against the same sed with no gc, interleaved.
//  3. throughput: `turnctl gc --json` alone, reclaiming that much in
//     chunks (files under 4 MiB overwritten) and in the attic (big files
//     deleted): bytes reclaimed (before_bytes - after_bytes) per second.
//  4. policies: the same scripted history (edits to a source tree of a
//     few thousand files, outputs rebuilt every few turns) under the
//     default policy, an unlimited one and a tight one, then `turnctl
//     gc`: the store's size against the bytes the history changed.

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"ckptfs/turnctl"
)

// gcSizes scale the retention figures.
type gcSizes struct {
	turns     int   // figure 1: turns (--gc-turns)
	turnBytes int64 // figure 1: new data per turn
	budget    int64 // figure 1: --keep-size
	garbage   int64 // figures 2, 3: garbage made for each gc
	chunkFile int64 // figures 2, 3: size of the files whose old bytes are chunks
	atticFile int64 // figure 3: size of the deleted files
	histTurns int   // figure 4: turns of the scripted history
	histFiles int   // figure 4: source files
	reps      int   // figure 2: repetitions (each makes its garbage anew)
}

var fullGCSizes = gcSizes{turns: 200, turnBytes: 50e6, budget: 1 << 30, garbage: 1 << 30, chunkFile: 2 << 20, atticFile: 256 << 20, histTurns: 100, histFiles: 3000, reps: 3}
var quickGCSizes = gcSizes{turns: 40, turnBytes: 50e6, budget: 1 << 30, garbage: 256 << 20, chunkFile: 2 << 20, atticFile: 64 << 20, histTurns: 30, histFiles: 1000, reps: 2}

// Policies of the figures (ckptfs mount flags).
var (
	budgetPolicy    = []string{"--keep-size", "1GiB", "--keep-turns", "5", "--keep-age", "1s"}
	unlimitedPolicy = []string{"--keep-size", "1TiB", "--keep-turns", "1000000", "--keep-age", "100000d"}
	tightPolicy     = []string{"--keep-turns", "20", "--keep-age", "1s"}
)

type gcFigures struct {
	b   *bench
	sz  gcSizes
	res *gcResult
}

// runGC runs the retention figures; each failure is a note, not the end.
func (b *bench) runGC(ctx context.Context) error {
	for _, p := range []string{b.o.ckptfs, b.o.turnctl} {
		if _, err := os.Stat(p); err != nil {
			b.note("gc figures skipped: %v (run make build)", err)
			return nil
		}
	}
	g := &gcFigures{b: b, sz: fullGCSizes, res: &gcResult{}}
	if b.o.quick {
		g.sz = quickGCSizes
	}
	if b.o.gcTurns > 0 {
		g.sz.turns = b.o.gcTurns
	}
	g.sz.reps = min(g.sz.reps, b.o.reps)
	b.res.GC = g.res
	for _, f := range []struct {
		name string
		run  func(context.Context) error
	}{{"budget", g.budget}, {"foreground", g.foreground}, {"throughput", g.throughput}, {"policies", g.policies}} {
		start := time.Now()
		err := f.run(ctx)
		if !b.o.keep {
			os.RemoveAll(filepath.Join(b.o.work, "gc"))
		}
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			b.note("gc %s: %v", f.name, err)
		}
		b.logf("gc %s: %.0f s", f.name, since(start))
	}
	return nil
}

// mount mounts a fresh project WORK/gc/NAME/dir with its store beside it
// and the policy flags given; the bench's cleanup unmounts it too.
func (g *gcFigures) mount(ctx context.Context, name string, policy []string, env ...string) (*ckptfsTarget, error) {
	base := filepath.Join(g.b.o.work, "gc", name)
	dir, store := filepath.Join(base, "dir"), filepath.Join(base, "store")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	args := append(append([]string{"mount", "-f", "--store", store}, policy...), dir)
	cmd := exec.Command(g.b.o.ckptfs, args...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	c := &ckptfsTarget{b: g.b, store: store}
	c.daemon = daemon{name: "C", mnt: dir, cmd: cmd, log: filepath.Join(base, "daemon.log")}
	c.unmount = func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if out, err := exec.CommandContext(ctx, g.b.o.ckptfs, "umount", dir).CombinedOutput(); err != nil {
			return fmt.Errorf("gc %s: ckptfs umount: %v: %s", name, err, strings.TrimSpace(string(out)))
		}
		return nil
	}
	if err := c.launch(ctx, g.b, c); err != nil {
		return nil, err
	}
	return c, nil
}

// closeMount unmounts m, noting a failure.
func (g *gcFigures) closeMount(m *ckptfsTarget) {
	if err := m.Close(); err != nil {
		g.b.note("gc: %v", err)
	}
}

// storeBytes is what versionstore's StoreBytes counts: the blocks of the
// store's regular files, its ballast aside, and of Pebble's logs what
// they hold (not their preallocation).
func storeBytes(store string) int64 {
	var total int64
	ballast := filepath.Join(store, "ballast")
	filepath.Walk(store, func(p string, fi os.FileInfo, err error) error {
		if err != nil || !fi.Mode().IsRegular() || p == ballast {
			return nil // files come and go while the daemon works
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			if strings.HasSuffix(p, ".log") && strings.HasPrefix(p, filepath.Join(store, "db")+"/") {
				total += min(st.Blocks*512, fi.Size())
			} else {
				total += st.Blocks * 512
			}
		}
		return nil
	})
	return total
}

// begin opens a turn on m and returns its number.
func begin(ctx context.Context, m *ckptfsTarget) (uint64, error) {
	cl, err := m.control()
	if err != nil {
		return 0, err
	}
	r, err := cl.Begin(ctx, turnctl.BeginRequest{})
	if err != nil {
		return 0, err
	}
	return r.Turn.Num, nil
}

// inTurn runs fn inside a turn of its own and returns the turn's number.
func inTurn(ctx context.Context, m *ckptfsTarget, fn func() error) (uint64, error) {
	n, err := begin(ctx, m)
	if err != nil {
		return 0, err
	}
	if err := fn(); err != nil {
		m.End(ctx)
		return n, err
	}
	return n, m.End(ctx)
}

// gcJSON is what `turnctl gc --json` prints (doc/schema/turnctl-gc.json).
type gcJSON struct {
	Chunks      int      `json:"chunks"`
	ChunkBytes  int64    `json:"chunk_bytes"`
	AtticFiles  int      `json:"attic_files"`
	AtticBytes  int64    `json:"attic_bytes"`
	BeforeBytes int64    `json:"before_bytes"`
	AfterBytes  int64    `json:"after_bytes"`
	Forgot      []uint64 `json:"forgot"`
	Stopped     string   `json:"stopped"`
}

// runGCCmd runs turnctl --json gc on m and times it.
func (g *gcFigures) runGCCmd(ctx context.Context, m *ckptfsTarget) (gcRun, gcJSON, error) {
	start := time.Now()
	out, err := g.b.turnctlCmd(ctx, m.Dir(), "--json", "gc")
	wall := since(start)
	var rep gcJSON
	if err != nil {
		return gcRun{}, rep, err
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		return gcRun{}, rep, fmt.Errorf("turnctl gc --json: %v: %q", err, out)
	}
	if rep.Stopped != "" {
		g.b.note("gc stopped early: %s", rep.Stopped)
	}
	return gcRun{Wall: wall, Reclaimed: rep.BeforeBytes - rep.AfterBytes, Freed: rep.ChunkBytes + rep.AtticBytes}, rep, nil
}

// forgetAll closes an empty turn (the newest closed turn is never
// forgotten) and forgets every turn before it: all content captured so
// far becomes garbage.
func (g *gcFigures) forgetAll(ctx context.Context, m *ckptfsTarget) error {
	n, err := inTurn(ctx, m, func() error { return nil })
	if err != nil {
		return err
	}
	cl, err := m.control()
	if err != nil {
		return err
	}
	_, err = cl.Forget(ctx, turnctl.ForgetRequest{Before: fmt.Sprint(n)})
	return err
}

// quiesce writes dirty pages back and waits until m's daemon is idle.
func (g *gcFigures) quiesce(m *ckptfsTarget) {
	syscall.Sync()
	if pid := m.DaemonPID(); pid > 0 {
		if c := cpuSeconds(pid); c >= 0 {
			settle(pid, c, 30*time.Second)
		}
	}
}

// budget is figure 1, with the daemon's own background gc interval and,
// unless --gc-every is 0, with the interval it names.
func (g *gcFigures) budget(ctx context.Context) error {
	variants := []string{""}
	if g.b.o.gcEvery != "0" {
		variants = append(variants, g.b.o.gcEvery)
	}
	for i, every := range variants {
		if err := g.budgetRun(ctx, fmt.Sprintf("budget%d", i), every); err != nil {
			return err
		}
		if !g.b.o.keep {
			os.RemoveAll(filepath.Join(g.b.o.work, "gc", fmt.Sprintf("budget%d", i)))
		}
	}
	return nil
}

// budgetRun runs figure 1 on a mount whose daemon looks for gc work every
// interval ("": its default).
func (g *gcFigures) budgetRun(ctx context.Context, name, every string) error {
	var env []string
	label := "1m (the daemon's default)"
	if every != "" {
		env = []string{"CKPTFS_GC_EVERY=" + every}
		label = every + " (CKPTFS_GC_EVERY)"
	}
	m, err := g.mount(ctx, name, budgetPolicy, env...)
	if err != nil {
		return err
	}
	defer g.closeMount(m)
	bud := &gcBudget{Turns: g.sz.turns, TurnBytes: g.sz.turnBytes, BudgetBytes: g.sz.budget, Policy: strings.Join(budgetPolicy, " "), GCEvery: label}
	g.res.Budgets = append(g.res.Budgets, bud)
	g.b.logf("gc budget: %d turns of %d MB under %s, gc every %s", g.sz.turns, g.sz.turnBytes/1e6, bud.Policy, label)
	start := time.Now()
	for i := 0; i < g.sz.turns; i++ {
		_, err := inTurn(ctx, m, func() error {
			if err := writeRandom(filepath.Join(m.Dir(), fmt.Sprintf("f%d", i)), g.sz.turnBytes, uint64(1000+i), false); err != nil {
				return err
			}
			if i > 0 {
				return os.Remove(filepath.Join(m.Dir(), fmt.Sprintf("f%d", i-1)))
			}
			return nil
		})
		if err != nil {
			return err
		}
		bud.Sizes = append(bud.Sizes, storeBytes(m.store))
		if (i+1)%20 == 0 {
			g.b.logf("gc budget: turn %d: store %d MiB", i+1, bud.Sizes[i]>>20)
		}
	}
	bud.Wall = since(start)
	bud.summarize()
	data, _ := os.ReadFile(m.log)
	bud.BackgroundGCs = strings.Count(string(data), "background gc (")
	return nil
}

// makeChunkGarbage overwrites (or first writes) size bytes of files of
// chunkFile bytes under dir/sub with new random data in a turn of its
// own, whose number it returns: the bytes they held before are chunks of
// that turn.
func (g *gcFigures) makeChunkGarbage(ctx context.Context, m *ckptfsTarget, sub string, size int64, seed uint64) (uint64, error) {
	d := filepath.Join(m.Dir(), sub)
	if err := os.MkdirAll(d, 0o755); err != nil {
		return 0, err
	}
	return inTurn(ctx, m, func() error {
		for i := int64(0); i*g.sz.chunkFile < size; i++ {
			if err := writeRandom(filepath.Join(d, fmt.Sprint(i)), g.sz.chunkFile, seed<<20+uint64(i), false); err != nil {
				return err
			}
		}
		return nil
	})
}

// The foreground figure's mount looks for background gc work this often.
const foregroundGCEvery = "250ms"

// foreground is figure 2 (and the "chunks, sed running" throughput): in
// each repetition, the sed alone, during a turnctl gc and during the
// daemon's background gc, in a rotating order, each gc reclaiming chunks
// of its own.
func (g *gcFigures) foreground(ctx context.Context) error {
	m, err := g.mount(ctx, "foreground", unlimitedPolicy, "CKPTFS_GC_EVERY="+foregroundGCEvery)
	if err != nil {
		return err
	}
	defer g.closeMount(m)
	cl, err := m.control()
	if err != nil {
		return err
	}
	gl := &global{b: g.b}
	if err := globalTarball(ctx, gl); err != nil {
		return err
	}
	e := &env{global: gl, t: m, dir: m.Dir()}
	if _, err := inTurn(ctx, m, func() error { return setupSed(ctx, e) }); err != nil {
		return err
	}
	fg := &gcForeground{Files: len(e.list()), GarbageBytes: g.sz.garbage, BGEvery: foregroundGCEvery}
	g.res.Foreground = fg
	during := &gcThroughput{Kind: "chunks among as many live, sed -i running", Garbage: g.sz.garbage}
	// The files exist first, so that each repetition's overwrites make
	// garbage of the bytes the previous one wrote.
	for i, sub := range []string{"a", "b"} {
		if _, err := g.makeChunkGarbage(ctx, m, sub, g.sz.garbage, uint64(1000+i)); err != nil {
			return err
		}
	}
	seds := 0
	var lastSed uint64 // the newest sed's turn
	sed := func() (float64, error) {
		e.rep = seds
		seds++
		start := time.Now()
		n, err := inTurn(ctx, m, func() error { return runSed(ctx, e) })
		lastSed = n
		return since(start), err
	}
	// bgLines returns the daemon's background gc log lines.
	bgLines := func() []string {
		data, _ := os.ReadFile(m.log)
		var lines []string
		for _, l := range strings.Split(string(data), "\n") {
			if strings.Contains(l, "background gc (") {
				lines = append(lines, l)
			}
		}
		return lines
	}
	tiny, huge := int64(1), int64(1)<<40
	for rep := 0; rep < g.sz.reps; rep++ {
		ta, err := g.makeChunkGarbage(ctx, m, "a", g.sz.garbage, uint64(2+2*rep))
		if err != nil {
			return err
		}
		_, err = g.makeChunkGarbage(ctx, m, "b", g.sz.garbage, uint64(3+2*rep))
		if err != nil {
			return err
		}
		// The turnctl gc reclaims what turn ta captured, the
		// background gc what tb did, each forgotten just before (history
		// then starts at the end of ta, of a closed turn after tb: what
		// the turn it starts at captured goes too): so the turnctl gc
		// comes before the background one (whose forget needs a closed
		// turn after tb: the turnctl one's sed), and the sed alone takes
		// each place in turn. A budget of 1 byte makes the background gc
		// due; it runs at its next look.
		order := []string{"turnctl", "background"}
		at := rep % 3
		order = append(order[:at], append([]string{"alone"}, order[at:]...)...)
		for _, what := range order {
			g.quiesce(m)
			switch what {
			case "alone":
				s, err := sed()
				if err != nil {
					return err
				}
				fg.Alone = append(fg.Alone, s)
				g.b.logf("gc foreground rep %d: sed alone %.2f s", rep+1, s)
			case "turnctl":
				if _, err := cl.Forget(ctx, turnctl.ForgetRequest{Before: fmt.Sprint(ta)}); err != nil {
					return err
				}
				g.quiesce(m)
				type outcome struct {
					run gcRun
					err error
				}
				done := make(chan outcome, 1)
				start := time.Now()
				go func() {
					r, _, err := g.runGCCmd(ctx, m)
					done <- outcome{r, err}
				}()
				s, err := sed()
				sedEnd := since(start)
				o := <-done
				if err != nil {
					return err
				}
				if o.err != nil {
					return o.err
				}
				fg.WithGC = append(fg.WithGC, s)
				fg.GCWall = append(fg.GCWall, o.run.Wall)
				if o.run.Wall >= sedEnd {
					fg.Outlasted++
				}
				during.Runs = append(during.Runs, o.run)
				g.b.logf("gc foreground rep %d: sed during turnctl gc %.2f s; gc %.2f s, reclaimed %d MiB", rep+1, s, o.run.Wall, o.run.Reclaimed>>20)
			case "background":
				if _, err := cl.Forget(ctx, turnctl.ForgetRequest{Before: fmt.Sprint(lastSed)}); err != nil {
					return err
				}
				g.quiesce(m)
				n := len(bgLines())
				// The poller sees the first background gc end and
				// lifts the budget at once, so that no second one
				// (a scan of the whole store each) runs during the sed.
				type seen struct {
					line string
					at   float64
					err  error
				}
				seenc := make(chan seen, 1)
				start := time.Now()
				if _, err := cl.Policy(ctx, turnctl.PolicyRequest{KeepSize: &tiny}); err != nil {
					return err
				}
				go func() {
					for {
						if l := bgLines(); len(l) > n {
							at := since(start)
							_, err := cl.Policy(ctx, turnctl.PolicyRequest{KeepSize: &huge})
							seenc <- seen{l[n], at, err}
							return
						}
						if since(start) > 600 || ctx.Err() != nil {
							cl.Policy(context.Background(), turnctl.PolicyRequest{KeepSize: &huge})
							seenc <- seen{err: fmt.Errorf("no background gc after %.0f s", since(start))}
							return
						}
						time.Sleep(20 * time.Millisecond)
					}
				}()
				s, err := sed()
				sedEnd := since(start)
				sn := <-seenc
				if err != nil {
					return err
				}
				if sn.err != nil {
					return sn.err
				}
				line, wall := sn.line, sn.at
				if !strings.Contains(line, "freed") || strings.Contains(line, "freed 0 B") {
					g.b.note("gc foreground: the background gc reclaimed nothing: %s", line)
				}
				g.b.logf("gc foreground: daemon: %s", line)
				if more := bgLines()[n+1:]; len(more) > 0 {
					g.b.logf("gc foreground: then: %s", strings.Join(more, " | "))
				}
				fg.WithBG = append(fg.WithBG, s)
				fg.BGWall = append(fg.BGWall, wall)
				fg.BGFreed = append(fg.BGFreed, loggedFreed(line))
				if wall >= sedEnd {
					fg.BGOutlasted++
				}
				g.b.logf("gc foreground rep %d: sed during background gc %.2f s; gc logged after %.2f s", rep+1, s, wall)
			}
		}
	}
	fg.summarize()
	g.res.Throughput = append(g.res.Throughput, during)
	return nil
}

// throughput is figure 3: a gc alone, of chunks and of attic files.
func (g *gcFigures) throughput(ctx context.Context) error {
	m, err := g.mount(ctx, "throughput", unlimitedPolicy)
	if err != nil {
		return err
	}
	defer g.closeMount(m)
	// The files written, then overwritten twice: turn t1 captures their
	// first bytes, t2 their second. Forgetting before t1 makes t1's
	// garbage among as many live chunks (t2's, which rewinding to t1's
	// end needs): keys of both interleave (SHA-256 sums), so the sweep
	// deletes many short runs and compaction rewrites tables holding
	// both. Forgetting the rest then makes t2's garbage alone.
	var t1 uint64
	for seed := uint64(100); seed < 103; seed++ {
		n, err := g.makeChunkGarbage(ctx, m, "garbage", g.sz.garbage, seed)
		if err != nil {
			return err
		}
		if seed == 101 {
			t1 = n
		}
	}
	cl, err := m.control()
	if err != nil {
		return err
	}
	for _, kind := range []string{"chunks among as many live chunks", "chunks (files < 4 MiB overwritten)"} {
		if t1 != 0 {
			_, err = cl.Forget(ctx, turnctl.ForgetRequest{Before: fmt.Sprint(t1)})
			t1 = 0
		} else {
			err = g.forgetAll(ctx, m)
		}
		if err != nil {
			return err
		}
		g.quiesce(m)
		r, _, err := g.runGCCmd(ctx, m)
		if err != nil {
			return err
		}
		g.res.Throughput = append(g.res.Throughput, &gcThroughput{Kind: kind, Garbage: g.sz.garbage, Runs: []gcRun{r}})
		g.b.logf("gc throughput: %s: %d MiB in %.2f s", kind, r.Reclaimed>>20, r.Wall)
	}

	attic := &gcThroughput{Kind: fmt.Sprintf("attic (%s files deleted)", sizeLabel(g.sz.atticFile)), Garbage: g.sz.garbage}
	d := filepath.Join(m.Dir(), "big")
	if err := os.MkdirAll(d, 0o755); err != nil {
		return err
	}
	n := int((g.sz.garbage + g.sz.atticFile - 1) / g.sz.atticFile)
	if _, err := inTurn(ctx, m, func() error {
		for i := 0; i < n; i++ {
			if err := writeRandom(filepath.Join(d, fmt.Sprint(i)), g.sz.atticFile, uint64(200+i), false); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return err
	}
	if _, err := inTurn(ctx, m, func() error { return os.RemoveAll(d) }); err != nil {
		return err
	}
	if err := g.forgetAll(ctx, m); err != nil {
		return err
	}
	g.quiesce(m)
	r, _, err := g.runGCCmd(ctx, m)
	if err != nil {
		return err
	}
	attic.Runs = append(attic.Runs, r)
	g.res.Throughput = append(g.res.Throughput, attic)
	g.b.logf("gc throughput: attic: %d MiB in %.2f s", r.Reclaimed>>20, r.Wall)
	return nil
}

// policies is figure 4: one scripted history on three mounts in
// lockstep, each under its own policy.
func (g *gcFigures) policies(ctx context.Context) error {
	type side struct {
		row  *gcPolicyRow
		m    *ckptfsTarget
		h    *scriptedHistory
		last uint64 // the newest turn
	}
	var sides []*side
	defer func() {
		for _, s := range sides {
			g.closeMount(s.m)
		}
	}()
	for _, p := range []struct {
		name  string
		flags []string
	}{{"default", nil}, {"unlimited", unlimitedPolicy}, {"tight", tightPolicy}} {
		m, err := g.mount(ctx, "policy-"+p.name, p.flags)
		if err != nil {
			return err
		}
		flags := strings.Join(p.flags, " ")
		if flags == "" {
			flags = "(none: the defaults)"
		}
		s := &side{row: &gcPolicyRow{Policy: p.name, Flags: flags, Turns: g.sz.histTurns}, m: m, h: newScriptedHistory(m.Dir(), g.sz.histFiles)}
		sides = append(sides, s)
	}
	for _, s := range sides {
		if _, err := inTurn(ctx, s.m, s.h.populate); err != nil {
			return err
		}
		s.h.written, s.h.replaced = 0, 0 // the history starts here
		g.quiesce(s.m)
		s.row.BaseBytes = storeBytes(s.m.store)
	}
	g.b.logf("gc policies: %d turns over %d files", g.sz.histTurns, g.sz.histFiles)
	for t := 0; t < g.sz.histTurns; t++ {
		for _, s := range sides {
			n, err := inTurn(ctx, s.m, func() error { return s.h.turn(t) })
			if err != nil {
				return err
			}
			s.last = n
		}
	}
	for _, s := range sides {
		g.quiesce(s.m)
		_, rep, err := g.runGCCmd(ctx, s.m)
		if err != nil {
			return err
		}
		g.quiesce(s.m)
		cl, err := s.m.control()
		if err != nil {
			return err
		}
		// The turns the log still lists: the policy forgets from the
		// start and thins (merges) in the middle.
		lg, err := cl.Log(ctx, turnctl.LogRequest{})
		if err != nil {
			return err
		}
		s.row.Kept = len(lg.Turns)
		s.row.Forgot = len(rep.Forgot)
		s.row.Written, s.row.Replaced = s.h.written, s.h.replaced
		s.row.StoreBytes = storeBytes(s.m.store)
		s.row.summarize()
		g.res.Policies = append(g.res.Policies, *s.row)
		g.b.logf("gc policies: %s: store %d MiB for %d MiB replaced, %d turns kept", s.row.Policy, s.row.StoreBytes>>20, s.row.Replaced>>20, s.row.Kept)
	}
	return nil
}

// scriptedHistory is a source tree's history as an agent makes it: each
// turn edits a few dozen source files (rewritten in place or replaced by
// a rename, as editors and sed -i do), adds a file and sometimes deletes
// a few; every fifth turn rebuilds the outputs: object files rewritten
// in place and a 20 MB binary replaced by a rename. It counts the bytes
// it writes and the prior bytes of the files it replaces or deletes
// (what a full history must keep).
type scriptedHistory struct {
	root     string
	rng      *rand.Rand
	files    []string
	size     map[string]int64
	written  int64
	replaced int64
	next     int
}

func newScriptedHistory(root string, files int) *scriptedHistory {
	h := &scriptedHistory{root: root, rng: rand.New(rand.NewPCG(15, uint64(files))), size: map[string]int64{}}
	for i := 0; i < files; i++ {
		h.files = append(h.files, fmt.Sprintf("src/pkg%02d/file%04d.go", i%40, i))
	}
	h.next = files
	return h
}

// Rebuilt outputs.
const (
	histObjects   = 8
	histObjBytes  = 1 << 20
	histBinBytes  = 20e6
	histEdits     = 30
	histRebuildEv = 5
)

func (h *scriptedHistory) populate() error {
	for _, f := range h.files {
		if err := h.write(f, h.source(f, 0), false); err != nil {
			return err
		}
	}
	return h.rebuild(0)
}

// source is a file's text: a few KB of lines, version v.
func (h *scriptedHistory) source(name string, v int) []byte {
	var sb strings.Builder
	lines := 40 + h.rng.IntN(300)
	fmt.Fprintf(&sb, "// %s, version %d\npackage p\n\n", name, v)
	for i := 0; i < lines; i++ {
		fmt.Fprintf(&sb, "var v%d = %d // %x\n", i, h.rng.Int64(), h.rng.Uint64())
	}
	return []byte(sb.String())
}

// write writes data to rel, in place or by a rename over it.
func (h *scriptedHistory) write(rel string, data []byte, rename bool) error {
	p := filepath.Join(h.root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	h.replaced += h.size[rel]
	h.written += int64(len(data))
	h.size[rel] = int64(len(data))
	if !rename {
		return os.WriteFile(p, data, 0o644)
	}
	if err := os.WriteFile(p+".tmp", data, 0o644); err != nil {
		return err
	}
	return os.Rename(p+".tmp", p)
}

func (h *scriptedHistory) rebuild(t int) error {
	if err := os.MkdirAll(filepath.Join(h.root, "out"), 0o755); err != nil {
		return err
	}
	for i := 0; i < histObjects; i++ {
		rel := fmt.Sprintf("out/obj%d.o", i)
		if err := writeRandom(filepath.Join(h.root, rel), histObjBytes, uint64(t)<<8+uint64(i)+5000, false); err != nil {
			return err
		}
		h.replaced += h.size[rel]
		h.written += histObjBytes
		h.size[rel] = histObjBytes
	}
	p := filepath.Join(h.root, "out", "app")
	if err := writeRandom(p+".tmp", histBinBytes, uint64(t)+900000, false); err != nil {
		return err
	}
	h.replaced += h.size["out/app"]
	h.written += histBinBytes
	h.size["out/app"] = histBinBytes
	return os.Rename(p+".tmp", p)
}

func (h *scriptedHistory) turn(t int) error {
	for i := 0; i < histEdits; i++ {
		f := h.files[h.rng.IntN(len(h.files))]
		if err := h.write(f, h.source(f, t+1), i%2 == 1); err != nil {
			return err
		}
	}
	f := fmt.Sprintf("src/pkg%02d/file%04d.go", h.next%40, h.next)
	h.next++
	h.files = append(h.files, f)
	if err := h.write(f, h.source(f, 0), false); err != nil {
		return err
	}
	if t%10 == 9 {
		for i := 0; i < 5 && len(h.files) > 1; i++ {
			j := h.rng.IntN(len(h.files))
			f := h.files[j]
			h.files = append(h.files[:j], h.files[j+1:]...)
			h.replaced += h.size[f]
			delete(h.size, f)
			if err := os.Remove(filepath.Join(h.root, f)); err != nil {
				return err
			}
		}
	}
	if t%histRebuildEv == histRebuildEv-1 {
		return h.rebuild(t + 1)
	}
	return nil
}

var freedRE = regexp.MustCompile(`freed ([^;,]+)`)

// loggedFreed is what a daemon's "background gc (...): freed X; ..." log
// line says it freed ("?": the line says no such thing).
func loggedFreed(line string) string {
	if m := freedRE.FindStringSubmatch(line); m != nil {
		return m[1]
	}
	return "?"
}
