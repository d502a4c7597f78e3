package main

// The hidden "fuse-rtt" subcommand: what one FUSE request round trip costs
// on this machine, by transport (issue 20: is the transport the limit?).
//
//	ckptfs-bench fuse-rtt [--reps N] [--dur D] [--configs N,dev,uring,uring-np,go-fuse,L]
//
// Clients loop on statx(fd, "", AT_EMPTY_PATH|AT_STATX_FORCE_SYNC) of an
// open file: on FUSE each call is one GETATTR to the server and back,
// whatever the attribute timeout. Configurations, each served by a child
// process (fusertt_serve.go), interleaved and repeated:
//
//	N        the same file on the native filesystem (the syscall alone)
//	dev      a raw server (internal/rawfuse): read(2)/write(2) on /dev/fuse
//	uring    the same raw server over FUSE over io_uring, each queue's
//	         thread pinned to its CPU (as libfuse)
//	uring-np the same, not pinned: how much of uring's gain is locality
//	go-fuse  go-fuse's fs package, default server, the same tree in memory
//	L        the stock go-fuse loopback (as in the bench's L) of a real file
//
// For each: ns per round trip with 1 client thread, the server's and the
// client's CPU per round trip, round trips per second with 1 and 2 client
// threads; then the per-repetition differences dev−uring, dev−uring-np,
// go-fuse−dev and L−go-fuse, also scaled to the agent session's requests.
// It turns /sys/module/fuse/parameters/enable_uring on for the run if it
// was off (only servers that ask for FUSE_OVER_IO_URING at INIT notice)
// and back off at the end.

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"
)

// sessionRequests is the FUSE requests of one agent session (session.go,
// --session-debug; README "Performance"), to scale a per-request saving.
const sessionRequests = 31600

const uringParam = "/sys/module/fuse/parameters/enable_uring"

var rttConfigs = []string{"N", "dev", "uring", "uring-np", "go-fuse", "L"}

// rttSample is one configuration's measurement in one repetition.
type rttSample struct {
	ns1         float64 // wall ns per round trip, 1 client thread
	srvCPU1     float64 // server CPU ns per round trip, 1 client thread
	cliCPU1     float64 // client thread CPU ns per round trip
	ops1, ops2  float64 // round trips per second, 1 and 2 client threads
	srvCPU2     float64 // server CPU ns per round trip, 2 client threads
	served, got int64   // GETATTRs the server counted; round trips made
	counts      string  // the server's own counts line
}

func runFuseRTT(args []string, stdout, stderr io.Writer) int {
	fl := pflag.NewFlagSet("fuse-rtt", pflag.ContinueOnError)
	fl.SetOutput(stderr)
	reps := fl.Int("reps", 5, "repetitions of each configuration, interleaved")
	dur := fl.Duration("dur", 300*time.Millisecond, "measuring time per configuration, repetition and thread count")
	configs := fl.StringSlice("configs", rttConfigs, "configurations (N, dev, uring, uring-np, go-fuse, L)")
	if err := fl.Parse(args); err != nil || fl.NArg() != 0 || *reps < 1 || *dur <= 0 {
		fmt.Fprintln(stderr, "usage: ckptfs-bench fuse-rtt [--reps N] [--dur D] [--configs N,dev,uring,uring-np,go-fuse,L]")
		return exitUsage
	}
	for _, c := range *configs {
		if !contains(rttConfigs, c) {
			fmt.Fprintf(stderr, "fuse-rtt: unknown configuration %q\n", c)
			return exitUsage
		}
	}
	if contains(*configs, "uring") || contains(*configs, "uring-np") {
		restore, err := enableUring()
		if err != nil {
			fmt.Fprintf(stderr, "fuse-rtt: %v\n", err)
		}
		defer restore()
	}
	dir, err := os.MkdirTemp("", "ckptfs-fuse-rtt-")
	if err != nil {
		fmt.Fprintf(stderr, "fuse-rtt: %v\n", err)
		return exitFail
	}
	defer os.RemoveAll(dir)
	fmt.Fprintf(stdout, "fuse-rtt: statx(AT_STATX_FORCE_SYNC) of an open file, %d × %v per configuration and thread count, interleaved\n", *reps, *dur)

	// An interrupt stops between configurations, so that the current
	// server is stopped and its mount gone before we exit.
	var interrupted atomic.Bool
	sigc := make(chan os.Signal, 1)
	signal.Notify(sigc, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigc)
	go func() {
		<-sigc
		interrupted.Store(true)
	}()

	samples := map[string][]rttSample{}
	failed := map[string]string{}
	for rep := range *reps {
		for _, c := range *configs {
			if interrupted.Load() {
				fmt.Fprintln(stderr, "fuse-rtt: interrupted")
				return exitFail
			}
			if failed[c] != "" {
				continue
			}
			s, err := rttOne(dir, c, *dur)
			if err != nil {
				failed[c] = err.Error()
				fmt.Fprintf(stderr, "fuse-rtt: %s: %v\n", c, err)
				continue
			}
			samples[c] = append(samples[c], s)
			fmt.Fprintf(stderr, "fuse-rtt: rep %d %-8s %6.0f ns/op  %4.0f kop/s 1T  %4.0f kop/s 2T  (%s)\n", rep+1, c, s.ns1, s.ops1/1e3, s.ops2/1e3, s.counts)
		}
	}
	rttReport(stdout, *configs, samples, failed)
	if len(failed) > 0 {
		return exitFail
	}
	return exitOK
}

