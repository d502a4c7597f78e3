package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"

	"ckptfs/internal/exclude"
	"ckptfs/internal/rundir"
	"ckptfs/internal/storeref"
	"ckptfs/internal/turnctlcli"
	"ckptfs/internal/units"
)

type mountOpts struct {
	store      string
	foreground bool
	excludes   []string
	// excludesGiven: --exclude was on the command line (else the store's)
	excludesGiven bool
	allowOther    bool // share the mount with other users (see usermount.go)
	debug         bool
	readyFd       int // hidden: the pipe the parent waits on (daemon mode)
	// The retention policy's flags, as given ("": keep what the store
	// holds); policy is what they set.
	keepSize, keepTurns, keepAge, keepHourly, keepDaily string
	policy                                              policyFlags
}

// policyFlags are the --keep-* flags given, parsed (nil: not given).
type policyFlags struct {
	size  *int64
	turns *int
	age   *time.Duration
	// The thinning windows; -1: off.
	hourly, daily *time.Duration
}

func (p policyFlags) any() bool {
	return p.size != nil || p.turns != nil || p.age != nil || p.hourly != nil || p.daily != nil
}

// parsePolicyFlags parses the --keep-* flags (usage errors for malformed
// values).
func parsePolicyFlags(size, turns, age, hourly, daily string) (policyFlags, error) {
	var p policyFlags
	if size != "" {
		n, err := units.ParseBudget(size)
		if err != nil {
			return p, usageError{"mount: --keep-size: " + err.Error()}
		}
		p.size = &n
	}
	if turns != "" {
		n, err := strconv.Atoi(turns)
		if err != nil || n < 0 {
			return p, usageError{fmt.Sprintf("mount: --keep-turns: bad number %q", turns)}
		}
		p.turns = &n
	}
	if age != "" {
		d, err := units.ParseDuration(age)
		if err != nil {
			return p, usageError{"mount: --keep-age: " + err.Error()}
		}
		p.age = &d
	}
	for _, w := range []struct {
		flag, v string
		dst     **time.Duration
	}{{"--keep-hourly", hourly, &p.hourly}, {"--keep-daily", daily, &p.daily}} {
		if w.v == "" {
			continue
		}
		d, err := units.ParseWindow(w.v)
		if err != nil {
			return p, usageError{"mount: " + w.flag + ": " + err.Error()}
		}
		*w.dst = &d
	}
	return p, nil
}

