package tests

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"ckptfs/internal/rundir"
)

// The mount made by an ordinary user (through fusermount3, private to that
// user) and what everyone else is told about it. A private mount refuses
// every other user, root included, so these tests run their checks as the
// mounting user: a user the test creates (useradd), with /dev/fuse made
// usable (mode 0666, as distributions ship it; .ci/run does the same).

// testUserName is the unprivileged user the tests create and act as.
const testUserName = "ckptfs-test"

var (
	unprivOnce sync.Once
	unprivUID  uint32
	unprivGID  uint32
	unprivErr  error
)

// unprivileged returns the test user's uid and gid, creating the user if
// it is missing and making /dev/fuse and the test binaries usable by it.
func unprivileged(t *testing.T) (uid, gid uint32) {
	t.Helper()
	unprivOnce.Do(func() {
		if _, err := user.Lookup(testUserName); err != nil {
			out, err := exec.Command("useradd", "--system", "--user-group", "--no-create-home",
				"--shell", "/usr/sbin/nologin", testUserName).CombinedOutput()
			if err != nil {
				unprivErr = fmt.Errorf("useradd %s: %v: %s", testUserName, err, out)
				return
			}
		}
		u, err := user.Lookup(testUserName)
		if err != nil {
			unprivErr = err
			return
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		unprivUID, unprivGID = uint32(uid), uint32(gid)
		if err := os.Chmod("/dev/fuse", 0o666); err != nil {
			unprivErr = fmt.Errorf("make /dev/fuse usable: %v", err)
			return
		}
		if _, err := exec.LookPath("fusermount3"); err != nil {
			unprivErr = fmt.Errorf("fusermount3 is missing (Debian: apt-get install fuse3; .ci/run installs it): %v", err)
			return
		}
		// The binaries' directory is made 0700 by MkdirTemp.
		unprivErr = os.Chmod(binDir, 0o755)
	})
	if unprivErr != nil {
		t.Fatal(unprivErr)
	}
	return unprivUID, unprivGID
}

// userProject is a project owned by the test user, with that user's home
// and runtime directory beside it.
type userProject struct {
	Dir      string // the project (the mount point)
	Home     string
	Runtime  string // CKPTFS_RUNTIME_DIR of the user's commands and of the test
	uid, gid uint32
}

// newUserProject makes a project directory owned by the test user, in a
// temporary directory the user can reach. The test's own runtime
// directory is root's own; info reads the user's mounts' info files.
func newUserProject(t *testing.T) *userProject {
	t.Helper()
	uid, gid := unprivileged(t)
	base := t.TempDir()
	// t.TempDir's directories are 0700: open the way down to base.
	for _, d := range []string{filepath.Dir(base), base} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	p := &userProject{Dir: filepath.Join(base, "proj"), Home: filepath.Join(base, "home"), Runtime: filepath.Join(base, "run"), uid: uid, gid: gid}
	for _, d := range []string{p.Dir, p.Home, p.Runtime} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(d, int(uid), int(gid)); err != nil {
			t.Fatal(err)
		}
	}
	os.Chmod(p.Dir, 0o755)
	setRuntimeDir(t) // root's own: the user's is theirs alone (rundir)
	return p
}

// info reads the info file of the user's mount in the user's runtime
// directory.
func (p *userProject) info() (rundir.Info, error) { return rundir.ReadInfoIn(p.Runtime, p.Dir) }

// cmd returns a command that runs as the test user in dir, with a fixed
// environment (git dates, its own home and runtime directory).
func (p *userProject) cmd(dir, name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: p.uid, Gid: p.gid, Groups: []uint32{}}}
	cmd.Env = []string{
		"PATH=" + binDir + ":/usr/local/bin:/usr/bin:/bin", "HOME=" + p.Home,
		"CKPTFS_RUNTIME_DIR=" + p.Runtime, "LC_ALL=C", "TZ=UTC",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com",
		"GIT_AUTHOR_DATE=2026-01-01T00:00:00Z", "GIT_COMMITTER_DATE=2026-01-01T00:00:00Z",
		"GIT_CONFIG_NOSYSTEM=1",
	}
	return cmd
}

