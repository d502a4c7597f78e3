package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"ckptfs/fusefs"
	"ckptfs/internal/rundir"
)

func runUmount(args []string, stdout, stderr io.Writer) error {
	var lazy bool
	fs := newFlags("umount", `umount [--lazy] DIR

Closes the open turn, flushes and unmounts DIR. While a process has its
working directory, root, an open file or a memory map inside DIR, umount
refuses, names those processes ("PID COMMAND") and changes nothing: the
mount stays live and the open turn open. --lazy has what they wrote
through shared memory maps of DIR's files written back (into the open
turn), closes the open turn and detaches DIR anyway; those processes then
see a dead directory until they leave it. A daemon that dies before it saved the record of the tree (what
the next mount compares the tree with, to record changes made while
unmounted), or cannot save it, is told of on stderr, and umount exits 1.
A daemon stopped (SIGSTOP, a debugger) is refused the same way, nothing
changed, with the pid to continue (kill -CONT).`, stdout)
	fs.BoolVar(&lazy, "lazy", false, "close the open turn and detach DIR even while processes use it")
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
	// A view on DIR as given, else on DIR resolved; not resolved when DIR
	// is a project's mount: that stats DIR, which asks its daemon, and
	// would hang on a stopped one before umount even signalled it.
	paths := []string{dir}
	if !rundir.IsMounted(dir) {
		paths = append(paths, canonical(dir))
	}
	for _, d := range paths {
		if m, ok := viewMount(d); ok {
			if err := umountView(d, m, lazy, stderr); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "unmounted the view %s\n", d)
			return nil
		}
	}
	if _, err := rundir.ReadInfo(dir); err != nil && !rundir.IsMounted(dir) {
		// Not the path the mount was made by: resolve symlinks as mount
		// did. (Not first: that would ask a hung daemon.)
		dir = canonical(dir)
	}
	var note bytes.Buffer
	if err := umount(dir, lazy, 30*time.Second, &note); err != nil {
		stderr.Write(note.Bytes())
		return err
	}
	if note.Len() > 0 {
		stderr.Write(note.Bytes()) // its one line says how it went
		return nil
	}
	fmt.Fprintf(stdout, "unmounted %s\n", dir)
	return nil
}

