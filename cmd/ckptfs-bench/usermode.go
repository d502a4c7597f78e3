package main

// Cu: ckptfs mounted by an ordinary user (--user, default nobody), as
// `ckptfs mount` does when not root: through fusermount3, private to that
// user (no allow_other; default_permissions), without passthrough; Lu:
// the stock loopback mounted the same way (without default_permissions).
// A private mount refuses every other user, root included, so everything
// the bench does in their directories — the workloads' own syscalls, the
// programs they start, turnctl's requests — runs as that user, on an OS
// thread that took the user's credentials alone (inUserThread).

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"ckptfs/internal/rundir"
)

// benchUser is the ordinary user (--user) who mounts Cu and Lu, with a
// directory of its own under WORK for each: home, runtime dir, caches,
// and copies of the binaries it runs (root's may not be readable).
type benchUser struct {
	uid, gid int
	base     string // WORK/Cu or WORK/Lu, owned by the user
}

// user is the user itself: a target embedding it answers userOf.
func (u *benchUser) user() *benchUser { return u }

// userOf is the ordinary user t runs as (Cu, Lu), or nil (as root).
func userOf(t target) *benchUser {
	if u, ok := t.(interface{ user() *benchUser }); ok {
		return u.user()
	}
	return nil
}

// extraEnv is what programs started for the user need besides the bench's
// environment: a home of the user's own (root's is not readable).
func (u *benchUser) extraEnv() []string {
	return []string{"HOME=" + filepath.Join(u.base, "home"), "CKPTFS_RUNTIME_DIR=" + filepath.Join(u.base, "run")}
}

func (u *benchUser) cred() *syscall.Credential {
	return &syscall.Credential{Uid: uint32(u.uid), Gid: uint32(u.gid), Groups: []uint32{}}
}

// bin is where the user's copy of the binary at path is.
func (u *benchUser) bin(path string) string { return filepath.Join(u.base, "bin", filepath.Base(path)) }

// newBenchUser makes WORK/name for --user: its home, runtime dir and
// dirs (names under it) owned by the user, and copies of bins under
// WORK/name/bin.
func newBenchUser(b *bench, name string, bins []string, dirs ...string) (*benchUser, error) {
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("needs root, to act as --user %s", b.o.user)
	}
	uu, err := user.Lookup(b.o.user)
	if err != nil {
		return nil, fmt.Errorf("--user: %v", err)
	}
	uid, _ := strconv.Atoi(uu.Uid)
	gid, _ := strconv.Atoi(uu.Gid)
	if uid == 0 {
		return nil, fmt.Errorf("--user %s is root", b.o.user)
	}
	u := &benchUser{uid: uid, gid: gid, base: filepath.Join(b.o.work, name)}
	owned := []string{u.base, filepath.Join(u.base, "home"), filepath.Join(u.base, "run")}
	for _, d := range dirs {
		owned = append(owned, filepath.Join(u.base, d))
	}
	for _, d := range append(owned, filepath.Join(u.base, "bin")) {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	for _, p := range bins {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("%v (run make build)", err)
		}
		if err := os.WriteFile(u.bin(p), data, 0o755); err != nil {
			return nil, err
		}
	}
	for _, d := range owned {
		if err := os.Chown(d, uid, gid); err != nil {
			return nil, err
		}
	}
	os.Chmod(filepath.Join(u.base, "run"), 0o700)
	return u, nil
}

// userCkptfs is Cu: a ckptfs mount made by an ordinary user.
type userCkptfs struct {
	*ckptfsTarget
	*benchUser
}

// asTarget runs fn as t's user when t has one (Cu, Lu; see
// inUserThread), else as is.
func asTarget(t target, fn func() error) error {
	if u := userOf(t); u != nil {
		return inUserThread(u.uid, u.gid, fn)
	}
	return fn()
}

// asRoot runs fn on a thread that kept the bench's own credentials, from
// code that may run in a user thread (dropping the page cache).
func asRoot(fn func() error) error {
	errc := make(chan error, 1)
	go func() { errc <- fn() }()
	return <-errc
}

