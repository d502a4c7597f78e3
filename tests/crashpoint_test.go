package tests

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	mrand "math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"ckptfs/internal/crashpoint"
	"ckptfs/internal/rundir"
	"ckptfs/turnctl"
)

// TestCrashPointsOfTheDaemon kills the daemon at its named crash points
// (internal/crashpoint: CKPTFS_CRASH in the daemon's environment), chosen
// by the test's seed, so that a failure replays from its seed
// (CKPTFS_SEED=N). Each round arms one daemon for one of:
//
//   - rewind: a rewind to a turn whose state the test knows, killed at a
//     hit of any point (the rewind's own, its records, its renames and
//     exchanges back, the tree's operations), or of one rarer point;
//     every other time the next mount's recovery of it is killed too;
//   - overlay: a turn of writes, renames and exchanges through the mount,
//     killed at a hit of the overlay's rename and exchange points or of
//     the records they make.
//
// After each crash a clean mount must come up (its Recover finishing what
// was cut short) with the tree exactly the rewind's target or its start,
// never a mix; one random closed turn must rewind exactly, and at the end
// every closed turn (up to a limit) once more. The daemon's trace of hits
// (CKPTFS_CRASH_TRACE) tells the test how many hits a rewind has, so that
// most rounds do crash. make test runs 50 rounds, make test-long 1000
// (about 1.05 crash points a round), on a fresh project every 250.
func TestCrashPointsOfTheDaemon(t *testing.T) {
	seed := testSeed(t)
	rng := mrand.New(mrand.NewSource(seed))
	rounds := scale(t, 50, 1000)
	// A fresh project every so many rounds: a rewind costs more the
	// longer the history, and the rounds would slow down.
	const perProject = 250
	tally := &crashTally{points: map[string]int{}}
	for first := 0; first < rounds; first += perProject {
		r := newCrashRounds(t, seed, rng, tally)
		r.clean()
		for k := first; k < min(rounds, first+perProject); k++ {
			r.round(k)
		}
		// Every known turn once more (the newest first: they are the
		// ones the crashes left).
		known := r.h.knownStates()
		sort.Slice(known, func(i, j int) bool { return known[i] > known[j] })
		if n := scale(t, 8, 40); len(known) > n {
			known = known[:n]
		}
		for _, n := range known {
			r.h.rewindCheck(r.c, n, fmt.Sprintf("final sweep (seed %d)", seed))
		}
		r.kill()
	}
	var names []string
	for n, c := range tally.points {
		names = append(names, fmt.Sprintf("%s:%d", n, c))
	}
	sort.Strings(names)
	t.Logf("%d rounds, %d crash points (%d in a recovery): %s", rounds, tally.crashes, tally.recoveries, strings.Join(names, " "))
}

