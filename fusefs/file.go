package fusefs

import (
	"context"
	"sync"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// file is an open handle served by the daemon: every write is captured
// first.
type file struct {
	n        *Node
	mu       sync.Mutex
	fd       int
	writable bool
	kind     int // which Node counter this handle is in
}

const (
	kindReader   = iota // read-only, served by the daemon (n.readers)
	kindWriter          // writable, served by the daemon (n.writers)
	kindPTReader        // read-only through passthrough (n.ptReaders)
	kindPTWriter        // writable through passthrough (n.ptWriters)
)

// ptFile is a handle the kernel serves through FUSE passthrough, with the
// node's backing ID (Node.ptID). It does not implement go-fuse's
// FilePassthroughFder: the daemon registers backing files itself (see
// rawFS.Open).
type ptFile struct{ *file }

// newHandle wraps an open fd; the passthrough decision is made here, under
// the node's lock, so the counters match what the kernel is told. wantPT
// says passthrough is safe for this open: always for a read-only one; for
// a writable one when the file's prior state in this turn is recorded
// already (Node.priorRecorded), so its writes need not pass through the
// daemon. The kernel forbids mixing passthrough and daemon-served opens of
// one inode: while one kind is open, a new open takes the same kind (a
// writer forced onto passthrough is captured by the caller at open).
//
// A writable open of an inode the store's attic has claimed fails with
// ENOENT (see attic.go); fd is closed then.
func (n *Node) newHandle(ctx context.Context, fd int, flags int, wantPT bool) (fs.FileHandle, syscall.Errno) {
	f := &file{n: n, fd: fd, writable: flags&unix.O_ACCMODE != unix.O_RDONLY}
	n.mu.Lock()
	defer n.mu.Unlock()
	if f.writable && n.claimedLocked() {
		unix.Close(fd)
		return nil, syscall.ENOENT
	}
	pt := n.ptReaders > 0 || n.ptWriters > 0 || (wantPT && n.readers == 0 && n.writers == 0)
	if pt && n.ptReaders+n.ptWriters == 0 {
		// The inode's first passthrough handle registers the backing
		// file every later one shares, until the last is released.
		srv := n.r.backing.Load()
		if srv == nil {
			pt = false
		} else if id, eno := srv.RegisterBackingFd(&fuse.BackingMap{Fd: int32(fd)}); eno != 0 {
			pt = false // served by the daemon instead
		} else {
			n.ptID = id
		}
	}
	if pt {
		notePassthrough(ctx, n.ptID)
	}
	switch {
	case !f.writable && pt:
		f.kind = kindPTReader
		n.ptReaders++
	case !f.writable:
		f.kind = kindReader
		n.readers++
	case pt:
		f.kind = kindPTWriter
		n.ptWriters++
		n.r.ptMu.Lock()
		n.r.ptWriters[n]++
		n.r.ptMu.Unlock()
	default:
		f.kind = kindWriter
		n.writers++
	}
	if f.kind == kindPTReader || f.kind == kindPTWriter {
		return &ptFile{f}, 0
	}
	return f, 0
}

func (f *file) fdOf() int { return f.fd }

func (f *file) release() {
	f.mu.Lock()
	fd := f.fd
	f.fd = -1
	f.mu.Unlock()
	if fd < 0 {
		return
	}
	n := f.n
	n.mu.Lock()
	switch f.kind {
	case kindReader:
		n.readers--
	case kindWriter:
		n.writers--
	case kindPTReader:
		n.ptReaders--
	case kindPTWriter:
		n.ptWriters--
		n.r.ptMu.Lock()
		if n.r.ptWriters[n]--; n.r.ptWriters[n] <= 0 {
			delete(n.r.ptWriters, n)
		}
		n.r.ptMu.Unlock()
	}
	if (f.kind == kindPTReader || f.kind == kindPTWriter) && n.ptReaders+n.ptWriters == 0 {
		// The kernel has closed every passthrough file of the inode
		// (RELEASE follows the close), so it holds the backing file
		// no more.
		if srv := n.r.backing.Load(); srv != nil {
			srv.UnregisterBackingFd(n.ptID)
		}
		n.ptID = 0
	}
	n.mu.Unlock()
	unix.Close(fd)
}

func (f *file) Release(ctx context.Context) syscall.Errno {
	f.release()
	return 0
}

func (f *file) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	n, err := unix.Pread(f.fd, dest, off)
	if err != nil {
		return nil, errno(err)
	}
	return fuse.ReadResultData(dest[:n]), 0
}

