package tests

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"ckptfs/internal/crashpoint"
	"ckptfs/internal/rundir"
)

// A mount detached behind ckptfs's back (umount -l) ends its daemon as an
// unmount from outside does: the open turn closed, the manifest saved, so
// that what is changed in the directory afterwards is recorded as an
// offline turn at the next mount. The daemon holds no fd of its own
// mount, which would keep the detached mount alive.
func TestLazyDetachFromOutsideEndsTheDaemon(t *testing.T) {
	lazyDetach(t, "a lazy detach (umount -l)", func(dir string) {
		writeTree(t, dir, map[string]string{"made-in-t1.txt": "t1\n"})
	})
}

// The same with a process still in the detached mount (its cwd): the
// mount lives on for it, and the daemon ends anyway, as 'ckptfs umount
// --lazy' has it end; that process then sees a dead directory.
func TestLazyDetachWhileInUseEndsTheDaemon(t *testing.T) {
	lazyDetach(t, "a lazy detach (umount -l) of a mount in use", func(dir string) {
		writeTree(t, dir, map[string]string{"made-in-t1.txt": "t1\n"})
		sleeper := exec.Command("sleep", "60")
		sleeper.Dir = dir
		if err := sleeper.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sleeper.Process.Kill(); sleeper.Wait() })
	})
}

// A file the turn made, still open for writing (through passthrough: its
// prior state is the turn's) when the mount is lazily detached: the
// daemon's last boundary closes the turn and saves the manifest, and
// opens no turn after it for that file. Its handle's RELEASE never comes
// (the process holds it past the daemon's end), and a capture of it for
// a next turn made a manual turn after the manifest, which the next mount
// then took as the file's last state.
func TestLazyDetachWithAWriterOpenEndsTheTurnLast(t *testing.T) {
	lazyDetach(t, "a lazy detach (umount -l) of a mount with a file open for writing", func(dir string) {
		f, err := os.OpenFile(filepath.Join(dir, "made-in-t1.txt"), os.O_WRONLY|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		if _, err := f.WriteString("t1\n"); err != nil {
			t.Fatal(err)
		}
	})
}

// lazyDetach mounts a project, runs inTurn in turn t1 (it makes
// made-in-t1.txt), detaches the mount lazily, waits for the daemon to
// end, changes the directory underneath (detachedEdits) and checks that
// the next mount records those changes as an offline turn right after t1.
func lazyDetach(t *testing.T, what string, inTurn func(dir string)) {
	t.Helper()
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"a.txt": "orig\n"})
	m := mountProject(t, dir)
	pid := m.PID(t)
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) }) // a lingering daemon
	m.turnctl(t, "begin", "--label", "t1")
	inTurn(dir)
	if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
		t.Fatal(err)
	}
	waitGone(t, pid, what)
	detachedEdits(t, dir)
	checkDetachedEdits(t, mountProject(t, dir))
}

// waitGone fails the test unless the daemon pid ends within 10 s of what.
func waitGone(t *testing.T, pid int, what string) {
	t.Helper()
	for i := 0; i < 500 && alive(pid); i++ {
		time.Sleep(20 * time.Millisecond)
	}
	if alive(pid) {
		t.Fatalf("the daemon (pid %d) still runs 10 s after %s", pid, what)
	}
}

// detachedEdits changes the directory a detached mount had covered.
func detachedEdits(t *testing.T, dir string) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, "a.txt"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("edited directly\n")
	f.Close()
	if err := os.Remove(filepath.Join(dir, "made-in-t1.txt")); err != nil {
		t.Fatal(err)
	}
}

