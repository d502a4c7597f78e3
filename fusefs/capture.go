package fusefs

import (
	"context"
	"errors"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"ckptfs/internal/backing"
	"ckptfs/internal/ckpt"
)

// capture.go is the one hook every mutation calls before it touches the
// backing tree. The caller holds the gate's read lock (Root.gate) from the
// capture through its syscall, so a turn boundary cannot fall between them.

// stateOf converts a stat result to the versioned state; fd is an O_PATH
// fd of the object (for a symlink's target), or -1.
func stateOf(st *backing.Stat, fd int) ckpt.State {
	s := backing.StateOf(st)
	if s.Type == ckpt.Symlink && fd >= 0 {
		s.Target, _ = backing.Readlinkat(fd, "")
	}
	return s
}

// commName is a pid's program name and when it was read.
type commName struct {
	comm string
	read time.Time
}

// commFresh is how long a pid's program name is taken as read: a process
// that execs another program, or a pid reused, is named anew by its first
// change this long after the last read.
const commFresh = 10 * time.Millisecond

// caller names the program that sent the request.
func (r *Root) caller(ctx context.Context) ckpt.Program {
	if ctx == boundaryCtx {
		return ckpt.Program{}
	}
	c, ok := fuse.FromContext(ctx)
	if !ok {
		return ckpt.Program{Comm: "ckptfs"}
	}
	pid := c.Pid
	now := time.Now()
	r.commMu.Lock()
	n, ok := r.comms[pid]
	r.commMu.Unlock()
	if !ok || now.Sub(n.read) > commFresh {
		n = commName{read: now}
		b, err := os.ReadFile("/proc/" + strconv.FormatUint(uint64(pid), 10) + "/comm")
		if err == nil {
			n.comm = strings.TrimSpace(string(b))
		}
		r.commMu.Lock()
		if len(r.comms) >= 512 {
			r.comms = map[uint32]commName{} // bounded
		}
		r.comms[pid] = n
		r.commMu.Unlock()
	}
	return ckpt.Program{PID: pid, Comm: n.comm}
}

// recordErrno maps a Record failure to the errno the caller sees: the
// change did not land because its prior state could not be recorded.
func (r *Root) recordErrno(p string, err error) syscall.Errno {
	r.logf("ckptfs: cannot record prior state of %q: %v", p, err)
	if errors.Is(err, ckpt.ErrStoreFull) {
		return syscall.ENOSPC
	}
	return syscall.EIO
}

// record records c unless it is excluded or already captured.
func (r *Root) record(ctx context.Context, c ckpt.Capture, isDir bool) syscall.Errno {
	if r.excluded(c.Path, isDir) {
		return 0
	}
	if !r.rec.NeedsCapture(c.Path, c.MetaOnly) {
		return 0
	}
	if err := r.rec.Record(c, r.caller(ctx)); err != nil {
		return r.recordErrno(c.Path, err)
	}
	return 0
}

// captureName captures whatever is at name inside the directory dirfd
// (Absent if nothing), as the prior state of p. With a claim, the name is
// about to go away: the regular file with a single link that the claim
// keeps writers off (attic.go) is offered to the store as a hard link
// instead of a copy.
func (r *Root) captureName(ctx context.Context, dirfd int, name, p string, claim *atticClaim) syscall.Errno {
	st, err := backing.Lstatat(dirfd, name)
	if errors.Is(err, unix.ENOENT) {
		return r.record(ctx, ckpt.Capture{Path: p, Prior: ckpt.State{Type: ckpt.Absent}}, false)
	}
	if err != nil {
		return errno(err)
	}
	isDir := st.Mode&unix.S_IFMT == unix.S_IFDIR
	if r.excluded(p, isDir) || !r.rec.NeedsCapture(p, false) {
		return 0
	}
	fd, err := backing.OpenPath(dirfd, name)
	if err != nil {
		return errno(err)
	}
	defer unix.Close(fd)
	if st2, err := backing.Fstat(fd); err == nil {
		st = st2
	}
	c := r.captureFor(p, fd, &st, false)
	if linkable(st.Mode) && st.Nlink > 1 {
		c.Links = r.otherNames(r.namesOf(&st), p)
	}
	if claim != nil && c.Prior.Type == ckpt.Regular && st.Nlink == 1 && idOf(&st) == claim.id {
		c.Link = func(dir *os.File, newName string) error {
			err := backing.Retry(func() error {
				return unix.Linkat(dirfd, name, int(dir.Fd()), newName, 0)
			})
			if err == nil {
				claim.linked = true
			}
			return err
		}
	}
	if err := r.rec.Record(c, r.caller(ctx)); err != nil {
		return r.recordErrno(p, err)
	}
	return 0
}

// captureFor builds the capture of the object behind the O_PATH fd: of
// anything but a directory with its inode. The Open function reopens the
// same inode read-only; fd must stay open until Record returns.
func (r *Root) captureFor(p string, fd int, st *backing.Stat, metaOnly bool) ckpt.Capture {
	c := ckpt.Capture{Path: p, Prior: stateOf(st, fd)}
	if linkable(st.Mode) {
		c.Inode = backing.InodeOf(st)
	}
	if c.Prior.Type == ckpt.Regular {
		if metaOnly {
			c.MetaOnly = true
		} else {
			c.Open = func() (*os.File, error) {
				nfd, err := backing.ReopenRead(fd)
				if err != nil {
					return nil, err
				}
				return os.NewFile(uintptr(nfd), p), nil
			}
		}
	}
	return c
}

