package tests

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"ckptfs/internal/rundir"
)

func TestMountUmount(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"a.txt": "hello\n", "sub/b.txt": "b\n"})
	m := mountProject(t, dir)

	b, err := os.ReadFile(filepath.Join(dir, "sub/b.txt"))
	if err != nil || string(b) != "b\n" {
		t.Fatalf("read through mount: %q %v", b, err)
	}
	info, err := rundir.ReadInfo(dir)
	if err != nil || info.PID == 0 || info.Dir != dir {
		t.Fatalf("info file: %+v %v", info, err)
	}
	// status, human and JSON.
	out, err := runCkptfs("status", dir)
	if err != nil || !strings.Contains(out, "mounted: yes") || !strings.Contains(out, "reserve: ") {
		t.Fatalf("status: %v\n%s", err, out)
	}
	// A directory inside the mount is the project's.
	if out, err := runCkptfs("status", filepath.Join(dir, "sub")); err != nil || !strings.HasPrefix(out, "dir:     "+dir+"\nmounted: yes") {
		t.Errorf("status of a directory inside the mount: %v\n%s", err, out)
	}
	out, err = runCkptfs("status", "--json", dir)
	var st struct {
		Mounted    bool  `json:"mounted"`
		Alive      bool  `json:"alive"`
		StoreBytes int64 `json:"store_bytes"`
	}
	if err != nil || json.Unmarshal([]byte(out), &st) != nil || !st.Mounted || !st.Alive || st.StoreBytes == 0 {
		t.Fatalf("status --json: %v\n%s", err, out)
	}
	// A second mount is refused with one line.
	out, err = runCkptfs("mount", dir)
	if exitCode(err) != 1 || !strings.Contains(out, "already a ckptfs mount") || strings.Count(out, "\n") != 1 {
		t.Fatalf("second mount: %v\n%s", err, out)
	}
	// Success is one line each.
	if out, err := runCkptfs("umount", dir); err != nil || out != "unmounted "+dir+"\n" {
		t.Fatalf("umount: %v, %q; want one line", err, out)
	}
	if out, err := runCkptfs("mount", dir); err != nil || out != "mounted "+dir+" (history in "+filepath.Join(dir, ".ckptfs")+")\n" {
		t.Fatalf("mount: %v, %q; want one line", err, out)
	}
	m.Unmount(t)
	if _, err := os.Stat(filepath.Join(dir, ".ckptfs", ".gitignore")); err != nil {
		t.Fatalf("store .gitignore: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, ".ckptfs", ".gitignore")); string(b) != "*\n" {
		t.Fatalf(".gitignore holds %q", b)
	}
	if _, err := rundir.ReadInfo(dir); err == nil {
		t.Fatalf("info file left behind")
	}
	out, err = runCkptfs("umount", dir)
	if exitCode(err) != 1 || !strings.Contains(out, "not a ckptfs mount") {
		t.Fatalf("umount of unmounted dir: %v\n%s", err, out)
	}
	out, err = runCkptfs("status", dir)
	if err != nil || !strings.Contains(out, "mounted: no") {
		t.Fatalf("status after umount: %v\n%s", err, out)
	}
	// A directory that was never mounted has no store to size.
	never := t.TempDir()
	want := fmt.Sprintf("dir:     %s\nmounted: no\nstore:   none yet (ckptfs mount %s makes it at %s)\n", never, never, filepath.Join(never, ".ckptfs"))
	if out, err := runCkptfs("status", never); err != nil || out != want {
		t.Errorf("status of a directory never mounted: %v\n%s\nwant\n%s", err, out, want)
	}
}

