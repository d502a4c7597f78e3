package tests

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"ckptfs/internal/crashpoint"
	"ckptfs/internal/rundir"
)

// What `ckptfs mount` tells its user on stderr that they would not see
// otherwise: the processes that entered DIR before the mount (they work
// around the overlay, unrecorded), a last mount that ended in a crash
// (what changed since is not in the history), and the changes made while
// unmounted it recorded. A clean mount says nothing.

// mountCmd runs cmd, a `ckptfs mount` of dir, as mountProject does (the
// same cleanup) and returns its stdout and stderr.
func mountCmd(t *testing.T, dir string, cmd *exec.Cmd) (*Mount, string, string) {
	t.Helper()
	rt := setRuntimeDir(t)
	m := &Mount{Dir: dir, Store: filepath.Join(dir, ".ckptfs"), Runtime: rt}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	t.Cleanup(func() {
		forceUnmount(t, dir)
		checkDaemonLog(t, m.Store)
	})
	if err != nil {
		t.Fatalf("%s: %v\n%s%s", strings.Join(cmd.Args, " "), err, stdout.String(), stderr.String())
	}
	if !rundir.IsMounted(dir) {
		t.Fatalf("ckptfs mount returned but %s is not in /proc/mounts", dir)
	}
	return m, stdout.String(), stderr.String()
}

// mountStderr runs `ckptfs mount DIR` and returns the mount and its
// stderr.
func mountStderr(t *testing.T, dir string) (*Mount, string) {
	t.Helper()
	m, _, stderr := mountCmd(t, dir, exec.Command(ckptfsBin, "mount", dir))
	return m, stderr
}

