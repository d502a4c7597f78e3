package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// warm.go: priming the kernel's caches after a mount.
//
// A fresh mount pays a round trip to the daemon for every path the first
// time a program touches it: exploring a project (git status, find, grep)
// right after the mount ran several times slower than native (make bench,
// the session's first turn). Once the mount is live, the daemon starts a
// child process (the hidden "ckptfs warm-up DIR MAX") that reads the
// directories of the tree through the mount, breadth first, at the lowest
// CPU and I/O priority, until it has read about MAX entries (a directory
// a chunk at a time, so that a large one does not overshoot): each read is a
// READDIRPLUS, whose reply gives the kernel the entries and their
// attributes at once, and the kernel keeps them for the mount's cache
// timeouts (fusefs/mount.go). A child, never the daemon itself: a daemon
// killed while one of its own threads waits on a request to its own mount
// would never finish exiting (the kernel waits for the answer the dead
// server cannot give, and aborts the connection only when the daemon's
// last thread is gone), leaving the mount hung.
//
// Every entry the kernel keeps holds one of the daemon's file descriptors
// (fusefs/fdrelief.go), so MAX is warmMax or, under a lower open-file
// limit, half of the mark at which the daemon starts asking the kernel to
// forget inodes: the warm-up never brings that on by itself, and leaves
// room for what programs then open. The same for root's mounts and a
// user's. CKPTFS_WARMUP=0 turns it off.

// warmMax bounds the entries the warm-up reads.
const warmMax = 50000

// warmChunk is the most entries the warm-up asks a directory for at once.
const warmChunk = 128

// warmBudget is the entries the warm-up reads, given the live nodes at
// which the daemon's fd relief starts (fusefs.Root.NodeMark; 0: never):
// warmMax, or half of the mark where that is less.
func warmBudget(mark int) int {
	if mark <= 0 {
		return warmMax
	}
	return min(warmMax, mark/2)
}

// warmUp starts the child that walks dir. stop kills it and waits for it
// (its open directories would keep the mount busy); it is safe to call
// more than once. The child's one line of summary goes to the daemon's
// log.
func warmUp(dir string, budget int, logf func(string, ...any)) (stop func()) {
	exe, err := os.Executable()
	if err != nil {
		logf("warm-up: %v", err)
		return func() {}
	}
	// The child must hold none of the daemon's files, above all not its
	// /dev/fuse (go-fuse opens it without O_CLOEXEC): a child holding it
	// would keep a killed daemon's connection alive, and then wait
	// forever on its own request.
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		logf("warm-up: not started: %v", err)
		return func() {}
	}
	cmd := exec.Command(exe, "warm-up", dir, strconv.Itoa(budget))
	cmd.Dir = "/"
	out, err := cmd.StdoutPipe()
	if err != nil {
		logf("warm-up: %v", err)
		return func() {}
	}
	if err := cmd.Start(); err != nil {
		logf("warm-up: %v", err)
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		b, _ := io.ReadAll(out)
		cmd.Wait()
		if line := strings.TrimSpace(string(b)); line != "" {
			logf("warm-up: %s", line)
		}
	}()
	return func() {
		select {
		case <-done:
		default:
			cmd.Process.Signal(syscall.SIGKILL)
			<-done
		}
	}
}

// runWarmUp is the child: it walks dir and prints what it read.
func runWarmUp(args []string, stdout io.Writer) int {
	if len(args) != 2 {
		return exitUsage
	}
	budget, err := strconv.Atoi(args[1])
	if err != nil || budget < 0 {
		return exitUsage
	}
	unix.Setpriority(unix.PRIO_PROCESS, 0, 19)
	unix.Syscall(unix.SYS_IOPRIO_SET, 1, 0, 3<<13) // IOPRIO_CLASS_IDLE, this process
	start := time.Now()
	queue, seen, dirs := []string{args[0]}, 0, 0
	for len(queue) > 0 && seen < budget {
		d := queue[0]
		queue = queue[1:]
		f, err := os.Open(d)
		if err != nil {
			continue
		}
		dirs++
		// A chunk at a time, not the directory whole: every entry a
		// READDIRPLUS returns costs the daemon an fd, and one directory
		// may hold more than the budget.
		for seen < budget {
			entries, err := f.ReadDir(min(warmChunk, budget-seen))
			seen += len(entries)
			for _, e := range entries {
				if e.IsDir() {
					queue = append(queue, filepath.Join(d, e.Name()))
				}
			}
			if err != nil {
				break
			}
		}
		f.Close()
	}
	fmt.Fprintf(stdout, "read %d directories, %d entries, in %v\n", dirs, seen, time.Since(start).Round(time.Millisecond))
	return exitOK
}

// warmUpWanted reports whether the daemon primes the kernel's caches.
func warmUpWanted() bool { return os.Getenv("CKPTFS_WARMUP") != "0" }
