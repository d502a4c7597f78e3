package main

// The run loop: set up the configurations, run each workload interleaved
// across them, then the history figures, then report and clean up.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"ckptfs/turnctl"
)

type bench struct {
	o              options
	stdout, stderr io.Writer
	sz             sizes

	mu      sync.Mutex
	targets []target // every configuration started, for cleanup
	cleaned bool

	res *results
}

func newBench(o options, stdout, stderr io.Writer) *bench {
	b := &bench{o: o, stdout: stdout, stderr: stderr, sz: fullSizes}
	if o.quick {
		b.sz = quickSizes
	}
	if o.churnFiles > 0 {
		b.sz.churnFiles = o.churnFiles
	}
	b.res = &results{
		Started: time.Now().UTC().Format(time.RFC3339),
		Quick:   o.quick,
		Reps:    o.reps,
		Work:    o.work,
		Configs: map[string]configInfo{},
	}
	return b
}

func (b *bench) register(t target) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.targets = append(b.targets, t)
}

func (b *bench) logf(format string, args ...any) {
	fmt.Fprintf(b.stderr, "[%s] %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// note records a remark that goes into the report.
func (b *bench) note(format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	b.res.Notes = append(b.res.Notes, s)
	b.logf("note: %s", s)
}

func (b *bench) run(ctx context.Context) error {
	if err := b.prepareWork(); err != nil {
		return err
	}
	b.res.Host = hostInfo()
	if dev := ext4WithoutJournal(b.o.work); dev != "" {
		b.note("%s is on ext4 without a journal (%s): such an ext4 scans its inode table for inodes freed in the last minute or more whenever it allocates one, so workloads that create many files (churn, extract) run up to 10× slower right after others deleted many, on every configuration alike; for figures that do not depend on what ran before them, give --work a directory on a journaled ext4 (an image made by mkfs.ext4 and mounted with -o loop)", b.o.work, dev)
	}
	b.logf("work dir %s; %d repetitions; configurations %s", b.o.work, b.o.reps, strings.Join(b.o.configs, ","))

	// The agent session mounts and unmounts its own configurations (one
	// fresh mount per session): it runs first, alone.
	if b.selected("session", -1) {
		if err := b.runSession(ctx); err != nil {
			if ctx.Err() != nil {
				return b.report(ctx.Err())
			}
			b.note("session: %v", err)
		}
	}
	// So do the retention figures, on mounts of their own.
	if b.selected("gc", -1) && !b.o.noHistory {
		if err := b.runGC(ctx); err != nil {
			if ctx.Err() != nil {
				return b.report(ctx.Err())
			}
			b.note("gc: %v", err)
		}
	}
	anyWorkload := false
	for _, wl := range workloads {
		anyWorkload = anyWorkload || b.selected(wl.name, wl.num)
	}
	if !anyWorkload && (!b.selected("history", -1) && !b.selected("capture", -1) && !b.selected("ui", -1) && !b.selected("at", -1) && !b.selected("navigation", -1) || b.o.noHistory) {
		return b.report(nil)
	}
	var ts []target
	for _, name := range b.o.configs {
		if !anyWorkload && name != "C" {
			continue // history figures only: C alone
		}
		t, err := b.startTarget(ctx, name)
		if err != nil {
			b.res.Configs[name] = configInfo{Error: err.Error(), What: b.describe(name)}
			b.logf("%s unavailable: %v", name, err)
			continue
		}
		b.res.Configs[name] = configInfo{Available: true, Dir: t.Dir(), DaemonPID: t.DaemonPID(), What: b.describe(name)}
		ts = append(ts, t)
	}
	if len(ts) == 0 {
		var errs []string
		for _, name := range b.o.configs {
			if ci, ok := b.res.Configs[name]; ok {
				errs = append(errs, name+": "+ci.Error)
			}
		}
		return fmt.Errorf("no configuration available (%s)", strings.Join(errs, "; "))
	}

	return b.report(b.runAll(ctx, ts))
}

// report prints the table and writes the JSON; err (an interruption) is
// returned as it is.
func (b *bench) report(err error) error {
	if err != nil {
		b.note("interrupted: partial results")
	}
	b.res.Finished = time.Now().UTC().Format(time.RFC3339)
	configs := b.o.configs
	if _, ok := b.res.Configs["Nx"]; ok {
		configs = append(slices.Clone(configs), "Nx")
	}
	fmt.Fprint(b.stdout, b.res.table(configs))
	if err := b.res.writeJSON(b.o.jsonPath); err != nil {
		return err
	}
	fmt.Fprintf(b.stdout, "\nJSON: %s\n", b.o.jsonPath)
	return err
}

// runAll runs the selected workloads, then the history figures. Only an
// interruption stops it early.
func (b *bench) runAll(ctx context.Context, ts []target) error {
	for _, wl := range workloads {
		if !b.selected(wl.name, wl.num) {
			continue
		}
		if b.o.quick && wl.skipQuick {
			b.note("%s skipped in --quick", wl.name)
			continue
		}
		run := func() error { return b.runWorkload(ctx, wl, ts) }
		if wl.onXFS {
			run = func() error { return b.runOnXFS(ctx, wl) }
		}
		if err := run(); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			b.note("%s: %v", wl.name, err)
		}
	}
	var figures []string // all of them
	if !b.selected("history", -1) {
		// --only capture, at
		for _, f := range []string{"capture", "at"} {
			if b.selected(f, -1) {
				figures = append(figures, f)
			}
		}
		if b.selected("navigation", -1) {
			figures = append(figures, "navigation")
		}
		if b.selected("ui", -1) { // --only ui: on a history of logTurns turns
			figures = append(figures, "logshow", "ui")
		}
	}
	if (b.selected("history", -1) || len(figures) > 0) && !b.o.noHistory {
		if err := b.runHistory(ctx, ts, figures...); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			b.note("history: %v", err)
		}
	}
	return nil
}