// umount asks the daemon of dir to stop (SIGTERM: it closes the open turn
// and unmounts) and waits until it is gone and the mount with it; a mount
// left by a dead daemon is detached. A live mount some process uses is
// refused, or with lazy detached first (the daemon still closes the turn).
// A daemon that dies (killed, crashed) after umount signalled it and
// before it saved the record of the tree (rundir.Info.Saved), or that
// ends but could not save it (rundir.Info.Unsaved: a disk error), fails
// the umount, after the detach: changes made until the next mount will
// not be in the history. One dead before umount ran is told of on
// stderr, and its mount detached without failing: cleaning up is all
// umount can do.
//
// A mount moved with a parent directory keeps the info file of the path
// it was made on, its source in the mount table: its daemon is found
// there (movedInfo).
func umount(dir string, lazy bool, timeout time.Duration, stderr io.Writer) error {
	info, ierr := rundir.ReadInfo(dir)
	mnt, mounted := topMount(dir)
	if ierr != nil && !mounted {
		return fmt.Errorf("umount: %s is not a ckptfs mount", dir)
	}
	if ierr != nil {
		info, ierr = movedInfo(mnt)
	}
	if mounted {
		// Another user's daemon takes no signal from us, and its runtime
		// files are not in our runtime directory.
		if err := mnt.Mine(); err != nil {
			return fmt.Errorf("umount: %v", err)
		}
	}
	var died error
	if ierr == nil && diedUnsaved(info) {
		// Dead before umount was asked: it can only clean up.
		fmt.Fprintf(stderr, "ckptfs: umount: the daemon of %s (pid %d) %s: changes made until the next mount will not be in the history; mount again soon ('ckptfs mount %s'); detached its dead mount\n", dir, info.PID, unsavedWhy(info, true), dir)
	} else if ierr == nil && rundir.Alive(info.PID) {
		if rundir.Stopped(info.PID) {
			// It would take the SIGTERM only once continued, and
			// unmount then, long after this umount gave up waiting.
			return fmt.Errorf("umount: %v; then run umount again; nothing changed", rundir.StoppedError(dir, info.PID))
		}
		var holders []holder
		if mounted {
			holders = mountHolders(dir, mnt.Dev, info.Store, map[int]bool{info.PID: true, os.Getpid(): true})
		}
		if len(holders) > 0 && !lazy {
			return fmt.Errorf("umount: %s is in use by %s; leave it (cd out, close its files, end those processes) and run umount again, or run 'ckptfs umount --lazy %s'", dir, listHolders(holders), dir)
		}
		if len(holders) > 0 {
			// Have the pages written through shared maps written back
			// while the files are still reachable by path, and wait for
			// them: the daemon ends once the mount is detached, and a
			// page not written back by then is lost. Then take the mount
			// out of the tree: the daemon's unmount below then finds
			// nothing to wait for.
			writeBackMaps(holders, mnt.Dev, stderr)
			if err := detach(dir); err != nil {
				return fmt.Errorf("umount: detach %s: %v", dir, err)
			}
		}
		if err := syscall.Kill(info.PID, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("umount: signal daemon %d: %v", info.PID, err)
		}
		deadline := time.Now().Add(timeout)
		for rundir.Alive(info.PID) || rundir.IsMounted(dir) {
			if time.Now().After(deadline) {
				if rundir.Stopped(info.PID) {
					return fmt.Errorf("umount: daemon %d did not finish within %v: it is stopped (SIGSTOP, or a debugger holds it), and ends its unmount once continued: kill -CONT %d", info.PID, timeout, info.PID)
				}
				return fmt.Errorf("umount: daemon %d did not finish within %v", info.PID, timeout)
			}
			if !rundir.Alive(info.PID) {
				break // died, mount left behind: detach below
			}
			time.Sleep(20 * time.Millisecond)
		}
		if diedUnsaved(info) {
			died = fmt.Errorf("umount: the daemon of %s (pid %d) %s: changes made until the next mount will not be in the history; mount again soon ('ckptfs mount %s')", dir, info.PID, unsavedWhy(info, false), dir)
		} else if len(holders) > 0 {
			fmt.Fprintf(stderr, "ckptfs: umount: %s was in use by %s; closed its open turn and detached it lazily: those processes see a dead directory until they leave it\n", dir, listHolders(holders))
		}
	}
	if rundir.IsMounted(dir) {
		if err := detach(dir); err != nil {
			return fmt.Errorf("umount: detach %s: %v", dir, err)
		}
	}
	rundir.Remove(dir)
	if ierr == nil && info.Dir != dir {
		rundir.Remove(info.Dir)
	}
	return died
}

// diedUnsaved reports whether the daemon of info is gone without having
// saved the manifest: its info file is still there, unmarked
// (rundir.Info.Saved). A daemon that ends removes the file, after saving;
// one that could not save leaves it, saying why (rundir.Info.Unsaved).
func diedUnsaved(info rundir.Info) bool {
	if rundir.Alive(info.PID) {
		return false
	}
	now, err := rundir.ReadInfo(info.Dir)
	return err == nil && now.PID == info.PID && !now.Saved
}

// unsavedWhy says how the daemon of info, gone (diedUnsaved), came to
// leave no record of the tree: it died before saving it, or it ended but
// could not save it (and why); had, if it was gone before umount ran.
func unsavedWhy(info rundir.Info, had bool) string {
	if now, err := rundir.ReadInfo(info.Dir); err == nil && now.PID == info.PID && now.Unsaved != "" {
		if had {
			return fmt.Sprintf("had ended without saving the record of the tree (%s)", now.Unsaved)
		}
		return fmt.Sprintf("could not save the record of the tree as it ended (%s)", now.Unsaved)
	}
	if had {
		return "had died before it saved the record of the tree"
	}
	return "died before it saved the record of the tree"
}