// checkDetachedEdits checks that the next mount recorded detachedEdits
// as an offline turn after t1.
func checkDetachedEdits(t *testing.T, m *Mount) {
	t.Helper()
	log := m.turnctl(t, "log")
	if !strings.Contains(log, "t1") || !strings.Contains(log, "changed while unmounted") {
		t.Fatalf("turnctl log shows no offline turn after t1:\n%s", log)
	}
	if strings.Contains(log, "manual") {
		t.Errorf("a turn after t1's end, before the offline turn:\n%s", log)
	}
	show := m.turnctl(t, "show", "2")
	for _, want := range []string{"a.txt", "made-in-t1.txt"} {
		if !strings.Contains(show, want) {
			t.Errorf("turnctl show 2 (the offline turn) does not name %s:\n%s", want, show)
		}
	}
}

// A daemon killed after 'ckptfs umount' asked it to stop and before it
// saved the manifest: umount detaches the dead mount, but says on stderr
// that changes made until the next mount will not be in the history, and
// exits 1.
func TestUmountTellsTheDaemonDiedBeforeItsManifest(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"a.txt": "orig\n"})
	// The daemon kills itself once umount's SIGTERM reached it. (A
	// SIGSTOP held it there until umount came to refuse a stopped
	// daemon.)
	t.Setenv("CKPTFS_CRASH", "daemon.stopping@1")
	m := mountProject(t, dir)
	os.Unsetenv("CKPTFS_CRASH")
	pid := m.PID(t)
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	cmd := exec.Command(ckptfsBin, "umount", dir)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	checkDiedUmount(t, dir, err, cmd.ProcessState.ExitCode(), stdout.String(), stderr.String())
}

// A daemon that 'ckptfs umount' stopped and that ended as it should but
// could not close its open turn or save the manifest (a disk error
// then: CKPTFS_FAIL arms one) used to leave umount saying "unmounted"
// with exit 0, though the next mount, finding no manifest, cannot see
// what changes meanwhile. umount must say so on stderr in one line, and
// exit 1; and the next mount indeed records no offline turn, and says
// why in one line: the last daemon could not save its record of the
// tree (not, as it used to, that it was killed or crashed).
func TestUmountTellsTheDaemonCouldNotSaveItsManifest(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	writeTree(t, dir, map[string]string{"a.txt": "orig\n"})
	t.Setenv(crashpoint.FailEnv, "daemon.manifest")
	m := mountProject(t, dir)
	pid := m.PID(t)
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) }) // a lingering daemon
	if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte("through the mount\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(ckptfsBin, "umount", dir)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	line := strings.TrimSuffix(stderr.String(), "\n")
	if code := cmd.ProcessState.ExitCode(); code != 1 || stdout.String() != "" || strings.Contains(line, "\n") ||
		!strings.Contains(line, "could not save the record of the tree") || !strings.Contains(line, "injected failure at daemon.manifest") ||
		!strings.Contains(line, "changes made until the next mount will not be in the history") || !strings.Contains(line, "mount again") ||
		strings.Contains(line, "died") {
		t.Errorf("ckptfs umount of a daemon that could not save its manifest: %v, exit %d\nstdout: %s\nstderr: %s\nwant exit 1, nothing on stdout, and one line on stderr saying the record of the tree was not saved and what that costs", err, code, stdout.String(), stderr.String())
	}
	if rundir.IsMounted(dir) {
		t.Fatalf("%s still mounted after ckptfs umount", dir)
	}
	if alive(pid) {
		t.Errorf("daemon %d still alive after ckptfs umount", pid)
	}
	if _, err := rundir.ReadInfo(dir); err == nil {
		t.Errorf("the info file of %s is left after ckptfs umount", dir)
	}
	// What the line warns of: a change made now is not told apart by the
	// next mount.
	if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte("while unmounted\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(crashpoint.FailEnv, "")
	m, mstderr := mountStderr(t, dir)
	want := fmt.Sprintf("ckptfs: warning: the last mount of %s ended, but its daemon could not save its record of the tree (injected failure at daemon.manifest (CKPTFS_FAIL)): changes made between that unmount and this mount are not in the history, and a rewind will not undo them\n", dir)
	if mstderr != want {
		t.Errorf("the mount after a daemon that could not save its manifest: stderr:\n%s\nwant:\n%s", mstderr, want)
	}
	if log := m.turnctl(t, "log"); strings.Contains(log, "changed while unmounted") {
		t.Errorf("turnctl log shows an offline turn though no manifest was saved:\n%s", log)
	}
	// Told once: after a clean unmount, the next mount says nothing.
	m.Unmount(t)
	if _, mstderr = mountStderr(t, dir); mstderr != "" {
		t.Errorf("the mount after a clean unmount: stderr %q", mstderr)
	}
}

// The same with the daemon killed before 'ckptfs umount' ran: umount
// detaches the dead mount and exits 0, but tells of the loss on stderr.
func TestUmountTellsTheDaemonHadDiedBeforeItsManifest(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"a.txt": "orig\n"})
	m := mountProject(t, dir)
	pid := m.PID(t)
	syscall.Kill(pid, syscall.SIGKILL)
	for i := 0; i < 200 && alive(pid); i++ {
		time.Sleep(10 * time.Millisecond)
	}
	cmd := exec.Command(ckptfsBin, "umount", dir)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil || !strings.Contains(stderr.String(), "had died before it saved the record of the tree") || !strings.Contains(stderr.String(), "mount again") {
		t.Errorf("ckptfs umount of a daemon killed before: %v\nstdout: %s\nstderr: %s\nwant exit 0 and the loss told on stderr", err, stdout.String(), stderr.String())
	}
	if rundir.IsMounted(dir) {
		t.Errorf("%s still mounted after ckptfs umount", dir)
	}
}