// Write captures the file's prior content (once per turn), then writes.
// Writes through a shared mmap arrive here too (see rawFS.Write for their
// attributes).
func (f *file) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	r := f.n.r
	r.gate.RLock()
	defer r.gate.RUnlock()
	if eno := f.n.captureContentLocked(ctx); eno != 0 {
		return 0, eno
	}
	n, err := unix.Pwrite(f.fd, data, off)
	if err != nil {
		return 0, errno(err)
	}
	if killRequested(ctx) {
		killSuidgid(f.fd) // the content capture above covered the mode too
	}
	return uint32(n), 0
}

func (f *file) Flush(ctx context.Context) syscall.Errno {
	// Flush may come once per dup'd fd: close a dup, not the file.
	nfd, err := unix.Dup(f.fd)
	if err != nil {
		return errno(err)
	}
	return errno(unix.Close(nfd))
}

func (f *file) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	if flags&1 != 0 { // FUSE_FSYNC_FDATASYNC
		return errno(unix.Fdatasync(f.fd))
	}
	return errno(unix.Fsync(f.fd))
}

func (f *file) Lseek(ctx context.Context, off uint64, whence uint32) (uint64, syscall.Errno) {
	n, err := unix.Seek(f.fd, int64(off), int(whence))
	return uint64(n), errno(err)
}

func (f *file) Allocate(ctx context.Context, off uint64, size uint64, mode uint32) syscall.Errno {
	r := f.n.r
	r.gate.RLock()
	defer r.gate.RUnlock()
	if eno := f.n.captureContentLocked(ctx); eno != 0 {
		return eno
	}
	return errno(retry(func() error { return unix.Fallocate(f.fd, mode, int64(off), int64(size)) }))
}

func (f *file) Getattr(ctx context.Context, out *fuse.AttrOut) syscall.Errno {
	st, err := fstatFd(f.fd)
	if err != nil {
		return errno(err)
	}
	out.FromStat(&st.Stat_t)
	return 0
}

// Open file description locks, as the stock loopback does.
const (
	ofdGetlk  = 36
	ofdSetlk  = 37
	ofdSetlkw = 38
)

func (f *file) Getlk(ctx context.Context, owner uint64, lk *fuse.FileLock, flags uint32, out *fuse.FileLock) syscall.Errno {
	flk := syscall.Flock_t{}
	lk.ToFlockT(&flk)
	eno := errno(syscall.FcntlFlock(uintptr(f.fd), ofdGetlk, &flk))
	out.FromFlockT(&flk)
	return eno
}

func (f *file) Setlk(ctx context.Context, owner uint64, lk *fuse.FileLock, flags uint32) syscall.Errno {
	return f.setLock(lk, flags, false)
}

func (f *file) Setlkw(ctx context.Context, owner uint64, lk *fuse.FileLock, flags uint32) syscall.Errno {
	return f.setLock(lk, flags, true)
}

func (f *file) setLock(lk *fuse.FileLock, flags uint32, blocking bool) syscall.Errno {
	if flags&fuse.FUSE_LK_FLOCK != 0 {
		var op int
		switch lk.Typ {
		case syscall.F_RDLCK:
			op = syscall.LOCK_SH
		case syscall.F_WRLCK:
			op = syscall.LOCK_EX
		case syscall.F_UNLCK:
			op = syscall.LOCK_UN
		default:
			return syscall.EINVAL
		}
		if !blocking {
			op |= syscall.LOCK_NB
		}
		return errno(syscall.Flock(f.fd, op))
	}
	flk := syscall.Flock_t{}
	lk.ToFlockT(&flk)
	op := ofdSetlk
	if blocking {
		op = ofdSetlkw
	}
	return errno(syscall.FcntlFlock(uintptr(f.fd), op, &flk))
}
