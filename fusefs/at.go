package fusefs

import (
	"errors"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// at.go is the one funnel to the backing tree: every access is relative to
// a directory fd or an O_PATH fd of the inode itself, never an absolute
// path (an absolute path would loop back into our own mount, which covers
// the backing directory). Syscalls are retried on EINTR here.

// retry runs fn until it does not fail with EINTR.
func retry(fn func() error) error {
	for {
		err := fn()
		if err != unix.EINTR {
			return err
		}
	}
}

// procPath names an open fd through /proc/self/fd; opening it reopens the
// inode itself (also for O_PATH fds), without resolving any name.
func procPath(fd int) string { return "/proc/self/fd/" + strconv.Itoa(fd) }

// openPath opens name inside dirfd as an O_PATH handle that does not
// follow a final symlink.
func openPath(dirfd int, name string) (int, error) {
	var fd int
	err := retry(func() error {
		var err error
		fd, err = unix.Openat(dirfd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		return err
	})
	return fd, err
}

// reopen opens the inode behind an O_PATH fd with real access flags.
func reopen(fd int, flags int) (int, error) {
	var nfd int
	err := retry(func() error {
		var err error
		// O_NOFOLLOW would refuse the /proc link itself; the inode is
		// already fixed by fd, so there is nothing left to follow.
		nfd, err = unix.Open(procPath(fd), flags&^unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		return err
	})
	return nfd, err
}

// stat is a stat result with the birth time, which tells a reused inode
// number from the inode that had it before.
type stat struct {
	syscall.Stat_t
	btime uint64
}

func statxInto(x *unix.Statx_t, st *stat) {
	st.Dev = unix.Mkdev(x.Dev_major, x.Dev_minor)
	st.Ino = x.Ino
	st.Nlink = uint64(x.Nlink)
	st.Mode = uint32(x.Mode)
	st.Uid = x.Uid
	st.Gid = x.Gid
	st.Rdev = unix.Mkdev(x.Rdev_major, x.Rdev_minor)
	st.Size = int64(x.Size)
	st.Blksize = int64(x.Blksize)
	st.Blocks = int64(x.Blocks)
	st.Atim = syscall.Timespec{Sec: x.Atime.Sec, Nsec: int64(x.Atime.Nsec)}
	st.Mtim = syscall.Timespec{Sec: x.Mtime.Sec, Nsec: int64(x.Mtime.Nsec)}
	st.Ctim = syscall.Timespec{Sec: x.Ctime.Sec, Nsec: int64(x.Ctime.Nsec)}
	st.btime = 1
	if x.Mask&unix.STATX_BTIME != 0 && (x.Btime.Sec != 0 || x.Btime.Nsec != 0) {
		st.btime = uint64(x.Btime.Sec)*1e9 + uint64(x.Btime.Nsec)
	}
}

// fstatFd stats an fd (O_PATH fds too), never following a symlink.
func fstatFd(fd int) (stat, error) {
	return fstatat(fd, "", unix.AT_EMPTY_PATH)
}

// lstatAt stats name inside dirfd without following it.
func lstatAt(dirfd int, name string) (stat, error) {
	return fstatat(dirfd, name, 0)
}

func fstatat(dirfd int, name string, flags int) (stat, error) {
	var x unix.Statx_t
	var st stat
	err := retry(func() error {
		return unix.Statx(dirfd, name, flags|unix.AT_SYMLINK_NOFOLLOW|unix.AT_STATX_SYNC_AS_STAT,
			unix.STATX_BASIC_STATS|unix.STATX_BTIME, &x)
	})
	if err != nil {
		return st, err
	}
	statxInto(&x, &st)
	return st, nil
}

// readlinkFd reads the target of the symlink an O_PATH fd refers to.
func readlinkFd(fd int) (string, error) {
	for l := 256; ; l *= 2 {
		buf := make([]byte, l)
		n, err := unix.Readlinkat(fd, "", buf)
		if err != nil {
			return "", err
		}
		if n < l {
			return string(buf[:n]), nil
		}
	}
}

// errno converts any error to a syscall.Errno, following wrapped errors
// (fs.ToErrno does not) and defaulting to EIO.
func errno(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	var e syscall.Errno
	if errors.As(err, &e) {
		return e
	}
	if errors.Is(err, os.ErrNotExist) {
		return syscall.ENOENT
	}
	if errors.Is(err, os.ErrExist) {
		return syscall.EEXIST
	}
	if errors.Is(err, os.ErrPermission) {
		return syscall.EPERM
	}
	return syscall.EIO
}
