package main

import (
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"ckptfs/fusefs"
	"ckptfs/internal/backing"
	"ckptfs/internal/control"
	"ckptfs/internal/crashpoint"
	"ckptfs/internal/exclude"
	"ckptfs/internal/rundir"
	"ckptfs/versionstore"
)

// daemon serves the mount in this process until SIGTERM/SIGINT or an
// external unmount (a lazy detach too, even while processes still use the
// detached mount: watchDetach). With o.readyFd set, it reports on that fd (readyPipe)
// what its start found that the user must know, then "ok" (or the error
// line) once the mount is live. In the foreground (-f) those notes go to
// stderr, and so do the warnings 'ckptfs mount' prints of the processes
// that entered DIR before the mount (warnBypass).
func daemon(dir string, o mountOpts, stderr io.Writer) error {
	ready := newReadyPipe(o, stderr)
	err := serve(dir, o, stderr, ready.note, func() {
		ready.ok()
		if !ready.piped {
			warnBypass(dir, o.store, map[int]bool{os.Getpid(): true}, os.Getpid(), stderr)
		}
	})
	if err != nil {
		ready.fail(err)
		return err
	}
	return nil
}

// startNotes passes on to the user, through note, what the start of a
// mount of dir found that they must know and would not see otherwise (the
// daemon's log is in the store, hidden by the mount): a rewind a crash had
// interrupted, finished or rolled back; that the last mount was not
// unmounted cleanly; and the changes made while unmounted that it
// recorded.
func startNotes(dir string, started control.StartResult, note func(string, ...any)) {
	switch {
	case started.RolledBack != "":
		note("warning: a rewind, restore or revert that a crash interrupted could not finish, and was rolled back: the tree is as it was before it (%s)", started.RolledBack)
	case started.Recovered:
		note("finished a rewind, restore or revert that a crash had interrupted: the tree is as it asked (turnctl log shows it)")
	}
	switch {
	case started.Unclean && started.Unsaved != "":
		note("warning: the last mount of %s ended, but its daemon could not save its record of the tree (%s): changes made between that unmount and this mount are not in the history, and a rewind will not undo them", dir, started.Unsaved)
	case started.Unclean:
		note("warning: the last mount of %s did not end with a clean unmount (its daemon was killed or crashed), so no record of the tree was saved: changes made between the crash and this mount are not in the history, and a rewind will not undo them", dir)
	}
	if off := started.Offline; off.Paths > 0 {
		s := "s"
		if off.Paths == 1 {
			s = ""
		}
		lost := ""
		switch {
		case off.Lost == 1:
			lost = " (the earlier bytes of 1 file were never captured: a rewind leaves it as it is)"
		case off.Lost > 1:
			lost = fmt.Sprintf(" (the earlier bytes of %d files were never captured: a rewind leaves them as they are)", off.Lost)
		}
		note("recorded %d change%s made while unmounted as turn %d%s", off.Paths, s, off.Turn.Num, lost)
	}
}