func TestMountErrors(t *testing.T) {
	setRuntimeDir(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	os.WriteFile(file, nil, 0o644)
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"mount", filepath.Join(dir, "missing")}, 1, "no such file"},
		{[]string{"mount", file}, 1, "not a directory"},
		{[]string{"mount"}, 2, "expected one DIR"},
		{[]string{"mount", "--bogus", dir}, 2, "mount: unknown flag: --bogus (try --help)"},
		{[]string{"mount", "--exclude", "!x", dir}, 2, "unsupported pattern"},
		{[]string{"frobnicate"}, 2, "unknown command"},
		{[]string{"umount"}, 2, "expected one DIR"},
		{[]string{"status", filepath.Join(dir, "missing")}, 1, "no such file"},
		{[]string{"status", file}, 1, "not a directory"},
	} {
		out, err := runCkptfs(c.args...)
		if exitCode(err) != c.code || !strings.Contains(out, c.want) || !strings.HasPrefix(out, "ckptfs: ") || strings.Count(out, "\n") != 1 {
			t.Errorf("%v: exit %d, output %q; want exit %d and one line with %q", c.args, exitCode(err), out, c.code, c.want)
		}
	}
	for _, cmd := range []string{"mount", "umount", "status"} {
		out, err := runCkptfs(cmd, "--help")
		if err != nil || !strings.Contains(out, "usage: ckptfs "+cmd) {
			t.Errorf("%s --help: %v\n%s", cmd, err, out)
		}
	}
}

func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return -1
}

// A store held by another daemon is refused.
func TestStoreInUse(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	store := filepath.Join(t.TempDir(), "store")
	mountProject(t, a, "--store", store)
	out, err := runCkptfs("mount", "--store", store, b)
	if exitCode(err) != 1 || !strings.Contains(out, "in use") {
		forceUnmount(t, b)
		t.Fatalf("second daemon on one store: %v\n%s", err, out)
	}
}

// After a SIGKILL of the daemon the dead mount is detected, detached and
// mounted afresh.
func TestStaleMount(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"a": "1"})
	m := mountProject(t, dir)
	pid := m.PID(t)
	syscall.Kill(pid, syscall.SIGKILL)
	for i := 0; i < 100 && alive(pid); i++ {
		time.Sleep(20 * time.Millisecond)
	}
	// An open needs the daemon (a stat may be answered from the kernel's
	// caches, which the mount's warm-up filled).
	if _, err := os.ReadFile(filepath.Join(dir, "a")); err == nil {
		t.Fatalf("read on dead mount: %v", err)
	}
	// status says why it cannot size the store, and what to do.
	want := fmt.Sprintf("store:   %s (not readable under a mount whose daemon is dead: ckptfs umount %s, then mount it again)\n", filepath.Join(dir, ".ckptfs"), dir)
	if out, err := runCkptfs("status", dir); err != nil || !strings.Contains(out, want) || !strings.Contains(out, "(dead)") {
		t.Errorf("status of a dead mount: %v\n%s\nwant a line %q", err, out, want)
	}
	os.ReadDir(dir) // (after which a stat of the project fails too: ENOTCONN)
	// turnctl, and an agent's hook for the project, say what to do
	// (once), whether the kernel answers a stat of the project from its
	// caches (the socket is then refused) or not (ENOTCONN).
	wantT := regexp.MustCompile(`^turnctl: the ckptfs daemon of ` + regexp.QuoteMeta(dir) + ` does not answer \([^;]*\); if it died, run: ckptfs umount ` + regexp.QuoteMeta(dir) + `\n$`)
	cmd := exec.Command(turnctlBin, "-C", dir, "status")
	if out, err := cmd.CombinedOutput(); err == nil || !wantT.Match(out) {
		t.Errorf("turnctl status in a dead mount: %v, %q; want %s", err, out, wantT)
	}
	cmd = exec.Command(turnctlBin, "hook-event", "claude-code")
	cmd.Dir = t.TempDir() // (the project itself may not be entered any more)
	cmd.Stdin = strings.NewReader(`{"session_id":"s","cwd":"` + dir + `","hook_event_name":"UserPromptSubmit","prompt":"hi"}`)
	hint := "does not answer"
	if out, _ := cmd.CombinedOutput(); strings.Count(string(out), hint) != 1 || !strings.Contains(string(out), "; if it died, run: ckptfs umount "+dir) {
		t.Errorf("hook-event for a dead mount: %q; want %q once, and the way out", out, hint)
	}
	out, err := runCkptfs("mount", dir)
	if err != nil || !strings.Contains(out, "died") {
		t.Fatalf("remount over dead mount: %v\n%s", err, out)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "a")); err != nil || string(b) != "1" {
		t.Fatalf("read after remount: %q %v", b, err)
	}
	if n := strings.Count(mountsOf(dir), "\n"); n != 1 {
		t.Fatalf("%d mounts on %s after remount", n, dir)
	}
}