func runMount(args []string, stdout, stderr io.Writer) error {
	var o mountOpts
	var at string
	fs := newFlags("mount", `mount [flags] DIR
       ckptfs mount --at TURN PROJECT MOUNTPOINT

Mounts the versioning overlay over DIR, in place, and returns once the
mount is live. As root the mount is shared with every user (the kernel
checks each one's permissions) and reads use FUSE passthrough, at native
speed. As any other user it is made through fusermount3 (package fuse3)
and is private to that user: nobody else, root included, can enter DIR
while it is mounted, and reads go through the daemon (passthrough needs
root). --allow-other shares it instead (as a user, only with
user_allow_other in /etc/fuse.conf; files other users create then belong
to you).

With --at, mounts instead a read-only view of PROJECT's tree as it was at
the end of TURN (a number, 0, or ref:ID, as turnctl takes it) on
MOUNTPOINT, an existing directory outside the project, while the project
stays mounted and in use: exactly the tree 'turnctl checkout TURN' writes
and a rewind to TURN would leave, its files read from the live tree where
they are unchanged and from the history store where not. It shows TURN's
bytes whatever the project does later; every write fails with EROFS.
PROJECT's daemon serves it, and it goes when PROJECT is unmounted; if
PROJECT is not mounted, a daemon of the view's own opens its store
(--store, else the one PROJECT's mounts use) and holds it while the view
is mounted: PROJECT cannot be mounted meanwhile, and a file changed on disk
since the view was mounted can no longer be read through it (EIO).
'ckptfs umount MOUNTPOINT' unmounts it. TURN must be closed and kept: an
open, forgotten or missing turn is refused and nothing is mounted.`, stdout)
	fs.StringVar(&at, "at", "", "mount a read-only view of the tree at the end of `TURN` (PROJECT MOUNTPOINT; see above)")
	fs.StringVar(&o.store, "store", "", "history store `PATH` (default DIR/.ckptfs, hidden from the mount; remembered for the next mounts and turnctl, in $XDG_STATE_HOME/ckptfs/stores)")
	fs.BoolVarP(&o.foreground, "foreground", "f", false, "stay in the foreground (default: return once the mount is live)")
	fs.StringArrayVar(&o.excludes, "exclude", nil, "gitignore-style `PATTERN` passed through unversioned (repeatable; kept in the store for the next mounts; --exclude= for none)")
	fs.BoolVar(&o.allowOther, "allow-other", false, "share the mount with other users (root always does; a user needs user_allow_other in /etc/fuse.conf)")
	fs.BoolVar(&o.debug, "debug", false, "log every FUSE request (with -f: to stderr)")
	fs.StringVar(&o.keepSize, "keep-size", "", "retention: budget of the store on disk (`SIZE` with a unit: 500M, 10GiB, 100B; default min(10 GiB, 10% of its disk))")
	fs.StringVar(&o.keepTurns, "keep-turns", "", "retention: keep at least the last `N` turns (default 100)")
	fs.StringVar(&o.keepAge, "keep-age", "", "retention: keep the turns of the last `DURATION` (24h, 7d; default 24h)")
	fs.StringVar(&o.keepHourly, "keep-hourly", "", "retention: then keep the last turn of each hour for `DURATION` (default 7d; off: none)")
	fs.StringVar(&o.keepDaily, "keep-daily", "", "retention: then keep the last turn of each day for `DURATION` (default 30d; off: none)")
	fs.IntVar(&o.readyFd, "ready-fd", -1, "")
	fs.MarkHidden("ready-fd")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.Changed("at") {
		if fs.NArg() != 2 {
			return usageError{"mount --at TURN: expected PROJECT and MOUNTPOINT (try --help)"}
		}
		var other []string
		fs.Visit(func(f *pflag.Flag) {
			switch f.Name {
			case "at", "store", "allow-other", "debug", "foreground", "ready-fd":
			default:
				other = append(other, "--"+f.Name)
			}
		})
		if len(other) > 0 {
			return usageError{fmt.Sprintf("mount --at: %s cannot be given with --at", strings.Join(other, ", "))}
		}
		return runMountAt(at, fs.Arg(0), fs.Arg(1), o, stdout, stderr)
	}
	if fs.NArg() != 1 {
		return usageError{"mount: expected one DIR (try --help)"}
	}
	// Given, the patterns replace those the store keeps ("--exclude=":
	// none); not given, the daemon takes the kept ones.
	o.excludesGiven = fs.Changed("exclude")
	o.excludes = slices.DeleteFunc(o.excludes, func(p string) bool { return p == "" })
	if _, err := exclude.New(o.excludes); err != nil {
		return usageError{err.Error()}
	}
	if f := turnctlcli.EmptyKeepFlag(fs); f != "" {
		return usageError{"mount: --" + f + ": no value given"}
	}
	pol, err := parsePolicyFlags(o.keepSize, o.keepTurns, o.keepAge, o.keepHourly, o.keepDaily)
	if err != nil {
		return err
	}
	o.policy = pol
	dir, err := filepath.Abs(fs.Arg(0))
	if err != nil {
		return err
	}
	dir = canonical(dir)
	// Every refusal comes before anything is created: a store made inside
	// another mount would land in that mount's history.
	if err := checkMountDir(dir, stderr); err != nil {
		return err
	}
	if err := checkUserMount(dir, o); err != nil {
		return err
	}
	// A store given is remembered for the next mounts and turnctl's
	// offline commands (storeref); none given, the remembered one is
	// used, else DIR/.ckptfs.
	if o.store == "" {
		if o.store, err = storeref.Resolve(dir); err != nil {
			return fmt.Errorf("mount: %v", err)
		}
	} else if o.store, err = filepath.Abs(o.store); err != nil {
		return err
	}
	if outer, ok := ckptfsMountOf(canonical(o.store)); ok {
		return fmt.Errorf("mount: the store %s is inside the ckptfs mount %s, whose history would record it; put the store outside every ckptfs mount", o.store, outer)
	}
	if err := prepareStore(o.store); err != nil {
		return err
	}
	// The daemon spawned below (ready-fd) is given the store: its parent
	// remembers it, once the mount is live (its key is found while
	// DIR is not mounted). A moved project's record follows it.
	key, keyErr := storeref.KeyOf(dir)
	remember := func() {
		if o.readyFd >= 0 {
			return
		}
		err := keyErr
		if err == nil {
			err = storeref.RememberAt(key, dir, o.store)
		}
		if err != nil && o.store != storeref.Default(dir) {
			fmt.Fprintf(stderr, "ckptfs: warning: cannot remember the store of %s (%v): give --store %s again at the next mount\n", dir, err, o.store)
		}
	}
	if o.foreground {
		remember()
		return daemon(dir, o, stderr)
	}
	pid, err := spawnDaemon(dir, o, stderr)
	if err != nil {
		return err
	}
	remember()
	fmt.Fprintf(stdout, "mounted %s (history in %s)\n", dir, o.store)
	warnBypass(dir, o.store, map[int]bool{os.Getpid(): true, pid: true}, os.Getpid(), stderr)
	return nil
}

