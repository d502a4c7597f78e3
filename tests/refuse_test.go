package tests

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"ckptfs/internal/rundir"
)

// refuseListing lists each path: its own type, and if a directory, every
// entry below it (recursively, up to depth levels) with its type. What a
// refused command must leave exactly as it was.
func refuseListing(t *testing.T, depth int, paths ...string) string {
	t.Helper()
	var out []string
	var walk func(p string, d int)
	walk = func(p string, d int) {
		fi, err := os.Lstat(p)
		if err != nil {
			out = append(out, fmt.Sprintf("%s: %v", p, err))
			return
		}
		out = append(out, fmt.Sprintf("%s %v", p, fi.Mode().Type()))
		if !fi.IsDir() || d == 0 {
			return
		}
		ents, err := os.ReadDir(p)
		if err != nil {
			out = append(out, fmt.Sprintf("%s: readdir: %v", p, err))
			return
		}
		for _, e := range ents {
			walk(filepath.Join(p, e.Name()), d-1)
		}
	}
	for _, p := range paths {
		walk(p, depth)
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}

// refused runs ckptfs with args and checks it refused: exit status 1 and
// one line on its output, naming the problem (every string of want).
func refused(t *testing.T, want []string, args ...string) string {
	t.Helper()
	start := time.Now()
	out, err := runCkptfs(args...)
	if code := exitCode(err); code != 1 {
		t.Errorf("ckptfs %s: exit %d (%v), want 1; output:\n%s", strings.Join(args, " "), code, err, out)
	}
	if !strings.HasPrefix(out, "ckptfs: ") || strings.Count(out, "\n") != 1 || !strings.HasSuffix(out, "\n") {
		t.Errorf("ckptfs %s: want one line \"ckptfs: ...\", got:\n%s", strings.Join(args, " "), out)
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("ckptfs %s: output does not name %q:\n%s", strings.Join(args, " "), w, out)
		}
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("ckptfs %s took %v to refuse", strings.Join(args, " "), d)
	}
	t.Logf("ckptfs %s: %s", strings.Join(args, " "), strings.TrimSpace(out))
	return out
}

// sameListing fails the test when a listing changed.
func sameListing(t *testing.T, what, before, after string) {
	t.Helper()
	if before != after {
		t.Errorf("%s changed:\nbefore:\n%s\nafter:\n%s", what, before, after)
	}
}

// A directory inside a live mount (directly, through a symlink, or as the
// --store of another project) is refused, and neither the outer mount's
// tree nor its history learns of it.
func TestMountRefusesInsideMount(t *testing.T) {
	outer := t.TempDir()
	other := t.TempDir()
	writeTree(t, outer, map[string]string{"a": "1", "inner/x": "2", "inner/deep/y": "3"})
	link := filepath.Join(other, "link")
	if err := os.Symlink(filepath.Join(outer, "inner"), link); err != nil {
		t.Fatal(err)
	}
	m := mountProject(t, outer)
	inner, deep := filepath.Join(outer, "inner"), filepath.Join(outer, "inner", "deep")
	// Should a refusal fail, leave nothing mounted on the inner paths.
	for _, d := range []string{inner, deep, other} {
		d := d
		t.Cleanup(func() { forceUnmount(t, d) })
	}
	logBefore, statusBefore := m.turnctl(t, "log"), m.turnctl(t, "status")
	before := refuseListing(t, 5, outer, other, filepath.Dir(outer))

	refused(t, []string{inner + " is inside the ckptfs mount " + outer, "ckptfs umount " + outer}, "mount", inner)
	refused(t, []string{deep + " is inside the ckptfs mount " + outer}, "mount", deep)
	refused(t, []string{inner + " is inside the ckptfs mount " + outer}, "mount", link)
	refused(t, []string{"store " + filepath.Join(inner, "st") + " is inside the ckptfs mount " + outer}, "mount", "--store", filepath.Join(inner, "st"), other)
	refused(t, []string{m.Store + " is the history store of the ckptfs mount " + outer + " (hidden from it, not recorded)"}, "mount", m.Store)

	for _, d := range []string{inner, deep, other} {
		if rundir.IsMounted(d) {
			t.Errorf("%s is mounted", d)
		}
	}
	sameListing(t, "the trees through the mount", before, refuseListing(t, 5, outer, other, filepath.Dir(outer)))
	if out := m.turnctl(t, "log"); out != logBefore {
		t.Errorf("the outer mount's history changed:\nbefore:\n%s\nafter:\n%s", logBefore, out)
	}
	if out := m.turnctl(t, "status"); out != statusBefore {
		t.Errorf("the outer mount's open turn changed:\nbefore:\n%s\nafter:\n%s", statusBefore, out)
	}
	// The backing tree, as the outer daemon sees it, holds no store.
	m.Unmount(t)
	for _, p := range []string{filepath.Join(inner, ".ckptfs"), filepath.Join(deep, ".ckptfs"), filepath.Join(inner, "st")} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s was created in the backing tree", p)
		}
	}
}

