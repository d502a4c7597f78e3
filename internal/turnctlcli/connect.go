package turnctlcli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"ckptfs/internal/rundir"
	"ckptfs/internal/storeref"
	"ckptfs/turnctl"
)

// project says where the project is and how to reach its history.
type project struct {
	root    string // the project directory (mount point), absolute
	base    string // the directory relative paths on the command line start from
	mounted bool
	store   string // offline: the store directory
}

var errNotMounted = errors.New("not inside a ckptfs mount (ckptfs mount DIR mounts a project; -C DIR names a mounted one)")

// notMountedError is errNotMounted for a directory named with -C or
// $CKPTFS_DIR, or a project with a history found around the current
// directory: it says which, and how to mount it.
type notMountedError struct{ dir string }

func (e notMountedError) Error() string {
	return fmt.Sprintf("%s is not mounted (mount it with: ckptfs mount %s)", e.dir, e.dir)
}

func (e notMountedError) Is(target error) bool { return target == errNotMounted }

// findProject locates the project: the ckptfs mount containing -C DIR, else
// the current directory, else $CKPTFS_DIR. Without a mount it looks for
// the store (DIR/.ckptfs, in DIR or a parent) unless the command needs a
// live mount. A mount that belongs to another user is an error that says
// whose it is (*rundir.ForeignError): its daemon would not answer us.
func findProject(g globals, needMount bool) (*project, error) {
	// Before anything is entered: a stat, even the one os.Getwd makes,
	// waits on a stopped daemon's mount for as long as it stays stopped.
	at := ""
	if pwd := os.Getenv("PWD"); filepath.IsAbs(pwd) {
		at = pwd
		if g.dir != "" {
			at = absIn(pwd, g.dir)
		}
		if err := rundir.StoppedAround(at); err != nil {
			return nil, err
		}
	}
	cwd, err := os.Getwd()
	switch {
	case err == nil:
	case g.dir != "" && filepath.IsAbs(g.dir):
		// The current directory cannot be entered (a dead mount), but
		// the project is named by an absolute path: go on from there.
		cwd = filepath.Clean(g.dir)
	case g.dir == "":
		// (at is $PWD: the current directory, as the shell knows it)
		if dead := deadMountError(at, err); dead != nil {
			return nil, dead
		}
		return nil, err
	default:
		return nil, err
	}
	start := cwd
	explicit := false
	switch {
	case g.dir != "":
		start, explicit = absIn(cwd, g.dir), true
	default:
		if _, err := rundir.FindMount(realPath(cwd)); err != nil {
			if d := os.Getenv("CKPTFS_DIR"); d != "" {
				start, explicit = absIn(cwd, d), true
			}
		}
	}
	if fi, err := os.Stat(start); err != nil {
		// Another user's private mount cannot even be entered: by its
		// path alone, it is still theirs to name.
		if m, lerr := rundir.Lookup(start); lerr == nil && m.Mine() != nil {
			return nil, m.Mine()
		}
		if dead := deadMountError(start, err); dead != nil {
			return nil, dead
		}
		return nil, fmt.Errorf("%s: %w", start, errors.Unwrap(err))
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("%s is not a directory", start)
	}
	start = realPath(start)
	p := &project{base: start}
	if !explicit {
		p.base = realPath(cwd)
	}
	if m, err := rundir.Lookup(start); err == nil {
		if err := m.Mine(); err != nil {
			return nil, err
		}
		p.root, p.mounted = m.Dir, true
		return p, nil
	}
	if needMount {
		if explicit {
			return nil, notMountedError{start}
		}
		if root, _, found, _ := historyAround(start); found {
			return nil, notMountedError{root}
		}
		return nil, errNotMounted
	}
	if g.store != "" {
		p.root, p.store = start, absIn(cwd, g.store)
		return p, nil
	}
	root, store, found, err := historyAround(start)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, fmt.Errorf("%s is neither inside a ckptfs mount nor a project with a history store (.ckptfs); use -C DIR", start)
	}
	p.root, p.store = root, store
	return p, nil
}