// TestKillAfterAnExchangeThroughTheMount: directories b/b and d are
// exchanged through the mount, the daemon is killed, and after the next
// mount a rewind to the turn before must give back the tree exactly:
// killed right after the exchange, before it was confirmed; or later, when
// it was confirmed and one of the names has since been removed, which the
// turn records nothing for (the name holds the directory the turn made).
func TestKillAfterAnExchangeThroughTheMount(t *testing.T) {
	for _, c := range []struct{ name, spec string }{
		{"killed before the confirmation", "fuse.exchange.done@1"},
		{"killed after an rmdir", ""},
	} {
		spec := c.spec
		t.Run(c.name, func(t *testing.T) {
			r := newCrashRounds(t, 0, mrand.New(mrand.NewSource(1)), &crashTally{points: map[string]int{}})
			r.clean()
			ctx := context.Background()
			in := func(p string) string { return filepath.Join(r.dir, p) }
			// Turn 1: d becomes a directory holding d/d.
			r.begin(ctx)
			if err := os.Remove(in("d")); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(in("d"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(in("d/d"), []byte("dd1"), 0o644); err != nil {
				t.Fatal(err)
			}
			e, err := r.c.End(ctx, turnctl.EndRequest{})
			if err != nil {
				t.Fatalf("end: %v", err)
			}
			r.h.states[e.Turn.Num] = tree(t, r.dir)
			// Turn 2: mkdir b/b; exchange b/b d; rmdir d.
			r.kill()
			if p := r.mount(spec); p != "" {
				t.Fatalf("crashed at %s while mounting", p)
			}
			r.begin(ctx)
			if err := os.Mkdir(in("b/b"), 0o755); err != nil {
				t.Fatal(err)
			}
			err = unix.Renameat2(unix.AT_FDCWD, in("b/b"), unix.AT_FDCWD, in("d"), unix.RENAME_EXCHANGE)
			if spec == "" {
				if err != nil {
					t.Fatalf("exchange: %v", err)
				}
				if err := os.Remove(in("d")); err != nil {
					t.Fatal(err)
				}
			}
			r.kill()
			if p := r.crashedAt(); spec != "" && p != "fuse.exchange.done" {
				t.Fatalf("crashed at %q (exchange: %v), want fuse.exchange.done", p, err)
			}
			r.clean()
			if _, err := os.Lstat(in("b/b/d")); err != nil {
				t.Fatalf("after the remount: %v (the exchange was made)", err)
			}
			r.h.rewindCheck(r.c, e.Turn.Num, "after the kill")
			r.kill()
		})
	}
}

// crashTally counts the crashes of TestCrashPointsOfTheDaemon.
type crashTally struct {
	points     map[string]int // crashes by point
	crashes    int
	recoveries int
}

// crashRounds is the state of TestCrashPointsOfTheDaemon.
type crashRounds struct {
	t      *testing.T
	seed   int64
	rng    *mrand.Rand
	dir    string // the project
	store  string // its store, outside it: its daemon.log stays readable
	trace  string // CKPTFS_CRASH_TRACE
	logOff int    // how much of daemon.log was read
	h      *history
	m      *Mount
	c      *turnctl.Client
	pid    int
	// watchPID is pid for the watchdog's timer goroutine.
	watchPID atomic.Int64

	rewindHits int      // hits of the longest rewind traced
	journal    []string // what happened, for the failure message
	*crashTally
}

// newCrashRounds makes a project of its own and its history.
func newCrashRounds(t *testing.T, seed int64, rng *mrand.Rand, tally *crashTally) *crashRounds {
	setRuntimeDir(t)
	dir, aside := t.TempDir(), t.TempDir()
	writeTree(t, dir, map[string]string{"a": "a0", "b/a": "ba0", "b/c/a": "bca0", "d": "d0"})
	os.Symlink("a", filepath.Join(dir, "c"))
	r := &crashRounds{t: t, seed: seed, rng: rng, dir: dir,
		store: filepath.Join(aside, "store"), trace: filepath.Join(aside, "trace"),
		rewindHits: 40, crashTally: tally}
	r.h = newHistory(t, dir)
	t.Cleanup(func() {
		forceUnmount(t, dir)
		if t.Failed() {
			t.Logf("seed %d (CKPTFS_SEED=%d replays); the last rounds:\n  %s", seed, seed, strings.Join(r.journal[max(0, len(r.journal)-12):], "\n  "))
		}
		checkDaemonLog(t, r.store)
	})
	return r
}

func (r *crashRounds) note(format string, args ...any) {
	r.journal = append(r.journal, fmt.Sprintf(format, args...))
}

// mount mounts with spec armed ("" none) and returns "" if the daemon came
// up, else the crash point that killed it (while Recover ran, say).
func (r *crashRounds) mount(spec string) string {
	t := r.t
	t.Helper()
	var env []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, crashpoint.Env+"=") && !strings.HasPrefix(e, crashpoint.TraceEnv+"=") {
			env = append(env, e)
		}
	}
	os.Remove(r.trace)
	if spec != "" {
		env = append(env, crashpoint.Env+"="+spec, crashpoint.TraceEnv+"="+r.trace)
	}
	// Files of 8 KiB and more written in place are kept by ranges (the
	// ops' big files are).
	env = append(env, "CKPTFS_RANGE_MIN=8192")
	cmd := exec.Command(ckptfsBin, "mount", "--store", r.store, r.dir)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		if p := r.crashedAt(); p != "" {
			return p
		}
		t.Fatalf("ckptfs mount (%s=%q): %v\n%s", crashpoint.Env, spec, err, out)
	}
	info, err := rundir.ReadInfo(r.dir)
	if err != nil {
		t.Fatalf("read info: %v", err)
	}
	r.m = &Mount{Dir: r.dir, Store: r.store}
	r.h.m = r.m
	r.pid = info.PID
	r.watchPID.Store(int64(info.PID))
	r.c = turnctl.NewClient(info.Socket)
	return ""
}

