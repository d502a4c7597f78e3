package versionstore

import (
	"errors"
	"fmt"
	"log"
	"os"
	"syscall"
	"time"

	"ckptfs/internal/ckpt"

	"golang.org/x/sys/unix"
)

// space.go keeps the store from running its disk completely full, and
// remembers what went wrong last (Health).
//
// Why: Pebble treats a failed WAL or MANIFEST write as fatal (v2.1.7
// db.go: "pebble: fatal commit error", version_set.go: "MANIFEST ... failed"
// are Logger.Fatalf, which exits the process). An ENOSPC that reaches Pebble
// would kill the daemon and leave the mount dead. So, on a real filesystem:
//
//   - Record refuses a capture with ckpt.ErrStoreFull (the caller's operation
//     fails with ENOSPC, the backing tree is untouched) when the free space
//     under the store would drop below headroom after storing the capture's
//     bytes (storedSize: twice, in the WAL and the table a flush writes,
//     or once for content ingested as a table).
//   - A ballast file (<store>/ballast) holds back room for Pebble's own
//     background work (a memtable flush, a compaction, the MANIFEST). When
//     any write of Pebble's still meets ENOSPC, vfs.OnDiskFull deletes the
//     ballast and the write is retried once.
//   - A record that stores no bytes (a rename, an unlink linked into the
//     attic, a mode change) is a few hundred bytes of log: it never needs
//     room for a file's data, and the ballast pays for it. With less than
//     headroom free, the ballast gives back a ballastSlice of its room
//     (roomForRecord), so rm, mv and chmod keep working on a full disk;
//     such a record is refused only when the disk and the ballast together
//     have less than recordRoom left.
//   - The store is "full" from a refused capture, or from a ballast that
//     gave back room, until the free space holds a capture's need plus
//     what the ballast misses (spaceBack): the ballast is then made whole
//     again and captures with bytes are accepted again. While the ballast
//     is short, they are refused: Pebble would have no room held back.
//     Health looks too, with the need of the capture refused last (at
//     least the headroom), so that status neither reports a full store
//     after space came back nor a store with room while that capture
//     would still be refused.
//
// Turn boundaries (Begin, End) are always allowed: they are tiny, and
// refusing them would leave the user unable to close a turn.
const (
	// headroom is kept free beyond a capture's own bytes.
	headroom = 4 << 20
	// ballastSlice is what the ballast gives back at a time to pay for
	// records without bytes on a full disk.
	ballastSlice = headroom
	// recordRoom is the least free space a record without bytes is
	// admitted with (once the ballast paid what it could): room for
	// thousands of them.
	recordRoom = 1 << 20
	// maxBallast bounds the ballast: twice the memtable size, so that one
	// memtable flush always fits once the ballast is gone.
	maxBallast = 64 << 20
	// spaceCheckEvery: a Record storing no bytes re-reads the free space at
	// most this often (fstatfs is cheap, but not free on every syscall).
	spaceCheckEvery = 50 * time.Millisecond
)

