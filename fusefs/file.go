package fusefs

import (
	"context"
	"sync"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"ckptfs/internal/backing"
)

// file.go owns the open-file handle: its kinds (served by the daemon or
// through passthrough, read-only or writable), the choice between them at
// open, and its release. Its operations are in file_io.go and file_locks.go.

// file is an open handle served by the daemon: every write is captured
// first.
type file struct {
	n        *Node
	mu       sync.Mutex
	fd       int // -1 until fdOf opens it (lazy), and once released
	lazy     int // the open flags fdOf reopens the file with; 0: fd is set
	released bool
	writable bool
	readable bool // O_RDWR without O_DIRECT: a capture may read through fd
	mappable bool // O_RDWR: a shared writable mmap may dirty pages through it (flush.go)
	kind     int  // which Node counter this handle is in
	// direct: the kernel was told FOPEN_DIRECT_IO, so the handle's reads
	// and writes bypass the page cache (Root.directWrites).
	direct bool
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
// ENOENT (see attic.go); fd is closed then. direct asks for a direct
// handle (file.direct). A read-write daemon-served handle is direct also
// while the node has one open: no shared mapping of the file can dirty a
// page read in the moment before a direct write reached the file and
// write it back over that write (the kernel refuses a shared mmap of a
// direct handle, ENODEV). A read-only one stays cached: its mappings
// cannot dirty pages.
func (n *Node) newHandle(ctx context.Context, fd int, flags int, wantPT, direct bool) (fs.FileHandle, syscall.Errno) {
	f := &file{n: n, fd: fd, writable: flags&unix.O_ACCMODE != unix.O_RDONLY, readable: flags&unix.O_ACCMODE == unix.O_RDWR && flags&unix.O_DIRECT == 0,
		mappable: flags&unix.O_ACCMODE == unix.O_RDWR}
	n.mu.Lock()
	defer n.mu.Unlock()
	if f.writable && n.claimedLocked() {
		unix.Close(fd)
		return nil, syscall.ENOENT
	}
	pt := n.ptReaders > 0 || n.ptWriters > 0 || (wantPT && n.readers == 0 && n.writers == 0)
	if pt && n.ptID == 0 {
		// The inode's first passthrough handle registers the backing
		// file every later one shares, until the last is released (or,
		// registered read-only, until the node is forgotten).
		srv := n.r.backing.Load()
		if srv == nil {
			pt = false
		} else if id, eno := srv.RegisterBackingFd(&fuse.BackingMap{Fd: int32(fd)}); eno != 0 {
			pt = false // served by the daemon instead
		} else {
			n.ptID, n.ptLinger = id, !f.writable
		}
	}
	if pt {
		notePassthrough(ctx, n.ptID)
	}
	if !pt {
		n.directShared = n.directShared || n.directs > 0
		if direct || n.directs > 0 && f.mappable {
			f.direct = true
			n.directs++
		}
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
		if f.mappable {
			n.r.ptMu.Lock()
			n.r.writers[n]++
			n.r.ptMu.Unlock()
		}
	}
	if f.kind == kindPTReader || f.kind == kindPTWriter {
		return &ptFile{f}, 0
	}
	return f, 0
}

// openLingering opens a read-only passthrough handle on the backing ID
// the node keeps registered (ptLinger), without opening the file: its fd
// is opened by the first operation that needs one (fdOf). ok is false when
// the node has none, or daemon-served handles are open.
func (n *Node) openLingering(ctx context.Context, flags int) (fs.FileHandle, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ptID == 0 || !n.ptLinger || n.readers+n.writers > 0 {
		return nil, false
	}
	n.ptReaders++
	notePassthrough(ctx, n.ptID)
	return &ptFile{&file{n: n, fd: -1, lazy: flags | unix.O_CLOEXEC, kind: kindPTReader}}, true
}

// fdOf is the handle's fd of the backing file, opened now if the handle
// was opened without one (-1 if that fails, or after release). A handle
// opened with its fd (lazy 0: every daemon-served one) keeps it for its
// life, and its reads and writes take no lock for it.
func (f *file) fdOf() int {
	if f.lazy == 0 {
		return f.fd
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fd < 0 && !f.released {
		if fd, err := backing.Reopen(f.n.fd, f.lazy); err == nil {
			f.fd = fd
		}
	}
	return f.fd
}

// openFd is the handle's fd if it has one open, -1 if not, without
// opening one.
func (f *file) openFd() int {
	if f.lazy == 0 {
		return f.fd
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fd
}

// statFd is an fd to fstat the file by: the handle's if it has one open,
// else the node's (the same inode).
func (f *file) statFd() int {
	if fd := f.openFd(); fd >= 0 {
		return fd
	}
	return f.n.fd
}

func (f *file) release() {
	f.mu.Lock()
	fd, done := f.fd, f.released
	f.fd, f.released = -1, true
	f.mu.Unlock()
	if done {
		return
	}
	n := f.n
	n.mu.Lock()
	// Other opens made while direct ones were (a reader, a mapping) may
	// have read a page in the moment before a direct write reached the
	// file: once the last direct handle is gone, the kernel drops the
	// file's pages, from a goroutine of its own (the kernel may have to
	// wait for requests to this daemon to drop them).
	drop := false
	if f.direct {
		if n.directs--; n.directs == 0 {
			drop, n.directShared = n.directShared, false
		}
	}
	switch f.kind {
	case kindReader:
		n.readers--
	case kindWriter:
		n.writers--
		if f.mappable {
			n.r.ptMu.Lock()
			if n.r.writers[n]--; n.r.writers[n] <= 0 {
				delete(n.r.writers, n)
			}
			n.r.ptMu.Unlock()
		}
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
	if (f.kind == kindPTReader || f.kind == kindPTWriter) && n.ptReaders+n.ptWriters == 0 && !n.ptLinger {
		// The kernel has closed every passthrough file of the inode
		// (RELEASE follows the close), so it holds the backing file
		// no more.
		if srv := n.r.backing.Load(); srv != nil {
			srv.UnregisterBackingFd(n.ptID)
		}
		n.ptID = 0
	}
	n.mu.Unlock()
	if fd >= 0 {
		unix.Close(fd)
	}
	if drop {
		go n.NotifyContent(0, 0)
	}
}

func (f *file) Release(ctx context.Context) syscall.Errno {
	f.release()
	return 0
}

func (f *file) isWritable() bool { return f.writable }
