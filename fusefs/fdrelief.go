package fusefs

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// fdrelief.go keeps the daemon below its open-file limit. Every node the
// kernel remembers holds an O_PATH fd of its backing inode, and the kernel
// forgets inodes only under memory pressure: a tree larger than the daemon's
// open-file limit (which an ordinary user cannot raise past its hard limit)
// would run into EMFILE, after which lookups, creates and even the control
// socket's accept fail. When the live nodes pass the mark (3/4 of the
// limit), the daemon has the kernel forget unused inodes, in the first way
// available of:
//
//   - prune (kernel 6.18+, FUSE protocol 7.45): FUSE_NOTIFY_PRUNE of the
//     nodes used least recently, oldest first, until half the mark is
//     left. The kernel drops the unused dentries of each and skips any
//     inode in use (an open file, a working directory, a directory with
//     remembered children), so nothing anyone holds changes. It takes no
//     directory lock: it cannot wait for a request in flight.
//   - drop (root): vm.drop_caches = 2, every unused dentry and inode of the
//     machine, at most once a second.
//   - entry (anyone, any kernel): FUSE_NOTIFY_INVAL_ENTRY of the files
//     (not directories) used least recently that no handle holds. An
//     invalidated dentry is unhashed even if some process holds it, so
//     directories are left alone (a process whose working directory was
//     invalidated gets ENOENT from getcwd). The kernel takes the parent
//     directory's lock for each: the notification waits for a create or
//     lookup in flight there, so it is sent from this goroutine alone,
//     holding no lock a request handler may wait for.
//
// In every way the kernel then sends FORGET for what it dropped and OnForget
// closes the fds. Nodes can arrive faster than that (a READDIRPLUS brings
// one per entry, hundreds a request), so over the mark:
//
//   - READDIRPLUS answers with names alone: its lookups of the entries
//     fail (bareListing), which the kernel takes as "no attributes for
//     this entry" (a zero node ID), not as ENOENT;
//   - past the cap, halfway from the mark to the limit, a LOOKUP or CREATE
//     waits (at most capWait) for FORGETs to make room before it makes a
//     node. It waits before it takes any lock of the daemon's, so the
//     FORGETs it waits for can run. CKPTFS_FD_RELIEF=prune|drop|entry forces one (tests,
// measurements).

// reliefMode is how the daemon has the kernel forget inodes.
type reliefMode string

const (
	reliefPrune reliefMode = "prune"
	reliefDrop  reliefMode = "drop"
	reliefEntry reliefMode = "entry"
)

// fdRelief has the kernel forget unused inodes when the live nodes near
// the open-file limit.
type fdRelief struct {
	high   int           // live nodes that trigger relief; 0: never
	cap    int           // live nodes past which new ones wait; 0: never
	live   atomic.Int64  // len(Root.nodes), for readers without nodesMu
	kick   chan struct{} // relief is wanted
	once   sync.Once
	logf   func(string, ...any)
	lastOK time.Time
}

// NodeMark is the number of live nodes (each an fd of the daemon's) past
// which the daemon has the kernel forget inodes: 3/4 of its open-file
// limit, or CKPTFS_NODE_MARK; 0: never.
func (r *Root) NodeMark() int { return r.relief.high }

func newFDRelief(logf func(string, ...any)) *fdRelief {
	f := &fdRelief{kick: make(chan struct{}, 1), logf: logf}
	var l unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &l) == nil && l.Cur < 1<<40 {
		f.high = int(l.Cur) * 3 / 4
		f.cap = int(l.Cur) * 7 / 8
	}
	// Tests set a low mark without lowering the real limit.
	if n, err := strconv.Atoi(os.Getenv("CKPTFS_NODE_MARK")); err == nil && n > 0 {
		f.high = n
		f.cap = max(f.cap, n+n/6)
	}
	return f
}

// note is called with the number of live nodes after one was added.
func (f *fdRelief) note(live int) {
	f.live.Store(int64(live))
	if f.high > 0 && live > f.high {
		f.wake()
	}
}

func (f *fdRelief) wake() {
	select {
	case f.kick <- struct{}{}:
	default:
	}
}

// over reports whether the live nodes are past the mark.
func (f *fdRelief) over() bool { return f.high > 0 && f.live.Load() > int64(f.high) }

// capWait bounds how long a request waits for room (room).
const capWait = 200 * time.Millisecond

// room waits, at most capWait or until the request is interrupted, while
// the live nodes are past the cap. The caller must hold no lock.
func (f *fdRelief) room(cancel <-chan struct{}) {
	if f.cap == 0 || f.live.Load() < int64(f.cap) {
		return
	}
	f.wake()
	deadline := time.After(capWait)
	for f.live.Load() >= int64(f.cap) {
		select {
		case <-cancel:
			return
		case <-deadline:
			return
		case <-time.After(time.Millisecond):
		}
	}
}

// bareListings holds the cancel channels of the READDIRPLUS requests that
// run over the mark: their lookups make no nodes.
var bareListings sync.Map

