package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"ckptfs/internal/backing"
	"ckptfs/internal/control"
	"ckptfs/internal/rundir"
	"ckptfs/internal/storeref"
	"ckptfs/turnctl"
	"ckptfs/versionstore"
)

// mountat.go: `ckptfs mount --at TURN PROJECT MOUNTPOINT`, a read-only
// view of the tree at the end of TURN, and its `ckptfs umount`. The
// project's daemon, the one owner of its store, serves the view in its own
// process (views.go); this command only asks it to. A project that is not
// mounted has no daemon: the view gets one of its own, which opens the
// store (and so keeps the project from being mounted while it runs).

// runMountAt mounts the view of turn of project on mp: asks project's
// daemon to, or when project is not mounted, starts a daemon of the
// view's own (daemonAt).
func runMountAt(turn, project, mp string, o mountOpts, stdout, stderr io.Writer) error {
	project, err := filepath.Abs(project)
	if err != nil {
		return err
	}
	project = canonical(project)
	if mp, err = filepath.Abs(mp); err != nil {
		return err
	}
	mp = canonical(mp)
	if o.readyFd < 0 {
		if err := checkViewDir(project, mp); err != nil {
			return err
		}
	}
	_, err = ownMount(project)
	switch {
	case errors.Is(err, rundir.ErrNotMounted):
		return mountAtOffline(turn, project, mp, o, stdout, stderr)
	case err != nil:
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

// mountAtOffline serves the view of a project that is not mounted from a
// daemon of its own, which opens the store: in this process with -f,
// else in a detached one it waits for.
func mountAtOffline(turn, project, mp string, o mountOpts, stdout, stderr io.Writer) error {
	if err := checkUserMount(mp, o); err != nil {
		return err
	}
	if o.store == "" {
		var err error
		if o.store, err = storeref.Resolve(project); err != nil {
			return fmt.Errorf("mount --at: %v", err)
		}
	} else if abs, err := filepath.Abs(o.store); err == nil {
		o.store = abs
	}
	if fi, err := os.Stat(o.store); err != nil || !fi.IsDir() {
		return fmt.Errorf("mount --at: %s is not mounted and has no history store at %s (give --store, or mount it: ckptfs mount %s)", project, o.store, project)
	}
	if o.foreground || o.readyFd >= 0 {
		ready := newReadyPipe(o, stderr)
		err := daemonAt(turn, project, mp, o, stderr, ready.note, ready.ok)
		if err != nil {
			ready.fail(err)
		}
		return err
	}
	args := []string{"mount", "--at", turn, "-f", "--ready-fd", "3", "--store", o.store}
	if o.allowOther {
		args = append(args, "--allow-other")
	}
	if o.debug {
		args = append(args, "--debug")
	}
	if _, err := startDaemon(append(args, "--", project, mp), o.store, stderr); err != nil {
		return err
	}
	// The daemon resolved the turn; say which one it shows.
	src := turn
	if m, ok := viewMount(mp); ok {
		if _, num, ok := strings.Cut(m.Source, "@"); ok && m.Source == project+"@"+num {
			src = num
		}
	}
	fmt.Fprintf(stdout, "mounted turn %s of %s on %s (read-only; %s is not mounted: this view holds its store until it is unmounted)\n", src, project, mp, project)
	return nil
}

// daemonAt opens the store of a project that is not mounted, mounts the
// view of turn on mp and serves it until it is unmounted or a signal
// comes; note passes a line on to the user (startNotes), live is called
// once it is mounted.
func daemonAt(turn, project, mp string, o mountOpts, stderr io.Writer, note func(string, ...any), live func()) error {
	logger := log.New(stderr, "", log.LstdFlags)
	store, err := versionstore.Open(o.store, versionstore.Options{
		Fatal: func(msg string) { logger.Printf("ckptfs: fatal store error, exiting: %s", msg) },
	})
	if errors.Is(err, versionstore.ErrLocked) {
		return fmt.Errorf("mount --at: the history store %s is in use by another ckptfs process (a view of %s, or a turnctl command)", o.store, project)
	} else if err != nil {
		return fmt.Errorf("mount --at: %v", err)
	}
	defer store.Close()
	tree, err := backing.Open(project)
	if err != nil {
		return fmt.Errorf("mount --at: %v", err)
	}
	defer tree.Close()
	// Record what changed while unmounted first, as an offline command
	// does: the view then knows which bytes were never captured.
	started, err := control.Start(store, tree, project, o.store, control.StartOptions{KeepManifest: true, Logf: logger.Printf})
	if err != nil {
		return fmt.Errorf("mount --at: %s", strings.ReplaceAll(err.Error(), "versionstore: ", ""))
	}
	startNotes(project, started, note)
	n, err := store.Resolve(turn)
	if err != nil {
		msg := "mount --at: " + strings.ReplaceAll(err.Error(), "versionstore: ", "")
		if errors.Is(err, versionstore.ErrBadTurn) {
			return usageError{msg}
		}
		return errors.New(msg)
	}
	if versionstore.NamesStep(turn) {
		return usageError{fmt.Sprintf("mount --at: %q is a step: a view shows a whole turn", turn)}
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer signal.Stop(sigs)
	v := newViews(store, tree, project, privateMount(o), o.debug, logger.Printf)
	v.unwatched = true
	defer v.closeAll()
	srv, err := v.add(n, mp)
	if err != nil {
		return fmt.Errorf("mount --at: %s", strings.ReplaceAll(err.Error(), "versionstore: ", ""))
	}
	// umount finds this daemon by the info file, to wait until it has let
	// the store go.
	if err := rundir.WriteInfo(rundir.Info{Dir: mp, Store: o.store, PID: os.Getpid(), Started: time.Now()}); err != nil {
		return fmt.Errorf("mount --at: %v", err)
	}
	defer rundir.Remove(mp)
	live()
	waited := make(chan struct{})
	go func() { srv.Wait(); close(waited) }()
	select {
	case s := <-sigs:
		logger.Printf("%v: unmounting the view on %s", s, mp)
	case <-waited:
	}
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
	if r, err := filepath.Rel(project, mp); err == nil && (r == "." || !(r == ".." || strings.HasPrefix(r, "../"))) {
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
	// A view's own daemon (the project not mounted) holds the store until
	// it exits: umount waits for it, so that the project can be mounted
	// next. (Read first: the daemon removes its info file as it goes.)
	info, infoErr := rundir.ReadInfo(dir)
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
	if infoErr == nil && info.PID != os.Getpid() && rundir.Alive(info.PID) {
		if len(holders) > 0 {
			// Detached in use, the view would keep its daemon, and the
			// store, until its last user left: stop it now (their
			// reads fail from here on).
			syscall.Kill(info.PID, syscall.SIGTERM)
		}
		for deadline := time.Now().Add(30 * time.Second); rundir.Alive(info.PID) && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
		rundir.Remove(dir)
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