// run runs name args as the user in dir and returns the combined output;
// it fails the test if the command fails.
func (p *userProject) run(t *testing.T, dir, name string, args ...string) string {
	t.Helper()
	out, err := p.try(dir, name, args...)
	if err != nil {
		t.Fatalf("as %s in %s: %s %s: %v\n%s", testUserName, dir, name, strings.Join(args, " "), err, out)
	}
	return out
}

// try runs name args as the user in dir and returns the combined output.
func (p *userProject) try(dir, name string, args ...string) (string, error) {
	cmd := p.cmd(dir, name, args...)
	var b bytes.Buffer
	cmd.Stdout, cmd.Stderr = &b, &b
	err := cmd.Run()
	return b.String(), err
}

// sh runs a bash script as the user in the project.
func (p *userProject) sh(t *testing.T, script string) string {
	t.Helper()
	return p.run(t, p.Dir, "bash", "-euo", "pipefail", "-c", script)
}

// listing is the state of every path under the project as the user sees
// it: type, mode, symlink target, and each regular file's sha256 — read
// through the mount by the user, the only one who may.
func (p *userProject) listing(t *testing.T) string {
	t.Helper()
	return p.sh(t, `{ find . -mindepth 1 -path ./.ckptfs -prune -o -printf '%y %#m %P %l\n'
		find . -path ./.ckptfs -prune -o -type f -print0 | xargs -0 -r sha256sum; } | sort`)
}

// mount mounts the project as the user and unmounts it when the test
// ends, also on failure: ckptfs umount as the user, then (as root) a
// SIGKILL of the daemon and a lazy detach.
func (p *userProject) mount(t *testing.T) {
	t.Helper()
	p.run(t, p.Dir, ckptfsBin, "mount", p.Dir)
	p.cleanupMount(t)
}

// mountLimited is mount with the daemon's open-file limit, soft and hard,
// at nofile: what a user whose hard limit is low gets; each word of env
// (NAME=VALUE) is added to the daemon's environment.
func (p *userProject) mountLimited(t *testing.T, nofile int, env ...string) {
	t.Helper()
	script := fmt.Sprintf(`ulimit -n %d && exec env %s "$0" mount "$1"`, nofile, strings.Join(env, " "))
	p.run(t, p.Dir, "bash", "-c", script, ckptfsBin, p.Dir)
	p.cleanupMount(t)
}

// cleanupMount unmounts the project when the test ends (see mount).
func (p *userProject) cleanupMount(t *testing.T) {
	t.Cleanup(func() {
		if rundir.IsMounted(p.Dir) {
			pid := 0
			if info, err := p.info(); err == nil {
				pid = info.PID
			}
			cmd := p.cmd("/", ckptfsBin, "umount", p.Dir)
			cmd.Start()
			done := make(chan struct{})
			go func() { cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(15 * time.Second):
				t.Errorf("ckptfs umount %s as %s hung", p.Dir, testUserName)
			}
			if rundir.IsMounted(p.Dir) {
				if pid > 0 {
					syscall.Kill(pid, syscall.SIGKILL)
				}
				unix.Unmount(p.Dir, unix.MNT_DETACH)
			}
			if rundir.IsMounted(p.Dir) {
				t.Errorf("%s is still mounted after cleanup", p.Dir)
			}
		}
		checkDaemonLog(t, filepath.Join(p.Dir, ".ckptfs"))
	})
}