// bareListing reports whether ctx is the lookup of an entry for such a
// READDIRPLUS.
func bareListing(ctx context.Context) bool {
	c, ok := ctx.(*fuse.Context)
	if !ok || c.Cancel == nil {
		return false
	}
	_, ok = bareListings.Load(c.Cancel)
	return ok
}

// reliefModeFor picks how the daemon relieves: CKPTFS_FD_RELIEF, else
// prune where the kernel has it, else drop as root, else entry.
func reliefModeFor(srv *fuse.Server) (reliefMode, error) {
	switch m := reliefMode(os.Getenv("CKPTFS_FD_RELIEF")); m {
	case reliefPrune, reliefDrop, reliefEntry:
		return m, nil
	case "":
	default:
		return "", fmt.Errorf("fusefs: CKPTFS_FD_RELIEF=%s: want prune, drop or entry", m)
	}
	if s := srv.KernelSettings(); s != nil && s.SupportsNotify(fuse.NOTIFY_PRUNE) {
		return reliefPrune, nil
	}
	if os.Geteuid() == 0 {
		return reliefDrop, nil
	}
	return reliefEntry, nil
}

// runRelief has the kernel forget unused inodes in mode's way when the
// relief is kicked, until done is closed.
func (r *Root) runRelief(mode reliefMode, done <-chan struct{}) {
	f := r.relief
	// Opened now, not when the daemon is out of fds: then opening it
	// would fail with EMFILE, and nothing would give the fds back.
	var dropCaches *os.File
	if mode == reliefDrop {
		var err error
		if dropCaches, err = os.OpenFile("/proc/sys/vm/drop_caches", os.O_WRONLY, 0); err != nil {
			f.logf("ckptfs: cannot open /proc/sys/vm/drop_caches (near the open-file limit, the kernel will not be asked to forget inodes): %v", err)
		} else {
			defer dropCaches.Close()
		}
	}
	for {
		select {
		case <-done:
			return
		case <-f.kick:
		}
		var err error
		// Until the next relief: long enough for FORGETs of what was
		// asked to arrive, short enough that lookups (thousands a
		// second) cannot take the nodes from the mark to the limit.
		pause := 10 * time.Millisecond
		switch mode {
		case reliefDrop:
			err = os.ErrClosed
			if dropCaches != nil {
				_, err = dropCaches.WriteAt([]byte("2\n"), 0)
			}
			pause = time.Second // machine-wide: not more often
		case reliefPrune, reliefEntry:
			var asked int
			asked, err = r.forgetOldest(mode, f.high/2)
			if asked == 0 {
				pause = time.Second // everything is held
			}
		}
		if err != nil {
			f.once.Do(func() {
				f.logf("ckptfs: near the open-file limit (%d nodes) and cannot ask the kernel to forget inodes (%s): %v", f.high, mode, err)
			})
		} else if time.Since(f.lastOK) > time.Minute {
			f.logf("ckptfs: more than %d cached nodes, near the open-file limit: asked the kernel to forget unused inodes (%s)", f.high, mode)
			f.lastOK = time.Now()
		}
		select {
		case <-done:
			return
		case <-time.After(pause):
		}
	}
}

// pruneBatch is how many node IDs one FUSE_NOTIFY_PRUNE carries (4 KiB).
const pruneBatch = 512

// forgetOldest asks the kernel to forget live nodes until low are left,
// those used least recently first, that no handle of the daemon holds
// (entry: files only), and returns how many it asked about. It holds no
// lock while it notifies.
func (r *Root) forgetOldest(mode reliefMode, low int) (asked int, err error) {
	type cand struct {
		n    *Node
		used uint64
	}
	r.nodesMu.Lock()
	want := len(r.nodes) - low
	cands := make([]cand, 0, len(r.nodes))
	for _, node := range r.nodes {
		if used := node.used.Load(); used != 0 {
			cands = append(cands, cand{node, used})
		}
	}
	r.nodesMu.Unlock()
	if want <= 0 {
		return 0, nil
	}
	slices.SortFunc(cands, func(a, b cand) int { return cmp.Compare(a.used, b.used) })
	var batch []*fs.Inode
	for _, c := range cands {
		if want == 0 {
			break
		}
		if c.n.held() || (mode == reliefEntry && c.n.StableAttr().Mode == unix.S_IFDIR) {
			continue
		}
		want--
		asked++
		if mode == reliefPrune {
			if batch = append(batch, &c.n.Inode); len(batch) == pruneBatch {
				if errno := r.root.NotifyPrune(batch); errno != 0 {
					return asked, errno
				}
				batch = batch[:0]
			}
			continue
		}
		name, parent := c.n.Parent()
		if parent == nil {
			continue
		}
		if errno := parent.NotifyEntry(name); errno != 0 && errno != unix.ENOENT {
			return asked, errno
		}
	}
	if len(batch) > 0 {
		if errno := r.root.NotifyPrune(batch); errno != 0 {
			return asked, errno
		}
	}
	return asked, nil
}

// held reports whether the daemon has handles open on n.
func (n *Node) held() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.readers+n.writers+n.ptReaders+n.ptWriters > 0
}