// enableUring turns FUSE over io_uring on if it is off; restore turns it
// back off.
func enableUring() (restore func(), err error) {
	b, err := os.ReadFile(uringParam)
	if err != nil {
		return func() {}, fmt.Errorf("no FUSE over io_uring here (%w): the kernel lacks CONFIG_FUSE_IO_URING", err)
	}
	if strings.TrimSpace(string(b)) == "Y" {
		return func() {}, nil
	}
	if err := os.WriteFile(uringParam, []byte("Y"), 0); err != nil {
		return func() {}, fmt.Errorf("enable %s: %w", uringParam, err)
	}
	return func() { os.WriteFile(uringParam, []byte("N"), 0) }, nil
}

// rttOne measures configuration c once: starts its server on a fresh
// mount under dir, runs the client loops with 1 then 2 threads, stops the
// server and unmounts, also on failure.
func rttOne(dir, c string, dur time.Duration) (s rttSample, err error) {
	base, err := os.MkdirTemp(dir, c+"-")
	if err != nil {
		return s, err
	}
	defer os.RemoveAll(base)
	mnt := filepath.Join(base, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		return s, err
	}
	pid := 0
	if c == "N" {
		if err := os.WriteFile(filepath.Join(mnt, "f"), nil, 0o644); err != nil {
			return s, err
		}
	} else {
		srv, err := startRTTServer(base, mnt, c)
		// A mount must not outlive us, whatever happens.
		defer unix.Unmount(mnt, unix.MNT_DETACH)
		if err != nil {
			return s, err
		}
		defer func() {
			counts, serr := srv.stop()
			s.counts = counts
			s.served = parseCount(counts, "getattr")
			if err == nil && serr != nil {
				err = serr
			}
			// Every round trip must have been a GETATTR, over the
			// ring for uring.
			if err == nil && s.served >= 0 && s.served < s.got {
				err = fmt.Errorf("%d round trips but %d GETATTRs served (%s)", s.got, s.served, counts)
			}
			if err == nil && strings.HasPrefix(c, "uring") && parseCount(counts, "ring") < s.got {
				err = fmt.Errorf("%d round trips but fewer requests over the ring (%s)", s.got, counts)
			}
		}()
		pid = srv.cmd.Process.Pid
	}
	path := filepath.Join(mnt, "f")
	r1, err := statLoop(path, 1, dur, pid)
	if err != nil {
		return s, err
	}
	r2, err := statLoop(path, 2, dur, pid)
	if err != nil {
		return s, err
	}
	s.ns1 = r1.wallNs / float64(r1.ops)
	s.srvCPU1 = r1.serverNs / float64(r1.ops)
	s.cliCPU1 = r1.clientNs / float64(r1.ops)
	s.ops1, s.ops2 = r1.opsPerSec, r2.opsPerSec
	s.srvCPU2 = r2.serverNs / float64(r2.ops)
	s.got = r1.ops + r2.ops + r1.warm + r2.warm
	s.served = -1
	return s, nil
}

// rttServer is a fuse-rtt-serve child (or the bench's loopback, for L).
type rttServer struct {
	cmd   *exec.Cmd
	lines chan string
	log   string
}

