package tests

import (
	"bufio"
	"context"
	"fmt"
	"io"
	mrand "math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"ckptfs/internal/rundir"
	"ckptfs/turnctl"
)

// TestMmapWritesBeforeABoundaryAreInItsTurn: pages written through a
// shared mmap that is still mapped at a turn boundary are in the turn
// that wrote them, and a rewind to before it gives the old bytes back.
// (syncfs alone started their writeback without waiting for it: they
// arrived after the boundary, in a turn of their own.)
func TestMmapWritesBeforeABoundaryAreInItsTurn(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"a": "hello\n", "b": "other\n"})
	mountProject(t, dir)
	if _, err := runTurnctl(t, dir, "begin", "--label", "mapped"); err != nil {
		t.Fatal(err)
	}
	// Another process maps a and writes through the mapping, and keeps
	// it mapped until the boundary is over.
	py := exec.Command("python3", "-c", `
import mmap, os, sys
fd = os.open("a", os.O_RDWR)
m = mmap.mmap(fd, 6, mmap.MAP_SHARED)
m[0:6] = b"HELLO\n"
print("written", flush=True)
sys.stdin.readline()
m.close()
os.close(fd)
`)
	py.Dir = dir
	stdin := startMapper(t, py)
	out, err := runTurnctl(t, dir, "end")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "1 file") {
		t.Errorf("turnctl end with a's pages still mapped: %q, want 1 file changed", out)
	}
	stdin.Close()
	if err := py.Wait(); err != nil {
		t.Fatalf("python: %v", err)
	}
	mappedPagesInTurn1(t, dir, "a")
	if b, err := os.ReadFile(filepath.Join(dir, "a")); err != nil || string(b) != "hello\n" {
		t.Errorf("a after the rewind to 0: %q, %v; want hello", b, err)
	}
}

// TestMmapWritesBeforeALazyUmountAreInTheLastTurn: pages a process wrote
// through a shared mmap it still holds when 'ckptfs umount --lazy' runs
// belong to the turn that umount closes, and reach the file: umount has
// them written back, and waits for them, before it detaches the mount.
// (A syncfs started their writeback without waiting for it; the daemon
// ends at the detach, and pages not written back by then were lost.)
func TestMmapWritesBeforeALazyUmountAreInTheLastTurn(t *testing.T) {
	mappedAcrossDetach(t, "ckptfs umount --lazy", func(dir string) {
		if out, err := runCkptfs("umount", "--lazy", dir); err != nil {
			t.Fatalf("ckptfs umount --lazy: %v\n%s", err, out)
		}
	})
}

// TestMmapWritesBeforeAnOutsideDetachAreInTheLastTurn: the same for a
// lazy detach from outside (umount -l): the daemon's last boundary finds
// the mapped files through /proc, since no path leads to them any more.
func TestMmapWritesBeforeAnOutsideDetachAreInTheLastTurn(t *testing.T) {
	mappedAcrossDetach(t, "umount -l", func(dir string) {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Fatal(err)
		}
	})
}

// mappedAcrossDetach has a process write through shared maps of a small
// and a 64 MiB file in a turn, detach the mount while it holds them, and
// checks that every page reached the file and the turn.
func mappedAcrossDetach(t *testing.T, what string, detach func(dir string)) {
	t.Helper()
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"a": "hello\n", "b": "other\n"})
	big := strings.Repeat("0123456789abcdef", 4<<20) // 64 MiB: a long writeback
	if err := os.WriteFile(filepath.Join(dir, "big"), []byte(big), 0o644); err != nil {
		t.Fatal(err)
	}
	m := mountProject(t, dir)
	pid := m.PID(t)
	t.Cleanup(func() { unix.Kill(pid, unix.SIGKILL) }) // a lingering daemon
	m.turnctl(t, "begin", "--label", "mapped")
	py := exec.Command("python3", "-c", detachMapper)
	py.Dir = dir
	stdin := startMapper(t, py)
	detach(dir)
	stdin.Close()
	if err := py.Wait(); err != nil {
		t.Fatalf("python: %v", err)
	}
	waitGone(t, pid, what+" and the mapping's end")
	// Written before the detach: on disk, not lost with the connection.
	if b, err := os.ReadFile(filepath.Join(dir, "a")); err != nil || string(b) != "HELLO\n" {
		t.Fatalf("a after %s: %q, %v; want the bytes written through the map before it", what, b, err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "big"))
	if err != nil {
		t.Fatal(err)
	}
	for off := 0; off < len(b); off += 4096 {
		if string(b[off:off+4]) != "XXXX" {
			t.Fatalf("big after %s: the page at %d is %q, not what was written through the map before it", what, off, b[off:off+16])
		}
	}
	mountProject(t, dir)
	if show, err := runTurnctl(t, dir, "show", "1"); err != nil || !regexp.MustCompile(`(?m)^ +modified +big +binary`).MatchString(show) {
		t.Errorf("turnctl show 1: %v\n%s\nwant big modified", err, show)
	}
	log, err := runTurnctl(t, dir, "log")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(log, "manual") || strings.Contains(log, "changed while unmounted") {
		t.Errorf("the mapped pages came after the boundary of %s:\n%s", what, log)
	}
	mappedPagesInTurn1(t, dir, "a")
	if b, err := os.ReadFile(filepath.Join(dir, "a")); err != nil || string(b) != "hello\n" {
		t.Errorf("a after the rewind to 0: %q, %v; want hello", b, err)
	}
}

