package fusefs

import (
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"ckptfs/internal/backing"
)

// node_dir_ops.go owns the directory operations: listing (without the
// hidden names), mkdir, rmdir, fsync, and captureChild, the capture every
// operation on a name in a directory makes first.

// Readdir lists the backing directory, without the hidden names.
func (n *Node) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	fd, err := backing.Reopen(n.fd, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return nil, errno(err)
	}
	ds, eno := fs.NewLoopbackDirStreamFd(fd)
	if eno != 0 {
		unix.Close(fd)
		return nil, eno
	}
	if len(n.r.hidden) == 0 || (!n.IsRoot() && !n.r.nested) {
		return ds, 0
	}
	return &filterStream{DirStream: ds, n: n}, 0
}

// filterStream drops hidden names from a directory stream.
type filterStream struct {
	fs.DirStream
	n    *Node
	next *fuse.DirEntry
}

func (s *filterStream) HasNext() bool {
	for s.next == nil && s.DirStream.HasNext() {
		e, eno := s.DirStream.Next()
		if eno != 0 {
			return false
		}
		if s.n.r.hiddenName(s.n, e.Name) {
			continue
		}
		s.next = &e
	}
	return s.next != nil
}

// Seekdir continues the listing after the entry whose d_off is off: a
// directory read without OPENDIR is listed afresh for every request, from
// its offset (rawFS.readDir).
func (s *filterStream) Seekdir(ctx context.Context, off uint64) syscall.Errno {
	sd, ok := s.DirStream.(fs.FileSeekdirer)
	if !ok {
		return syscall.ENOTSUP
	}
	s.next = nil
	return sd.Seekdir(ctx, off)
}

func (s *filterStream) Next() (fuse.DirEntry, syscall.Errno) {
	if !s.HasNext() {
		return fuse.DirEntry{}, syscall.EBADF
	}
	e := *s.next
	s.next = nil
	return e, 0
}

func (n *Node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if n.r.hiddenName(n, name) {
		return nil, syscall.EPERM
	}
	n.r.gate.RLock()
	defer n.r.gate.RUnlock()
	if eno := n.captureNewDir(ctx, name); eno != 0 {
		return nil, eno
	}
	if err := backing.Retry(func() error { return unix.Mkdirat(n.fd, name, mode) }); err != nil {
		return nil, errno(err)
	}
	return n.finishCreate(ctx, name, mode, out, func() { unix.Unlinkat(n.fd, name, unix.AT_REMOVEDIR) })
}

func (n *Node) Rmdir(ctx context.Context, name string) syscall.Errno {
	if n.r.hiddenName(n, name) {
		return syscall.EPERM
	}
	n.r.gate.RLock()
	defer n.r.gate.RUnlock()
	if eno := n.captureChild(ctx, name, nil); eno != 0 {
		return eno
	}
	return errno(backing.Retry(func() error { return unix.Unlinkat(n.fd, name, unix.AT_REMOVEDIR) }))
}

// captureChild captures the prior state of name inside n (see
// Root.captureName). The caller holds the gate.
func (n *Node) captureChild(ctx context.Context, name string, claim *atticClaim) (eno syscall.Errno) {
	n.r.settled(func() {
		p, ok := n.childPath(name)
		if !ok {
			return // a directory that was removed: not in the tree
		}
		eno = n.r.captureName(ctx, n.fd, name, p, claim)
	})
	return eno
}

// captureNewDir is captureChild for mkdir: the path is to become a
// directory, so patterns that exclude directories (build/) leave it out.
func (n *Node) captureNewDir(ctx context.Context, name string) (eno syscall.Errno) {
	n.r.settled(func() {
		p, ok := n.childPath(name)
		if !ok || n.r.excluded(p, true) {
			return
		}
		eno = n.r.captureName(ctx, n.fd, name, p, nil)
	})
	return eno
}

// Fsync syncs the backing inode. go-fuse asks the node first for every
// FSYNC, so a handle that syncs itself (file.Fsync) is passed the request;
// for a directory (FSYNCDIR: a program that makes a rename durable) the
// backing directory is synced.
func (n *Node) Fsync(ctx context.Context, f fs.FileHandle, flags uint32) syscall.Errno {
	if s, ok := f.(fs.FileFsyncer); ok {
		return s.Fsync(ctx, flags)
	}
	fd, err := backing.Reopen(n.fd, unix.O_RDONLY)
	if err != nil {
		return errno(err)
	}
	defer unix.Close(fd)
	if flags&fsyncFdatasync != 0 {
		return errno(unix.Fdatasync(fd))
	}
	return errno(unix.Fsync(fd))
}
