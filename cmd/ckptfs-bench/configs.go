package main

// The configurations under test. Every mount is served by a child process
// (a go-fuse server must never be used by the process that serves it), is
// registered with the bench as soon as it exists, and is unmounted by
// Close — with MNT_DETACH as the last resort — also on error or Ctrl-C.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"ckptfs/internal/rundir"
	"ckptfs/turnctl"
)

var configNames = []string{"N", "L", "L+", "C", "Cu", "Lu"}

// configName is the configuration named s, in any case ("" if none).
func configName(s string) string {
	for _, n := range configNames {
		if strings.EqualFold(s, n) {
			return n
		}
	}
	return ""
}

// target is one configuration, ready to run workloads in Dir.
type target interface {
	Name() string
	Dir() string
	// DaemonPID is the pid whose CPU time is charged to the configuration
	// (0: none).
	DaemonPID() int
	// Begin and End bracket one timed repetition (turnctl begin/end for C).
	Begin(ctx context.Context) error
	End(ctx context.Context) error
	Close() error
}

// native is N: a plain directory.
type native struct{ dir string }

func (n *native) Name() string                    { return "N" }
func (n *native) Dir() string                     { return n.dir }
func (n *native) DaemonPID() int                  { return 0 }
func (n *native) Begin(ctx context.Context) error { return nil }
func (n *native) End(ctx context.Context) error   { return nil }
func (n *native) Close() error                    { return nil }

// daemon is a child process serving a FUSE mount at mnt.
type daemon struct {
	name string
	mnt  string
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
	err  error         // cmd.Wait's result, valid after done
	log  string        // the child's stderr

	closeOnce sync.Once
	closeErr  error
	// unmount asks the daemon to unmount; nil: send SIGTERM.
	unmount func() error
	// cred: the daemon runs as this user (nil: as the bench).
	cred *syscall.Credential
}

func (d *daemon) Name() string   { return d.name }
func (d *daemon) Dir() string    { return d.mnt }
func (d *daemon) DaemonPID() int { return d.cmd.Process.Pid }

func (d *daemon) start() error {
	d.cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid:    true,            // Ctrl-C reaches only us; we unmount in order
		Pdeathsig:  syscall.SIGTERM, // if we die, the child unmounts itself
		Credential: d.cred,
	}
	// The kernel sends Pdeathsig when the thread that forked the child
	// ends, not the process: fork from a thread locked to the goroutine
	// that waits for the child, so it lives as long as the child, and no
	// goroutine that ends its thread (inUserThread) can run on it.
	done, started := make(chan struct{}), make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := d.cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		d.err = d.cmd.Wait()
		close(done)
	}()
	if err := <-started; err != nil {
		return err
	}
	d.done = done
	return nil
}

func (d *daemon) exited() bool {
	select {
	case <-d.done:
		return true
	default:
		return false
	}
}

// exitStatus says how the daemon ended, after exited.
func (d *daemon) exitStatus() string {
	s := fmt.Sprint(d.err)
	if d.err == nil {
		s = "exit status 0"
	}
	if t := d.logTail(); t != "" {
		s += ": " + t
	}
	return s
}

// logTail is the end of the daemon's stderr, for error messages.
func (d *daemon) logTail() string {
	data, _ := os.ReadFile(d.log)
	s := strings.TrimSpace(string(data))
	if len(s) > 400 {
		s = "..." + s[len(s)-400:]
	}
	return strings.ReplaceAll(s, "\n", " | ")
}

// Close unmounts and stops the daemon, escalating to SIGKILL and a lazy
// unmount. It is safe to call more than once and concurrently.
func (d *daemon) Close() error {
	d.closeOnce.Do(func() { d.closeErr = d.close() })
	return d.closeErr
}

func (d *daemon) close() error {
	var errs []error
	if !d.exited() {
		if d.unmount != nil {
			if err := d.unmount(); err != nil {
				errs = append(errs, err)
			}
		} else {
			d.cmd.Process.Signal(syscall.SIGTERM)
		}
		if !d.wait(20 * time.Second) {
			d.cmd.Process.Signal(syscall.SIGTERM)
			if !d.wait(10 * time.Second) {
				d.cmd.Process.Kill()
				d.wait(5 * time.Second)
				errs = append(errs, fmt.Errorf("%s: daemon did not stop; killed", d.name))
			}
		}
	}
	if isMounted(d.mnt) {
		if err := syscall.Unmount(d.mnt, syscall.MNT_DETACH); err != nil {
			errs = append(errs, fmt.Errorf("%s: umount -l %s: %v", d.name, d.mnt, err))
		} else {
			errs = append(errs, fmt.Errorf("%s: %s was still mounted; detached", d.name, d.mnt))
		}
	}
	return errors.Join(errs...)
}

func (d *daemon) wait(t time.Duration) bool {
	select {
	case <-d.done:
		return true
	case <-time.After(t):
		return false
	}
}

