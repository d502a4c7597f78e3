package fusefs

import (
	"errors"
	"os"
	"syscall"
)

// errno.go owns the answer a FUSE request gets when a syscall on the
// backing tree fails. The syscalls themselves are internal/backing's
// primitives (the same ones the history store's Tree is made of): every
// access is relative to a node's O_PATH fd or its parent's, and reopens go
// through /proc/self/fd (backing.Reopen), never an absolute path, which
// would loop back into our own mount.

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