// A directory that holds a live mount below it (directly, two levels
// down, or named through a symlink) is refused too: the outer daemon
// would write through the inner mount, and the outer history record the
// inner project's files and its store, which a rewind could then delete.
// Nothing is created, and the inner project's history does not change.
func TestMountRefusesOverMount(t *testing.T) {
	outer := t.TempDir()
	other := t.TempDir()
	writeTree(t, outer, map[string]string{"a": "1", "src/child/c": "2"})
	src, child := filepath.Join(outer, "src"), filepath.Join(outer, "src", "child")
	link := filepath.Join(other, "link")
	if err := os.Symlink(outer, link); err != nil {
		t.Fatal(err)
	}
	m := mountProject(t, child)
	// Should a refusal fail, leave nothing mounted on the outer paths.
	for _, d := range []string{outer, src} {
		d := d
		t.Cleanup(func() { forceUnmount(t, d) })
	}
	logBefore, statusBefore := m.turnctl(t, "log"), m.turnctl(t, "status")
	before := refuseListing(t, 5, outer, other)

	refused(t, []string{"the ckptfs mount " + child + " is inside " + outer, "ckptfs umount " + child}, "mount", outer)
	refused(t, []string{"the ckptfs mount " + child + " is inside " + src, "ckptfs umount " + child}, "mount", src)
	refused(t, []string{"the ckptfs mount " + child + " is inside " + outer}, "mount", link)

	for _, d := range []string{outer, src} {
		if rundir.IsMounted(d) {
			t.Errorf("%s is mounted", d)
		}
	}
	sameListing(t, "the trees", before, refuseListing(t, 5, outer, other))
	if out := m.turnctl(t, "log"); out != logBefore {
		t.Errorf("the inner mount's history changed:\nbefore:\n%s\nafter:\n%s", logBefore, out)
	}
	if out := m.turnctl(t, "status"); out != statusBefore {
		t.Errorf("the inner mount's open turn changed:\nbefore:\n%s\nafter:\n%s", statusBefore, out)
	}
	// Once the inner project is unmounted, the outer one mounts.
	m.Unmount(t)
	mountProject(t, outer).Unmount(t)
}

// Mounting over / is refused before anything is created there.
func TestMountRefusesRoot(t *testing.T) {
	setRuntimeDir(t)
	_, storeErr := os.Lstat("/.ckptfs")
	t.Cleanup(func() {
		// Undo what a mount that was not refused did.
		if rundir.IsMounted("/") {
			forceUnmount(t, "/")
		}
		if storeErr != nil {
			os.RemoveAll("/.ckptfs")
		}
	})
	before := refuseListing(t, 1, "/")
	refused(t, []string{"refusing to mount over /"}, "mount", "/")
	sameListing(t, "/", before, refuseListing(t, 1, "/"))
	if rundir.IsMounted("/") {
		t.Errorf("/ is a ckptfs mount")
	}
}