// clean mounts with nothing armed.
func (r *crashRounds) clean() {
	if r.mount("") != "" {
		r.t.Fatal("a mount with nothing armed crashed")
	}
}

// crashedAt returns the point named by a crash line the daemon logged
// since the last call ("" if none).
func (r *crashRounds) crashedAt() string {
	b, _ := os.ReadFile(filepath.Join(r.store, "daemon.log"))
	if len(b) < r.logOff {
		r.logOff = 0
	}
	s := string(b[r.logOff:])
	r.logOff = len(b)
	const pre = "crashpoint: killed at "
	i := strings.LastIndex(s, pre)
	if i < 0 {
		return ""
	}
	p, _, _ := strings.Cut(s[i+len(pre):], " ")
	return p
}

// traced returns the hits the last armed daemon counted.
func (r *crashRounds) traced() []string {
	b, _ := os.ReadFile(r.trace)
	return strings.Fields(string(b))
}

// dead waits for the daemon to be gone: every thread, not only the main
// one (a zombie while others still exit, holding the store's lock). A
// killed process can take seconds to finish exiting when the disks are
// busy (a thread in an fsync); one that never does waits on something
// that will not come, such as a request to its own mount. It fails after
// a minute, with each remaining thread's kernel stack, and logs those of
// an exit slower than two seconds.
func (r *crashRounds) dead() {
	start := time.Now()
	var slow string
	for time.Since(start) < time.Minute {
		if gone(r.pid) {
			if slow != "" {
				r.t.Logf("daemon %d took %v to exit; its threads after 2 s:\n%s", r.pid, time.Since(start).Round(time.Millisecond), slow)
			}
			return
		}
		if slow == "" && time.Since(start) > 2*time.Second {
			slow = threadStacks(r.pid)
		}
		time.Sleep(5 * time.Millisecond)
	}
	r.t.Fatalf("daemon %d still there a minute after its crash or kill; its threads:\n%s", r.pid, threadStacks(r.pid))
}

// threadStacks describes each thread of process pid still there: its
// state and its kernel stack (what a thread that does not exit waits on).
func threadStacks(pid int) string {
	var b strings.Builder
	cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	fmt.Fprintf(&b, "  process %d: %q\n", pid, bytes.ReplaceAll(bytes.TrimRight(cmdline, "\x00"), []byte{0}, []byte{' '}))
	ts, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	for _, e := range ts {
		dir := fmt.Sprintf("/proc/%d/task/%s/", pid, e.Name())
		stat, _ := os.ReadFile(dir + "stat")
		state := "?"
		if i := bytes.LastIndexByte(stat, ')'); i > 0 && i+2 < len(stat) {
			state = string(stat[i+2])
		}
		stack, err := os.ReadFile(dir + "stack")
		if err != nil {
			stack = []byte(err.Error())
		}
		fmt.Fprintf(&b, "  thread %s, state %s:\n%s\n", e.Name(), state, bytes.TrimSpace(stack))
	}
	return b.String()
}