// movedInfo returns the info file of the daemon of mnt, a mount moved away
// from the path it was made on (mnt.Source, which names the info file):
// an error when there is none, or when it is another daemon's, which
// mounted that path since.
func movedInfo(mnt rundir.Mount) (rundir.Info, error) {
	if mnt.Source == "" || mnt.Source == mnt.Dir {
		return rundir.Info{}, rundir.ErrNotMounted
	}
	info, err := rundir.ReadInfo(mnt.Source)
	if err != nil {
		return info, err
	}
	if other, ok := topMount(info.Dir); ok && other.Dev != mnt.Dev {
		return rundir.Info{}, rundir.ErrNotMounted
	}
	return info, nil
}

// topMount returns the topmost ckptfs mount on dir.
func topMount(dir string) (rundir.Mount, bool) {
	ms, _ := rundir.MountTable()
	var top rundir.Mount
	found := false
	for _, m := range ms {
		if m.Dir == dir {
			top, found = m, true
		}
	}
	return top, found
}

// holder is a process that keeps a mount busy, or (bypassHolders) uses
// the directory a mount covers.
type holder struct {
	pid  int
	comm string
	what string // how: "cwd", "root", "fd" (an open file) or "map"
	path string // what it holds, as /proc names it
}

// mountHolders lists the processes (but those in skip) whose working
// directory, root, an open file or a memory map lies in the mount on dir
// (device dev). Paths under store (the backing store, hidden through the
// mount) do not count; nor does a path under dir on the filesystem the
// mount covers (a shell that entered dir before it was mounted: see
// bypassHolders).
//
// A process in skip does not count, nor does a child of one (the daemon's
// warm-up, warm.go, which it ends before it unmounts; a boundary's
// flush, flush.go, which it waits for).
func mountHolders(dir string, dev uint64, store string, skip map[int]bool) []holder {
	mapsDev := fmt.Sprintf("%02x:%02x", unix.Major(dev), unix.Minor(dev))
	return scanHolders(skip, func(base string) (string, string, bool) {
		if what, p, ok := linkHolds(base, dir, store, func(d uint64) bool { return d == dev }); ok {
			return what, p, true
		}
		// Any map of the mount's device: its files are all in the mount.
		if p, ok := mapsHold(base+"/maps", func(d, _ string) bool { return d == mapsDev }); ok {
			return "map", p, true
		}
		return "", "", false
	})
}

// bypassHolders lists the processes (but those in skip, and their
// children) whose working directory, root, an open file or a memory map
// lies under dir but not in the mount on it (device dev): they entered
// dir before it was mounted, and still use the directory underneath,
// around the overlay. Paths under store do not count.
func bypassHolders(dir string, dev uint64, store string, skip map[int]bool) []holder {
	mapsDev := fmt.Sprintf("%02x:%02x", unix.Major(dev), unix.Minor(dev))
	return scanHolders(skip, func(base string) (string, string, bool) {
		if what, p, ok := linkHolds(base, dir, store, func(d uint64) bool { return d != dev }); ok {
			return what, p, true
		}
		if p, ok := mapsHold(base+"/maps", func(d, p string) bool {
			p = strings.TrimSuffix(p, " (deleted)")
			return d != mapsDev && under(p, dir) && (store == "" || !under(p, store))
		}); ok {
			return "map", p, true
		}
		return "", "", false
	})
}

// scanHolders lists the processes (but those in skip, and their children)
// that holds finds holding something: it is given /proc/PID and returns
// how and what.
func scanHolders(skip map[int]bool, holds func(base string) (what, path string, ok bool)) []holder {
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []holder
	for _, e := range procs {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 || skip[pid] || skip[rundir.Parent(pid)] {
			continue // (a child of the daemon: its warm-up, which it ends itself)
		}
		base := "/proc/" + e.Name()
		if what, p, ok := holds(base); ok {
			out = append(out, holder{pid, procName(base), what, p})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].pid < out[j].pid })
	return out
}

