// Command ckptfs-bench runs the workloads of doc/BENCH.md on several
// configurations side by side (N native, L stock go-fuse loopback, L+ tuned
// loopback, C ckptfs mounted by root, Cu ckptfs and Lu the stock loopback
// mounted by an ordinary user), interleaved and repeated, and reports
// medians, ranges, the daemon's CPU time and the ratios C/N, C/L, C/L+,
// Cu/N, Cu/L, Cu/C, Lu/N, Cu/Lu.
//
// Files: main.go (flags), configs.go (the configurations and their mounts),
// loopback.go (the hidden "loopback" subcommand that serves L, L+ and Lu
// in a child process), usermode.go (Cu and Lu, and acting as their user), workloads.go,
// reflink.go (workloads on a loop-mounted XFS image), history.go (C-only
// history figures), capture.go (big-file capture, and the XFS image),
// navigation.go (revert, log search, export, checkout over 1000 turns),
// gcfigures.go and gcreport.go (the retention figures), report.go
// (statistics, tables, JSON), fusertt.go and fusertt_serve.go (the hidden
// "fuse-rtt" micro-benchmark of FUSE request round trips by transport:
// /dev/fuse read/write, FUSE over io_uring, go-fuse; doc/BENCH.md).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"
)

// Exit codes.
const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

type options struct {
	quick     bool
	reps      int
	only      []string
	configs   []string
	work      string
	jsonPath  string
	ckptfs    string
	turnctl   string
	lplus     []string
	user      string
	keep      bool
	noHistory bool
	// churnFiles overrides the churn's file count (0: the size's).
	churnFiles int
	// The retention figures (gcfigures.go).
	gcTurns int
	gcEvery string
	// The agent session (session.go).
	sessionDebug   bool
	sessionProfile string
	sessionGocache string
	sessionAlt     string
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "loopback":
			return runLoopback(args[1:], stdout, stderr)
		case "fuse-rtt":
			return runFuseRTT(args[1:], stdout, stderr)
		case "fuse-rtt-serve":
			return runFuseRTTServe(args[1:], stdout, stderr)
		}
	}
	var o options
	fl := pflag.NewFlagSet("ckptfs-bench", pflag.ContinueOnError)
	fl.SetOutput(stderr)
	fl.BoolVar(&o.quick, "quick", false, "small sizes, 2 repetitions, no npm/build: about a minute, 2-3 with C")
	fl.IntVar(&o.reps, "reps", 0, "repetitions per workload and configuration (default 5, --quick 2)")
	fl.StringSliceVar(&o.only, "only", nil, "run only these `WORKLOAD`s (comma-separated names or numbers; \"history\" for the history figures, \"capture\" for the big-file capture alone, \"ui\" for turnctl ui's page, \"at\" for the reads through mount --at alone, \"navigation\" for revert, log search, export and checkout over 1000 turns, \"gc\" for the retention figures)")
	fl.StringSliceVar(&o.configs, "configs", slices.Clone(configNames), "configurations to run")
	fl.StringVar(&o.user, "user", "nobody", "the ordinary `USER` who mounts Cu and Lu")
	fl.StringVar(&o.work, "work", "/var/tmp/ckptfs-bench", "work `DIR` (emptied at start and end; must be on the filesystem under test)")
	fl.StringVar(&o.jsonPath, "json", "", "write results as JSON to `FILE` (default WORK/bench.json)")
	fl.StringVar(&o.ckptfs, "ckptfs", "bin/ckptfs", "ckptfs binary `PATH`")
	fl.StringVar(&o.turnctl, "turnctl", "bin/turnctl", "turnctl binary `PATH`")
	fl.StringSliceVar(&o.lplus, "lplus", defaultLplus, "L+ tuning `OPTION`s, for ablations (see above)")
	fl.BoolVar(&o.keep, "keep", false, "keep the work directory's contents at the end")
	fl.BoolVar(&o.noHistory, "no-history", false, "skip the history figures (C only) and the retention figures (gc)")
	fl.IntVar(&o.churnFiles, "churn-files", 0, "churn: create and delete `N` files (default 20000, --quick 2000)")
	fl.IntVar(&o.gcTurns, "gc-turns", 0, "retention figures: `N` turns of 50 MB under a 1 GiB budget (default 200, --quick 40)")
	fl.StringVar(&o.gcEvery, "gc-every", "1s", "retention figures: run the budget figure again with the daemon looking for gc work every `DURATION` (CKPTFS_GC_EVERY; 0: only at its default, 1m)")
	fl.BoolVar(&o.sessionDebug, "session-debug", false, "agent session: mount C with --debug and count FUSE requests per turn (slows C)")
	fl.StringVar(&o.sessionProfile, "session-cpuprofile", "", "agent session: write the C daemon's CPU profile of each session into `DIR`")
	fl.StringVar(&o.sessionGocache, "session-gocache", "", "agent session: the GOCACHE `DIR` every configuration shares (default WORK/session/gocache)")
	fl.StringVar(&o.sessionAlt, "session-alt", "", "agent session: also run C with the ckptfs binary at `PATH` as configuration \"C'\" (an A/B in one run)")
	help := fl.BoolP("help", "h", false, "show this help")
	fl.Usage = func() { usage(stdout, fl) }
	if err := fl.Parse(args); err != nil {
		fmt.Fprintf(stderr, "ckptfs-bench: %v (try --help)\n", err)
		return exitUsage
	}
	if *help {
		usage(stdout, fl)
		return exitOK
	}
	if fl.NArg() != 0 {
		fmt.Fprintf(stderr, "ckptfs-bench: unexpected argument %q (try --help)\n", fl.Arg(0))
		return exitUsage
	}
	if err := o.check(); err != nil {
		fmt.Fprintf(stderr, "ckptfs-bench: %v (try --help)\n", err)
		return exitUsage
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b := newBench(o, stdout, stderr)
	sigc := make(chan os.Signal, 2)
	signal.Notify(sigc, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sigc
		fmt.Fprintln(stderr, "ckptfs-bench: interrupted; cleaning up (again to force)")
		cancel()
		<-sigc
		b.forceCleanup()
		os.Exit(130)
	}()

	err := b.run(ctx)
	b.cleanup()
	if err != nil {
		fmt.Fprintf(stderr, "ckptfs-bench: %v\n", err)
		return exitFail
	}
	return exitOK
}