// checkDiedUmount checks what 'ckptfs umount dir' did about a daemon
// dead before it saved the manifest: the mount detached, the loss told
// on stderr, exit 1.
func checkDiedUmount(t *testing.T, dir string, err error, code int, stdout, stderr string) {
	t.Helper()
	if code != 1 || !strings.Contains(stderr, "died before it saved the record of the tree") || !strings.Contains(stderr, "mount again") || stdout != "" {
		t.Errorf("ckptfs umount with the daemon killed: %v, exit %d\nstdout: %s\nstderr: %s\nwant exit 1 and the loss told on stderr", err, code, stdout, stderr)
	}
	if rundir.IsMounted(dir) {
		t.Errorf("%s still mounted after ckptfs umount", dir)
	}
}

// A mount moved along with its parent directory (mv) is unmounted by its
// new path as by the old: 'ckptfs umount NEWPATH' has the daemon close
// the open turn and save the manifest, and waits for it, so that what is
// changed afterwards is an offline turn at the next mount, there.
func TestUmountAfterTheParentMoved(t *testing.T) {
	top := t.TempDir()
	dir := filepath.Join(top, "p", "proj")
	writeTree(t, dir, map[string]string{"a.txt": "orig\n"})
	m := mountProject(t, dir)
	pid := m.PID(t)
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	m.turnctl(t, "begin", "--label", "t1")
	writeTree(t, dir, map[string]string{"made-in-t1.txt": "t1\n"})

	if err := os.Rename(filepath.Join(top, "p"), filepath.Join(top, "q")); err != nil {
		t.Fatal(err)
	}
	moved := filepath.Join(top, "q", "proj")
	t.Cleanup(func() { forceUnmount(t, moved) })
	if out, err := runCkptfs("umount", moved); err != nil {
		t.Fatalf("ckptfs umount %s: %v\n%s", moved, err, out)
	}
	if alive(pid) {
		t.Fatalf("ckptfs umount %s returned with the daemon (pid %d) still running", moved, pid)
	}
	if rundir.IsMounted(moved) {
		t.Fatalf("%s still mounted after ckptfs umount", moved)
	}
	detachedEdits(t, moved)

	m = mountProject(t, moved)
	checkDetachedEdits(t, m)
}
