package fusefs

import (
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// file_locks.go owns file locks (flock and OFD locks) on open files, taken
// on the backing file itself.

// Open file description locks, as the stock loopback does.
const (
	ofdGetlk  = 36
	ofdSetlk  = 37
	ofdSetlkw = 38
)

func (f *file) Getlk(ctx context.Context, owner uint64, lk *fuse.FileLock, flags uint32, out *fuse.FileLock) syscall.Errno {
	flk := syscall.Flock_t{}
	lk.ToFlockT(&flk)
	eno := errno(syscall.FcntlFlock(uintptr(f.fdOf()), ofdGetlk, &flk))
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
		return errno(syscall.Flock(f.fdOf(), op))
	}
	flk := syscall.Flock_t{}
	lk.ToFlockT(&flk)
	op := ofdSetlk
	if blocking {
		op = ofdSetlkw
	}
	return errno(syscall.FcntlFlock(uintptr(f.fdOf()), op, &flk))
}