// serve mounts dir and serves it; note passes a line on to the user
// (startNotes), live is called once the mount is live.
func serve(dir string, o mountOpts, stderr io.Writer, note func(string, ...any), live func()) error {
	// The kernel already applied the caller's umask (doc/FUSE-NOTES.md).
	syscall.Umask(0)
	raiseNoFile()
	if p := os.Getenv("CKPTFS_CPUPROFILE"); p != "" {
		// For profiling the daemon (doc/BENCH.md: profile before guessing).
		if f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600); err == nil {
			pprof.StartCPUProfile(f)
			defer func() { pprof.StopCPUProfile(); f.Close() }()
		}
	}
	logger := log.New(stderr, "", log.LstdFlags)

	dirFile, err := os.OpenFile(dir, os.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return fmt.Errorf("mount: %v", unwrapPath(err))
	}
	defer dirFile.Close()
	// Keep our cwd in the store: off the mount, and it lets `ckptfs status`
	// reach the hidden store through /proc/PID/cwd.
	os.Chdir(o.store)

	store, err := versionstore.Open(o.store, versionstore.Options{
		// Pebble cannot go on after a failed WAL or MANIFEST write. Exit:
		// the mount is left dead (ENOTCONN), so nothing lands unrecorded,
		// and the next mount replays the log (versionstore/doc.go).
		Fatal: func(msg string) {
			logger.Printf("ckptfs: fatal store error, exiting (remount to recover): %s", msg)
		},
		// Tests put small files through range capture
		// (CKPTFS_RANGE_MIN=BYTES).
		RangeFrom: envInt("CKPTFS_RANGE_MIN"),
	})
	if err != nil {
		if errors.Is(err, versionstore.ErrLocked) {
			if mp, ok := rundir.OfflineView(dir); ok {
				return fmt.Errorf("mount: store %s is in use by the view of %s on %s (ckptfs mount --at, made while %s was not mounted); run 'ckptfs umount %s' first", o.store, dir, mp, dir, mp)
			}
			return fmt.Errorf("mount: store %s is in use by another ckptfs daemon", o.store)
		}
		return fmt.Errorf("mount: %v", err)
	}
	storeClosed := false
	defer func() {
		if !storeClosed {
			store.Close()
		}
	}()
	if o.excludesGiven {
		err = store.SetExcludes(o.excludes)
	} else {
		o.excludes, _, err = store.Excludes()
	}
	if err != nil {
		return fmt.Errorf("mount: exclude patterns: %v", err)
	}
	ex, err := exclude.New(o.excludes)
	if err != nil {
		return fmt.Errorf("mount: the store's exclude patterns: %v", err)
	}
	if o.policy.any() {
		// The flags change the stored policy; what they leave out stays.
		pol, err := store.Policy()
		if err == nil {
			if o.policy.size != nil {
				pol.KeepSize = *o.policy.size
			}
			if o.policy.turns != nil {
				pol.KeepTurns = *o.policy.turns
			}
			if o.policy.age != nil {
				pol.KeepAge = *o.policy.age
			}
			if o.policy.hourly != nil {
				pol.KeepHourly = *o.policy.hourly
			}
			if o.policy.daily != nil {
				pol.KeepDaily = *o.policy.daily
			}
			err = store.SetPolicy(pol)
		}
		if err != nil {
			return fmt.Errorf("mount: retention policy: %v", err)
		}
	}
	tree := backing.New(dirFile)
	started, err := control.Start(store, tree, dir, o.store, control.StartOptions{Excludes: ex, Links: true, Logf: logger.Printf})
	if err != nil {
		return fmt.Errorf("mount: %v", err)
	}
	crashpoint.Hit("mount.recovered")
	startNotes(dir, started, note)
	var hidden []string
	if started.Hidden != "" {
		hidden = append(hidden, started.Hidden)
	}
	root, err := fusefs.NewRoot(dirFile, fusefs.Options{
		Recorder: store,
		Hidden:   hidden,
		Exclude:  ex.Match, // never empty: other projects' stores (exclude.Nested)
		Logger:   logger,
		// Passthrough (root only: see usermount.go) for reads unless
		// CKPTFS_PASSTHROUGH=0, for writes to files the turn holds
		// already unless CKPTFS_WRITE_PASSTHROUGH=0: see fusefs.Options.
		WritePassthrough: asRoot() && os.Getenv("CKPTFS_WRITE_PASSTHROUGH") != "0",
		ReadPassthrough:  asRoot() && os.Getenv("CKPTFS_PASSTHROUGH") != "0",
		Private:          privateMount(o),
		// Without passthrough, reads are the daemon's: let the kernel
		// keep what it read (ignored with write passthrough).
		KeepCache: true,
		Flush:     flushChild,
	})
	if err != nil {
		return fmt.Errorf("mount: %v", err)
	}
	for _, l := range started.Links {
		root.NoteLink(l.Ino, l.Path)
	}
	// Catch the stop signals before the mount exists: a SIGTERM from here
	// on must unmount, not leave a dead mount behind.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer signal.Stop(sigs)
	srv, err := root.Mount(dir, o.debug)
	if err != nil {
		return fmt.Errorf("mount: %v", err)
	}
	sock, _ := rundir.Socket(dir)
	views := newViews(store, tree, dir, privateMount(o), o.debug, logger.Printf)
	defer views.closeAll()
	stopControl, err := startControl(sock, store, tree, root, views)
	if err != nil {
		unmount(srv, dir, logger)
		return fmt.Errorf("mount: control socket: %v", err)
	}
	info := rundir.Info{Dir: dir, Store: o.store, PID: os.Getpid(), Socket: sock, Started: time.Now()}
	if err := rundir.WriteInfo(info); err != nil {
		stopControl()
		unmount(srv, dir, logger)
		return fmt.Errorf("mount: %v", err)
	}
	mode := "shared with other users"
	if privateMount(o) {
		mode = "private to uid " + strconv.Itoa(os.Geteuid())
	}
	logger.Printf("mounted %s (store %s), %s", dir, o.store, mode)
	live()
	endWarm := func() {}
	if warmUpWanted() {
		endWarm = warmUp(dir, warmBudget(root.NodeMark()), logger.Printf)
	}
	defer endWarm()
	stopGC := make(chan struct{})
	gcDone := make(chan struct{})
	go func() {
		defer close(gcDone)
		control.AutoGC(store, autoGCEvery(), stopGC, logger.Printf)
	}()
	stopAutoGC := sync.OnceFunc(func() {
		store.StopGC()
		close(stopGC)
		<-gcDone
	})
	defer stopAutoGC()

	waited := make(chan struct{})
	go func() { srv.Wait(); close(waited) }()
	var detached <-chan struct{} // never, if the mount cannot be found
	if mnt, ok := topMount(dir); ok {
		root.SetMountDev(mnt.Dev)
		stopWatch := make(chan struct{})
		defer close(stopWatch)
		detached = watchDetach(mnt.Dev, stopWatch)
	}
	select {
	case s := <-sigs:
		logger.Printf("%v: closing the open turn and unmounting", s)
	case <-waited:
		logger.Printf("unmounted from outside")
	case <-detached:
		logger.Printf("detached from outside (umount -l): closing the open turn and ending")
	}
	crashpoint.Hit("daemon.stopping")
	endWarm()
	stopControl()
	views.closeAll() // they read the store
	stopAutoGC()
	// Close the open turn, and save the manifest the next mount compares
	// the tree with, at a boundary no mutation straddles. (A change that
	// reaches the daemon after it is recorded as usual; the next mount
	// knows it from its event.)
	if err := root.ExclusiveLast(func() error {
		if _, open := store.Current(); open {
			if _, err := store.End(""); err != nil {
				return err
			}
		}
		if err := crashpoint.Fail("daemon.manifest"); err != nil {
			return err
		}
		return store.SaveManifest(tree, started.Skip, o.excludes)
	}); err != nil {
		logger.Printf("close open turn, save manifest: %v", err)
		// Tell 'ckptfs umount' that it ended without the manifest: the
		// next mount will not see what changes meanwhile.
		info.Unsaved = strings.Join(strings.Fields(err.Error()), " ")
		if err := rundir.WriteInfo(info); err != nil {
			logger.Printf("note the unsaved manifest in %s's info file: %v", dir, err)
		}
		// And the next mount (umount removes the info file): it then
		// says why there is no manifest, not that this daemon crashed.
		if err := store.NoteUnsaved(info.Unsaved); err != nil {
			logger.Printf("note the unsaved manifest in the store: %v", err)
		}
	} else {
		// Tell 'ckptfs umount', which waits for this process to end,
		// that it did not die before the manifest was saved.
		info.Saved = true
		if err := rundir.WriteInfo(info); err != nil {
			logger.Printf("note the saved manifest in %s's info file: %v", dir, err)
		}
	}
	unmount(srv, dir, logger)
	if _, open := store.Current(); open {
		store.End("") // a change that came in after the boundary
	}
	storeClosed = true
	if err := store.Close(); err != nil {
		logger.Printf("close store: %v", err)
	}
	if info.Unsaved != "" {
		rundir.RemoveSocket(dir) // the info file is umount's to remove
	} else {
		rundir.Remove(dir)
	}
	return nil
}