// TestUserMount runs the main scenario as an ordinary user: mount (private,
// through fusermount3), turns of real tools, log, rewind, undo, restore,
// status from a subdirectory, umount; then checks bytes, modes and owners
// on disk.
func TestUserMount(t *testing.T) {
	needTurnctl(t)
	p := newUserProject(t)
	p.sh(t, `
		mkdir -p src/pkg docs build
		printf 'package main\n\nfunc foo() int { return 1 }\n' > src/main.go
		printf 'hello\nworld\n' > docs/readme.txt
		printf '#!/bin/sh\necho hi\n' > run.sh && chmod 0755 run.sh
		for i in 1 2 3; do echo obj$i > build/o$i; done
		head -c 20000 /dev/urandom > blob.bin
		git init -q -b main . && git add -A && git commit -qm init`)
	p.mount(t)

	// Private: the kernel shows the user as its owner, no allow_other,
	// and refuses everyone else, root included.
	m, err := rundir.Lookup(p.Dir)
	if err != nil || m.Dir != p.Dir || m.UID != int(p.uid) || m.AllowOther {
		t.Fatalf("mount table: %+v %v; want %s owned by uid %d, without allow_other", m, err, p.Dir, p.uid)
	}
	if _, err := os.Stat(filepath.Join(p.Dir, "src")); !os.IsPermission(err) {
		t.Errorf("root entered the private mount: %v", err)
	}
	info, err := p.info()
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(fmt.Sprintf("/proc/%d", info.PID)); err != nil || st.Sys().(*syscall.Stat_t).Uid != p.uid {
		t.Errorf("the daemon does not run as uid %d: %v", p.uid, err)
	}

	states := []string{p.listing(t)} // turn 0
	work := []string{
		`sed -i 's/return 1/return 42/' src/main.go; echo new > src/pkg/new.go; chmod 0600 docs/readme.txt`,
		`rm -rf build; mv docs documentation; ln -s src/main.go link.go; ln -s missing dangling`,
		`head -c 30000 /dev/urandom > blob.bin; truncate -s 3 src/pkg/new.go; mkdir empty; git add -A; git commit -qm two`,
	}
	for i, w := range work {
		p.run(t, p.Dir, turnctlBin, "begin", "--label", fmt.Sprintf("turn %d", i+1))
		p.sh(t, w)
		p.run(t, p.Dir, turnctlBin, "end")
		states = append(states, p.listing(t))
	}
	log := p.run(t, filepath.Join(p.Dir, "src"), turnctlBin, "log")
	for _, want := range []string{"turn 1", "turn 2", "turn 3", "sed"} {
		if !strings.Contains(log, want) {
			t.Errorf("turnctl log lacks %q:\n%s", want, log)
		}
	}
	// ckptfs status from a subdirectory finds the mount.
	st := p.run(t, filepath.Join(p.Dir, "src/pkg"), ckptfsBin, "status")
	if !strings.Contains(st, "dir:     "+p.Dir+"\n") || !strings.Contains(st, "mounted: yes") || !strings.Contains(st, "private") || !strings.Contains(st, "latest:  turn 3\n") {
		t.Errorf("ckptfs status in src/pkg:\n%s", st)
	}

	// Rewinds as the user; every file was read through the mount before
	// (the kernel keeps its pages), so this checks they are dropped too.
	for _, n := range []int{1, 0, 2} {
		p.run(t, p.Dir, turnctlBin, "rewind", strconv.Itoa(n))
		if got := p.listing(t); got != states[n] {
			t.Fatalf("after rewind %d:\n%s\nwant:\n%s", n, got, states[n])
		}
	}
	p.run(t, "/", turnctlBin, "-C", p.Dir, "undo") // the rewind to 2
	if got := p.listing(t); got != states[0] {
		t.Fatalf("after undo of the rewind to 2:\n%s\nwant:\n%s", got, states[0])
	}
	p.run(t, p.Dir, turnctlBin, "restore", "3", "--", "blob.bin", "src")
	final := p.listing(t)
	p.run(t, "/", ckptfsBin, "umount", p.Dir)
	if rundir.IsMounted(p.Dir) {
		t.Fatalf("%s still mounted after ckptfs umount", p.Dir)
	}

	// On disk, as root: what the user saw through the mount, owned by
	// the user (the daemon created the files as the user).
	if got := p.listing(t); got != final {
		t.Errorf("the backing tree after umount:\n%s\nwant what the mount showed:\n%s", got, final)
	}
	main, _ := os.ReadFile(filepath.Join(p.Dir, "src/main.go"))
	if !strings.Contains(string(main), "return 42") {
		t.Errorf("src/main.go = %q, want turn 3's", main)
	}
	if b, _ := os.ReadFile(filepath.Join(p.Dir, "src/pkg/new.go")); string(b) != "new" {
		t.Errorf("src/pkg/new.go = %q, want turn 3's %q", b, "new")
	}
	if fi, err := os.Lstat(filepath.Join(p.Dir, "docs/readme.txt")); err != nil || fi.Mode() != 0o644 {
		t.Errorf("docs/readme.txt: %v %v, want turn 0's 0644", fi, err)
	}
	if fi, err := os.Lstat(filepath.Join(p.Dir, "run.sh")); err != nil || fi.Mode() != 0o755 {
		t.Errorf("run.sh: %v %v, want 0755", fi, err)
	}
	for _, f := range []string{"src/pkg/new.go", "blob.bin", ".ckptfs/daemon.log"} {
		fi, err := os.Lstat(filepath.Join(p.Dir, f))
		if err != nil || fi.Sys().(*syscall.Stat_t).Uid != p.uid {
			t.Errorf("%s: %v, want it owned by uid %d", f, err, p.uid)
		}
	}
}

