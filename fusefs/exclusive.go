package fusefs

import (
	"context"
)

// exclusive.go owns the turn boundary: Exclusive, which holds the mutation
// gate's write lock while the store closes a turn or rewinds.

// Exclusive flushes the kernel's dirty pages of the mount (shared mmap
// writes, flushWriters), then blocks every mutating operation, runs fn,
// captures again the files open for writing through passthrough (their
// prior state in the turn that follows), and releases. Kernel cache
// invalidations requested by fn (Invalidate) are sent after the lock is
// released and before Exclusive returns: sending them while holding the
// lock could deadlock against a request that holds a kernel inode lock
// and waits for ours.
func (r *Root) Exclusive(fn func() error) error { return r.exclusiveRun(fn, true) }

// ExclusiveLast is Exclusive for the daemon's last boundary, which closes
// the open turn and saves the manifest as the daemon ends: the files open
// for writing through passthrough are not captured again for a next turn,
// for there is none. (A handle whose RELEASE never came, held past a lazy
// detach or lost with the connection, would otherwise open a turn after
// the manifest; what is written through it from then on is a change made
// while unmounted, which the next mount records.)
func (r *Root) ExclusiveLast(fn func() error) error { return r.exclusiveRun(fn, false) }

func (r *Root) exclusiveRun(fn func() error, recapture bool) error {
	// Not under the lock: flushing sends WRITE requests, which take the
	// read lock.
	r.flushWriters()
	r.gate.Lock()
	r.exclusive.Store(true)
	err := fn()
	if recapture {
		r.recapturePassthroughWriters()
	}
	r.exclusive.Store(false)
	r.gate.Unlock()
	r.pendingMu.Lock()
	pending := r.pending
	r.pending, r.pendingDirs = nil, nil
	r.pendingMu.Unlock()
	for _, p := range pending {
		p()
	}
	return err
}

type boundaryKey struct{}

// boundaryCtx marks the captures a turn boundary makes on its own
// (recapturePassthroughWriters): no program is credited with them.
var boundaryCtx = context.WithValue(context.Background(), boundaryKey{}, true)