// warnBypass warns on stderr of the processes that entered dir before it
// was mounted (bypassHolders): a shell that ran 'cd DIR && ckptfs mount
// .' still works in the directory underneath, around the overlay, so
// nothing it changes there is recorded, and the manifest saved at the
// next unmount takes its changes in: no rewind will ever undo them.
// Processes in skip (this one, the daemon) and their children are left
// out, and so is an ancestor of self whose parent is named too (sudo in
// 'sudo ckptfs mount .': it ends with the mount command, its shell does
// not).
func warnBypass(dir, store string, skip map[int]bool, self int, stderr io.Writer) {
	mnt, ok := topMount(dir)
	if !ok {
		return
	}
	hs := bypassHolders(dir, mnt.Dev, store, skip)
	named := map[int]bool{}
	for _, h := range hs {
		named[h.pid] = true
	}
	ancestors := map[int]bool{}
	for p := rundir.Parent(self); p > 1 && !ancestors[p]; p = rundir.Parent(p) {
		ancestors[p] = true
	}
	hs = slices.DeleteFunc(hs, func(h holder) bool { return ancestors[h.pid] && named[rundir.Parent(h.pid)] })
	const show = 10
	for i, h := range hs {
		if i == show {
			fmt.Fprintf(stderr, "ckptfs: warning: and %d more processes that used %s from before the mount: their changes go around ckptfs and are not recorded\n", len(hs)-show, dir)
			break
		}
		var how, fix string
		switch h.what {
		case "cwd":
			how, fix = "has its working directory in "+h.path, "cd "+h.path+" again"
		case "root":
			how, fix = "has its root directory in "+h.path, "restart it"
		case "map":
			how, fix = "has "+h.path+" mapped", "restart it"
		default:
			how, fix = "has "+h.path+" open", "reopen it, or restart the process"
		}
		fmt.Fprintf(stderr, "ckptfs: warning: %d %s %s from before the mount: its changes go around ckptfs and are not recorded (%s)\n", h.pid, h.comm, how, fix)
	}
}

// checkMountDir refuses every DIR ckptfs must not mount over, creating
// nothing: /, a directory inside a ckptfs mount, one that holds a ckptfs
// mount below it (the outer daemon would write through the inner mount,
// and its history record the inner project's files and store), a live
// ckptfs mount, a missing path, anything not a directory. A dead mount on
// dir (its daemon was killed) is detached.
func checkMountDir(dir string, stderr io.Writer) error {
	if dir == "/" {
		return errors.New("mount: refusing to mount over /; name a project directory")
	}
	if outer, ok := ckptfsMountOf(filepath.Dir(dir)); ok {
		if info, err := rundir.ReadInfo(outer); err == nil && info.Store == dir {
			return fmt.Errorf("mount: %s is the history store of the ckptfs mount %s (hidden from it, not recorded): a store is not a project to mount", dir, outer)
		}
		return fmt.Errorf("mount: %s is inside the ckptfs mount %s, which records it already; to version %s on its own, run 'ckptfs umount %s' first", dir, outer, dir, outer)
	}
	if inner, ok := ckptfsMountBelow(dir); ok {
		how := fmt.Sprintf("run 'ckptfs umount %s' first", inner.Dir)
		if err := inner.Mine(); err != nil {
			how = err.Error() + " to unmount it first"
		}
		return fmt.Errorf("mount: the ckptfs mount %s is inside %s, whose history would record that project's files and its history store; %s", inner.Dir, dir, how)
	}
	if err := clearStaleMount(dir, stderr); err != nil {
		return err
	}
	fi, err := os.Stat(dir)
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("mount: %v; create the directory first or check the path", unwrapPath(err))
	} else if err != nil {
		return fmt.Errorf("mount: %v", unwrapPath(err))
	}
	if !fi.IsDir() {
		return fmt.Errorf("mount: %s is not a directory; name a project directory", dir)
	}
	return nil
}