// TestForeignMount: a mount that belongs to another user is named as such
// by every command that would otherwise look for its daemon ("mounted by
// uid N; ask its owner"), in both directions: root at a user's private
// mount, a user in root's shared one.
func TestForeignMount(t *testing.T) {
	needTurnctl(t)
	p := newUserProject(t)
	p.mount(t)
	owner := fmt.Sprintf("%s is mounted by uid %d (%s); ask its owner", p.Dir, p.uid, testUserName)
	oneLine := func(what, out string, err error, prefix string) {
		t.Helper()
		if exitCode(err) != 1 || out != prefix+owner+"\n" {
			t.Errorf("%s: exit %d, output %q; want exit 1 and %q", what, exitCode(err), out, prefix+owner+"\n")
		}
	}
	out, err := runTurnctl(t, p.Dir, "status")
	oneLine("turnctl -C DIR status as root", out, err, "turnctl: ")
	out, err = runTurnctl(t, filepath.Join(p.Dir, "sub"), "log")
	oneLine("turnctl -C DIR/sub log as root", out, err, "turnctl: ")
	out, err = runCkptfs("umount", p.Dir)
	oneLine("ckptfs umount as root", out, err, "ckptfs: umount: ")
	out, err = runCkptfs("mount", p.Dir)
	oneLine("ckptfs mount as root", out, err, "ckptfs: mount: ")
	out, err = runCkptfs("status", p.Dir)
	if err != nil || !strings.Contains(out, fmt.Sprintf("mounted: yes, by uid %d (%s), private", p.uid, testUserName)) || !strings.Contains(out, owner) {
		t.Errorf("ckptfs status as root: %v\n%s", err, out)
	}
	if !rundir.IsMounted(p.Dir) {
		t.Fatal("a refused umount unmounted")
	}

	// Root's shared mount, seen by the user from inside it.
	shared := t.TempDir()
	os.Chmod(filepath.Dir(shared), 0o755)
	os.Chmod(shared, 0o777)
	os.Mkdir(filepath.Join(shared, "sub"), 0o777)
	os.Chmod(filepath.Join(shared, "sub"), 0o777)
	mountProject(t, shared)
	rootOwned := fmt.Sprintf("turnctl: %s is mounted by uid 0 (root); ask its owner\n", shared)
	for _, args := range [][]string{{"status"}, {"begin"}, {"-C", shared, "log"}} {
		out, err := p.try(filepath.Join(shared, "sub"), turnctlBin, args...)
		if exitCode(err) != 1 || out != rootOwned {
			t.Errorf("turnctl %v as %s in root's mount: exit %d, %q; want exit 1 and %q", args, testUserName, exitCode(err), out, rootOwned)
		}
	}
}

// TestUserMountRefusals: what fusermount3 would refuse, ckptfs refuses
// first, in one line that says what to do.
func TestUserMountRefusals(t *testing.T) {
	p := newUserProject(t)
	other := filepath.Join(filepath.Dir(p.Dir), "rootowned")
	os.Mkdir(other, 0o755)
	if _, err := os.Stat("/etc/fuse.conf"); err == nil && userAllowOther(t) {
		t.Log("/etc/fuse.conf allows user_allow_other: --allow-other case skipped")
	} else {
		out, err := p.try(p.Dir, ckptfsBin, "mount", "--allow-other", p.Dir)
		if exitCode(err) != 1 || !strings.Contains(out, "user_allow_other") || strings.Count(out, "\n") != 1 {
			t.Errorf("mount --allow-other as a user: exit %d, %q", exitCode(err), out)
		}
	}
	out, err := p.try(p.Dir, ckptfsBin, "mount", other)
	if exitCode(err) != 1 || !strings.Contains(out, "not writable by uid") || strings.Count(out, "\n") != 1 {
		t.Errorf("mount of a directory the user may not write: exit %d, %q", exitCode(err), out)
	}
	if rundir.IsMounted(p.Dir) || rundir.IsMounted(other) {
		t.Fatal("a refused mount mounted")
	}
	if _, err := os.Stat(filepath.Join(other, ".ckptfs")); err == nil {
		t.Error("a refused mount created a store")
	}
}