// loopback is L or L+: this binary re-executed as "loopback".
type loopback struct{ daemon }

func (l *loopback) Begin(ctx context.Context) error { return nil }
func (l *loopback) End(ctx context.Context) error   { return nil }

func startLoopback(b *bench, name string) (*loopback, error) {
	return startLoopbackIn(b, name, filepath.Join(b.o.work, configDirName(name)), nil)
}

// startLoopbackIn starts L, L+ or Lu over base/backing, mounted on
// base/mnt: as u when u is not nil (Lu, through fusermount3; the
// directories are u's already).
func startLoopbackIn(b *bench, name, base string, u *benchUser) (*loopback, error) {
	backing, mnt := filepath.Join(base, "backing"), filepath.Join(base, "mnt")
	for _, d := range []string{backing, mnt} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	args := []string{"loopback"}
	if name == "L+" {
		args = append(args, "--opts", strings.Join(b.o.lplus, ","))
	}
	args = append(args, backing, mnt)
	l := &loopback{daemon{name: name, mnt: mnt, cmd: exec.Command(exe, args...), log: filepath.Join(base, "daemon.log")}}
	if u != nil {
		l.cmd.Path, l.cmd.Args[0] = u.bin(exe), u.bin(exe)
		l.cmd.Env, l.cmd.Dir = append(os.Environ(), u.extraEnv()...), "/"
		l.cred = u.cred()
	}
	logf, err := os.Create(l.log)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	l.cmd.Stderr = logf
	out, err := l.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := l.start(); err != nil {
		return nil, err
	}
	b.register(l)
	ready := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(out).ReadString('\n')
		ready <- strings.TrimSpace(line)
		io.Copy(io.Discard, out)
	}()
	select {
	case line := <-ready:
		if line != "ready" {
			l.Close()
			return nil, fmt.Errorf("%s: loopback did not start: %q %s", name, line, l.logTail())
		}
	case <-time.After(20 * time.Second):
		l.Close()
		return nil, fmt.Errorf("%s: loopback not ready after 20 s: %s", name, l.logTail())
	}
	if !isMounted(mnt) {
		l.Close()
		return nil, fmt.Errorf("%s: %s is not a mount after ready", name, mnt)
	}
	return l, nil
}

// ckptfsTarget is C: bin/ckptfs mount -f over a directory.
type ckptfsTarget struct {
	daemon
	b      *bench
	store  string
	socket string          // the control socket ("": rundir's for the mount)
	client *turnctl.Client // the control socket, dialed at the first turn
	// inTree: the store is the mount's own DIR/.ckptfs, hidden by the
	// mount, on a filesystem of the bench's own (an XFS image).
	inTree bool
}

// storeUsage is the space the store takes (the blocks of its files); ok
// is false for a store inside the tree, hidden by the mount (on an XFS
// image): there a statfs would also count XFS's copy-on-write
// preallocation around each block written into a cloned file (its
// cowextsize, 128 KiB), which XFS frees only once the inode leaves the
// cache, and the daemon holds it.
func (c *ckptfsTarget) storeUsage() (n int64, ok bool) {
	if c.inTree {
		return 0, false
	}
	return storeBytes(c.store), true
}

// Begin and End speak the control protocol (turnctl/doc.go) as an agent's
// hook would, without the cost of starting a turnctl process, which is a
// fixed cost per turn measured on its own ("turn boundary via the turnctl
// CLI" in the history figures).
func (c *ckptfsTarget) Begin(ctx context.Context) error {
	cl, err := c.control()
	if err != nil {
		return err
	}
	_, err = cl.Begin(ctx, turnctl.BeginRequest{})
	return err
}

func (c *ckptfsTarget) End(ctx context.Context) error {
	cl, err := c.control()
	if err != nil {
		return err
	}
	_, err = cl.End(ctx, turnctl.EndRequest{})
	return err
}

func (c *ckptfsTarget) control() (*turnctl.Client, error) {
	if c.client != nil {
		return c.client, nil
	}
	sock := c.socket
	if sock == "" {
		var err error
		if sock, err = rundir.Socket(c.mnt); err != nil {
			return nil, err
		}
	}
	var err error
	// The daemon opens its socket just after the mount goes live.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if c.client, err = turnctl.Dial(sock); err == nil || time.Now().After(deadline) {
			return c.client, err
		}
	}
}

func startCkptfs(ctx context.Context, b *bench) (*ckptfsTarget, error) {
	for _, p := range []string{b.o.ckptfs, b.o.turnctl} {
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("%v (run make build)", err)
		}
	}
	return mountCkptfs(ctx, b, filepath.Join(b.o.work, "C"), "C")
}

