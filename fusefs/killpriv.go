package fusefs

import (
	"context"
	"sync"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"ckptfs/internal/backing"
)

// killpriv.go owns clearing set-ID bits (HANDLE_KILLPRIV_V2): the side
// channel that tells a write its request asked for it, and the clearing.

// killWrites holds the cancel channels of WRITE requests that carry
// FUSE_WRITE_KILL_SUIDGID while they run.
var killWrites sync.Map

// killRequested reports whether the request of ctx asked to clear set-ID
// bits (a write by a caller without CAP_FSETID).
func killRequested(ctx context.Context) bool {
	c, ok := ctx.(*fuse.Context)
	if !ok || c.Cancel == nil {
		return false
	}
	_, ok = killWrites.Load(c.Cancel)
	return ok
}

// killSuidgid clears set-user-ID, and set-group-ID if group-executable, as
// the kernel does when an unprivileged process writes or truncates (the
// daemon runs with CAP_FSETID, so its own write would not clear them).
func killSuidgid(fd int) error {
	st, err := backing.Fstat(fd)
	if err != nil {
		return err
	}
	mode := st.Mode & 07777
	nm := mode &^ unix.S_ISUID
	if mode&unix.S_IXGRP != 0 {
		nm &^= unix.S_ISGID
	}
	if nm == mode || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil
	}
	return unix.Fchmodat(unix.AT_FDCWD, backing.ProcPath(fd), nm, 0)
}