func userAllowOther(t *testing.T) bool {
	b, _ := os.ReadFile("/etc/fuse.conf")
	for _, l := range strings.Split(string(b), "\n") {
		if strings.TrimSpace(l) == "user_allow_other" {
			return true
		}
	}
	return false
}

// TestUserMountUnreadableFiles: files whose mode denies their owner read
// permission (0200, 0000), which root reads anyway, are the user's own in
// a private mount: the daemon keeps their bytes before a write or an
// unlink, and show, log, cat and rewind read them back, instead of an EIO
// for the write and an "attic file ... permission denied" that called the
// store corrupt and refused every rewind past the unlink.
func TestUserMountUnreadableFiles(t *testing.T) {
	needTurnctl(t)
	p := newUserProject(t)
	p.sh(t, `echo secret > wo && chmod 0200 wo
		echo zero > z && chmod 0000 z
		echo q > q`)
	p.mount(t)
	p.run(t, p.Dir, turnctlBin, "begin", "--label", "unreadable")
	p.sh(t, `echo overwritten > wo; rm z; chmod 0000 q`)
	p.run(t, p.Dir, turnctlBin, "end")
	show := p.run(t, p.Dir, turnctlBin, "show", "1")
	for _, want := range []string{"modified  wo", "deleted   z", "mode      q"} {
		if !strings.Contains(strings.Join(strings.Fields(show), " "), strings.Join(strings.Fields(want), " ")) {
			t.Errorf("turnctl show 1 lacks %q:\n%s", want, show)
		}
	}
	p.run(t, p.Dir, turnctlBin, "log")
	if got := p.run(t, p.Dir, turnctlBin, "cat", "0", "q"); got != "q\n" {
		t.Errorf("turnctl cat 0 q = %q, want %q", got, "q\n")
	}
	if got := p.run(t, p.Dir, turnctlBin, "cat", "0", "z"); got != "zero\n" {
		t.Errorf("turnctl cat 0 z = %q, want %q", got, "zero\n")
	}
	p.run(t, p.Dir, turnctlBin, "rewind", "0")
	p.run(t, "/", ckptfsBin, "umount", p.Dir)
	// As root, who reads any mode: bytes and modes as at turn 0.
	for name, want := range map[string]struct {
		bytes string
		mode  os.FileMode
	}{"wo": {"secret\n", 0o200}, "z": {"zero\n", 0}, "q": {"q\n", 0o644}} {
		b, err := os.ReadFile(filepath.Join(p.Dir, name))
		fi, serr := os.Lstat(filepath.Join(p.Dir, name))
		if err != nil || serr != nil || string(b) != want.bytes || fi.Mode() != want.mode {
			t.Errorf("%s after rewind 0: %q %v %v; want %q mode %v", name, b, fi.Mode(), err, want.bytes, want.mode)
		}
	}
}

// TestUserMountReadOnlyDir: a rewind changes the entries of directories
// whose mode denies their owner write permission (0555: a tree made
// read-only, Go's module cache), as root's does, instead of failing
// half-way with "permission denied"; the directories keep their modes.
func TestUserMountReadOnlyDir(t *testing.T) {
	needTurnctl(t)
	p := newUserProject(t)
	p.sh(t, `mkdir ro && echo a > ro/a && chmod 0555 ro`)
	p.mount(t)
	before := p.listing(t)
	p.run(t, p.Dir, turnctlBin, "begin", "--label", "read-only dirs")
	p.sh(t, `chmod 0755 ro; rm ro/a; echo c > ro/c; chmod 0555 ro
		mkdir -p mod/x/y && echo f > mod/x/y/f && chmod -R a-w mod`)
	p.run(t, p.Dir, turnctlBin, "end")
	after := p.listing(t)
	p.run(t, p.Dir, turnctlBin, "rewind", "0")
	if got := p.listing(t); got != before {
		t.Fatalf("after rewind 0:\n%s\nwant:\n%s", got, before)
	}
	p.run(t, p.Dir, turnctlBin, "undo")
	if got := p.listing(t); got != after {
		t.Fatalf("after undo:\n%s\nwant:\n%s", got, after)
	}
}

