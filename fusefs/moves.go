package fusefs

import (
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
)

// moves.go keeps the paths captures record in step with renames.
//
// A capture names what it records by a path computed from go-fuse's tree
// of inodes, and the store reads each record's path in the namespace of
// its place in the log. A rename is recorded before its syscall, so a
// capture made by another request in between (a write into a file of the
// directory being renamed: the kernel locks only the parent directories)
// would be recorded after the rename under the name it had before, and
// history would give its prior state to whatever the old name stands for
// after the rename. go-fuse moves its own children only after Rename has
// returned, so even a capture that starts after the rename can compute
// the old path.
//
// So Root.ns orders them: a capture holds its read lock from computing
// its path until its record is committed (Root.settled), a rename holds
// its write lock from computing its paths until its record is confirmed;
// and a rename that succeeded is listed as a pendingMove until go-fuse's
// tree shows it, which a capture waits for before computing a path.

// pendingMove is a rename or exchange made in the backing tree that
// go-fuse may not have applied to its tree yet.
type pendingMove struct {
	from, to         *fs.Inode // the parent directories
	fromName, toName string
	a, b             *fs.Inode // their children under fromName and toName before
	exchange         bool
	until            time.Time // after this, give up waiting (never seen)
}

// applied reports whether go-fuse's tree shows the move: each child it
// knew under the names is under the other name now. (A child it did not
// know has no descendants it knows either, whose paths could be stale.)
func (m *pendingMove) applied() bool {
	if m.a != nil && m.to.GetChild(m.toName) != m.a {
		return false
	}
	return !m.exchange || m.b == nil || m.from.GetChild(m.fromName) == m.b
}

// addMove lists a rename that just succeeded (the caller holds ns's write
// lock).
func (r *Root) addMove(m *pendingMove) {
	m.until = time.Now().Add(200 * time.Millisecond)
	r.movesMu.Lock()
	r.moves = append(r.moves, m)
	r.nMoves.Store(int32(len(r.moves)))
	r.movesMu.Unlock()
}

// settleMoves waits until go-fuse's tree shows every rename listed. The
// caller holds ns (either lock), so no new one is added meanwhile.
func (r *Root) settleMoves() {
	for r.nMoves.Load() > 0 {
		r.movesMu.Lock()
		now := time.Now()
		kept := r.moves[:0]
		for _, m := range r.moves {
			if !m.applied() && now.Before(m.until) {
				kept = append(kept, m)
			}
		}
		clear(r.moves[len(kept):])
		r.moves = kept
		r.nMoves.Store(int32(len(kept)))
		r.movesMu.Unlock()
		if len(kept) > 0 {
			time.Sleep(20 * time.Microsecond)
		}
	}
}

// settled runs fn, which computes paths and records captures under them,
// with no rename between its paths and its records (see above).
func (r *Root) settled(fn func()) {
	r.ns.RLock()
	defer r.ns.RUnlock()
	r.settleMoves()
	fn()
}
