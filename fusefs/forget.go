package fusefs

import (
	"sync"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// forget.go orders lookups and FORGETs. A node holds an fd of its backing inode
// that OnForget closes, and a LOOKUP may hand go-fuse a live node (lookupNode
// reuses it) whose registration go-fuse completes only after Lookup returns.
// Were a FORGET of the same node to run in between, go-fuse would revive the
// node it just forgot, with its fd closed: the path would fail with EBADF
// until the kernel forgot it again (go-fuse's NodeOnForgetter contract: a
// LOOKUP must not revive a node being forgotten).
//
// So every request that may reuse a node (LOOKUP, READDIRPLUS) holds
// Root.order's read lock from its decision through go-fuse's registration,
// and whatever may make go-fuse forget a node holds the write lock: FORGET,
// while go-fuse drops the node and OnForget closes its fd, and Invalidate's
// RmChild (a rewind). Requests that take the read lock never wait for the
// mutation gate, so a writer waits at most for lookups of the backing tree,
// also when it holds the gate (Invalidate runs inside Exclusive).
type forgetOrder struct{ mu sync.RWMutex }

func (f *rawFS) Lookup(cancel <-chan struct{}, header *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	f.r.relief.room(cancel) // before the lock: FORGETs make the room
	f.r.order.mu.RLock()
	defer f.r.order.mu.RUnlock()
	return f.RawFileSystem.Lookup(cancel, header, name, out)
}

func (f *rawFS) ReadDirPlus(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	if f.r.relief.over() {
		// Names alone (fdrelief.go).
		bareListings.Store(cancel, true)
		defer bareListings.Delete(cancel)
	}
	f.r.order.mu.RLock()
	defer f.r.order.mu.RUnlock()
	return f.readDir(cancel, in, out, f.RawFileSystem.ReadDirPlus)
}

func (f *rawFS) Forget(nodeid, nlookup uint64) {
	f.r.order.mu.Lock()
	defer f.r.order.mu.Unlock()
	f.RawFileSystem.Forget(nodeid, nlookup)
}