// TestUserMountKeepsSetgidBits: the daemon running as the user gives its
// owner read permission on an unreadable file, or write permission on a
// read-only directory, for a moment by chmod; the kernel clears the
// set-group-ID bit in a chmod by someone not in the inode's group (here
// the user, of a directory and a file of group 0). Such a mode is left
// alone: the bit was lost for good, from the live file at the capture of
// a write and from the directory at a rewind into it.
func TestUserMountKeepsSetgidBits(t *testing.T) {
	needTurnctl(t)
	p := newUserProject(t)
	p.sh(t, `mkdir sg && echo a > sg/f && echo secret > sgf`)
	for name, mode := range map[string]os.FileMode{"sg": 0o555 | os.ModeDir, "sgf": 0o200} {
		path := filepath.Join(p.Dir, name)
		if err := os.Chown(path, int(p.uid), 0); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, mode.Perm()|os.ModeSetgid); err != nil {
			t.Fatal(err)
		}
	}
	modes := func() string { return p.sh(t, `stat -c '%n %a' sg sgf`) }
	want := "sg 2555\nsgf 2200\n"
	p.mount(t)
	p.run(t, p.Dir, turnctlBin, "begin", "--label", "writes")
	p.try(p.Dir, "bash", "-c", "echo b > sg/f; echo new > sgf") // sgf's may fail (EIO)
	p.run(t, p.Dir, turnctlBin, "end")
	if got := modes(); got != want {
		t.Errorf("after the writes: %q, want %q", got, want)
	}
	out, err := p.try(p.Dir, turnctlBin, "rewind", "0")
	t.Logf("turnctl rewind 0: %v\n%s", err, out)
	if got := modes(); got != want {
		t.Errorf("after the rewind: %q, want %q", got, want)
	}
}

// TestUserOfflineReadOfAnUnreadableFile: turnctl run as the user without
// a mount reads a live file whose mode denies its owner reading by giving
// the owner read permission for a moment, which moves the file's ctime.
// That read is no change: the next mount records no turn "changed while
// unmounted" for it (whose bytes it would have taken as never seen).
func TestUserOfflineReadOfAnUnreadableFile(t *testing.T) {
	needTurnctl(t)
	p := newUserProject(t)
	p.sh(t, `echo q > q; echo r > r`)
	p.mount(t)
	p.run(t, p.Dir, turnctlBin, "begin", "--label", "unreadable")
	p.sh(t, `chmod 0000 q; echo rr > r`)
	p.run(t, p.Dir, turnctlBin, "end")
	p.run(t, "/", ckptfsBin, "umount", p.Dir)
	if got := p.run(t, p.Dir, turnctlBin, "cat", "0", "q"); got != "q\n" {
		t.Errorf("turnctl cat 0 q, unmounted = %q, want %q", got, "q\n")
	}
	p.run(t, p.Dir, turnctlBin, "show", "1")
	p.mount(t)
	if log := p.run(t, p.Dir, turnctlBin, "log"); strings.Contains(log, "changed while unmounted") {
		t.Errorf("reading q while unmounted was recorded as a change:\n%s", log)
	}
	if got := p.run(t, p.Dir, turnctlBin, "cat", "0", "q"); got != "q\n" {
		t.Errorf("turnctl cat 0 q = %q, want %q", got, "q\n")
	}
}