// captureContentLocked captures the node's content before a change that
// may touch any of it (fallocate); the caller holds the gate.
func (n *Node) captureContentLocked(ctx context.Context) syscall.Errno {
	return n.captureSelf(ctx, false, nil)
}

// captureRangeLocked captures the node's content before a change of the
// bytes [off, end) only (a write; a truncate to off with end
// ckpt.ToTheEnd): the store may keep only their prior bytes. The caller
// holds the gate.
func (n *Node) captureRangeLocked(ctx context.Context, off, end int64) syscall.Errno {
	return n.captureSelf(ctx, false, &ckpt.ByteRange{Off: off, End: end})
}

// captureRangeThrough is captureRangeLocked for a write through handle f:
// a readable handle serves the capture's reads of the prior bytes, which
// then opens nothing.
func (n *Node) captureRangeThrough(ctx context.Context, f *file, off, end int64) (eno syscall.Errno) {
	rd := -1
	if f.readable && f.lazy == 0 {
		rd = f.fd
	}
	n.r.settled(func() { eno = n.captureSelfSettled(ctx, false, &ckpt.ByteRange{Off: off, End: end}, rd) })
	return eno
}

// captureSelf captures the node under every path it has (all names of a
// hard-linked file that the overlay has seen). A node in no directory
// (unlinked while open) is not in the tree and needs no capture, unless
// it is a hard-linked file whose other names are: a write through the
// name that went changes them.
func (n *Node) captureSelf(ctx context.Context, metaOnly bool, rng *ckpt.ByteRange) (eno syscall.Errno) {
	n.r.settled(func() { eno = n.captureSelfSettled(ctx, metaOnly, rng, -1) })
	return eno
}

// needs reports whether p still needs a capture for the change described.
func (r *Root) needs(p string, metaOnly bool, rng *ckpt.ByteRange) bool {
	if rng != nil {
		return r.rec.NeedsRange(p, rng.Off, rng.End)
	}
	return r.rec.NeedsCapture(p, metaOnly)
}

// captureSelfSettled is captureSelf once settled; rd, if not -1, is a
// readable fd of the node's inode (a handle's: Open and Create open it
// from the node's own fd or the node's from it) that stays open until it
// returns.
func (n *Node) captureSelfSettled(ctx context.Context, metaOnly bool, rng *ckpt.ByteRange, rd int) syscall.Errno {
	r := n.r
	mode := n.StableAttr().Mode & unix.S_IFMT
	isDir := mode == unix.S_IFDIR
	if mode != unix.S_IFREG {
		metaOnly = false // dirs and symlinks: their whole state is small
	}
	// Fast path: the one known path was captured already.
	if p, ok := n.path(); !ok {
		// Not in go-fuse's tree (the name the kernel knew it by was
		// removed); other names of a hard-linked file still hold it.
		if !r.links.has(n.StableAttr().Ino) {
			return 0
		}
	} else if r.excluded(p, isDir) || !r.needs(p, metaOnly, rng) {
		if !r.links.has(n.StableAttr().Ino) {
			return 0
		}
	}
	st, err := backing.Fstat(n.fd)
	if err != nil {
		return errno(err)
	}
	if st.Nlink == 0 {
		return 0 // no name holds it (a rewind removed it while open)
	}
	paths := n.paths(&st)
	for i, p := range paths {
		if r.excluded(p, isDir) || !r.needs(p, metaOnly, rng) {
			continue
		}
		// The other names come from namesOf, which checked them already.
		if i == 0 && !r.holds(p, &st) {
			// go-fuse's path of the node is not where its inode is
			// (the backing tree changed underneath): recording this
			// inode's state as that path's would put another file's
			// bytes into its history.
			r.logf("fusefs: %s no longer holds the inode being changed; not recorded under that name", p)
			continue
		}
		c := r.captureFor(p, n.fd, &st, metaOnly)
		c.Range = rng
		if rd >= 0 && rng != nil {
			c.ReadAt = preadFrom(rd)
		}
		if linkable(mode) && st.Nlink > 1 {
			c.Links = r.otherNames(paths, p)
		}
		if err := r.rec.Record(c, r.caller(ctx)); err != nil {
			return r.recordErrno(p, err)
		}
	}
	return 0
}

// holds reports whether the root-relative path p names the inode st
// describes now.
func (r *Root) holds(p string, st *backing.Stat) bool {
	if p == "" {
		return true // the root is where it was mounted
	}
	at, err := backing.Lstatat(r.root.fd, p)
	return err == nil && idOf(&at) == idOf(st)
}

// preadFrom reads fd at an offset as io.ReaderAt does: short only at the
// end of the file (io.EOF).
func preadFrom(fd int) func(p []byte, off int64) (int, error) {
	return func(p []byte, off int64) (int, error) {
		done := 0
		for done < len(p) {
			n, err := unix.Pread(fd, p[done:], off+int64(done))
			if err == unix.EINTR {
				continue
			}
			if err != nil {
				return done, err
			}
			if n == 0 {
				return done, io.EOF
			}
			done += n
		}
		return done, nil
	}
}
