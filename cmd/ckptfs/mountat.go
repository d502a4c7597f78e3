package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"ckptfs/internal/rundir"
	"ckptfs/turnctl"
)

// mountat.go: `ckptfs mount --at TURN PROJECT MOUNTPOINT`, a read-only
// view of the tree at the end of TURN, and its `ckptfs umount`. The
// project's daemon, the one owner of its store, serves the view in its own
// process (views.go); this command only asks it to.

// runMountAt asks the daemon of project to mount the view of turn on mp.
func runMountAt(turn, project, mp string, stdout io.Writer) error {
	project, err := filepath.Abs(project)
	if err != nil {
		return err
	}
	project = canonical(project)
	if mp, err = filepath.Abs(mp); err != nil {
		return err
	}
	mp = canonical(mp)
	if err := checkViewDir(project, mp); err != nil {
		return err
	}
	_, err = ownMount(project)
	if errors.Is(err, rundir.ErrNotMounted) {
		return fmt.Errorf("mount --at: %s is not mounted: mount it first (ckptfs mount %s); its daemon serves the view", project, project)
	} else if err != nil {
		return fmt.Errorf("mount --at: %v", err)
	}
	sock, err := rundir.Socket(project)
	if err != nil {
		return fmt.Errorf("mount --at: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rep, err := turnctl.NewClient(sock).MountAt(ctx, turnctl.MountAtRequest{Turn: turn, Dir: mp})
	if err != nil {
		var te *turnctl.Error
		if errors.As(err, &te) && te.Code == turnctl.CodeBadRequest {
			return usageError{"mount --at: " + te.Message}
		}
		return fmt.Errorf("mount --at: %v", err)
	}
	fmt.Fprintf(stdout, "mounted turn %d of %s on %s (read-only)\n", rep.Turn, project, mp)
	return nil
}

// checkViewDir refuses a mount point that is missing, no directory, a
// mount of ckptfs already, or inside the project (the view would be part
// of the tree it shows) or of any ckptfs mount.
func checkViewDir(project, mp string) error {
	fi, err := os.Stat(mp)
	if err != nil {
		return fmt.Errorf("mount --at: %v; create the directory first or check the path", unwrapPath(err))
	}
	if !fi.IsDir() {
		return fmt.Errorf("mount --at: %s is not a directory", mp)
	}
	if r, err := filepath.Rel(project, mp); err == nil && (r == "." || !strings.HasPrefix(r, "..")) {
		return usageError{fmt.Sprintf("mount --at: %s is inside the project %s: mount the view outside it", mp, project)}
	}
	if outer, ok := ckptfsMountOf(mp); ok {
		return fmt.Errorf("mount --at: %s is inside the ckptfs mount %s: mount the view outside it", mp, outer)
	}
	if _, ok := viewMount(mp); ok {
		return fmt.Errorf("mount --at: %s is a view already; run 'ckptfs umount %s' first", mp, mp)
	}
	return nil
}

// viewMount returns the view mounted on dir, if any.
func viewMount(dir string) (rundir.Mount, bool) {
	ms, _ := rundir.ViewTable()
	for i := len(ms) - 1; i >= 0; i-- {
		if ms[i].Dir == dir {
			return ms[i], true
		}
	}
	return rundir.Mount{}, false
}

// umountView unmounts the view on dir: refused while a process uses it,
// unless lazy. Its daemon sees the unmount and lets the view go.
func umountView(dir string, m rundir.Mount, lazy bool, stderr io.Writer) error {
	if err := m.Mine(); err != nil {
		return fmt.Errorf("umount: %v", err)
	}
	holders := mountHolders(dir, m.Dev, "", map[int]bool{os.Getpid(): true})
	if len(holders) > 0 && !lazy {
		return fmt.Errorf("umount: the view %s is in use by %s; leave it and run umount again, or run 'ckptfs umount --lazy %s'", dir, listHolders(holders), dir)
	}
	var err error
	switch {
	case lazy:
		err = detach(dir)
	case asRoot():
		err = unix.Unmount(dir, 0)
	default:
		var bin string
		if bin, err = fusermount(); err == nil {
			err = runQuiet(bin, "-u", "--", dir)
		}
	}
	if err != nil {
		return fmt.Errorf("umount: %s: %v", dir, err)
	}
	if len(holders) > 0 {
		fmt.Fprintf(stderr, "ckptfs: umount: the view %s was in use by %s; detached it lazily\n", dir, listHolders(holders))
	}
	return nil
}

// runQuiet runs a command; its output is the error's text if it fails.
func runQuiet(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		if msg := strings.TrimSpace(string(out)); msg != "" {
			return errors.New(strings.ReplaceAll(msg, "\n", "; "))
		}
	}
	return err
}
