package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"ckptfs/internal/rundir"
)

// runBounded runs a command with a deadline: a command that waits on a
// stopped daemon's mount sleeps in the kernel, and only SIGKILL ends it.
func runBounded(t *testing.T, d time.Duration, name string, args ...string) (out string, hung bool, err error) {
	t.Helper()
	cmd := exec.Command(name, args...)
	var b strings.Builder
	cmd.Stdout, cmd.Stderr = &b, &b
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return b.String(), false, err
	case <-time.After(d):
		cmd.Process.Kill()
		<-done
		return b.String(), true, nil
	}
}

// A daemon stopped by SIGSTOP (a debugger, a Ctrl-Z of a -f mount)
// answers nothing, nor does its mount. 'ckptfs status DIR' hung in a
// stat of DIR (and of the store inside it) after saying "running";
// turnctl hung, silent, for as long as it stayed stopped; 'ckptfs umount'
// sent its SIGTERM, waited 30 s, failed with "did not finish within 30s",
// and the daemon unmounted on its own once continued. Each must say, at
// once, that the daemon is stopped and how to continue it, and umount
// must change nothing.
func TestStoppedDaemonIsNamed(t *testing.T) {
	needTurnctl(t)
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	writeTree(t, dir, map[string]string{"a.txt": "a\n"})
	m := mountProject(t, dir)
	pid := m.PID(t)
	syscall.Kill(pid, syscall.SIGSTOP)
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGCONT) })
	cont := "kill -CONT " + strconv.Itoa(pid)
	// The stop is not at once: a thread stops only as it leaves the
	// kernel (the daemon's may be in a sync on a loaded machine).
	for deadline := time.Now().Add(10 * time.Second); !rundir.Stopped(pid); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("daemon %d not stopped 10 s after SIGSTOP", pid)
		}
	}

	out, hung, err := runBounded(t, 10*time.Second, ckptfsBin, "status", dir)
	if hung || err != nil || !strings.Contains(out, "stopped") || !strings.Contains(out, cont) {
		t.Errorf("ckptfs status of a stopped daemon's mount (hung %v, err %v):\n%s", hung, err, out)
	}
	out, hung, err = runBounded(t, 10*time.Second, turnctlBin, "-C", dir, "log")
	if hung || err == nil || !strings.Contains(out, "is stopped") || !strings.Contains(out, cont) {
		t.Errorf("turnctl log on a stopped daemon (hung %v, err %v):\n%s", hung, err, out)
	}
	out, hung, err = runBounded(t, 10*time.Second, ckptfsBin, "umount", dir)
	if hung || err == nil || !strings.Contains(out, "is stopped") || !strings.Contains(out, cont) || !strings.Contains(out, "nothing changed") {
		t.Errorf("ckptfs umount of a stopped daemon's mount (hung %v, err %v):\n%s", hung, err, out)
	}
	syscall.Kill(pid, syscall.SIGCONT)
	// umount sent nothing: the daemon, continued, still serves.
	time.Sleep(300 * time.Millisecond)
	if !rundir.IsMounted(dir) {
		t.Fatalf("the mount went away once the daemon was continued after a refused umount")
	}
	if b, err := os.ReadFile(filepath.Join(dir, "a.txt")); err != nil || string(b) != "a\n" {
		t.Errorf("a.txt after SIGCONT: %q, %v", b, err)
	}
	m.Unmount(t)
}

// A daemon killed in the middle of a rewind left turnctl saying only
// "ckptfs daemon at SOCKET: rewind: reading reply: unexpected EOF": not
// that the daemon died, nor whether the tree changed, nor what to do.
// turnctl must name the death and the way out (the journal: umount and
// mount finish or undo the rewind); the remount then leaves the tree at
// the rewind's target.
func TestTurnctlSaysTheDaemonDiedDuringARewind(t *testing.T) {
	needTurnctl(t)
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for i := 0; i < 20; i++ {
		files["f"+strconv.Itoa(i)] = "v0\n"
	}
	writeTree(t, dir, files)
	t.Setenv("CKPTFS_CRASH", "rewind.step@5")
	m := mountProject(t, dir)
	os.Unsetenv("CKPTFS_CRASH")
	want := snapshot(t, dir, []string{".ckptfs"}, nil)
	m.turnctl(t, "begin", "--label", "edit")
	for f := range files {
		writeTree(t, dir, map[string]string{f: "v1\n"})
	}
	m.turnctl(t, "end")

	out, code := m.turnctlFail(t, "rewind", "0")
	if code != 1 || !strings.Contains(out, "died during 'turnctl rewind'") || !strings.Contains(out, "journaled") ||
		!strings.Contains(out, "ckptfs umount "+dir) || strings.Count(strings.TrimSpace(out), "\n") != 0 {
		t.Errorf("turnctl rewind whose daemon died half-way (exit %d):\n%s", code, out)
	}
	if o, err := runCkptfs("umount", dir); err != nil {
		t.Logf("umount: %v\n%s", err, o) // it says the daemon died before its manifest
	}
	m = mountProject(t, dir)
	diffTrees(t, want, snapshot(t, dir, []string{".ckptfs"}, nil))
	m.Unmount(t)
}