// ckptfsMountOf returns the innermost ckptfs mount (live or dead) that is
// path or one of its ancestors.
func ckptfsMountOf(path string) (string, bool) {
	m, err := rundir.FindMount(path)
	return m, err == nil
}

// ckptfsMountBelow returns a ckptfs project mount (live or dead) strictly
// below dir, the first in the mount table. Views (ViewFSType) are not
// projects: they are not looked for.
func ckptfsMountBelow(dir string) (rundir.Mount, bool) {
	ms, _ := rundir.MountTable()
	for _, m := range ms {
		if strings.HasPrefix(m.Dir, strings.TrimSuffix(dir, "/")+"/") {
			return m, true
		}
	}
	return rundir.Mount{}, false
}

// canonical returns the absolute path p with its symlinks resolved, as
// far as it exists (the rest appended as it is): the mount table names
// mounts by such paths. A component that cannot be resolved (a dead
// mount answers ENOTCONN) is kept as written.
func canonical(p string) string {
	p = filepath.Clean(p)
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	parent := filepath.Dir(p)
	if parent == p {
		return p
	}
	return filepath.Join(canonical(parent), filepath.Base(p))
}

func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %v", pe.Path, pe.Err)
	}
	return err
}

// clearStaleMount refuses a live ckptfs mount on dir and lazily unmounts a
// dead one (its daemon was killed: requests fail with ENOTCONN). Another
// user's mount is refused as such: it cannot be told live or dead from
// here.
func clearStaleMount(dir string, stderr io.Writer) error {
	if _, err := ownMount(dir); errors.Is(err, rundir.ErrNotMounted) {
		return nil
	} else if err != nil {
		return fmt.Errorf("mount: %v", err)
	}
	// statfs always reaches the daemon (a stat may be answered from the
	// kernel's attribute cache): a dead one answers ENOTCONN.
	var st unix.Statfs_t
	err := unix.Statfs(dir, &st)
	dead := err == unix.ENOTCONN || err == unix.ECONNABORTED
	if err != nil && !dead {
		// Some other failure: dead only if its daemon is gone too.
		info, ierr := rundir.ReadInfo(dir)
		dead = ierr == nil && !rundir.Alive(info.PID)
	}
	if !dead {
		return fmt.Errorf("mount: %s is already a ckptfs mount; use it as it is, or run 'ckptfs umount %s' first", dir, dir)
	}
	fmt.Fprintf(stderr, "ckptfs: %s: the previous daemon died; detaching its dead mount\n", dir)
	if err := detach(dir); err != nil {
		return fmt.Errorf("mount: detach dead mount of %s: %v", dir, err)
	}
	rundir.Remove(dir)
	return nil
}

// prepareStore creates the store directory with a .gitignore of "*", so
// git passes it by while the project is not mounted.
func prepareStore(store string) error {
	if err := os.MkdirAll(store, 0o700); err != nil {
		return fmt.Errorf("mount: store: %v", unwrapPath(err))
	}
	gi := filepath.Join(store, ".gitignore")
	if _, err := os.Lstat(gi); errors.Is(err, os.ErrNotExist) {
		if err := os.WriteFile(gi, []byte("*\n"), 0o644); err != nil {
			return fmt.Errorf("mount: store: %v", unwrapPath(err))
		}
	}
	return nil
}

// spawnDaemon re-executes ckptfs as a detached daemon (its own session,
// output to <store>/daemon.log) and waits until it reports the mount live;
// it returns the daemon's pid.
func spawnDaemon(dir string, o mountOpts, stderr io.Writer) (int, error) {
	args := []string{"mount", "-f", "--ready-fd", "3", "--store", o.store}
	for _, x := range o.excludes {
		args = append(args, "--exclude", x)
	}
	if o.excludesGiven && len(o.excludes) == 0 {
		args = append(args, "--exclude=")
	}
	if o.allowOther {
		args = append(args, "--allow-other")
	}
	if o.debug {
		args = append(args, "--debug")
	}
	for flag, v := range map[string]string{"--keep-size": o.keepSize, "--keep-turns": o.keepTurns, "--keep-age": o.keepAge,
		"--keep-hourly": o.keepHourly, "--keep-daily": o.keepDaily} {
		if v != "" {
			args = append(args, flag, v)
		}
	}
	args = append(args, "--", dir)
	return startDaemon(args, o.store, stderr)
}