func (b *bench) selected(name string, num int) bool {
	if len(b.o.only) == 0 {
		return true
	}
	for _, w := range b.o.only {
		if w == name || w == fmt.Sprint(num) {
			return true
		}
	}
	return false
}

func (b *bench) describe(name string) string {
	switch name {
	case "N":
		return "plain directory " + filepath.Join(b.o.work, "N")
	case "L":
		return "go-fuse v2.12.1 loopback, fs.Mount defaults (1 s entry/attr timeouts, max_write 128 KiB, max_background 12, passthrough negotiated by default)"
	case "L+":
		var parts []string
		for _, o := range lplusOptions {
			if contains(b.o.lplus, o.name) {
				parts = append(parts, o.what)
			}
		}
		return "loopback + " + strings.Join(parts, "; ")
	case "C":
		return b.o.ckptfs + " mount -f --store " + filepath.Join(b.o.work, "C", "store") + " " + filepath.Join(b.o.work, "C", "dir") + "; turnctl begin/end around each repetition"
	case "Cu":
		return "the same as C, mounted by " + b.o.user + " through fusermount3: private (no allow_other, no default_permissions), no passthrough, page cache kept across opens; the workloads run as " + b.o.user
	case "Lu":
		return "L mounted by " + b.o.user + " through fusermount3: private, no passthrough (the floor of Cu's mode); the workloads run as " + b.o.user
	}
	return ""
}

func (b *bench) startTarget(ctx context.Context, name string) (target, error) {
	switch name {
	case "N":
		dir := filepath.Join(b.o.work, "N")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		return &native{dir: dir}, nil
	case "L", "L+":
		return startLoopback(b, name)
	case "C":
		return startCkptfs(ctx, b)
	case "Cu":
		return startUserCkptfs(ctx, b)
	case "Lu":
		return startUserLoopback(b)
	}
	return nil, fmt.Errorf("unknown configuration %q", name)
}

