package main

import (
	"os"
	"path/filepath"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// warm.go: priming the kernel's caches after a mount.
//
// A fresh mount pays a round trip to the daemon for every path the first
// time a program touches it: exploring a project (git status, find, grep)
// right after the mount ran several times slower than native (make bench,
// the session's first turn). Once the mount is live, the daemon reads the
// directories of the tree through its own mount, breadth first, at the
// lowest CPU and I/O priority, up to warmMax entries: each read is a
// READDIRPLUS, whose reply gives the kernel the entries and their
// attributes at once, and the kernel keeps them for the mount's cache
// timeouts (fusefs/mount.go). Root's mounts only: a user's daemon holds a
// file descriptor for every inode the kernel remembers, and cannot make it
// forget them. CKPTFS_WARMUP=0 turns it off.

// warmMax bounds the entries the warm-up reads.
const warmMax = 50000

// warmUp starts the walk of dir; stop ends it early. done is closed when
// it has ended (it holds directories of the mount open until then); it
// logs what it read.
func warmUp(dir string, stop <-chan struct{}, logf func(string, ...any)) (done <-chan struct{}) {
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		start := time.Now()
		runtime.LockOSThread() // the priorities are the thread's; it ends with the goroutine
		tid := unix.Gettid()
		unix.Setpriority(unix.PRIO_PROCESS, tid, 19)
		unix.Syscall(unix.SYS_IOPRIO_SET, 1, uintptr(tid), 3<<13) // IOPRIO_CLASS_IDLE
		queue, seen, dirs := []string{dir}, 0, 0
		defer func() {
			logf("warm-up: read %d directories, %d entries, in %v", dirs, seen, time.Since(start).Round(time.Millisecond))
		}()
		for len(queue) > 0 && seen < warmMax {
			select {
			case <-stop:
				return
			default:
			}
			d := queue[0]
			queue = queue[1:]
			entries, err := os.ReadDir(d)
			if err != nil {
				continue
			}
			dirs++
			seen += len(entries)
			for _, e := range entries {
				if e.IsDir() {
					queue = append(queue, filepath.Join(d, e.Name()))
				}
			}
		}
	}()
	return ch
}

// closedChan is a closed channel: a warm-up that never ran is done.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// warmUpWanted reports whether the daemon primes the kernel's caches.
func warmUpWanted() bool { return asRoot() && os.Getenv("CKPTFS_WARMUP") != "0" }