// autoGCEvery is how often the background gc looks whether the policy
// has work: every minute, or CKPTFS_GC_EVERY (a Go duration; tests).
func autoGCEvery() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("CKPTFS_GC_EVERY")); err == nil && d > 0 {
		return d
	}
	return time.Minute
}

// unmount unmounts, retrying while busy, and detaches lazily at last.
func unmount(srv *fuse.Server, dir string, logger *log.Logger) {
	if !rundir.IsMounted(dir) {
		return
	}
	var err error
	for i := 0; i < 20; i++ {
		if err = srv.Unmount(); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	logger.Printf("unmount %s: %v; detaching lazily", dir, err)
	if err := detach(dir); err != nil {
		logger.Printf("detach %s: %v", dir, err)
	}
}

// raiseNoFile lifts the soft fd limit to the hard one: every node the
// kernel remembers holds an O_PATH fd, so a tree with more cached inodes
// than the limit fails with EMFILE. As root, the hard limit is raised too,
// to the kernel's fs.nr_open.
func raiseNoFile() {
	var l unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &l) != nil {
		return
	}
	if b, err := os.ReadFile("/proc/sys/fs/nr_open"); err == nil && os.Geteuid() == 0 {
		var n uint64
		if _, err := fmt.Sscan(string(b), &n); err == nil && n > l.Max {
			if unix.Setrlimit(unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: n, Max: n}) == nil {
				return
			}
		}
	}
	if l.Cur < l.Max {
		l.Cur = l.Max
		unix.Setrlimit(unix.RLIMIT_NOFILE, &l)
	}
}

// envInt is the environment variable name as a positive integer, else 0.
func envInt(name string) int64 {
	n, err := strconv.ParseInt(os.Getenv(name), 10, 64)
	if err != nil || n < 0 {
		return 0
	}
	return n
}
