package versionstore

import (
	"errors"
	"log"
	"os"
	"strconv"

	"golang.org/x/sys/unix"

	"ckptfs/internal/crashpoint"
)

// clone.go: prior bytes kept by a reflink (FICLONE) into the attic.
//
// Where the attic's filesystem shares extents between files (XFS made
// with reflink=1, btrfs), the prior bytes of a file that stays in the
// tree (the first write or truncate of a turn) are cloned into a new
// attic file instead of copied into chunks: the clone costs about the
// same for 1 MiB as for 1 GiB, and no space until the live file
// diverges (its writer's copy-on-write then pays for the blocks it
// changes). The clone is an attic file like a linked one: never written
// again, named by a contentRef with its size, inode number and mtime, so
// every reader (openContent: rewind, cat, diff, verify), GC and du treat
// it exactly as they treat the others. du and the budget count its blocks
// in full (st_blocks does not tell shared blocks), so a clone is charged
// what it would cost once the file diverges.
//
// Whether the store can clone is learnt once, by the first attempt: an
// error that says the filesystem cannot (EOPNOTSUPP: ext4, tmpfs, XFS
// without reflink; ENOTTY) as the first answer turns cloning off for the
// store's life, EXDEV (the file is on another filesystem than the store)
// for the files of that device; any other error (EINVAL: a btrfs NOCOW
// file, say) falls back to the copy for that capture only. A failed clone
// never fails the capture: keepBytes then copies as it always did.

// cloneMin is the smallest file cloned rather than copied. At 1 MiB the
// copy into chunks and the clone with its create and two fsyncs cost
// about the same (1-10 ms on XFS here: doc/BENCH.md, big-file capture);
// below it the copy wins, its chunks are shared with identical content
// of other versions, and the attic does not fill with small files.
const cloneMin = 1 << 20

// Whether the attic's filesystem clones: learnt by the first attempt.
const (
	cloneUnknown = iota
	cloneYes
	cloneNo
)

// CapturesByClone reports whether a capture of the regular file open at
// fd (a real open), of size bytes on device dev, would be a clone: the
// store has cloned before (it learns whether its filesystem can by the
// first attempt), the file is large enough (cloneMin), on the attic's
// device, no clone from dev has failed, and the file may be cloned into
// the attic (refusesClones).
func (s *Store) CapturesByClone(fd int, dev uint64, size int64) bool {
	return s.capturesByClone(dev, size) && !s.refusesClonesFd(fd)
}

// capturesByClone is CapturesByClone without the file's own flags.
func (s *Store) capturesByClone(dev uint64, size int64) bool {
	if s.attic == nil || size < cloneMin {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cloneState == cloneYes && dev == s.atticDev && !s.cloneXDev[dev]
}

// atticOn reports whether the store's attic is on device dev.
func (s *Store) atticOn(dev uint64) bool {
	var st unix.Stat_t
	return s.attic != nil && unix.Fstat(int(s.attic.Fd()), &st) == nil && st.Dev == dev
}

// cloneInto tries to keep the bytes of src (the prior bytes of a regular
// file of size about size, opened read-only) as a clone in the attic. It
// returns nil when it did not clone; the caller then copies. A returned
// ref names an attic file whose data and name are durable (fsynced), so
// the event naming it may be committed (doc.go, rule 3).
func (s *Store) cloneInto(src *os.File, size int64) *contentRef {
	if s.attic == nil || size < cloneMin {
		return nil
	}
	var sst unix.Stat_t
	if unix.Fstat(int(src.Fd()), &sst) != nil {
		return nil
	}
	s.mu.Lock()
	if s.cloneState == cloneNo || s.cloneXDev[sst.Dev] {
		s.mu.Unlock()
		return nil
	}
	s.mu.Unlock()
	name := s.atticName()
	fd, err := unix.Openat(int(s.attic.Fd()), name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil
	}
	ref, err := func() (*contentRef, error) {
		defer unix.Close(fd)
		return s.cloneFile(fd, src, name)
	}()
	if err != nil {
		// Unreferenced either way; a file left by a failed unlink is
		// garbage the next GC removes.
		unix.Unlinkat(int(s.attic.Fd()), name, 0)
		return nil
	}
	return ref
}

// cloneFile clones src into the new attic file fd (named name), makes it
// durable and returns its ref. It learns from the clone's outcome whether
// the store clones (see above).
func (s *Store) cloneFile(fd int, src *os.File, name string) (*contentRef, error) {
	err := unix.IoctlFileClone(fd, int(src.Fd()))
	if testHookClone != nil {
		err = testHookClone(err)
	}
	s.learnClone(src, err)
	if err != nil {
		return nil, err
	}
	// Durable before the event names it, as an ingested table is: the
	// event survives a power loss once its turn ends (doc.go, rule 4), so
	// its bytes must too. On XFS the fsync forces the log that holds the
	// shared extents; the directory's fsync, the new name.
	if err := unix.Fsync(fd); err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, err
	}
	if err := unix.Fsync(int(s.attic.Fd())); err != nil {
		return nil, err
	}
	crashpoint.Hit("record.cloned")
	return &contentRef{Size: st.Size, Attic: name, Ino: st.Ino, MTime: st.Mtim.Nano()}, nil
}