// Health reports the store's state for `ckptfs status`.
func (s *Store) Health() ckpt.Health {
	avail := int64(-1)
	if s.dirf != nil {
		if a, total, err := s.statfs(); err == nil {
			avail = a
			s.mu.Lock()
			full := s.full
			s.mu.Unlock()
			if full {
				if _, ok := s.spaceBack(avail, total, max(s.fullNeed.Load(), headroom)); ok {
					if a, _, err := s.statfs(); err == nil {
						avail = a // less the ballast made whole
					}
				}
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	h := ckpt.Health{Full: s.full, Avail: avail, LastErrorAt: s.lastErrAt}
	if s.lastErr != nil {
		h.LastError = s.lastErr.Error()
	}
	return h
}

// noteErr remembers err as the last error (s.mu not held) and returns it.
func (s *Store) noteErr(err error) error {
	if err == nil || errors.Is(err, ErrBadPath) {
		return err
	}
	s.mu.Lock()
	s.lastErr, s.lastErrAt = err, time.Now().UTC()
	if errors.Is(err, ckpt.ErrStoreFull) {
		s.full = true
	}
	s.mu.Unlock()
	return err
}

// diskOf, when set (tests), stands in for the store's filesystem: the
// bytes available and its size, as statfs returns them.
var diskOf func(s *Store) (avail, total int64)

// statfs returns the bytes available to us and the filesystem's size.
func (s *Store) statfs() (avail, total int64, err error) {
	if diskOf != nil {
		avail, total = diskOf(s)
		return avail, total, nil
	}
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(s.dirf.Fd()), &st); err != nil {
		return 0, 0, err
	}
	return int64(st.Bavail) * int64(st.Bsize), int64(st.Blocks) * int64(st.Bsize), nil
}

// storeSpace returns the bytes free under the store and its filesystem's
// device number; known is false on a store with no directory (in memory)
// or when they cannot be read.
func (s *Store) storeSpace() (free int64, dev uint64, known bool) {
	if s.dirf == nil {
		return 0, 0, false
	}
	free, _, err := s.statfs()
	if err != nil {
		return 0, 0, false
	}
	var x unix.Stat_t
	if unix.Fstat(int(s.dirf.Fd()), &x) != nil {
		return 0, 0, false
	}
	return free, x.Dev, true
}

// growthStep is how much content the store keeps (copied, cloned or
// linked into the attic) between two signals on Grown.
const growthStep = 32 << 20

// Grown signals, at most one signal pending, each time the store has
// kept another growthStep of content since the last, and at the end of
// a turn that kept any: the daemon's background gc then looks at once
// whether the store passed its budget. (A look during a turn cannot
// forget the open turn; what the budget needs forgotten may be there
// only once it is closed.)
func (s *Store) Grown() <-chan struct{} { return s.growth }

// noteGrowth counts n bytes of content kept.
func (s *Store) noteGrowth(n int64) {
	if n > 0 {
		s.keptInTurn.Store(true)
	}
	if s.grown.Add(n) >= growthStep {
		s.grown.Store(0)
		s.signalGrowth()
	}
}

// signalGrowth signals Grown, unless a signal is pending.
func (s *Store) signalGrowth() {
	select {
	case s.growth <- struct{}{}:
	default:
	}
}

// storedSize is the most a copy of size bytes of content takes in the
// store before compaction: twice (the WAL and the flushed table) below
// ingestMin, once above (written straight as a table).
func storedSize(size int64) int64 {
	if size >= ingestMin {
		return size
	}
	return 2 * size
}

// ballastSize is the ballast for a filesystem of total bytes: an eighth of
// it, at most maxBallast.
func ballastSize(total int64) int64 { return min(total/8, maxBallast) }

func (s *Store) ballastPath() string {
	return fmt.Sprintf("/proc/self/fd/%d/ballast", s.dirf.Fd())
}

// ballastHas returns the ballast's size (0: none).
func (s *Store) ballastHas() int64 {
	fi, err := os.Stat(s.ballastPath())
	if err != nil {
		return 0
	}
	return fi.Size()
}

// makeBallast makes the ballast size bytes if it is missing or shorter
// (best effort: a filesystem without fallocate gets none). When it fails,
// the ballast keeps what it had. s.mu need not be held.
func (s *Store) makeBallast(size int64) error {
	s.ballastMu.Lock()
	defer s.ballastMu.Unlock()
	p := s.ballastPath()
	had := int64(-1)
	if fi, err := os.Stat(p); err == nil {
		if fi.Size() >= size {
			return nil
		}
		had = fi.Size()
	}
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	err = unix.Fallocate(int(f.Fd()), 0, 0, size)
	if err != nil && had >= 0 {
		f.Truncate(had) // what a partial fallocate added goes again
	}
	f.Close()
	if err != nil && had < 0 {
		os.Remove(p)
	}
	return err
}

// shrinkBallast gives back n bytes of the ballast's room to the disk
// (all it has if less). It reports whether it gave back any.
func (s *Store) shrinkBallast(n int64) bool {
	s.ballastMu.Lock()
	defer s.ballastMu.Unlock()
	p := s.ballastPath()
	fi, err := os.Stat(p)
	if err != nil || fi.Size() == 0 {
		return false
	}
	if fi.Size() <= n {
		return os.Remove(p) == nil
	}
	return os.Truncate(p, fi.Size()-n) == nil
}

// onDiskFull runs when a write of Pebble's meets ENOSPC (vfs.OnDiskFull):
// it gives Pebble the ballast's room at once and stops accepting
// captures. It runs inside that write, which may be a commit made while
// s.mu is held (append, End): so the note that the store is full is
// taken on another goroutine, once s.mu is free, never here.
func (s *Store) onDiskFull() {
	if s.dirf != nil {
		os.Remove(s.ballastPath())
	}
	at := time.Now().UTC()
	go func() {
		s.mu.Lock()
		s.full = true
		s.lastErr, s.lastErrAt = fmt.Errorf("%w: the disk under the store ran out of space", ckpt.ErrStoreFull), at
		s.mu.Unlock()
	}()
}

// checkSpace returns ckpt.ErrStoreFull when storing size more bytes would leave
// the store's disk too full. A record of no bytes (size 0) is paid by the
// ballast if need be (roomForRecord). When space has come back after the
// store was full, it makes the ballast whole again and accepts captures
// again (spaceBack).
func (s *Store) checkSpace(size int64) error {
	if s.dirf == nil {
		return nil
	}
	// Within spaceCheckEvery of the last look, a capture that fits in
	// what that look found free, less what was admitted since, needs no
	// new look: range captures of a few blocks come by the thousand.
	s.mu.Lock()
	full := s.full
	recent := !full && time.Since(s.spaceAt) < spaceCheckEvery &&
		s.spaceLeft-storedSize(size) >= headroom
	if recent {
		s.spaceLeft -= storedSize(size)
	}
	s.mu.Unlock()
	if recent {
		return nil
	}
	avail, total, err := s.statfs()
	if err != nil {
		return nil // cannot tell: let the write try
	}
	need := storedSize(size) + headroom
	if full {
		// A record without bytes fits in so little that it says nothing
		// of space being back: the capture refused last tells.
		backNeed := need
		if size == 0 {
			backNeed = max(s.fullNeed.Load(), headroom)
		}
		missing, ok := s.spaceBack(avail, total, backNeed)
		if ok {
			full = false
			if avail, _, err = s.statfs(); err != nil {
				return nil
			}
		} else if size > 0 {
			s.fullNeed.Store(need)
			return fmt.Errorf("%w: %d bytes free under %s, %d needed and %d to refill its ballast",
				ckpt.ErrStoreFull, avail, s.dir, need, missing)
		}
	}
	if size == 0 {
		return s.roomForRecord()
	}
	if avail < need {
		s.fullNeed.Store(need)
		return fmt.Errorf("%w: %d bytes free under %s, %d needed", ckpt.ErrStoreFull, avail, s.dir, need)
	}
	s.mu.Lock()
	s.spaceAt, s.spaceLeft = time.Now(), avail-need+headroom
	s.mu.Unlock()
	return nil
}

// roomForRecord admits a record that stores no bytes (a rename, an
// unlink linked into the attic, a mode change, a directory, a symlink):
// with less than headroom free to the store's own writes (writableFree)
// the ballast gives back a ballastSlice to pay for it, and the store is
// full until space is back (spaceBack). It refuses (ckpt.ErrStoreFull)
// only when less than recordRoom is free even so.
func (s *Store) roomForRecord() error {
	free, err := s.writableFree()
	if err != nil {
		return nil // cannot tell: let the write try
	}
	if free < headroom && s.shrinkBallast(ballastSlice) {
		s.mu.Lock()
		s.full = true
		s.mu.Unlock()
		if free, err = s.writableFree(); err != nil {
			return nil
		}
	}
	if free < recordRoom {
		return fmt.Errorf("%w: %d bytes free under %s, and its ballast is spent", ckpt.ErrStoreFull, free, s.dir)
	}
	return nil
}

// writableFree returns the bytes the store's own writes may still take:
// run as root, the blocks a filesystem reserves for root count (ext4's 5 %
// by default, which a program of root's that filled the disk has taken
// too: without them a slice of ballast given back would not raise the
// space available to others above 0).
func (s *Store) writableFree() (int64, error) {
	if diskOf != nil || os.Geteuid() != 0 {
		avail, _, err := s.statfs()
		return avail, err
	}
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(s.dirf.Fd()), &st); err != nil {
		return 0, err
	}
	return int64(st.Bfree) * int64(st.Bsize), nil
}

// spaceBack ends the store's full state when avail bytes free hold need
// and what the ballast of a filesystem of total bytes misses: it makes
// the ballast whole again and reports true. Otherwise the store stays
// full (false). missing is what the ballast missed.
func (s *Store) spaceBack(avail, total, need int64) (missing int64, ok bool) {
	bsize := ballastSize(total)
	missing = s.ballastMissing(total)
	if avail < need+missing {
		return missing, false
	}
	if err := s.makeBallast(bsize); err != nil && isENOSPC(err) {
		return missing, false
	}
	s.mu.Lock()
	s.full = false
	s.mu.Unlock()
	s.fullNeed.Store(0)
	return missing, true
}

// ballastMissing is what the ballast of a filesystem of total bytes
// misses.
func (s *Store) ballastMissing(total int64) int64 { return max(0, ballastSize(total)-s.ballastHas()) }

// roomWith reports whether the capture refused last for want of space
// (it needed fullNeed) would fit with extra more bytes free (true when
// that cannot be told).
func (s *Store) roomWith(extra int64) bool {
	need := s.fullNeed.Load()
	if need == 0 || s.dirf == nil {
		return true
	}
	avail, total, err := s.statfs()
	if err != nil {
		return true
	}
	s.mu.Lock()
	full := s.full
	s.mu.Unlock()
	if full {
		need += s.ballastMissing(total)
	}
	return avail+extra >= need
}

// isENOSPC reports whether err is a full disk.
func isENOSPC(err error) bool { return errors.Is(err, syscall.ENOSPC) }

// reclaimEvery is how often a refused capture may run a gc (reclaim): one
// that freed nothing is not run again for every write that follows.
var reclaimEvery = 30 * time.Second

// mayReclaim reports whether a refused capture may run a gc (reclaim)
// now: none ran less than reclaimEvery ago.
func (s *Store) mayReclaim() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.reclaimAt.IsZero() && time.Since(s.reclaimAt) < reclaimEvery {
		return false
	}
	s.reclaimAt = time.Now()
	return true
}

// reclaim runs the retention policy's gc at once, in the caller's
// request, because a capture was refused for want of space: it forgets
// the turns the policy lets go and deletes the content no kept turn
// needs, before the write is refused. With undoToo, the undo of the
// newest turn, which the policy keeps over its budget, goes too: the
// caller asks for it when the write still does not fit without (the
// user's write comes before the undo of the last one). It reports
// whether it freed anything. It does nothing (false) while a rewind, a
// forget or another gc runs (the background gc is reclaiming already).
// The caller holds none of the store's locks and asked mayReclaim.
func (s *Store) reclaim(undoToo bool) bool {
	rep, err := s.GC(GCOptions{diskFull: undoToo})
	if err != nil {
		log.Printf("versionstore: the store is full, and a gc to make room failed: %v", err)
		return false
	}
	return rep.Freed() > 0
}