// mountCkptfs mounts ckptfs (root's, C) over base/dir with its store in
// base/store; what names it in errors.
func mountCkptfs(ctx context.Context, b *bench, base, what string) (*ckptfsTarget, error) {
	dir, store := filepath.Join(base, "dir"), filepath.Join(base, "store")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	c := &ckptfsTarget{b: b, store: store}
	c.daemon = daemon{
		name: "C",
		mnt:  dir,
		cmd:  exec.Command(b.o.ckptfs, "mount", "-f", "--store", store, dir),
		log:  filepath.Join(base, "daemon.log"),
	}
	c.unmount = func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, b.o.ckptfs, "umount", dir).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%s: ckptfs umount: %v: %s", what, err, strings.TrimSpace(string(out)))
		}
		return nil
	}
	if err := c.launch(ctx, b, c); err != nil {
		return nil, err
	}
	return c, nil
}

// launch starts the daemon, registers self (c, or what wraps it) for
// cleanup, waits for the mount, and opens and closes a turn as self's
// user.
func (c *ckptfsTarget) launch(ctx context.Context, b *bench, self target) error {
	logf, err := os.Create(c.log)
	if err != nil {
		return err
	}
	defer logf.Close()
	c.cmd.Stdout, c.cmd.Stderr = logf, logf
	if err := c.start(); err != nil {
		return err
	}
	b.register(self)
	deadline := time.Now().Add(30 * time.Second)
	for !isMounted(c.mnt) {
		if c.exited() {
			c.Close()
			return fmt.Errorf("ckptfs mount exited (%v): %s", c.err, c.logTail())
		}
		if time.Now().After(deadline) {
			c.Close()
			return fmt.Errorf("ckptfs mount: not mounted after 30 s: %s", c.logTail())
		}
		time.Sleep(20 * time.Millisecond)
	}
	// A turn must open and close before we trust the configuration.
	err = asTarget(self, func() error {
		if err := c.Begin(ctx); err != nil {
			return err
		}
		return c.End(ctx)
	})
	if err != nil {
		c.Close()
	}
	return err
}

// turnctlCmd runs turnctl -C dir args... and returns its stdout.
func (b *bench) turnctlCmd(ctx context.Context, dir string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, b.o.turnctl, append([]string{"-C", dir}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("turnctl %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

func configDirName(name string) string {
	return strings.ReplaceAll(name, "+", "plus")
}

// isMounted reports whether dir is a mount point (per /proc/self/mountinfo).
func isMounted(dir string) bool {
	for _, m := range mountsUnder(dir) {
		if m == dir {
			return true
		}
	}
	return false
}

// mountsUnder lists the mount points at or below dir, deepest first.
func mountsUnder(dir string) []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var ms []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMount(fields[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			ms = append([]string{mp}, ms...)
		}
	}
	return ms
}

// unescapeMount undoes mountinfo's octal escapes (\040 for space, ...).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var sb strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				sb.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		sb.WriteByte(s[i])
	}
	return sb.String()
}

// cpuSeconds is utime+stime of pid in seconds (all threads), or -1.
func cpuSeconds(pid int) float64 {
	if pid <= 0 {
		return -1
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return -1
	}
	return parseStatCPU(string(data))
}

// clockTicks is sysconf(_SC_CLK_TCK): 100 on every Linux we run on.
const clockTicks = 100

func parseStatCPU(stat string) float64 {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return -1
	}
	// After "pid (comm) ": state is field 3; utime and stime are 14 and 15.
	f := strings.Fields(stat[i+1:])
	if len(f) < 13 {
		return -1
	}
	ut, err1 := strconv.ParseUint(f[11], 10, 64)
	st, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return -1
	}
	return float64(ut+st) / clockTicks
}

// ext4WithoutJournal names the device of the ext4 filesystem dir is on
// when that filesystem has no journal ("": it has one, or is not ext4).
// Such an ext4 skips inodes freed in the last minute or more when it
// allocates new ones, scanning its inode table for them (the kernel's
// recently_deleted): creating many files right after many were deleted
// costs up to ten times what it costs otherwise.
func ext4WithoutJournal(dir string) string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	dev := ext4DeviceOf(f, dir)
	if dev == "" {
		return ""
	}
	if _, err := os.Stat("/proc/fs/jbd2/" + dev + "-8"); err == nil {
		return ""
	}
	return dev
}

// ext4DeviceOf reads a mountinfo and names the device (its base name) of
// the filesystem mounted deepest above dir, when that is ext4.
func ext4DeviceOf(mountinfo io.Reader, dir string) string {
	best, dev := "", ""
	sc := bufio.NewScanner(mountinfo)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		sep := slices.Index(fields, "-")
		if len(fields) < 5 || sep < 0 || sep+2 >= len(fields) {
			continue
		}
		mp := unescapeMount(fields[4])
		if (mp == dir || mp == "/" || strings.HasPrefix(dir, mp+"/")) && len(mp) >= len(best) {
			best, dev = mp, ""
			if fields[sep+1] == "ext4" {
				dev = filepath.Base(unescapeMount(fields[sep+2]))
			}
		}
	}
	return dev
}
