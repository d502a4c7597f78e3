package main

import (
	"bytes"
	"fmt"
	"io"
	"os/exec"

	"golang.org/x/sys/unix"

	"ckptfs/fusefs"
)

// flush.go: the turn boundary's flush of the kernel's dirty pages, in a
// child process (fusefs/flush.go says why it must not be the daemon).

// flushCommand is the hidden command the child runs.
const flushCommand = "flush-mount"

// flushChild runs fusefs.FlushFiles(args) in a child ("ckptfs
// flush-mount ARGS") and waits for it: fusefs.Options.Flush.
func flushChild(args []string) error {
	// The child must hold none of the daemon's files, above all not its
	// /dev/fuse (go-fuse opens it without O_CLOEXEC), which would keep a
	// killed daemon's connection alive with the child waiting on it.
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		return fmt.Errorf("not run: %v", err)
	}
	// /proc/self/exe: this daemon's own binary, even if a newer one has
	// replaced it on disk since.
	cmd := exec.Command("/proc/self/exe", append([]string{flushCommand}, args...)...)
	cmd.Args[0] = "ckptfs"
	cmd.Dir = "/"
	out, err := cmd.CombinedOutput()
	if err != nil {
		if msg := bytes.TrimSpace(out); len(msg) > 0 {
			return fmt.Errorf("%s", msg)
		}
		return err
	}
	return nil
}

// runFlush is the child.
func runFlush(args []string, stderr io.Writer) int {
	if err := fusefs.FlushFiles(args); err != nil {
		fmt.Fprintf(stderr, "ckptfs: %v\n", err)
		return exitFailure
	}
	return exitOK
}