// gone reports whether process pid has exited with all its threads
// (reaped or not).
func gone(pid int) bool {
	if alive(pid) {
		return false
	}
	ts, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	return err != nil || len(ts) <= 1
}

// kill SIGKILLs the daemon if it is still there (a quiet moment: nothing
// runs) and waits for it to be gone.
func (r *crashRounds) kill() {
	syscall.Kill(r.pid, syscall.SIGKILL)
	r.dead()
}

// watchdog dumps the daemon's goroutines into the test log (SIGQUIT: the
// Go runtime prints every stack and exits) if round k takes a minute, so
// that a deadlock fails the test with its stacks instead of hanging it.
// The caller defers stop: a round that ends in t.Fatal must not leave the
// timer to fire after the test.
func (r *crashRounds) watchdog(k int) (stop func()) {
	fired := make(chan struct{})
	timer := time.AfterFunc(time.Minute, func() {
		defer close(fired)
		syscall.Kill(int(r.watchPID.Load()), syscall.SIGQUIT)
		time.Sleep(2 * time.Second)
		b, _ := os.ReadFile(filepath.Join(r.store, "daemon.log"))
		if i := bytes.LastIndex(b, []byte("SIGQUIT")); i >= 0 {
			b = b[i:]
		}
		r.t.Errorf("round %d: no progress in a minute; the daemon's goroutines:\n%s", k, b)
	})
	return func() {
		if !timer.Stop() {
			<-fired // it fired: its report goes in before the round ends
		}
	}
}

// crashed books a crash at point.
func (r *crashRounds) crashed(point string, recovery bool) {
	r.points[point]++
	r.crashes++
	if recovery {
		r.recoveries++
	}
}

// Points of a rewind rarer than their share of "*" would test.
var rareRewindPoints = []string{
	"rewind.exchange.recorded", "rewind.exchange.done", "rewind.rename.recorded",
	"rewind.rename.done", "rewind.planned", "rewind.noted", "rewind.ended", "rewind.finished",
	"tree.write.tmp", "tree.remove.part", "rename.recorded", "rename.confirmed",
}

