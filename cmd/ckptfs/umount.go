package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"ckptfs/internal/rundir"
)

func runUmount(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("umount", "umount DIR\n\nCloses the open turn, flushes and unmounts DIR.", stdout)
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError{"umount: expected one DIR (try --help)"}
	}
	dir, err := filepath.Abs(fs.Arg(0))
	if err != nil {
		return err
	}
	dir = filepath.Clean(dir)
	return umount(dir, 30*time.Second)
}

// umount asks the daemon of dir to stop (SIGTERM) and waits until it is gone
// and the mount with it; a mount left by a dead daemon is detached.
func umount(dir string, timeout time.Duration) error {
	info, ierr := rundir.ReadInfo(dir)
	mounted := rundir.IsMounted(dir)
	if ierr != nil && !mounted {
		return fmt.Errorf("umount: %s is not a ckptfs mount", dir)
	}
	if ierr == nil && alive(info.PID) {
		if err := syscall.Kill(info.PID, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("umount: signal daemon %d: %v", info.PID, err)
		}
		deadline := time.Now().Add(timeout)
		for alive(info.PID) || rundir.IsMounted(dir) {
			if time.Now().After(deadline) {
				return fmt.Errorf("umount: daemon %d did not finish within %v", info.PID, timeout)
			}
			if !alive(info.PID) {
				break // died, mount left behind: detach below
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if rundir.IsMounted(dir) {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			return fmt.Errorf("umount: detach %s: %v", dir, err)
		}
	}
	rundir.Remove(dir)
	return nil
}

// alive reports whether pid runs (and is not a zombie).
func alive(pid int) bool {
	if pid <= 0 || syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) S ...: the state follows the last ')'.
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] == ')' {
			return i+2 < len(b) && b[i+2] != 'Z'
		}
	}
	return true
}