// A regular file and a missing path are refused, and nothing is created
// beside them.
func TestMountRefusesNonDirectory(t *testing.T) {
	setRuntimeDir(t)
	parent := t.TempDir()
	file := filepath.Join(parent, "file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(parent, "missing")
	before := refuseListing(t, 3, parent, filepath.Dir(parent))
	refused(t, []string{file + " is not a directory"}, "mount", file)
	refused(t, []string{missing + ": no such file or directory", "create the directory"}, "mount", missing)
	refused(t, []string{"no such file or directory"}, "mount", filepath.Join(missing, "sub"))
	sameListing(t, "the directory", before, refuseListing(t, 3, parent, filepath.Dir(parent)))
	for _, p := range []string{file, missing} {
		if rundir.IsMounted(p) {
			t.Errorf("%s is mounted", p)
		}
	}
}

// A second mount of a mounted project is refused; the first goes on as it
// was.
func TestMountRefusesMounted(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"a": "1"})
	m := mountProject(t, dir)
	if err := os.WriteFile(filepath.Join(dir, "b"), []byte("2"), 0o644); err != nil {
		t.Fatal(err)
	}
	pid := m.PID(t)
	logBefore, statusBefore := m.turnctl(t, "log"), m.turnctl(t, "status")
	before := refuseListing(t, 3, dir, filepath.Dir(dir))
	refused(t, []string{dir + " is already a ckptfs mount", "ckptfs umount " + dir}, "mount", dir)
	sameListing(t, "the tree", before, refuseListing(t, 3, dir, filepath.Dir(dir)))
	if got := m.PID(t); got != pid || !alive(pid) {
		t.Errorf("daemon %d replaced by %d (alive: %v)", pid, got, alive(pid))
	}
	if n := strings.Count(mountsOf(dir), "\n"); n != 1 {
		t.Errorf("%d mounts on %s", n, dir)
	}
	if out := m.turnctl(t, "log"); out != logBefore {
		t.Errorf("history changed:\nbefore:\n%s\nafter:\n%s", logBefore, out)
	}
	if out := m.turnctl(t, "status"); out != statusBefore {
		t.Errorf("open turn changed:\nbefore:\n%s\nafter:\n%s", statusBefore, out)
	}
}

// startHolder starts `sleep 600` with its working directory in dir and
// kills it when the test ends; kill ends it sooner.
func startHolder(t *testing.T, dir string) (pid int, kill func()) {
	t.Helper()
	cmd := exec.Command("sleep", "600")
	cmd.Dir = dir
	if err := cmd.Start(); err != nil {
		t.Fatalf("start sleep in %s: %v", dir, err)
	}
	done := false
	kill = func() {
		if done {
			return
		}
		done = true
		cmd.Process.Kill()
		cmd.Wait()
	}
	// Registered after mountProject's cleanup, so it runs before it.
	t.Cleanup(kill)
	return cmd.Process.Pid, kill
}