// round runs one armed daemon and checks what its crash left.
func (r *crashRounds) round(k int) {
	t := r.t
	defer r.watchdog(k)()
	ctx := context.Background()
	// The work of the round before, on a clean mount: a closed turn.
	r.work(ctx, 10+r.rng.Intn(20))
	pre := tree(t, r.dir)
	r.kill()
	known := r.h.knownStates()
	target := known[r.rng.Intn(len(known))]
	overlay := r.rng.Intn(3) == 0
	var spec string
	switch {
	case overlay:
		pats := []string{"fuse.*", "fuse.exchange.*", "fuse.rename.*", "fuse.*,record.*,rename.*"}
		spec = fmt.Sprintf("%s@%d", pats[r.rng.Intn(len(pats))], 1+r.rng.Intn(8))
	case r.rng.Intn(4) == 0:
		spec = fmt.Sprintf("%s@%d", rareRewindPoints[r.rng.Intn(len(rareRewindPoints))], 1+r.rng.Intn(3))
	default:
		// Recover (no journal: 2 hits) and the mount (1) come first.
		spec = fmt.Sprintf("*@%d", 1+r.rng.Intn(r.rewindHits+3))
	}
	what := fmt.Sprintf("round %d: %s=%s", k, crashpoint.Env, spec)
	var point string
	if point = r.mount(spec); point != "" {
		// Killed in Recover or before serving, with nothing to recover.
		r.note("%s: crashed at %q while mounting", what, point)
		overlay = true // nothing to rewind; the tree must be pre
	} else if overlay {
		open := r.begin(ctx)
		r.ops(60)
		point = r.crashedAt()
		r.kill()
		r.note("%s: overlay turn %d, crashed at %q", what, open, point)
	} else {
		_, err := r.c.Rewind(ctx, turnctl.RewindRequest{Turn: fmt.Sprint(target)})
		// The daemon logs its crash before it kills itself, and the
		// rewind fails only once it is killed: a failure with no crash
		// logged is the rewind's own.
		point = r.crashedAt()
		if err != nil && point == "" {
			t.Fatalf("%s (seed %d): rewind to %d failed, and the daemon did not crash: %v", what, r.seed, target, err)
		}
		if err != nil {
			r.dead()
		}
		if point == "" {
			if hits := len(r.traced()); hits > r.rewindHits {
				r.rewindHits = hits
			}
			sameTree(t, fmt.Sprintf("%s (seed %d): rewind to %d", what, r.seed, target), r.h.states[target], tree(t, r.dir))
			r.kill()
		}
		r.note("%s: rewind to %d, crashed at %q", what, target, point)
	}
	if point != "" {
		r.crashed(point, false)
	}
	// Every other crash of a rewind, the recovery is crashed too.
	if !overlay && point != "" && r.rng.Intn(2) == 0 {
		spec2 := fmt.Sprintf("*@%d", 1+r.rng.Intn(r.rewindHits))
		p2 := r.mount(spec2)
		if p2 != "" {
			r.crashed(p2, true)
		} else {
			r.kill() // Recover finished: the crash would have come later
		}
		r.note("  its recovery, %s=%s: crashed at %q", crashpoint.Env, spec2, p2)
	}
	r.clean()
	got := tree(t, r.dir)
	if strings.HasPrefix(point, "mount.") || strings.HasPrefix(point, "recover.") {
		sameTree(t, fmt.Sprintf("%s (seed %d): killed at %s", what, r.seed, point), pre, got)
	}
	if !overlay && !equalTrees(got, pre) && !equalTrees(got, r.h.states[target]) {
		sameTree(t, fmt.Sprintf("%s (seed %d): the rewind to %d killed at %s: neither finished nor rolled back", what, r.seed, target, point), r.h.states[target], got)
	}
	// A turn closed since without a known state closed as the tree is now
	// (a rewind's own turn); the open one closes so at the next boundary.
	lg, err := r.c.Log(ctx, turnctl.LogRequest{})
	if err != nil {
		t.Fatalf("%s: log: %v", what, err)
	}
	for _, tn := range lg.Turns {
		if _, ok := r.h.states[tn.Num]; !ok && !tn.Open {
			r.h.states[tn.Num] = got
		}
	}
	known = r.h.knownStates()
	r.h.rewindCheck(r.c, known[r.rng.Intn(len(known))], fmt.Sprintf("%s, crashed at %q (seed %d)", what, point, r.seed))
}

// begin opens a turn and returns it; the open turn it closes has the
// tree as it is.
func (r *crashRounds) begin(ctx context.Context) uint64 {
	t := r.t
	if open := openTurn(t, r.c); open != 0 {
		r.h.states[open] = tree(t, r.dir)
	}
	b, err := r.c.Begin(ctx, turnctl.BeginRequest{})
	if err != nil {
		t.Fatalf("begin: %v", err)
	}
	return b.Turn.Num
}

// work runs n operations in a turn of their own on a clean mount.
func (r *crashRounds) work(ctx context.Context, n int) {
	t := r.t
	r.begin(ctx)
	r.ops(n)
	e, err := r.c.End(ctx, turnctl.EndRequest{})
	if err != nil {
		t.Fatalf("end: %v", err)
	}
	r.h.states[e.Turn.Num] = tree(t, r.dir)
}