// startDaemon runs ckptfs with args (which give it --ready-fd 3) as a
// detached daemon, its output appended to store/daemon.log, and waits
// for it to report on fd 3 (see readyPipe): "ok", or the error that
// stopped it (one that starts "ckptfs: usage: " is a usage error). The
// notes for the user it may send first go to stderr once the mount is
// live. It returns the daemon's pid.
func startDaemon(args []string, store string, stderr io.Writer) (int, error) {
	exe, err := os.Executable()
	if err != nil {
		return 0, err
	}
	log, err := os.OpenFile(filepath.Join(store, "daemon.log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return 0, fmt.Errorf("mount: %v", unwrapPath(err))
	}
	defer log.Close()
	pr, pw, err := os.Pipe()
	if err != nil {
		return 0, err
	}
	cmd := exec.Command(exe, args...)
	cmd.Stdin = nil
	cmd.Stdout = log
	cmd.Stderr = log
	cmd.ExtraFiles = []*os.File{pw}
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		pw.Close()
		pr.Close()
		return 0, fmt.Errorf("mount: start daemon: %v", err)
	}
	pw.Close()
	defer pr.Close()
	type report struct {
		notes []string
		line  string
	}
	done := make(chan report, 1)
	go func() {
		var rep report
		r := bufio.NewReader(pr)
		for {
			line, _ := r.ReadString('\n')
			line = strings.TrimSpace(line)
			if n, ok := strings.CutPrefix(line, readyNote); ok {
				rep.notes = append(rep.notes, n)
				continue
			}
			rep.line = line
			done <- rep
			return
		}
	}()
	var rep report
	select {
	case rep = <-done:
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		return 0, fmt.Errorf("mount: daemon did not report readiness within 60s (see %s)", filepath.Join(store, "daemon.log"))
	}
	line := rep.line
	if line == "ok" {
		// The notes, once the mount is live (a failure is one line; the
		// daemon's log has them too).
		for _, n := range rep.notes {
			fmt.Fprintf(stderr, "ckptfs: %s\n", n)
		}
		pid := cmd.Process.Pid
		cmd.Process.Release()
		return pid, nil
	}
	cmd.Wait()
	if line == "" {
		return 0, fmt.Errorf("mount: daemon exited before the mount was live (see %s)", filepath.Join(store, "daemon.log"))
	}
	msg := strings.TrimPrefix(line, "ckptfs: ")
	if u, ok := strings.CutPrefix(msg, "usage: "); ok {
		return 0, usageError{u}
	}
	return 0, errors.New(msg)
}

// readyNote starts a line of the ready pipe that is a note for the user.
const readyNote = "note: "

// readyPipe is how a daemon reports to the 'ckptfs mount' that started
// it (startDaemon), one line each, on the pipe given by --ready-fd: notes
// for the user first (readyNote, as many as there are), then "ok" once
// the mount is live, or "ckptfs: " and the error that stopped it. In the
// foreground (-f, no pipe) the notes go to stderr as they come.
type readyPipe struct {
	f      *os.File // nil once answered
	piped  bool     // started with a pipe (the daemon of 'ckptfs mount')
	stderr io.Writer
}

func newReadyPipe(o mountOpts, stderr io.Writer) *readyPipe {
	r := &readyPipe{stderr: stderr}
	if o.readyFd >= 0 {
		r.f = os.NewFile(uintptr(o.readyFd), "ready")
		r.piped = true
	}
	return r
}

// note passes one line to the user (once the parent was answered, it has
// no one to go to: the daemon's log has its own line).
func (r *readyPipe) note(format string, args ...any) {
	msg := strings.ReplaceAll(fmt.Sprintf(format, args...), "\n", " ")
	if r.f != nil {
		fmt.Fprintf(r.f, "%s%s\n", readyNote, msg)
	} else if !r.piped {
		fmt.Fprintf(r.stderr, "ckptfs: %s\n", msg)
	}
}

// ok reports the mount live.
func (r *readyPipe) ok() { r.answer("ok") }

// fail reports the error that stopped the daemon, unless the mount was
// reported live already.
func (r *readyPipe) fail(err error) {
	msg := err.Error()
	if _, ok := err.(usageError); ok {
		msg = "usage: " + msg
	}
	r.answer("ckptfs: " + msg)
}

func (r *readyPipe) answer(line string) {
	if r.f != nil {
		io.WriteString(r.f, line+"\n")
		r.f.Close()
		r.f = nil
	}
}