// deadMountError words err, met at path, for a mount whose daemon is
// gone (ENOTCONN): what to run, as connect says for a daemon that does
// not answer. Else nil.
func deadMountError(path string, err error) error {
	if path == "" || !errors.Is(err, syscall.ENOTCONN) {
		return nil
	}
	m, lerr := rundir.Lookup(path)
	if lerr != nil {
		return nil
	}
	return fmt.Errorf("the ckptfs daemon of %s does not answer (its mount: %v); if it died, run: ckptfs umount %s", m.Dir, syscall.ENOTCONN, m.Dir)
}

// historyAround finds the project with a history that holds start (itself
// or a parent): its directory and its store's.
func historyAround(start string) (root, store string, found bool, err error) {
	for d := start; ; d = filepath.Dir(d) {
		// A store given at an earlier mount (ckptfs mount --store) is
		// remembered outside the project.
		if r, ok := storeref.Lookup(d); ok {
			if _, err := storeref.Resolve(d); err != nil {
				return "", "", false, err
			}
			return d, r.Store, true, nil
		}
		if fi, err := os.Stat(filepath.Join(d, ".ckptfs")); err == nil && fi.IsDir() {
			return d, filepath.Join(d, ".ckptfs"), true, nil
		}
		if d == filepath.Dir(d) {
			return "", "", false, nil
		}
	}
}

// connect returns the Handler for the project: a Client on the daemon's
// socket, or what offline makes of the store.
func (p *project) connect(offline Offline) (turnctl.Handler, func(), error) {
	if p.mounted {
		sock, err := rundir.Socket(p.root)
		if err != nil {
			return nil, nil, err
		}
		if info, err := rundir.ReadInfo(p.root); err == nil && rundir.Stopped(info.PID) {
			// The call would wait, silent, for as long as it stays so.
			return nil, nil, rundir.StoppedError(p.root, info.PID)
		}
		c, err := turnctl.Dial(sock)
		if err != nil {
			return nil, nil, fmt.Errorf("the ckptfs daemon of %s does not answer (%v); if it died, run: ckptfs umount %s", p.root, errors.Unwrap(err), p.root)
		}
		return c, func() { c.Close() }, nil
	}
	if offline == nil {
		return nil, nil, fmt.Errorf("%s is not mounted, and this turnctl cannot open its history store", p.root)
	}
	return offline(p.root, p.store)
}

// rel converts a path given on the command line (relative to p.base, or
// absolute) into a project-relative one.
func (p *project) rel(arg string) (string, error) {
	r, ok := turnctl.RelPath(p.root, absIn(p.base, arg))
	if !ok {
		return "", fmt.Errorf("%s is outside the project %s", arg, p.root)
	}
	return r, nil
}

func absIn(base, p string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(base, p)
}

// realPath resolves symlinks where it can (mountinfo shows real paths).
func realPath(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return p
}

// diedDuring words err, an error from a call to the mount's daemon, for a
// daemon that died during the call (killed, crashed): the bare error
// ("reading reply: unexpected EOF", "git hash-object: EOF") says neither
// that nor what to do. A rewind, restore or revert it had begun is
// journaled, and the next mount finishes or undoes it. err is returned
// as it is when the daemon lives.
func (p *project) diedDuring(name string, err error) error {
	var ue *usageError
	var xe *exitError
	if err == nil || !p.mounted || errors.As(err, &ue) || errors.As(err, &xe) {
		return err
	}
	info, ierr := rundir.ReadInfo(p.root)
	if ierr != nil || rundir.Alive(info.PID) {
		return err
	}
	what := ""
	switch name {
	case "rewind", "undo", "restore", "revert":
		what = fmt.Sprintf("; a %s it had begun is journaled: 'ckptfs umount %s' and 'ckptfs mount %s' finish it or undo it, and 'turnctl log' then shows which", name, p.root, p.root)
	default:
		what = fmt.Sprintf("; run 'ckptfs umount %s' and mount it again", p.root)
	}
	return fmt.Errorf("the ckptfs daemon of %s (pid %d) died during 'turnctl %s' (%v)%s", p.root, info.PID, name, err, what)
}