// runWorkload runs wl's steps reps times on each target, interleaved.
func (b *bench) runWorkload(ctx context.Context, wl *workload, ts []target) error {
	g := &global{b: b}
	if wl.global != nil {
		b.logf("%s: preparing", wl.name)
		if err := wl.global(ctx, g); err != nil {
			return err
		}
	}
	if g.note != "" {
		b.note("%s: %s", wl.name, g.note)
	}
	live, skipped := map[string]bool{}, map[string]bool{}
	for _, t := range ts {
		if err := daemonGone(t); err != nil {
			b.failStep(wl, "", t.Name(), err)
			continue
		}
		if wl.skipUser != "" && userOf(t) != nil {
			b.note("%s: not run on %s (%s)", wl.name, t.Name(), wl.skipUser)
			skipped[t.Name()] = true
			continue
		}
		e := &env{global: g, t: t, dir: t.Dir()}
		if wl.setup != nil {
			if err := asTarget(t, func() error { return wl.setup(ctx, e) }); err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				b.failStep(wl, "", t.Name(), fmt.Errorf("setup: %w", err))
				continue
			}
		}
		live[t.Name()] = true
	}
	for rep := 0; rep < b.o.reps; rep++ {
		for _, t := range ts {
			if !live[t.Name()] {
				continue
			}
			e := &env{global: g, t: t, dir: t.Dir(), rep: rep}
			for _, st := range wl.steps {
				if err := b.runStep(ctx, wl, st, e); err != nil {
					if ctx.Err() != nil {
						return ctx.Err()
					}
					b.failStep(wl, st.name, t.Name(), err)
					live[t.Name()] = false
					break
				}
			}
			if wl.after != nil && live[t.Name()] {
				if err := asTarget(t, func() error { return wl.after(ctx, e) }); err != nil {
					b.failStep(wl, "", t.Name(), fmt.Errorf("after: %w", err))
					live[t.Name()] = false
				}
			}
		}
	}
	for _, t := range ts {
		if wl.teardown != nil && !skipped[t.Name()] {
			e := &env{global: g, t: t, dir: t.Dir()}
			if err := asTarget(t, func() error { return wl.teardown(ctx, e) }); err != nil {
				b.logf("%s %s: teardown: %v", wl.name, t.Name(), err)
			}
		}
	}
	return nil
}

// daemonGone reports a configuration whose daemon has exited.
func daemonGone(t target) error {
	if d, ok := t.(interface {
		exited() bool
		exitStatus() string
	}); ok && d.exited() {
		return fmt.Errorf("daemon exited: %s", d.exitStatus())
	}
	return nil
}

func (b *bench) failStep(wl *workload, step, config string, err error) {
	steps := []string{step}
	if step == "" {
		steps = nil
		for _, st := range wl.steps {
			steps = append(steps, st.name)
		}
	}
	for _, s := range steps {
		b.res.row(wl.name, s).setError(config, err.Error())
	}
	b.logf("%s/%s on %s failed: %v", wl.name, step, config, err)
}

// runStep prepares (untimed) and runs (timed, inside a turn for C) one step,
// as the target's user (Cu).
func (b *bench) runStep(ctx context.Context, wl *workload, st step, e *env) error {
	if st.prep != nil {
		if err := asTarget(e.t, func() error { return st.prep(ctx, e) }); err != nil {
			return fmt.Errorf("prep: %w", err)
		}
	}
	// Write back what earlier steps (any configuration's) left dirty, so
	// that this step does not pay for it.
	syscall.Sync()
	// A hung daemon would block this process in a syscall for ever; past
	// the limit, kill it: the mount then fails every call (ENOTCONN).
	limit := 15 * time.Minute
	if b.o.quick {
		limit = 3 * time.Minute
	}
	watchdog := time.AfterFunc(limit, func() {
		if d, ok := e.t.(interface{ kill() }); ok {
			b.logf("%s/%s on %s: no progress after %v; killing its daemon", wl.name, st.name, e.t.Name(), limit)
			d.kill()
		}
	})
	var s sample
	err := asTarget(e.t, func() error {
		var err error
		s, err = measure(ctx, e.t, func() error { return st.run(ctx, e) })
		return err
	})
	watchdog.Stop()
	if err != nil {
		return err
	}
	b.res.row(wl.name, st.name).add(e.t.Name(), s)
	b.logf("%-8s %-16s %-2s rep %d: %7.3f s", wl.name, st.name, e.t.Name(), e.rep+1, s.Wall)
	if st.post != nil {
		if err := asTarget(e.t, func() error { return st.post(ctx, e) }); err != nil {
			return fmt.Errorf("post: %w", err)
		}
	}
	return nil
}

