package fusefs

import (
	"os"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// fdrelief.go keeps the daemon below its open-file limit. Every node the
// kernel remembers holds an O_PATH fd of its backing inode, and the kernel
// forgets inodes only under memory pressure: a tree larger than the daemon's
// open-file limit (which cannot always be raised) would run into EMFILE,
// after which lookups, creates and even the control socket's accept fail.
// When the live nodes pass 3/4 of the limit, the daemon asks the kernel to
// drop its unused dentries and inodes (vm.drop_caches = 2, root only): the
// kernel then sends FORGET for every inode no process holds, and OnForget
// closes their fds. Inodes in use (open files, working directories) stay.

// fdRelief asks for the kernel's caches to be dropped when the live nodes
// near the open-file limit.
type fdRelief struct {
	high   int           // live nodes that trigger a drop; 0: never
	kick   chan struct{} // a drop is wanted
	once   sync.Once
	logf   func(string, ...any)
	lastOK time.Time
}

func newFDRelief(logf func(string, ...any)) *fdRelief {
	f := &fdRelief{kick: make(chan struct{}, 1), logf: logf}
	var l unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &l) == nil && l.Cur < 1<<40 {
		f.high = int(l.Cur) * 3 / 4
	}
	// Tests set a low mark without lowering the real limit.
	if n, err := strconv.Atoi(os.Getenv("CKPTFS_NODE_MARK")); err == nil && n > 0 {
		f.high = n
	}
	return f
}

// note is called with the number of live nodes after one was added.
func (f *fdRelief) note(live int) {
	if f.high > 0 && live > f.high {
		select {
		case f.kick <- struct{}{}:
		default:
		}
	}
}

// run drops the caches when kicked, at most once a second, until done
// is closed.
func (f *fdRelief) run(done <-chan struct{}) {
	for {
		select {
		case <-done:
			return
		case <-f.kick:
		}
		err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("2\n"), 0)
		if err != nil {
			f.once.Do(func() {
				f.logf("ckptfs: near the open-file limit (%d nodes) and cannot ask the kernel to forget inodes: %v", f.high, err)
			})
		} else if time.Since(f.lastOK) > time.Minute {
			f.logf("ckptfs: more than %d cached nodes, near the open-file limit: asked the kernel to forget unused inodes", f.high)
			f.lastOK = time.Now()
		}
		select {
		case <-done:
			return
		case <-time.After(time.Second):
		}
	}
}
