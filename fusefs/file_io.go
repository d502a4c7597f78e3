package fusefs

import (
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"ckptfs/internal/backing"
	"ckptfs/internal/ckpt"
)

// file_io.go owns the data operations of an open file served by the daemon:
// reads, and writes, fallocate and copy_file_range, each captured first.

func (f *file) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	n, err := unix.Pread(f.fdOf(), dest, off)
	if err != nil {
		return nil, errno(err)
	}
	return fuse.ReadResultData(dest[:n]), 0
}

// Write captures the prior bytes it overwrites (once per turn), then
// writes.
// Writes through a shared mmap arrive here too (see rawFS.Write for their
// attributes).
func (f *file) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	r := f.n.r
	r.gate.RLock()
	defer r.gate.RUnlock()
	if eno := f.n.captureRangeThrough(ctx, f, off, off+int64(len(data))); eno != 0 {
		return 0, eno
	}
	fd := f.fdOf()
	n, err := unix.Pwrite(fd, data, off)
	if err != nil {
		return 0, errno(err)
	}
	if killRequested(ctx) {
		killSuidgid(fd) // the content capture above covered the mode too
	}
	return uint32(n), 0
}

func (f *file) Flush(ctx context.Context) syscall.Errno {
	fd := f.openFd()
	if fd < 0 {
		return 0 // a handle that never opened its fd: nothing to pass on
	}
	// Flush may come once per dup'd fd: close a dup, not the file.
	nfd, err := unix.Dup(fd)
	if err != nil {
		return errno(err)
	}
	return errno(unix.Close(nfd))
}

// fsyncFdatasync is FUSE_FSYNC_FDATASYNC in an FSYNC request's flags.
const fsyncFdatasync = 1

func (f *file) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	if flags&fsyncFdatasync != 0 {
		return errno(unix.Fdatasync(f.fdOf()))
	}
	return errno(unix.Fsync(f.fdOf()))
}

func (f *file) Lseek(ctx context.Context, off uint64, whence uint32) (uint64, syscall.Errno) {
	n, err := unix.Seek(f.fdOf(), int64(off), int(whence))
	return uint64(n), errno(err)
}

func (f *file) Allocate(ctx context.Context, off uint64, size uint64, mode uint32) syscall.Errno {
	r := f.n.r
	r.gate.RLock()
	defer r.gate.RUnlock()
	if eno := f.n.captureSelf(ctx, false, allocRange(mode, int64(off), int64(size))); eno != 0 {
		return eno
	}
	return errno(backing.Retry(func() error { return unix.Fallocate(f.fdOf(), mode, int64(off), int64(size)) }))
}

// allocRange is the range of bytes fallocate with mode may change: none
// for a plain allocation (which may only grow the size), the range for a
// hole punched or zeroed, and all of them (nil) for the modes that move
// bytes (collapse, insert).
func allocRange(mode uint32, off, size int64) *ckpt.ByteRange {
	switch mode &^ unix.FALLOC_FL_KEEP_SIZE {
	case 0:
		return &ckpt.ByteRange{}
	case unix.FALLOC_FL_PUNCH_HOLE, unix.FALLOC_FL_ZERO_RANGE:
		return &ckpt.ByteRange{Off: off, End: off + size}
	}
	return nil
}

func (f *file) Getattr(ctx context.Context, out *fuse.AttrOut) syscall.Errno {
	st, err := backing.Fstat(f.statFd())
	if err != nil {
		return errno(err)
	}
	out.FromStat(&st.Stat_t)
	return 0
}

// CopyFileRange captures the destination, then copies in the kernel.
func (n *Node) CopyFileRange(ctx context.Context, fhIn fs.FileHandle, offIn uint64, out *fs.Inode, fhOut fs.FileHandle, offOut uint64, length uint64, flags uint64) (uint32, syscall.Errno) {
	in, ok1 := fhIn.(interface{ fdOf() int })
	o, ok2 := fhOut.(interface{ fdOf() int })
	dst, ok3 := out.Operations().(*Node)
	if !ok1 || !ok2 || !ok3 {
		return 0, syscall.ENOTSUP
	}
	r := n.r
	r.gate.RLock()
	defer r.gate.RUnlock()
	if eno := dst.captureRangeLocked(ctx, int64(offOut), int64(offOut+length)); eno != 0 {
		return 0, eno
	}
	i, j := int64(offIn), int64(offOut)
	c, err := unix.CopyFileRange(in.fdOf(), &i, o.fdOf(), &j, int(length), int(flags))
	return uint32(max(c, 0)), errno(err)
}