// procName names the process at base (/proc/PID) as a user knows it:
// its command name, but a turnctl the ckptfs binary runs (turnctl ui,
// an offline command) as turnctl and its arguments.
func procName(base string) string {
	comm, _ := os.ReadFile(base + "/comm")
	name := strings.TrimSpace(string(comm))
	cmdline, _ := os.ReadFile(base + "/cmdline")
	if argv := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00"); len(argv) > 2 && argv[1] == "turnctl-offline" {
		name = "turnctl " + strings.Join(argv[2:], " ")
		if len(name) > 60 {
			name = name[:57] + "..."
		}
	}
	return name
}

// under reports whether path p is root or below it.
func under(p, root string) bool {
	return p == root || strings.HasPrefix(p, root+"/") || root == "/"
}

// linkHolds looks at the working directory, root and open files of the
// process /proc/PID at base, in that order, for the first under dir (not
// under store, if given) on a device dev accepts (AT_STATX_DONT_SYNC:
// from the kernel's cache, no request to a daemon).
func linkHolds(base, dir, store string, dev func(uint64) bool) (what, path string, ok bool) {
	held := func(link string) (string, bool) {
		target, err := os.Readlink(link)
		if err != nil || !under(target, dir) || (store != "" && under(target, store)) {
			return "", false
		}
		var st unix.Statx_t
		if unix.Statx(unix.AT_FDCWD, link, unix.AT_STATX_DONT_SYNC, unix.STATX_TYPE, &st) != nil {
			return "", false
		}
		return target, dev(unix.Mkdev(st.Dev_major, st.Dev_minor))
	}
	if p, ok := held(base + "/cwd"); ok {
		return "cwd", p, true
	}
	if p, ok := held(base + "/root"); ok {
		return "root", p, true
	}
	d, err := os.Open(base + "/fd")
	if err != nil {
		return "", "", false
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	for _, n := range names {
		if p, ok := held(base + "/fd/" + n); ok {
			return "fd", p, true
		}
	}
	return "", "", false
}

// mapsHold returns the first file a /proc/PID/maps file maps that match
// accepts, given its device ("major:minor" as maps prints it) and path.
func mapsHold(path string, match func(dev, path string) bool) (string, bool) {
	f, err := os.Open(path)
	if err != nil {
		return "", false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		// start-end perms offset dev inode [path], the path after
		// padding.
		f := strings.SplitN(sc.Text(), " ", 6)
		if len(f) < 5 || f[4] == "0" {
			continue // anonymous
		}
		p := ""
		if len(f) == 6 {
			p = strings.TrimLeft(f[5], " ")
		}
		if match(f[3], p) {
			return p, true
		}
	}
	return "", false
}

// writeBackMaps writes back the dirty pages of the files on the mount's
// device dev that holders map shared and writable, and waits for them
// (fusefs.WriteBackMaps, by path too while the mount is attached): the
// only pages of the mount that can be dirty, since every write(2)
// reaches the daemon before it returns. A file that cannot be reached is
// told of on stderr.
func writeBackMaps(holders []holder, dev uint64, stderr io.Writer) {
	pids := make([]int, len(holders))
	for i, h := range holders {
		pids[i] = h.pid
	}
	if err := fusefs.WriteBackMaps(dev, pids, true); err != nil {
		fmt.Fprintf(stderr, "ckptfs: umount: %v\n", err)
	}
}

// listHolders formats holders as "PID COMMAND, PID COMMAND", the first
// ten of them.
func listHolders(hs []holder) string {
	const show = 10
	var parts []string
	for i, h := range hs {
		if i == show {
			parts = append(parts, fmt.Sprintf("and %d more", len(hs)-show))
			break
		}
		parts = append(parts, fmt.Sprintf("%d %s", h.pid, h.comm))
	}
	return strings.Join(parts, ", ")
}