func startRTTServer(base, mnt, c string) (*rttServer, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	var args []string
	switch c {
	case "L":
		backing := filepath.Join(base, "backing")
		if err := os.Mkdir(backing, 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(backing, "f"), nil, 0o644); err != nil {
			return nil, err
		}
		args = []string{"loopback", backing, mnt}
	case "uring-np":
		args = []string{"fuse-rtt-serve", "--transport", "uring", "--pin=false", mnt}
	default:
		args = []string{"fuse-rtt-serve", "--transport", c, mnt}
	}
	s := &rttServer{cmd: exec.Command(exe, args...), lines: make(chan string, 4), log: filepath.Join(base, "server.log")}
	// Should we die without stopping it, it unmounts and exits.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	logf, err := os.Create(s.log)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	s.cmd.Stderr = logf
	out, err := s.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			s.lines <- strings.TrimSpace(sc.Text())
		}
		close(s.lines)
	}()
	select {
	case line := <-s.lines:
		if line == "ready" {
			return s, nil
		}
	case <-time.After(10 * time.Second):
	}
	s.stop()
	return nil, fmt.Errorf("server did not start: %s", s.logTail())
}

// stop sends SIGTERM (the server unmounts), waits for the exit (SIGKILL
// after 10 s) and returns the server's last stdout line.
func (s *rttServer) stop() (string, error) {
	s.cmd.Process.Signal(syscall.SIGTERM)
	exited := make(chan error, 1)
	go func() { exited <- s.cmd.Wait() }()
	var err error
	select {
	case err = <-exited:
	case <-time.After(10 * time.Second):
		s.cmd.Process.Kill()
		err = fmt.Errorf("server killed after 10 s: %v", <-exited)
	}
	last := ""
	for l := range s.lines {
		last = l
	}
	if err != nil {
		return last, fmt.Errorf("%v: %s", err, s.logTail())
	}
	return last, nil
}

func (s *rttServer) logTail() string {
	b, _ := os.ReadFile(s.log)
	return strings.TrimSpace(string(b))
}

// parseCount reads KEY=N from a server's counts line; -1 if absent (the
// loopback does not count, go-fuse counts only GETATTRs).
func parseCount(counts, key string) int64 {
	for _, f := range strings.Fields(counts) {
		if v, ok := strings.CutPrefix(f, key+"="); ok {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				return n
			}
		}
	}
	return -1
}

// loopResult is one run of statLoop.
type loopResult struct {
	ops, warm          int64
	wallNs             float64 // mean over threads of each one's elapsed time
	opsPerSec          float64 // the sum of each thread's rate
	serverNs, clientNs float64 // CPU of the server process, of the client threads
}

// emptyPath is the "" of statx(fd, "", AT_EMPTY_PATH).
var emptyPath = [1]byte{}

// statLoop runs threads client threads, each on its own OS thread with its
// own open file, calling statx with AT_STATX_FORCE_SYNC for dur after a
// short warm-up, and measures the server's (pid, 0: none) CPU meanwhile.
func statLoop(path string, threads int, dur time.Duration, pid int) (loopResult, error) {
	const warm, batch = 200, 64
	var (
		res     loopResult
		mu      sync.Mutex
		errs    []error
		ready   sync.WaitGroup
		done    sync.WaitGroup
		start   = make(chan struct{})
		stopped atomic.Bool
	)
	for range threads {
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			var (
				stx      unix.Statx_t
				ops      int64
				err      error
				t0, t1   time.Time
				cpu0, c1 float64
			)
			fd, oerr := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
			statx := func() error {
				_, _, e := unix.Syscall6(unix.SYS_STATX, uintptr(fd), uintptr(unsafe.Pointer(&emptyPath[0])),
					unix.AT_EMPTY_PATH|unix.AT_STATX_FORCE_SYNC, unix.STATX_BASIC_STATS, uintptr(unsafe.Pointer(&stx)), 0)
				if e != 0 {
					return e
				}
				return nil
			}
			err = oerr
			for i := 0; err == nil && i < warm; i++ {
				err = statx()
			}
			ready.Done()
			<-start
			if err == nil {
				cpu0, t0 = threadCPUNs(), time.Now()
				for err == nil && !stopped.Load() {
					for i := 0; err == nil && i < batch; i++ {
						err = statx()
					}
					ops += batch
				}
				c1, t1 = threadCPUNs(), time.Now()
			}
			if oerr == nil {
				unix.Close(fd)
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("statx %s: %w", path, err))
				return
			}
			el := float64(t1.Sub(t0).Nanoseconds())
			res.ops += ops
			res.warm += warm
			res.wallNs += el / float64(threads)
			res.opsPerSec += float64(ops) / el * 1e9
			res.clientNs += c1 - cpu0
		}()
	}
	ready.Wait()
	srv0 := processCPUNs(pid)
	close(start)
	time.Sleep(dur)
	stopped.Store(true)
	done.Wait()
	res.serverNs = processCPUNs(pid) - srv0
	if len(errs) > 0 {
		return res, errors.Join(errs...)
	}
	return res, nil
}