// TestUserMountRewindRefusesRootsDirectory: a directory of root's, made
// while the project was not mounted (docker bind mounts and sudo do
// that), is not one whose entries a private mount's daemon may change. A
// rewind that would change it used to
// fail half-way ("remove rootdir/f: permission denied"), fail again
// undoing what it had not changed ("create rootdir/f"), and leave its
// turn open, so the user's next edits went into a "rewind" turn credited
// to turnctl. A rewind, its dry run, a restore or a revert that would
// change it must refuse before it changes anything or opens a turn,
// in one line naming the directory, and leave the log and the tree as
// they were; a rewind that does not touch the directory still works.
func TestUserMountRewindRefusesRootsDirectory(t *testing.T) {
	needTurnctl(t)
	p := newUserProject(t)
	p.sh(t, `echo a > a`)
	p.mount(t)
	p.run(t, p.Dir, turnctlBin, "begin", "--label", "first")
	p.sh(t, `echo b > b`)
	p.run(t, p.Dir, turnctlBin, "end")
	p.run(t, "/", ckptfsBin, "umount", p.Dir)
	// As root, while unmounted.
	rootdir := filepath.Join(p.Dir, "rootdir")
	if err := os.Mkdir(rootdir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(rootdir, "f"), []byte("r\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	onDisk := func() string {
		t.Helper()
		var b strings.Builder
		for _, name := range []string{"a", "b", "rootdir", "rootdir/f"} {
			var st unix.Stat_t
			if err := unix.Lstat(filepath.Join(p.Dir, name), &st); err != nil {
				t.Fatal(err)
			}
			data, _ := os.ReadFile(filepath.Join(p.Dir, name))
			fmt.Fprintf(&b, "%s %o %d:%d %q\n", name, st.Mode, st.Uid, st.Gid, data)
		}
		return b.String()
	}
	disk := onDisk()
	p.mount(t) // records the offline turn 2
	log := p.run(t, p.Dir, turnctlBin, "log")
	listing := p.listing(t)
	want := fmt.Sprintf("rootdir is owned by uid 0 and not writable by you (uid %d)", p.uid)
	for _, args := range [][]string{
		{"rewind", "1"}, {"rewind", "--dry-run", "1"}, {"restore", "1", "rootdir"},
		{"restore", "--dry-run", "1", "rootdir"}, {"revert", "2"}, {"revert", "--dry-run", "2"},
	} {
		out, err := p.try(p.Dir, turnctlBin, args...)
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Errorf("turnctl %s: %v, want exit status 1\n%s", strings.Join(args, " "), err, out)
		}
		what := map[string]string{"rewind": "rewind to turn 1", "restore": "restore of rootdir from turn 1", "revert": "revert of turn 2"}[args[0]]
		noun := args[0]
		line := fmt.Sprintf("turnctl: %s refused: %s; a %s running as you cannot change it; nothing changed\n", what, want, noun)
		if out != line {
			t.Errorf("turnctl %s said:\n%s\nwant:\n%s", strings.Join(args, " "), out, line)
		}
		if got := p.run(t, p.Dir, turnctlBin, "log"); got != log {
			t.Errorf("turnctl log after turnctl %s:\n%s\nwant, as before:\n%s", strings.Join(args, " "), got, log)
		}
		var st struct{ Open bool }
		if out := p.run(t, p.Dir, turnctlBin, "--json", "status"); json.Unmarshal([]byte(out), &st) != nil || st.Open {
			t.Errorf("turnctl status after turnctl %s: a turn is open:\n%s", strings.Join(args, " "), out)
		}
		if got := p.listing(t); got != listing {
			t.Errorf("the tree after turnctl %s:\n%s\nwant, as before:\n%s", strings.Join(args, " "), got, listing)
		}
	}
	// A rewind that leaves rootdir alone works.
	p.run(t, p.Dir, turnctlBin, "begin", "--label", "third")
	p.sh(t, `echo c > c`)
	p.run(t, p.Dir, turnctlBin, "end")
	p.run(t, p.Dir, turnctlBin, "rewind", "2")
	if got := p.listing(t); got != listing {
		t.Errorf("the tree after turnctl rewind 2:\n%s\nwant:\n%s", got, listing)
	}
	p.run(t, "/", ckptfsBin, "umount", p.Dir)
	if got := onDisk(); got != disk {
		t.Errorf("on disk after the refusals:\n%s\nwant, as before:\n%s", got, disk)
	}
}