// TestDaemonKilledWhileABoundaryFlushesExits: a turn boundary flushes the
// kernel's dirty pages of the mount (a shared mmap's writes), whose WRITE
// requests the daemon itself answers. Killed while it answers one, the
// daemon must still finish exiting, so that its connection ends and the
// directory can be mounted again. A daemon thread waiting in that flush
// would never return: the kernel waits for the answer the dead daemon
// cannot give, and ends the connection only once every thread is gone.
func TestDaemonKilledWhileABoundaryFlushesExits(t *testing.T) {
	r := newCrashRounds(t, 0, mrand.New(mrand.NewSource(1)), &crashTally{points: map[string]int{}})
	// The mmap's page reaches the daemon first in the boundary's flush:
	// the WRITE captures a, and the capture's record is the crash.
	if p := r.mount("record.committed@1"); p != "" {
		t.Fatalf("crashed at %s while mounting", p)
	}
	dev := mountDev(t, r.dir)
	ctx := context.Background()
	r.begin(ctx)
	f, err := os.OpenFile(filepath.Join(r.dir, "a"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	m, err := unix.Mmap(int(f.Fd()), 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	m[0] = 'A'
	ended := make(chan error, 1)
	go func() {
		_, err := r.c.End(ctx, turnctl.EndRequest{})
		ended <- err
	}()
	exited := r.exitsWithin(30 * time.Second)
	if !exited {
		// Free the stuck thread, or it outlives the test.
		abortConnection(t, dev)
	}
	unix.Munmap(m)
	f.Close()
	if !exited {
		t.Fatalf("the daemon killed at %q during a boundary's flush did not exit", r.crashedAt())
	}
	if p := r.crashedAt(); p != "record.committed" {
		t.Fatalf("crashed at %q, want record.committed (the flush's WRITE)", p)
	}
	if err := <-ended; err == nil {
		t.Fatal("turnctl end succeeded against a daemon that died in it")
	}
	forceUnmount(t, r.dir)
	r.clean()
	if b, err := os.ReadFile(filepath.Join(r.dir, "a")); err != nil || string(b) != "a0" {
		t.Fatalf("a after the remount: %q, %v; want the bytes before the unwritten page (a0)", b, err)
	}
}

// exitsWithin waits up to d for the daemon to be gone and reports whether
// it went; it logs the kernel stacks of the threads left otherwise.
func (r *crashRounds) exitsWithin(d time.Duration) bool {
	for start := time.Now(); time.Since(start) < d; time.Sleep(10 * time.Millisecond) {
		if gone(r.pid) {
			return true
		}
	}
	r.t.Logf("daemon %d still there after %v; its threads:\n%s", r.pid, d, threadStacks(r.pid))
	return false
}

// mountDev is the device number of the ckptfs mount on dir, from the
// mount table (a stat could wait on a daemon that no longer answers).
func mountDev(t *testing.T, dir string) uint64 {
	t.Helper()
	ms, err := rundir.MountTable()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.Dir == dir {
			return m.Dev
		}
	}
	t.Fatalf("no ckptfs mount on %s", dir)
	return 0
}

// abortConnection ends the FUSE connection of the mount with device dev
// through the fusectl filesystem (mounted for the call if it is not).
func abortConnection(t *testing.T, dev uint64) {
	const ctl = "/sys/fs/fuse/connections"
	abort := fmt.Sprintf("%s/%d/abort", ctl, unix.Minor(dev))
	if _, err := os.Stat(abort); err != nil {
		if err := unix.Mount("fusectl", ctl, "fusectl", 0, ""); err != nil {
			t.Errorf("mount fusectl: %v", err)
			return
		}
		defer unix.Unmount(ctl, 0)
	}
	if err := os.WriteFile(abort, []byte("1"), 0); err != nil {
		t.Errorf("abort the connection: %v", err)
	}
}

// TestMmapWritesThroughAnUnlinkedNameAreInTheirTurn: a file with two
// names, mapped through one that is then removed, still has its other
// name: pages written through the map before a boundary change that name
// in the turn that wrote them, and a rewind to before it gives its old
// bytes back.
func TestMmapWritesThroughAnUnlinkedNameAreInTheirTurn(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"a": "hello\n"})
	if err := os.Link(filepath.Join(dir, "a"), filepath.Join(dir, "b")); err != nil {
		t.Fatal(err)
	}
	// No warm-up: it would have the kernel look b up, which gives the
	// node a second parent in the tree.
	t.Setenv("CKPTFS_WARMUP", "0")
	mountProject(t, dir)
	if _, err := runTurnctl(t, dir, "begin", "--label", "mapped"); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(dir, "a"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	m, err := unix.Mmap(int(f.Fd()), 0, 6, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	unmapped := false
	unmap := func() {
		if !unmapped {
			unmapped = true
			unix.Munmap(m)
		}
	}
	t.Cleanup(unmap) // before the unmount (cleanups run last first)
	copy(m, "HELLO\n")
	if err := os.Remove(filepath.Join(dir, "a")); err != nil {
		t.Fatal(err)
	}
	if _, err := runTurnctl(t, dir, "end"); err != nil {
		t.Fatal(err)
	}
	unmap()
	mappedPagesInTurn1(t, dir, "b")
	for _, name := range []string{"a", "b"} {
		if b, err := os.ReadFile(filepath.Join(dir, name)); err != nil || string(b) != "hello\n" {
			t.Errorf("%s after the rewind to 0: %q, %v; want hello", name, b, err)
		}
	}
}

// mappedPagesInTurn1 checks that turn 1, whose mapped pages were written
// back at its end, holds them (it changed name, and no turn came after
// it), and rewinds to turn 0.
func mappedPagesInTurn1(t *testing.T, dir, name string) {
	t.Helper()
	log, err := runTurnctl(t, dir, "log")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(log, "open") || strings.Contains(log, "manual") {
		t.Errorf("the mapped pages came after the boundary:\n%s", log)
	}
	show, err := runTurnctl(t, dir, "show", "1")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^ +modified +` + regexp.QuoteMeta(name) + ` +\+1 -1$`).MatchString(show) {
		t.Errorf("turnctl show 1:\n%s\nwant %s modified", show, name)
	}
	if _, err := runTurnctl(t, dir, "rewind", "0"); err != nil {
		t.Fatal(err)
	}
}

// TestMmapWritesBeforeAnOutsideDetachOfAPrivateMount: as above, for a
// user's private mount, whose daemon (the user) cannot open
// /proc/PID/map_files: the mapped file is reached through the fd the
// mapping process holds of it.
func TestMmapWritesBeforeAnOutsideDetachOfAPrivateMount(t *testing.T) {
	needTurnctl(t)
	p := newUserProject(t)
	p.sh(t, `printf 'hello\n' > a; head -c 67108864 /dev/zero > big`)
	p.mount(t)
	info, err := p.info()
	if err != nil {
		t.Fatal(err)
	}
	p.run(t, p.Dir, turnctlBin, "begin", "--label", "mapped")
	py := p.cmd(p.Dir, "/usr/bin/python3", "-c", detachMapper)
	stdin := startMapper(t, py)
	if err := unix.Unmount(p.Dir, unix.MNT_DETACH); err != nil {
		t.Fatal(err)
	}
	stdin.Close()
	if err := py.Wait(); err != nil {
		t.Fatalf("python: %v", err)
	}
	waitGone(t, info.PID, "umount -l")
	if b, err := os.ReadFile(filepath.Join(p.Dir, "a")); err != nil || string(b) != "HELLO\n" {
		t.Fatalf("a after umount -l: %q, %v; want the bytes written through the map before it", b, err)
	}
	b, err := os.ReadFile(filepath.Join(p.Dir, "big"))
	if err != nil {
		t.Fatal(err)
	}
	for off := 0; off < len(b); off += 4096 {
		if string(b[off:off+4]) != "XXXX" {
			t.Fatalf("big after umount -l: the page at %d is %q, not what was written through the map before it", off, b[off:off+16])
		}
	}
	p.mount(t)
	if show := p.run(t, p.Dir, turnctlBin, "show", "1"); !regexp.MustCompile(`(?m)^ +modified +big +binary`).MatchString(show) ||
		!regexp.MustCompile(`(?m)^ +modified +a +\+1 -1$`).MatchString(show) {
		t.Errorf("turnctl show 1:\n%s\nwant a and big modified", show)
	}
	if log := p.run(t, p.Dir, turnctlBin, "log"); strings.Contains(log, "manual") || strings.Contains(log, "changed while unmounted") {
		t.Errorf("the mapped pages came after the boundary of umount -l:\n%s", log)
	}
}

// TestMmapWritesBeforeALazyUmountByOddNames: 'ckptfs umount --lazy' of a
// private mount finds the mapped files by inode, not only by the path
// /proc/PID/maps shows: a name with a newline (shown as \012), mapped by
// a process that closed its fd (the user cannot open map_files), and a
// hard-linked file mapped under a name since removed (shown with
// " (deleted)", its pages still the other name's bytes). Their pages
// were lost with the connection.
func TestMmapWritesBeforeALazyUmountByOddNames(t *testing.T) {
	p := newUserProject(t)
	p.sh(t, `head -c 67108864 /dev/zero > "$(printf 'nl\nbig')"; head -c 67108864 /dev/zero > hl; ln hl hl2`)
	p.mount(t)
	info, err := p.info()
	if err != nil {
		t.Fatal(err)
	}
	py := p.cmd(p.Dir, "/usr/bin/python3", "-c", `
import ctypes, mmap, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
size = 64 << 20
def mapped(name):
    fd = os.open(name, os.O_RDWR)
    a = libc.mmap(None, size, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_SHARED, fd, 0)
    assert a not in (None, ctypes.c_void_p(-1).value)
    for off in range(0, size, 4096):
        ctypes.memmove(a + off, b"XXXX", 4)
    return fd
os.close(mapped("nl\nbig"))   # the map alone holds it
hfd = mapped("hl")
os.unlink("hl")               # hl2 keeps the inode
print("written", flush=True)
sys.stdin.readline()
`)
	stdin := startMapper(t, py)
	out, err := p.try("/", ckptfsBin, "umount", "--lazy", p.Dir)
	if err != nil || strings.Contains(out, "lost") {
		t.Errorf("ckptfs umount --lazy: %v\n%s", err, out)
	}
	stdin.Close()
	py.Wait()
	waitGone(t, info.PID, "umount --lazy")
	for _, name := range []string{"nl\nbig", "hl2"} {
		b, err := os.ReadFile(filepath.Join(p.Dir, name))
		if err != nil {
			t.Fatal(err)
		}
		for off := 0; off < len(b); off += 4096 {
			if string(b[off:off+4]) != "XXXX" {
				t.Errorf("%q after umount --lazy: the page at %d is %q, not what was written through the map before it", name, off, b[off:off+4])
				break
			}
		}
	}
}

// startMapper starts py, a python that writes through shared maps, prints
// "written" and keeps its maps until a line or the end of its stdin, and
// returns once it has written; closing the returned stdin lets it end
// (the test's cleanup closes it and waits for py too).
func startMapper(t *testing.T, py *exec.Cmd) io.WriteCloser {
	t.Helper()
	py.Stderr = os.Stderr
	stdin, err := py.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := py.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := py.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { py.Wait() })
	t.Cleanup(func() { stdin.Close() })
	if line, err := bufio.NewReader(stdout).ReadString('\n'); line != "written\n" {
		t.Fatalf("python: %q, %v", line, err)
	}
	return stdin
}

// detachMapper is the python of the detach tests: it writes through shared
// maps of a (6 bytes) and big (64 MiB: a long writeback), prints
// "written", and lets go of them after a line or the end of its stdin.
// The mount is dead by then: closing may fail (ENOTCONN).
const detachMapper = `
import mmap, os, sys
fd = os.open("a", os.O_RDWR)
m = mmap.mmap(fd, 6, mmap.MAP_SHARED)
m[0:6] = b"HELLO\n"
bfd = os.open("big", os.O_RDWR)
bm = mmap.mmap(bfd, 64 << 20, mmap.MAP_SHARED)
for off in range(0, 64 << 20, 4096):
    bm[off:off+4] = b"XXXX"
print("written", flush=True)
sys.stdin.readline()
# The mount is dead by now: its close may fail (ENOTCONN).
for c in (m.close, lambda: os.close(fd), bm.close, lambda: os.close(bfd)):
    try:
        c()
    except OSError:
        pass
`