// threadCPUNs is the calling thread's CPU time.
func threadCPUNs() float64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
	return float64(ts.Nano())
}

// processCPUNs is the CPU time of process pid's threads, to the ns (the
// first field of each /proc/PID/task/TID/schedstat); 0 for pid 0.
func processCPUNs(pid int) float64 {
	if pid == 0 {
		return 0
	}
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	var sum float64
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		if f := strings.Fields(string(b)); len(f) > 0 {
			v, _ := strconv.ParseFloat(f[0], 64)
			sum += v
		}
	}
	return sum
}

// rttReport prints the table of medians (min–max) and the paired
// differences against dev.
func rttReport(w io.Writer, configs []string, samples map[string][]rttSample, failed map[string]string) {
	col := func(c string, f func(rttSample) float64, scale float64, format string) string {
		var xs []float64
		for _, s := range samples[c] {
			xs = append(xs, f(s)/scale)
		}
		if len(xs) == 0 {
			return "-"
		}
		med, lo, hi := stats(xs)
		return fmt.Sprintf(format+" ("+format+"–"+format+")", med, lo, hi)
	}
	header := []string{"config", "ns/round trip (1 thread)", "server CPU ns", "client CPU ns", "kop/s 1 thread", "kop/s 2 threads", "server CPU ns (2 threads)"}
	var rows [][]string
	for _, c := range configs {
		if msg := failed[c]; msg != "" && len(samples[c]) == 0 {
			rows = append(rows, []string{c, "failed: " + msg, "", "", "", "", ""})
			continue
		}
		rows = append(rows, []string{c,
			col(c, func(s rttSample) float64 { return s.ns1 }, 1, "%.0f"),
			col(c, func(s rttSample) float64 { return s.srvCPU1 }, 1, "%.0f"),
			col(c, func(s rttSample) float64 { return s.cliCPU1 }, 1, "%.0f"),
			col(c, func(s rttSample) float64 { return s.ops1 }, 1e3, "%.0f"),
			col(c, func(s rttSample) float64 { return s.ops2 }, 1e3, "%.0f"),
			col(c, func(s rttSample) float64 { return s.srvCPU2 }, 1, "%.0f"),
		})
	}
	fmt.Fprint(w, formatTable(header, rows))

	// Paired differences, repetition by repetition (the machine drifts).
	diff := func(a, b string, f func(rttSample) float64) (med, lo, hi float64, ok bool) {
		n := min(len(samples[a]), len(samples[b]))
		if n == 0 {
			return 0, 0, 0, false
		}
		var xs []float64
		for i := range n {
			xs = append(xs, f(samples[a][i])-f(samples[b][i]))
		}
		med, lo, hi = stats(xs)
		return med, lo, hi, true
	}
	wall := func(s rttSample) float64 { return s.ns1 }
	cpu := func(s rttSample) float64 { return s.srvCPU1 + s.cliCPU1 }
	for _, p := range [][2]string{{"dev", "uring"}, {"dev", "uring-np"}, {"go-fuse", "dev"}, {"L", "go-fuse"}} {
		m, lo, hi, ok := diff(p[0], p[1], wall)
		if !ok {
			continue
		}
		cm, clo, chi, _ := diff(p[0], p[1], cpu)
		fmt.Fprintf(w, "%s − %s per round trip: wall %.0f ns (%.0f–%.0f), CPU (server + client) %.0f ns (%.0f–%.0f); × %d session requests: %.0f ms wall, %.0f ms CPU\n",
			p[0], p[1], m, lo, hi, cm, clo, chi, sessionRequests, m*sessionRequests/1e6, cm*sessionRequests/1e6)
	}
}