// ops applies n random operations through the mount, one at a time (so
// that the daemon's hits come in an order the seed fixes), stopping early
// if the daemon dies. Results are ignored.
func (r *crashRounds) ops(n int) {
	rng := r.rng
	names := []string{"a", "b", "c", "d"}
	rel := func() string {
		p := names[rng.Intn(len(names))]
		if rng.Intn(2) == 0 {
			p += "/" + names[rng.Intn(len(names))]
		}
		return p
	}
	for i := 0; i < n; i++ {
		if i%4 == 0 && !alive(r.pid) {
			return
		}
		// Renames and exchanges mostly of names that exist.
		var exist []string
		filepath.WalkDir(r.dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && p != r.dir {
				exist = append(exist, p)
			}
			return nil
		})
		pick := func() string {
			if len(exist) > 0 && rng.Intn(4) > 0 {
				return exist[rng.Intn(len(exist))]
			}
			return filepath.Join(r.dir, rel())
		}
		p := filepath.Join(r.dir, rel())
		switch op := rng.Intn(11); op {
		case 0, 1:
			data := make([]byte, rng.Intn(3000))
			if rng.Intn(8) == 0 {
				data = make([]byte, 200000+rng.Intn(100000))
			}
			rng.Read(data)
			os.WriteFile(p, data, 0o644)
		case 2:
			os.Mkdir(p, 0o755)
		case 3:
			os.Symlink(names[rng.Intn(len(names))], p)
		case 4:
			os.Remove(pick())
		case 5, 6:
			os.Rename(pick(), pick())
		case 7, 8:
			unix.Renameat2(unix.AT_FDCWD, pick(), unix.AT_FDCWD, pick(), unix.RENAME_EXCHANGE)
		case 9:
			os.Chmod(pick(), []os.FileMode{0o600, 0o644, 0o755}[rng.Intn(3)])
		case 10:
			// A write in place: of a big file, a range record.
			if f, err := os.OpenFile(pick(), os.O_WRONLY, 0); err == nil {
				data := make([]byte, 1+rng.Intn(10000))
				rng.Read(data)
				if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
					f.WriteAt(data, rng.Int63n(st.Size()+1))
				}
				f.Close()
			}
		}
	}
}

// TestCrashBeforeARewindsJournal: the daemon dies after a rewind opened
// its turn but before it saved its journal (Begin's commit, or right
// after it). The tree was not touched; the next mount closes that turn,
// saying the rewind was cut short, so that what the user writes next goes
// into a turn of its own, and an undo keeps it. It stayed open as "rewind
// to 0", took the user's next edits, and an undo removed them.
func TestCrashBeforeARewindsJournal(t *testing.T) {
	for _, spec := range []string{"turn.committed", "rewind.begun"} {
		t.Run(spec, func(t *testing.T) {
			dir := t.TempDir()
			writeTree(t, dir, map[string]string{"f": "a\n"})
			m := mountProject(t, dir)
			m.turnctl(t, "begin", "--label", "edit")
			runIn(t, dir, `echo b > f`)
			m.turnctl(t, "end")
			m.Unmount(t)

			t.Setenv(crashpoint.Env, spec)
			m = mountProject(t, dir)
			t.Setenv(crashpoint.Env, "")
			if _, code := m.turnctlFail(t, "rewind", "0"); code == 0 {
				t.Fatal("the rewind went through: the daemon was not killed")
			}
			forceUnmount(t, dir)
			m = mountProject(t, dir)
			if got := readFile(t, filepath.Join(dir, "f")); got != "b\n" {
				t.Fatalf("after the crash, f = %q; want the tree untouched", got)
			}
			if st := m.turnctl(t, "status"); !strings.HasPrefix(st, "no turn open") {
				t.Errorf("after the restart a turn is open:\n%s", st)
			}
			if log := m.turnctl(t, "log", "-n", "1"); !strings.Contains(log, "rewind to 0 (cut short by a crash: nothing changed)") {
				t.Errorf("log:\n%s", log)
			}
			runIn(t, dir, `echo work > w.txt`)
			m.turnctl(t, "undo")
			if got := readFile(t, filepath.Join(dir, "f")); got != "a\n" {
				t.Errorf("the undo of turn 1 left f = %q", got)
			}
			if got := readFile(t, filepath.Join(dir, "w.txt")); got != "work\n" {
				t.Errorf("the undo took the work written after the restart: w.txt = %q", got)
			}
		})
	}
}