// startSleeper starts `bash -c script` in cwd (which must exec sleep in
// the end) and waits until it is sleep, with fd 3 open if fd3 is set;
// it returns its pid and a stop, which the test calls when it ends too.
func startSleeper(t *testing.T, cwd, script string, fd3 bool) (int, func()) {
	t.Helper()
	cmd := exec.Command("bash", "-c", script)
	cmd.Dir = cwd
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	stop := sync.OnceFunc(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	t.Cleanup(stop)
	for i := 0; ; i++ {
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		_, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/3", pid))
		if strings.TrimSpace(string(comm)) == "sleep" && (!fd3 || err == nil) {
			return pid, stop
		}
		if i == 500 {
			t.Fatalf("%q did not come to sleep", script)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestMountWarnsOfProcessesInDirBeforeMount(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	writeTree(t, dir, map[string]string{"a": "a0", "sub/b": "b0"})
	// A process with its working directory in a subdirectory, and one
	// with a file open for writing, from before the mount; and one that
	// enters only after it (not named).
	inSub, _ := startSleeper(t, filepath.Join(dir, "sub"), "exec sleep 600", false)
	open, _ := startSleeper(t, "/", "exec 3>>"+filepath.Join(dir, "a")+"; exec sleep 600", true)
	want := map[int]string{
		inSub: fmt.Sprintf("ckptfs: warning: %d sleep has its working directory in %s/sub from before the mount: its changes go around ckptfs and are not recorded (cd %s/sub again)\n", inSub, dir, dir),
		open:  fmt.Sprintf("ckptfs: warning: %d sleep has %s/a open from before the mount: its changes go around ckptfs and are not recorded (reopen it, or restart the process)\n", open, dir),
	}
	// And a memory map (its file closed), where python3 is.
	if cmd, _ := mapFile(t, filepath.Join(dir, "sub/b")); cmd != nil {
		pid := cmd.Process.Pid
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		want[pid] = fmt.Sprintf("ckptfs: warning: %d %s has %s/sub/b mapped from before the mount: its changes go around ckptfs and are not recorded (restart it)\n", pid, strings.TrimSpace(string(comm)), dir)
	}
	m, stderr := mountStderr(t, dir)
	_, stopAfter := startSleeper(t, dir, "exec sleep 600", false)
	if w := lines(want); stderr != w {
		t.Errorf("ckptfs mount stderr:\n%s\nwant:\n%s", stderr, w)
	}
	// The warning is true: a write through the fd opened before the mount
	// goes around ckptfs.
	m.turnctl(t, "begin", "--label", "around")
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/fd/3", open), []byte("!"), 0); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sub/b"), []byte("b1"), 0o644); err != nil {
		t.Fatal(err)
	}
	m.turnctl(t, "end")
	if show := m.turnctl(t, "show", "1"); !strings.Contains(show, "sub/b") || strings.Contains(show, "  a  ") {
		t.Errorf("turn 1 should hold sub/b only:\n%s", show)
	}
	stopAfter() // (in the mount: umount would refuse)
	m.Unmount(t)

	// `cd DIR && sh -c 'ckptfs mount .'`: the shell is named, not the
	// sh between it and ckptfs mount (it ends with it), nor ckptfs mount
	// itself.
	cmd := exec.Command("bash", "-c", "sh -c '"+ckptfsBin+" mount .; true'; true")
	cmd.Dir = dir
	_, _, stderr = mountCmd(t, dir, cmd)
	shell := cmd.Process.Pid
	want[shell] = fmt.Sprintf("ckptfs: warning: %d bash has its working directory in %s from before the mount: its changes go around ckptfs and are not recorded (cd %s again)\n", shell, dir, dir)
	if w := lines(want); stderr != w {
		t.Errorf("cd DIR && sh -c 'ckptfs mount .': stderr:\n%s\nwant:\n%s", stderr, w)
	}
}

// lines joins the lines by pid, in order.
func lines(byPID map[int]string) string {
	var pids []int
	for p := range byPID {
		pids = append(pids, p)
	}
	sort.Ints(pids)
	var b strings.Builder
	for _, p := range pids {
		b.WriteString(byPID[p])
	}
	return b.String()
}

func TestMountWarnsAfterDaemonCrash(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	writeTree(t, dir, map[string]string{"a": "a0"})
	crash := fmt.Sprintf("ckptfs: warning: the last mount of %s did not end with a clean unmount (its daemon was killed or crashed), so no record of the tree was saved: changes made between the crash and this mount are not in the history, and a rewind will not undo them\n", dir)
	m, stderr := mountStderr(t, dir)
	if stderr != "" {
		t.Fatalf("first mount: stderr %q", stderr)
	}
	work := func(label string) {
		m.turnctl(t, "begin", "--label", label)
		if err := os.WriteFile(filepath.Join(dir, "a"), []byte(label), 0o644); err != nil {
			t.Fatal(err)
		}
		m.turnctl(t, "end")
	}
	work("one")
	m.kill(t)
	// Mounted again over the dead mount.
	m, stderr = mountStderr(t, dir)
	if w := "ckptfs: " + dir + ": the previous daemon died; detaching its dead mount\n" + crash; stderr != w {
		t.Errorf("mount over the dead mount: stderr:\n%s\nwant:\n%s", stderr, w)
	}
	work("two")
	m.kill(t)
	// Detached first, changed while unmounted, then mounted: the change
	// is not recorded, and the mount says so.
	if out, err := runCkptfs("umount", dir); err != nil {
		t.Fatalf("umount of the dead mount: %v\n%s", err, out)
	}
	writeTree(t, dir, map[string]string{"a": "offline"})
	m, stderr = mountStderr(t, dir)
	if stderr != crash {
		t.Errorf("mount after a crash: stderr:\n%s\nwant:\n%s", stderr, crash)
	}
	if log := m.turnctl(t, "log"); strings.Contains(log, "changed while unmounted") {
		t.Errorf("an offline turn after a crash:\n%s", log)
	}
	// The next mount after a clean unmount says nothing.
	m.Unmount(t)
	if _, stderr = mountStderr(t, dir); stderr != "" {
		t.Errorf("mount after a clean unmount: stderr %q", stderr)
	}
}

func TestMountNotesChangesWhileUnmounted(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	writeTree(t, dir, map[string]string{"a": "a0", "b": "b0"})
	m, _ := mountStderr(t, dir)
	m.turnctl(t, "begin", "--label", "one")
	writeTree(t, dir, map[string]string{"a": "a1"})
	m.turnctl(t, "end")
	m.Unmount(t)
	// While unmounted: one new file, one changed (its bytes before were
	// never seen).
	writeTree(t, dir, map[string]string{"new": "n", "b": "b1"})
	m, stderr := mountStderr(t, dir)
	if w := "ckptfs: recorded 2 changes made while unmounted as turn 2 (the earlier bytes of 1 file were never captured: a rewind leaves it as it is)\n"; stderr != w {
		t.Errorf("stderr:\n%s\nwant:\n%s", stderr, w)
	}
	if log := m.turnctl(t, "log"); !strings.HasPrefix(log, "2 ") || !strings.Contains(strings.SplitN(log, "\n", 2)[0], "changed while unmounted") {
		t.Errorf("turn 2 is not the offline turn:\n%s", log)
	}
	m.Unmount(t)
	writeTree(t, dir, map[string]string{"new2": "n"})
	if _, stderr = mountStderr(t, dir); stderr != "ckptfs: recorded 1 change made while unmounted as turn 3\n" {
		t.Errorf("stderr %q, want the note of 1 change as turn 3", stderr)
	}
}

// A clean mount says nothing on stderr: not of the mount command itself
// run in DIR (cd DIR && ckptfs mount .), nor of the daemon, which holds
// DIR underneath.
func TestMountCleanSaysNothing(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	writeTree(t, dir, map[string]string{"a": "a0"})
	m, stdout, stderr := mountCmd(t, dir, exec.Command(ckptfsBin, "mount", dir))
	if want := fmt.Sprintf("mounted %s (history in %s/.ckptfs)\n", dir, dir); stdout != want || stderr != "" {
		t.Errorf("first mount: stdout %q, stderr %q; want %q and nothing", stdout, stderr, want)
	}
	m.turnctl(t, "begin", "--label", "one")
	writeTree(t, dir, map[string]string{"a": "a1"})
	m.turnctl(t, "end")
	m.Unmount(t)
	cmd := exec.Command(ckptfsBin, "mount", ".")
	cmd.Dir = dir
	if _, _, stderr = mountCmd(t, dir, cmd); stderr != "" {
		t.Errorf("mount after a clean unmount, run in DIR: stderr %q", stderr)
	}
}

// TestMountTellsOfAnInterruptedRewind: a rewind killed half-way (a crash
// point in its fix-up pass) is finished by the next mount, which says so
// on stderr (the daemon's log, where it was said before, is hidden by the
// mount), and the tree is the rewind's target.
func TestMountTellsOfAnInterruptedRewind(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	writeTree(t, dir, map[string]string{"a": "a0", "b": "b0"})
	before := snapshot(t, dir, nil, nil)
	setRuntimeDir(t) // before the environment is copied
	cmd := exec.Command(ckptfsBin, "mount", dir)
	cmd.Env = append(os.Environ(), crashpoint.Env+"=rewind.journaled@1")
	m, _, stderr := mountCmd(t, dir, cmd)
	if stderr != "" {
		t.Fatalf("first mount: stderr %q", stderr)
	}
	m.turnctl(t, "begin")
	writeTree(t, dir, map[string]string{"a": "a1", "c": "c1"})
	os.Remove(filepath.Join(dir, "b"))
	m.turnctl(t, "end")
	if out, err := runTurnctl(t, dir, "rewind", "0"); err == nil {
		t.Fatalf("the rewind was not killed at rewind.fixup: %s", out)
	}
	m, stderr = mountStderr(t, dir)
	want := "ckptfs: finished a rewind, restore or revert that a crash had interrupted: the tree is as it asked (turnctl log shows it)\n"
	if !strings.Contains(stderr, want) {
		t.Errorf("mount after a killed rewind: stderr:\n%s\nwant a line %q", stderr, want)
	}
	diffTrees(t, before, snapshot(t, dir, []string{".ckptfs"}, nil))
}