// alive reports whether process pid has a thread that has not exited. A
// killed process's main thread turns zombie before its other threads are
// done exiting, and the files they share (a flock on the store, say) are
// closed only with the last: a zombie main thread is not yet the end.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	if i > 0 && i+2 < len(b) && b[i+2] != 'Z' {
		return true
	}
	tasks, err := os.ReadDir("/proc/" + itoa(pid) + "/task")
	return err == nil && len(tasks) > 1
}

func itoa(i int) string { return strings.TrimSpace(strings.Repeat(" ", 0) + fmtInt(i)) }

func fmtInt(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}

func mountsOf(dir string) string {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	var out strings.Builder
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) > 4 && f[4] == dir {
			out.WriteString(l + "\n")
		}
	}
	return out.String()
}

// The store directory cannot be seen, opened, created, renamed or removed
// through the mount.
func TestStoreInvisible(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"a": "1", "d/x": "2"})
	mountProject(t, dir)
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.Name() == ".ckptfs" {
			t.Fatalf("readdir lists .ckptfs")
		}
	}
	out := runIn(t, dir, "ls -a")
	if strings.Contains(out, ".ckptfs") {
		t.Fatalf("ls -a shows the store:\n%s", out)
	}
	store := filepath.Join(dir, ".ckptfs")
	check := func(what string, err error, want ...syscall.Errno) {
		t.Helper()
		for _, w := range want {
			if errors.Is(err, w) {
				return
			}
		}
		t.Errorf("%s: got %v, want one of %v", what, err, want)
	}
	_, err = os.Stat(store)
	check("stat", err, syscall.ENOENT)
	_, err = os.Open(filepath.Join(store, "lock"))
	check("open inside", err, syscall.ENOENT)
	_, err = os.Create(store)
	check("create", err, syscall.EPERM)
	check("mkdir", os.Mkdir(store, 0o755), syscall.EPERM)
	check("symlink", os.Symlink("a", store), syscall.EPERM)
	check("link", os.Link(filepath.Join(dir, "a"), store), syscall.EPERM)
	check("rename onto", os.Rename(filepath.Join(dir, "a"), store), syscall.EPERM)
	check("rename dir onto", os.Rename(filepath.Join(dir, "d"), store), syscall.EPERM)
	check("rename from", os.Rename(store, filepath.Join(dir, "z")), syscall.ENOENT, syscall.EPERM)
	check("remove", os.Remove(store), syscall.ENOENT, syscall.EPERM)
	if err := os.RemoveAll(store); err != nil { // nil: it does not exist here
		check("rm -rf", err, syscall.EPERM)
	}
	// rm -rf of the whole tree through the mount leaves the store alone.
	runIn(t, dir, "rm -rf ./* ./.[!.]* 2>/dev/null || true")
	forceUnmount(t, dir)
	if _, err := os.Stat(filepath.Join(store, "db")); err != nil {
		t.Fatalf("store damaged: %v", err)
	}
}

// ckptfs status finds the mount from any subdirectory of it; turnctl -C
// DIR on the project once unmounted says it is not mounted, and how to
// mount it.
func TestStatusFromSubdirAndUnmounted(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"a/b/c.txt": "x"})
	m := mountProject(t, dir)
	cmd := exec.Command(ckptfsBin, "status")
	cmd.Dir = filepath.Join(dir, "a/b")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "dir:     "+dir+"\n") || !strings.Contains(string(out), "mounted: yes") || !strings.Contains(string(out), "latest:  turn ") {
		t.Errorf("ckptfs status in a/b: %v\n%s", err, out)
	}
	// Through a symlink to the project, as mount and umount take it.
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(ckptfsBin, "status", link).CombinedOutput(); err != nil || !strings.Contains(string(out), "dir:     "+dir+"\n") || !strings.Contains(string(out), "mounted: yes") {
		t.Errorf("ckptfs status LINK: %v\n%s", err, out)
	}
	m.Unmount(t)
	got, err := runTurnctl(t, dir, "status")
	want := "turnctl: " + dir + " is not mounted (mount it with: ckptfs mount " + dir + ")\n"
	if exitCode(err) != 1 || got != want {
		t.Errorf("turnctl -C DIR status, unmounted: exit %d, %q; want exit 1 and %q", exitCode(err), got, want)
	}
}