// TestUserMountChecksSearchPermission: a directory made unsearchable
// (chmod 000) refuses its files at once, though the kernel has their
// entries cached: the private mount has default_permissions too. Before,
// cat of a file read a moment earlier went through, ls of the directory
// did not. (access(2) of a 0444 file, also checked, said no before too.)
func TestUserMountChecksSearchPermission(t *testing.T) {
	p := newUserProject(t)
	p.sh(t, `mkdir d && echo secret > d/f && chmod 0700 d && echo ro > ro && chmod 0444 ro`)
	p.mount(t)
	out := p.sh(t, `cat d/f; chmod 000 d
		if cat d/f 2>/dev/null; then echo "read through an unsearchable directory"; fi
		if stat d/f >/dev/null 2>&1; then echo "stat through an unsearchable directory"; fi
		chmod 0700 d
		if [ -w ro ]; then echo "access(2) says a 0444 file is writable"; fi`)
	if out != "secret\n" {
		t.Errorf("the user's checks said:\n%s", out)
	}
}

// TestUserMountUnsearchableDir: a directory of the user's own made 0600
// (no search permission) inside a turn: the user's daemon, which cannot
// pass it, gives itself search permission for the moment it needs, as the
// user could by chmod. A rewind removes it, an undo brings it back with
// its mode and file, and the project unmounts and mounts again. Before,
// every rewind failed on it, and so did the umount's record of the tree
// and the next mount: the project could not be mounted until a chmod.
func TestUserMountUnsearchableDir(t *testing.T) {
	needTurnctl(t)
	p := newUserProject(t)
	p.sh(t, `echo v1 > a`)
	p.mount(t)
	p.run(t, p.Dir, turnctlBin, "begin")
	p.sh(t, `echo v2 > a; mkdir d; echo x > d/f; chmod 600 d`)
	p.run(t, p.Dir, turnctlBin, "end")
	p.run(t, p.Dir, turnctlBin, "rewind", "0")
	if got := p.sh(t, `cat a; ls`); got != "v1\na\n" {
		t.Errorf("after rewind 0: %q", got)
	}
	p.run(t, p.Dir, turnctlBin, "undo")
	if got := p.sh(t, `cat a; stat -c %a d`); got != "v2\n600\n" {
		t.Errorf("after the undo: %q", got)
	}
	p.run(t, "/", ckptfsBin, "umount", p.Dir)
	p.run(t, p.Dir, ckptfsBin, "mount", p.Dir)
	if got := p.sh(t, `stat -c %a d; chmod 700 d; cat d/f; chmod 600 d`); got != "600\nx\n" {
		t.Errorf("after umount and mount: %q", got)
	}
	p.run(t, p.Dir, turnctlBin, "rewind", "0")
	if got := p.sh(t, `ls`); got != "a\n" {
		t.Errorf("after a second rewind 0: %q", got)
	}

	// Nested: the unsearchable directory two levels above the file.
	p.run(t, p.Dir, turnctlBin, "begin")
	p.sh(t, `echo v3 > a; mkdir -p n/e; echo y > n/e/f; chmod 700 n/e; chmod 600 n`)
	p.run(t, p.Dir, turnctlBin, "end")
	p.run(t, p.Dir, turnctlBin, "rewind", "0")
	p.run(t, p.Dir, turnctlBin, "undo")
	if got := p.sh(t, `cat a; stat -c %a n; chmod 700 n; stat -c %a n/e; cat n/e/f; chmod 600 n`); got != "v3\n600\n700\ny\n" {
		t.Errorf("after the undo of a rewind past a nested one: %q", got)
	}

	// Directories it may not list (0300, 0000), removed by a rewind and
	// made again by its undo, their modes as they were.
	p.run(t, p.Dir, turnctlBin, "begin")
	p.sh(t, `mkdir w z; echo w > w/f; echo z > z/f; chmod 300 w; chmod 000 z`)
	p.run(t, p.Dir, turnctlBin, "end")
	p.run(t, p.Dir, turnctlBin, "rewind", "0")
	if got := p.sh(t, `ls`); got != "a\n" {
		t.Errorf("after a rewind past 0300 and 0000 directories: %q", got)
	}
	p.run(t, p.Dir, turnctlBin, "undo")
	if got := p.sh(t, `stat -c %a w z; chmod 700 w z; cat w/f z/f; chmod 300 w; chmod 000 z`); got != "300\n0\nw\nz\n" {
		t.Errorf("after the undo: %q", got)
	}
}