func (o *options) check() error {
	if o.reps == 0 {
		o.reps = 5
		if o.quick {
			o.reps = 2
		}
	}
	if o.reps < 1 {
		return errors.New("--reps must be at least 1")
	}
	if o.churnFiles < 0 {
		return errors.New("--churn-files must not be negative")
	}
	if o.gcTurns < 0 {
		return errors.New("--gc-turns must not be negative")
	}
	if o.gcEvery != "0" {
		if d, err := time.ParseDuration(o.gcEvery); err != nil || d <= 0 {
			return fmt.Errorf("--gc-every: bad duration %q", o.gcEvery)
		}
	}
	seen := map[string]bool{}
	for i, c := range o.configs {
		name := configName(strings.TrimSpace(c))
		if name == "" {
			return fmt.Errorf("unknown configuration %q (want %s)", strings.TrimSpace(c), strings.Join(configNames, ", "))
		}
		c = name
		if seen[c] {
			return fmt.Errorf("configuration %s given twice", c)
		}
		seen[c] = true
		o.configs[i] = c
	}
	for i, w := range o.only {
		w = strings.TrimSpace(w)
		if w != "history" && w != "session" && w != "capture" && w != "ui" && w != "at" && w != "navigation" && w != "gc" && findWorkload(w) == nil {
			return fmt.Errorf("unknown workload %q", w)
		}
		o.only[i] = w
	}
	var lplus []string
	for _, x := range o.lplus {
		if x = strings.TrimSpace(x); x != "" {
			lplus = append(lplus, x)
		}
	}
	o.lplus = lplus
	if err := checkLplusOptions(o.lplus); err != nil {
		return err
	}
	abs, err := filepath.Abs(o.work)
	if err != nil {
		return err
	}
	o.work = abs
	if o.jsonPath == "" {
		o.jsonPath = filepath.Join(o.work, "bench.json")
	}
	return nil
}