// probeClone learns whether the attic's filesystem (XFS: learnAttic)
// clones by cloning a block between two unnamed files in the attic
// (O_TMPFILE: nothing is left behind), so that the first writable open
// of a big file after the store opens may already capture it by a clone
// and go through passthrough (CapturesByClone), not only the opens after
// the first clone. Where the probe cannot tell, the first capture still
// does. It logs nothing: offline commands open the store too.
func (s *Store) probeClone() {
	dir := int(s.attic.Fd())
	src, err := unix.Openat(dir, ".", unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return
	}
	defer unix.Close(src)
	dst, err := unix.Openat(dir, ".", unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return
	}
	defer unix.Close(dst)
	if _, err := unix.Pwrite(src, make([]byte, 4096), 0); err != nil {
		return
	}
	err = unix.IoctlFileClone(dst, src)
	if testHookClone != nil {
		err = testHookClone(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if st := cloneAnswer(err); s.cloneState == cloneUnknown {
		s.cloneState = st
	}
}

// cloneAnswer is what a clone's outcome says of the filesystem as a first
// answer: it clones (no error), it cannot (EOPNOTSUPP: ext4, tmpfs, XFS
// without reflink; ENOTTY, ENOSYS), or nothing (any other error is the
// file's or the moment's).
func cloneAnswer(err error) int {
	switch {
	case err == nil:
		return cloneYes
	case errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.ENOTTY), errors.Is(err, unix.ENOSYS):
		return cloneNo
	}
	return cloneUnknown
}

// testHookClone, in tests, replaces the clone's outcome.
var testHookClone func(error) error

// learnClone remembers what a clone's outcome (err) says about the store's
// filesystem, and logs the first answer.
func (s *Store) learnClone(src *os.File, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch answer := cloneAnswer(err); {
	case answer == cloneYes:
		if s.cloneState == cloneUnknown {
			log.Printf("versionstore: the store's filesystem clones: prior bytes of files of %d MiB and more are reflinked", cloneMin>>20)
		}
		s.cloneState = cloneYes
	case errors.Is(err, unix.EXDEV):
		var st unix.Stat_t
		if unix.Fstat(int(src.Fd()), &st) == nil && !s.cloneXDev[st.Dev] {
			if s.cloneXDev == nil {
				s.cloneXDev = map[uint64]bool{}
			}
			s.cloneXDev[st.Dev] = true
			log.Printf("versionstore: the store is not on the filesystem of device %d:%d: its files' prior bytes are copied", unix.Major(st.Dev), unix.Minor(st.Dev))
		}
	case answer == cloneNo:
		// Only as the first answer: after a clone succeeded, such an
		// error is the file's (the capture copies), not the store's.
		if s.cloneState == cloneUnknown {
			log.Printf("versionstore: the store's filesystem does not clone (%v): prior bytes are copied", err)
			s.cloneState = cloneNo
		}
	}
}

// atticName returns a new, unused attic name.
func (s *Store) atticName() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	name := strconv.FormatUint(s.atticSeq, 16)
	s.atticSeq++
	return name
}
