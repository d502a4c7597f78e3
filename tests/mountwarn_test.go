package tests

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"ckptfs/internal/rundir"
)

// What `ckptfs mount` tells its user on stderr that they would not see
// otherwise: a last mount that ended in a crash (what changed since is not
// in the history), and the changes made while unmounted it recorded.

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