// inUserThread runs fn on a goroutine locked to an OS thread that has
// taken uid, gid and no supplementary groups, with the raw system calls:
// Go's syscall.Setuid would change every thread of the process. The
// thread is never unlocked, so the runtime ends it with the goroutine,
// and while it is locked the runtime starts no new thread from it;
// processes started by fn inherit its credentials (clone copies the
// calling thread's).
func inUserThread(uid, gid int, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // for good: the thread dies with us
		for _, c := range []struct {
			name string
			nr   uintptr
			args [3]uintptr
		}{
			{"setgroups", syscall.SYS_SETGROUPS, [3]uintptr{0, 0, 0}},
			{"setresgid", syscall.SYS_SETRESGID, [3]uintptr{uintptr(gid), uintptr(gid), uintptr(gid)}},
			{"setresuid", syscall.SYS_SETRESUID, [3]uintptr{uintptr(uid), uintptr(uid), uintptr(uid)}},
		} {
			if _, _, e := syscall.RawSyscall(c.nr, c.args[0], c.args[1], c.args[2]); e != 0 {
				errc <- fmt.Errorf("%s: %v", c.name, e)
				return
			}
		}
		errc <- fn()
	}()
	return <-errc
}

func startUserCkptfs(ctx context.Context, b *bench) (*userCkptfs, error) {
	u, err := newBenchUser(b, "Cu", []string{b.o.ckptfs, b.o.turnctl}, "dir")
	if err != nil {
		return nil, err
	}
	t := &userCkptfs{benchUser: u}
	// Every inode the kernel remembers holds an fd in the daemon, and an
	// ordinary user's daemon cannot raise its hard limit: past 3/4 of it,
	// the daemon has the kernel forget unused inodes (fusefs/fdrelief.go),
	// and each file it forgot costs a LOOKUP when it is used again. Say
	// so when the churn goes past that mark.
	var lim unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &lim) == nil && lim.Max*3/4 < uint64(b.sz.churnFiles) {
		b.note("Cu: its daemon may open at most %d files (the hard RLIMIT_NOFILE it inherits, which an ordinary user cannot raise) and holds one per inode the kernel remembers: past %d of the churn's %d files it has the kernel forget the oldest, which its unlinks look up again", lim.Max, lim.Max*3/4, b.sz.churnFiles)
	}
	ckptfs := u.bin(b.o.ckptfs)
	dir, store := filepath.Join(u.base, "dir"), filepath.Join(u.base, "store")
	env := append(os.Environ(), u.extraEnv()...)
	c := &ckptfsTarget{b: b, store: store, socket: rundir.SocketIn(filepath.Join(u.base, "run"), dir)}
	c.daemon = daemon{
		name: "Cu",
		mnt:  dir,
		cmd:  exec.Command(ckptfs, "mount", "-f", "--store", store, dir),
		log:  filepath.Join(u.base, "daemon.log"),
		cred: u.cred(),
	}
	c.cmd.Env = env
	c.cmd.Dir = "/"
	c.unmount = func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, ckptfs, "umount", dir)
		cmd.Env, cmd.Dir = env, "/"
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: u.cred()}
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("Cu: ckptfs umount: %v: %s", err, strings.TrimSpace(string(out)))
		}
		return nil
	}
	t.ckptfsTarget = c
	if err := c.launch(ctx, b, t); err != nil {
		return nil, err
	}
	return t, nil
}

// userLoopback is Lu: the stock loopback (L) mounted by the same user
// through fusermount3, private to it and without passthrough, as Cu is:
// the FUSE floor of the private mode.
type userLoopback struct {
	*loopback
	*benchUser
}

func startUserLoopback(b *bench) (*userLoopback, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	u, err := newBenchUser(b, "Lu", []string{exe}, "backing", "mnt")
	if err != nil {
		return nil, err
	}
	l, err := startLoopbackIn(b, "Lu", u.base, u)
	if err != nil {
		return nil, err
	}
	return &userLoopback{loopback: l, benchUser: u}, nil
}
