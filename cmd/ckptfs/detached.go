package main

import (
	"os"

	"golang.org/x/sys/unix"

	"ckptfs/internal/rundir"
)

// watchDetach watches the mount table for the daemon's own mount, the
// ckptfs mount of device dev: the returned channel is closed once no
// mount of dev is left in it (a lazy detach from outside, umount -l),
// and never if stop is closed first.
//
// The end of the FUSE connection (fuse.Server.Wait) does not tell it: a
// detached mount lives on while some process still uses it (its cwd, an
// open file), and the daemon must not go on recording, behind the
// directory's back, while the directory underneath is edited directly.
// A mount only moved (with a parent directory renamed) is still there.
//
// It waits on /proc/self/mountinfo (POLLPRI: the mount table changed),
// and looks once a second anyway.
func watchDetach(dev uint64, stop <-chan struct{}) <-chan struct{} {
	gone := make(chan struct{})
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return gone
	}
	go func() {
		defer f.Close()
		fds := []unix.PollFd{{Fd: int32(f.Fd()), Events: unix.POLLPRI}}
		for {
			select {
			case <-stop:
				return
			default:
			}
			if !mountedDev(dev) {
				close(gone)
				return
			}
			unix.Poll(fds, 1000) // each poll takes in the changes it reports
		}
	}()
	return gone
}

// mountedDev reports whether a ckptfs mount of device dev is in the mount
// table (true when the table cannot be read: only a sure absence counts).
func mountedDev(dev uint64) bool {
	ms, err := rundir.MountTable()
	if err != nil {
		return true
	}
	for _, m := range ms {
		if m.Dev == dev {
			return true
		}
	}
	return false
}
