package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"golang.org/x/sys/unix"

	"ckptfs/internal/rundir"
)

// usermount.go owns the two ways a mount is made, and what each needs:
//
//   - root mounts with mount(2) itself, shared with every user (allow_other
//     and default_permissions), with FUSE passthrough;
//   - anyone else mounts through the set-user-ID fusermount3 (Debian's
//     fuse3), private to that user unless --allow-other (which fusermount3
//     grants only with user_allow_other in /etc/fuse.conf), and without
//     passthrough, which needs CAP_SYS_ADMIN: reads go through the daemon.
//
// It also owns detaching a mount, which an ordinary user can do only
// through fusermount3 too.

// asRoot says whether this process mounts and detaches with the syscalls
// themselves.
func asRoot() bool { return os.Geteuid() == 0 }

// privateMount says whether a mount made by this process is private to
// its user: not root, and --allow-other not given.
func privateMount(o mountOpts) bool { return !asRoot() && !o.allowOther }

// fusermount returns the path of fusermount3 (on $PATH, else /bin or
// /usr/bin), or an error that says how to get it.
func fusermount() (string, error) {
	if p, err := exec.LookPath("fusermount3"); err == nil {
		return p, nil
	}
	for _, p := range []string{"/bin/fusermount3", "/usr/bin/fusermount3"} {
		if unix.Access(p, unix.X_OK) == nil {
			return p, nil
		}
	}
	return "", errors.New("fusermount3 not found: an ordinary user mounts through it (Debian, Ubuntu: apt-get install fuse3), or mount as root")
}

// checkUserMount refuses, before anything is created, a mount by an
// ordinary user that fusermount3 would refuse, saying what to do: no
// fusermount3, /dev/fuse not usable, DIR not writable, --allow-other
// without user_allow_other. Root passes.
func checkUserMount(dir string, o mountOpts) error {
	if asRoot() {
		return nil
	}
	if _, err := fusermount(); err != nil {
		return fmt.Errorf("mount: %v", err)
	}
	if err := unix.Access("/dev/fuse", unix.R_OK|unix.W_OK); err != nil {
		mode := ""
		if fi, serr := os.Stat("/dev/fuse"); serr == nil {
			mode = fmt.Sprintf(" (mode %04o)", fi.Mode().Perm())
		}
		return fmt.Errorf("mount: /dev/fuse is not usable by uid %d%s: %v; distributions ship it mode 0666 (chmod 0666 /dev/fuse), or mount as root", os.Geteuid(), mode, err)
	}
	if err := unix.Access(dir, unix.W_OK); err != nil {
		return fmt.Errorf("mount: %s is not writable by uid %d; fusermount3 mounts only on a directory its user may write (or mount as root)", dir, os.Geteuid())
	}
	if o.allowOther && !userAllowOther("/etc/fuse.conf") {
		return errors.New("mount: --allow-other needs 'user_allow_other' in /etc/fuse.conf when not root; without --allow-other the mount is private to you")
	}
	return nil
}

// userAllowOther reports whether the fuse.conf at path has a
// user_allow_other line.
func userAllowOther(path string) bool {
	b, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "user_allow_other" {
			return true
		}
	}
	return false
}

// detach lazily unmounts dir: umount2(MNT_DETACH) as root, else
// `fusermount3 -u -z`, which detaches the caller's own mounts only.
func detach(dir string) error {
	if asRoot() {
		return unix.Unmount(dir, unix.MNT_DETACH)
	}
	bin, err := fusermount()
	if err != nil {
		return err
	}
	out, err := exec.Command(bin, "-u", "-z", "--", dir).CombinedOutput()
	if err != nil {
		if msg := strings.TrimSpace(string(out)); msg != "" {
			return fmt.Errorf("%s", strings.ReplaceAll(msg, "\n", "; "))
		}
		return err
	}
	return nil
}

// ownMount returns the ckptfs mount on dir itself and nil when it is this
// user's, a *rundir.ForeignError when it is someone else's, and
// rundir.ErrNotMounted when dir is no mount point.
func ownMount(dir string) (rundir.Mount, error) {
	m, err := rundir.Lookup(dir)
	if err != nil || m.Dir != dir {
		return rundir.Mount{}, rundir.ErrNotMounted
	}
	return m, m.Mine()
}