// umount refuses while a process has its working directory in the mount,
// names it, and leaves the mount live with its open turn open.
func TestUmountRefusesBusy(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"a": "1", "sub/b": "2"})
	m := mountProject(t, dir)
	if err := os.WriteFile(filepath.Join(dir, "before"), []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	statusBefore := m.turnctl(t, "status")
	if !strings.Contains(statusBefore, "open") {
		t.Fatalf("no open turn after a write:\n%s", statusBefore)
	}
	pid := m.PID(t)
	holder, kill := startHolder(t, filepath.Join(dir, "sub"))

	refused(t, []string{dir + " is in use by", fmt.Sprintf("%d sleep", holder), "--lazy"}, "umount", dir)

	if !rundir.IsMounted(dir) {
		t.Fatalf("%s is no longer mounted after a refused umount", dir)
	}
	if b, _ := os.ReadFile("/proc/mounts"); !strings.Contains(string(b), " "+dir+" "+rundir.FSType+" ") {
		t.Fatalf("%s is not in /proc/mounts", dir)
	}
	if !alive(pid) {
		t.Fatalf("daemon %d is gone", pid)
	}
	if out := m.turnctl(t, "status"); out != statusBefore {
		t.Errorf("the open turn changed:\nbefore:\n%s\nafter:\n%s", statusBefore, out)
	}
	if err := os.WriteFile(filepath.Join(dir, "after"), []byte("y\n"), 0o644); err != nil {
		t.Fatalf("write through the mount after a refused umount: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "after")); err != nil || string(b) != "y\n" {
		t.Fatalf("read back: %q %v", b, err)
	}
	if out := m.turnctl(t, "status"); !strings.Contains(out, "after") || !strings.Contains(out, "before") {
		t.Errorf("the open turn does not hold both writes:\n%s", out)
	}

	kill()

	// An open file and a memory map hold the mount as a working
	// directory does.
	f, err := os.Open(filepath.Join(dir, "sub", "b"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sleep", "600")
	cmd.ExtraFiles = []*os.File{f}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	refused(t, []string{fmt.Sprintf("%d sleep", cmd.Process.Pid)}, "umount", dir)
	cmd.Process.Kill()
	cmd.Wait()
	if cmd, stop := mapFile(t, filepath.Join(dir, "a")); cmd != nil {
		refused(t, []string{fmt.Sprintf("%d python3", cmd.Process.Pid)}, "umount", dir)
		stop()
	}
	if !rundir.IsMounted(dir) || !alive(pid) {
		t.Fatalf("%s is no longer mounted after refused umounts", dir)
	}

	start := time.Now()
	m.Unmount(t)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("umount with nothing holding the mount took %v", d)
	}
	if alive(pid) {
		t.Errorf("daemon %d still runs after umount", pid)
	}
}

// umount --lazy closes the open turn and detaches the mount although a
// process still has its working directory in it.
func TestUmountLazy(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"a": "1", "sub/b": "2"})
	m := mountProject(t, dir)
	if err := os.WriteFile(filepath.Join(dir, "lazy.txt"), []byte("lazy\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	pid := m.PID(t)
	holder, kill := startHolder(t, filepath.Join(dir, "sub"))

	start := time.Now()
	out, err := runCkptfs("umount", "--lazy", dir)
	if err != nil {
		t.Fatalf("umount --lazy: %v\n%s", err, out)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("umount --lazy took %v", d)
	}
	if strings.Count(out, "\n") != 1 || !strings.Contains(out, "lazily") || !strings.Contains(out, fmt.Sprintf("%d sleep", holder)) {
		t.Errorf("umount --lazy: want one line naming the holder and saying it detached lazily, got:\n%s", out)
	}
	t.Logf("umount --lazy: %s", strings.TrimSpace(out))
	if rundir.IsMounted(dir) {
		t.Fatalf("%s is still mounted after umount --lazy", dir)
	}
	if alive(pid) {
		t.Errorf("daemon %d still runs after umount --lazy", pid)
	}
	kill()

	m2 := mountProject(t, dir)
	var log struct {
		Turns []struct {
			Num  uint64    `json:"num"`
			End  time.Time `json:"end"`
			Open bool      `json:"open"`
		} `json:"turns"`
	}
	if err := json.Unmarshal([]byte(m2.turnctl(t, "--json", "log")), &log); err != nil {
		t.Fatal(err)
	}
	var closed bool
	for _, tr := range log.Turns {
		if tr.Num == 1 {
			closed = !tr.Open && !tr.End.IsZero()
		}
	}
	if !closed {
		t.Errorf("turn 1 is not a closed turn after umount --lazy:\n%s", m2.turnctl(t, "log"))
	}
	if out := m2.turnctl(t, "show", "1"); !strings.Contains(out, "lazy.txt") || strings.Contains(out, "open") {
		t.Errorf("turn 1 does not hold the change made before umount --lazy as a closed turn:\n%s", out)
	}
	if out := m2.turnctl(t, "status"); !strings.Contains(out, "no turn open") {
		t.Errorf("a turn is open after remounting:\n%s", out)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "lazy.txt")); err != nil || string(b) != "lazy\n" {
		t.Errorf("lazy.txt after remount: %q %v", b, err)
	}
}

// Both binaries say which build they are, in one line, and exit 0.
func TestVersion(t *testing.T) {
	needTurnctl(t)
	for _, bin := range []string{ckptfsBin, turnctlBin} {
		out, err := exec.Command(bin, "--version").CombinedOutput()
		if err != nil || strings.Count(string(out), "\n") != 1 || !strings.Contains(string(out), "ckptfs ") || !strings.Contains(string(out), "go1.") {
			t.Errorf("%s --version: %v, %q", filepath.Base(bin), err, out)
		}
		if bin == turnctlBin && !strings.HasPrefix(string(out), "turnctl from ckptfs ") {
			t.Errorf("turnctl --version: %q; want it to name turnctl, not read as an error", out)
		}
	}
}

// Every command's --help shows a yes/no flag as just its name.
func TestHelpShowsYesNoFlagsPlain(t *testing.T) {
	needTurnctl(t)
	for _, args := range [][]string{{ckptfsBin, "mount", "--help"}, {ckptfsBin, "umount", "--help"}, {ckptfsBin, "status", "--help"}, {turnctlBin, "log", "--help"}, {turnctlBin, "rewind", "--help"}} {
		out, _ := exec.Command(args[0], args[1:]...).CombinedOutput()
		if !strings.Contains(string(out), "--") || strings.Contains(string(out), "[=true|false]") {
			t.Errorf("%s %v: %s", filepath.Base(args[0]), args[1:], out)
		}
	}
}
