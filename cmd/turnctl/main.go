// Command turnctl marks turns in a ckptfs-mounted project and looks at,
// compares and rewinds its history. See `turnctl --help`.
//
// It talks to the mount's daemon over its control socket and does not link
// the history store (Pebble and its dependencies would cost every hook call
// tens of milliseconds of start-up), nor net/http. When the project is not
// mounted, it hands the command over to `ckptfs turnctl-offline`, which
// runs the same command line with the store linked in; it hands `turnctl
// ui`, whose web server needs net/http, over to it always.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"

	"ckptfs/internal/turnctlcli"
	"ckptfs/turnctl"
)

func main() {
	os.Exit(turnctlcli.Main(os.Args[1:], handOver, handOverUI))
}

// handOverUI runs `turnctl ui` in the ckptfs binary (`ckptfs
// turnctl-offline ui ...`, the same process): the page needs net/http,
// which turnctl does not link. It returns only on failure.
func handOverUI(context.Context, turnctl.Handler, string, string, bool, io.Writer) error {
	exe, err := findCkptfs()
	if err != nil {
		return fmt.Errorf("turnctl ui is served by the ckptfs binary, which is %v", err)
	}
	argv := append([]string{exe, "turnctl-offline"}, os.Args[1:]...)
	err = syscall.Exec(exe, argv, os.Environ())
	return fmt.Errorf("running %s failed: %v", exe, err)
}

// handOver replaces this process with `ckptfs turnctl-offline ARGS...`
// (the same arguments, environment and working directory), found beside
// this executable or else on $PATH. It returns only on failure.
func handOver(root, _ string) (turnctl.Handler, func(), error) {
	exe, err := findCkptfs()
	if err != nil {
		return nil, nil, fmt.Errorf("%s is not mounted, and reading its history without the daemon needs the ckptfs binary, which is %v", root, err)
	}
	argv := append([]string{exe, "turnctl-offline"}, os.Args[1:]...)
	err = syscall.Exec(exe, argv, os.Environ())
	return nil, nil, fmt.Errorf("%s is not mounted, and running %s failed: %v", root, exe, err)
}

// findCkptfs returns the ckptfs binary beside this executable, else the
// one on $PATH.
func findCkptfs() (string, error) {
	var where string
	if self, err := os.Executable(); err == nil {
		dir := filepath.Dir(self)
		p := filepath.Join(dir, "ckptfs")
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
		where = " (" + dir + ")"
	}
	p, err := exec.LookPath("ckptfs")
	if err != nil {
		return "", fmt.Errorf("neither beside turnctl%s nor on $PATH", where)
	}
	if abs, err := filepath.Abs(p); err == nil {
		p = abs
	}
	return p, nil
}