// measure times begin + fn + end and the daemon's CPU seconds around them.
func measure(ctx context.Context, t target, fn func() error) (sample, error) {
	pid := t.DaemonPID()
	cpu0 := cpuSeconds(pid)
	start := time.Now()
	if err := t.Begin(ctx); err != nil {
		return sample{}, err
	}
	if err := fn(); err != nil {
		t.End(ctx)
		return sample{}, err
	}
	if err := t.End(ctx); err != nil {
		return sample{}, err
	}
	s := sample{Wall: since(start), CPU: -1}
	cpu1 := cpuSeconds(pid)
	if cpu0 >= 0 && cpu1 >= 0 {
		s.CPU = cpu1 - cpu0
	}
	if _, ok := t.(interface {
		control() (*turnctl.Client, error)
	}); ok && cpu1 >= 0 {
		// Work ckptfs defers past "end" must not land on the next
		// configuration's clock: wait until the daemon is idle, and report
		// what it burnt meanwhile.
		s.SettleWall, s.SettleCPU = settle(pid, cpu1, 30*time.Second)
	}
	return s, nil
}

// settle waits until pid uses at most one clock tick of CPU in 200 ms (or
// max passes) and returns the time waited and the CPU seconds it used since
// cpu0.
func settle(pid int, cpu0 float64, max time.Duration) (wall, cpu float64) {
	start := time.Now()
	prev := cpu0
	for time.Since(start) < max {
		time.Sleep(200 * time.Millisecond)
		c := cpuSeconds(pid)
		if c < 0 {
			break
		}
		idle := c-prev <= 1.0/clockTicks
		prev = c
		if idle {
			break
		}
	}
	return since(start), prev - cpu0
}

// prepareWork creates the work directory and empties it, detaching any
// mount a killed earlier run left behind.
func (b *bench) prepareWork() error {
	if err := os.MkdirAll(b.o.work, 0o755); err != nil {
		return err
	}
	for _, m := range mountsUnder(b.o.work) {
		b.logf("detaching stale mount %s", m)
		syscall.Unmount(m, syscall.MNT_DETACH)
	}
	if len(mountsUnder(b.o.work)) > 0 {
		return fmt.Errorf("%s still has mounts under it", b.o.work)
	}
	return b.emptyWork(false)
}

// emptyWork removes everything in the work dir (except the JSON report if
// keepJSON).
func (b *bench) emptyWork(keepJSON bool) error {
	ents, err := os.ReadDir(b.o.work)
	if err != nil {
		return err
	}
	var errs []error
	for _, ent := range ents {
		p := filepath.Join(b.o.work, ent.Name())
		if keepJSON && p == b.o.jsonPath {
			continue
		}
		if err := os.RemoveAll(p); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// cleanup stops every configuration and empties the work directory.
func (b *bench) cleanup() {
	b.mu.Lock()
	if b.cleaned {
		b.mu.Unlock()
		return
	}
	b.cleaned = true
	ts := b.targets
	b.mu.Unlock()
	for i := len(ts) - 1; i >= 0; i-- {
		if err := ts[i].Close(); err != nil {
			b.logf("cleanup: %v", err)
		}
	}
	for _, m := range mountsUnder(b.o.work) {
		b.logf("cleanup: detaching leftover mount %s", m)
		syscall.Unmount(m, syscall.MNT_DETACH)
	}
	if b.o.keep {
		return
	}
	if len(mountsUnder(b.o.work)) > 0 {
		b.logf("cleanup: mounts remain under %s; not emptying it", b.o.work)
		return
	}
	if err := b.emptyWork(true); err != nil {
		b.logf("cleanup: %v", err)
	}
}

// forceCleanup is the second Ctrl-C: kill the daemons, detach the mounts.
func (b *bench) forceCleanup() {
	b.mu.Lock()
	ts := b.targets
	b.mu.Unlock()
	for _, t := range ts {
		if d, ok := t.(interface{ kill() }); ok {
			d.kill()
		}
	}
	for _, m := range mountsUnder(b.o.work) {
		syscall.Unmount(m, syscall.MNT_DETACH)
	}
}

func (d *daemon) kill() {
	if d.cmd.Process != nil {
		d.cmd.Process.Kill()
	}
}

func hostInfo() map[string]string {
	h := map[string]string{"go": runtime.Version(), "cpus": fmt.Sprint(runtime.NumCPU())}
	if out, err := exec.Command("uname", "-r").Output(); err == nil {
		h["kernel"] = strings.TrimSpace(string(out))
	}
	if name, err := os.Hostname(); err == nil {
		h["host"] = name
	}
	return h
}