func usage(w io.Writer, fl *pflag.FlagSet) {
	fmt.Fprintf(w, `Usage: ckptfs-bench [flags]

Runs the workloads of doc/BENCH.md on each configuration, interleaved
(N, L, L+, C, N, L, ...), and prints median [min-max] wall seconds, the
daemon's CPU seconds (utime+stime from /proc/PID/stat) and the ratios
C/N, C/L, C/L+, as a table and as JSON.

Configurations:
  N    a plain directory under --work (the physical limit)
  L    go-fuse loopback (fs.NewLoopbackRoot), default options, served by a child process
  L+   the same loopback tuned by the --lplus options (default: all but writeback):
%s  C    bin/ckptfs mount -f --store WORK/C/store DIR as root (shared, FUSE
       passthrough); turnctl begin/end around every repetition, counted in C's time
  Cu   the same mounted by --user (needs fusermount3 and a /dev/fuse it may
       open): private to that user, no passthrough; the workloads run as that user
  Lu   L mounted by --user the same way: the floor of Cu's mode

Workloads (--only takes names or numbers):
`, lplusHelp())
	for _, wl := range workloads {
		fmt.Fprintf(w, "  %2d %-8s %s\n", wl.num, wl.name, wl.desc)
	}
	fmt.Fprintf(w, `     session  the agent session: 13 turns over a clone of this repository
              on N, C (a fresh mount per session) and G (shadow git)
     history  C only: turn boundary vs tree size, shadow git (G), log/show,
              rewind, navigation and turnctl ui (below), rename and delete of a 1 GiB file (and on N),
              bytes stored per byte changed, umount and mount with a check
              for changes made while unmounted, and capture (below)
  navigation  C only: revert of a 1-file turn under 1000 later turns, log
              --graph, -S and --grep over them, export git of them all and
              of 1 new turn, checkout of an early turn (a mount of its own)
     capture  the first 4 KiB write of a turn into a 1 GiB and a 1 MiB
              file, on C and on Cx: ckptfs over a loop-mounted XFS image
              made with reflink=1 under WORK/Cx (captures clone; needs
              mkfs.xfs), with the space each capture took; then on C the
              rewind, log -S and revert of such a turn, and cat of a 64 MiB
              file before a turn of random writes over all of it
     ui       C only: turnctl ui's page in headless chromium: first paint
              and interactive timeline of 1000+ turns, first page of a
              20k-file turn with a diff (needs chromium)
     at       the first byte and the full read of a 1 GiB file, cache
              dropped, through a view of its turn (ckptfs mount --at: A)
              against C
     gc       retention (issue 15), on mounts of their own with a policy:
              the store's size through 200 turns of 50 MB under a 1 GiB
              budget, sed -i while turnctl gc and while the background
              gc reclaim 1 GiB against without, gc throughput (chunks,
              attic), and a scripted 100-turn history's store under the
              default, an unlimited and a tight policy (5-7 minutes)

Flags:
%s
Exit status: 0 ok, 1 failure, 2 usage error.
`, fl.FlagUsages())
}

func lplusHelp() string {
	var sb strings.Builder
	for _, o := range lplusOptions {
		fmt.Fprintf(&sb, "         %-10s %s\n", o.name, o.what)
	}
	return sb.String()
}

// since returns seconds elapsed since t.
func since(t time.Time) float64 { return time.Since(t).Seconds() }
