// Package tests mounts the built ckptfs binary over temporary directories
// and drives real programs through the mount.
package tests

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"ckptfs/internal/rundir"
)

// Paths of the binaries built once by TestMain (buildBinaries).
var (
	binDir     string
	ckptfsBin  string
	turnctlBin string // "" when cmd/turnctl does not build yet
)

func TestMain(m *testing.M) {
	if os.Geteuid() != 0 {
		fmt.Println("tests: skipped, mounting needs root")
		os.Exit(0)
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		fmt.Println("tests: skipped, no /dev/fuse")
		os.Exit(0)
	}
	dir, err := os.MkdirTemp("", "ckptfs-bin-")
	if err != nil {
		panic(err)
	}
	// The stores given with --store are remembered in the user's state
	// directory: the tests' in one of their own.
	os.Setenv("XDG_STATE_HOME", filepath.Join(dir, "state"))
	if err := buildBinaries(dir); err != nil {
		fmt.Println(err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// moduleRoot is the repository root (the directory above tests/).
func moduleRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(file))
}

// buildBinaries builds ckptfs (required) and turnctl (if it builds) into
// dir and sets ckptfsBin and turnctlBin.
func buildBinaries(dir string) error {
	binDir = dir
	root := moduleRoot()
	ckptfsBin = filepath.Join(dir, "ckptfs")
	args := []string{"build", "-o", ckptfsBin}
	if os.Getenv("CKPTFS_RACE") != "" {
		args = append(args, "-race") // the daemon under the race detector
	}
	cmd := exec.Command("go", append(args, "./cmd/ckptfs")...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build ckptfs: %v\n%s", err, out)
	}
	tb := filepath.Join(dir, "turnctl")
	cmd = exec.Command("go", "build", "-o", tb, "./cmd/turnctl")
	cmd.Dir = root
	if _, err := cmd.CombinedOutput(); err == nil {
		turnctlBin = tb
	}
	return nil
}

// Mount is a live ckptfs mount made by mountProject.
type Mount struct {
	Dir     string // the mounted directory
	Store   string // the store directory
	Runtime string // CKPTFS_RUNTIME_DIR of this test
}

// setRuntimeDir gives the test its own runtime directory (sockets, info
// files) and returns it.
func setRuntimeDir(t *testing.T) string {
	t.Helper()
	runtimeMu.Lock()
	defer runtimeMu.Unlock()
	if d, ok := runtimeDirs[t]; ok {
		return d
	}
	d := t.TempDir()
	if err := os.Chmod(d, 0o700); err != nil { // a runtime directory is private (rundir)
		t.Fatal(err)
	}
	t.Setenv("CKPTFS_RUNTIME_DIR", d)
	runtimeDirs[t] = d
	return d
}

var (
	runtimeMu   sync.Mutex
	runtimeDirs = map[*testing.T]string{}
)

// mountProject mounts ckptfs over dir (extra args go before DIR, e.g.
// "--exclude", "build") and unmounts it when the test ends, also on
// failure: `ckptfs umount`, then SIGKILL of the daemon and a lazy detach.
func mountProject(t *testing.T, dir string, args ...string) *Mount {
	t.Helper()
	rt := setRuntimeDir(t)
	dir, _ = filepath.Abs(dir)
	m := &Mount{Dir: dir, Store: filepath.Join(dir, ".ckptfs"), Runtime: rt}
	for i, a := range args {
		if a == "--store" && i+1 < len(args) {
			m.Store = args[i+1]
		}
	}
	out, err := runCkptfs(append(append([]string{"mount"}, args...), dir)...)
	if err != nil {
		t.Fatalf("ckptfs mount %s: %v\n%s", dir, err, out)
	}
	t.Cleanup(func() {
		forceUnmount(t, dir)
		checkDaemonLog(t, m.Store)
	})
	if !rundir.IsMounted(dir) {
		t.Fatalf("ckptfs mount returned but %s is not in /proc/mounts", dir)
	}
	return m
}

// Unmount unmounts with `ckptfs umount` and fails the test if it fails.
func (m *Mount) Unmount(t *testing.T) {
	t.Helper()
	if out, err := runCkptfs("umount", m.Dir); err != nil {
		t.Fatalf("ckptfs umount: %v\n%s", err, out)
	}
	if rundir.IsMounted(m.Dir) {
		t.Fatalf("%s still mounted after ckptfs umount", m.Dir)
	}
}

// PID returns the daemon's pid from the info file.
func (m *Mount) PID(t *testing.T) int {
	t.Helper()
	info, err := rundir.ReadInfo(m.Dir)
	if err != nil {
		t.Fatalf("read info: %v", err)
	}
	return info.PID
}

// forceUnmount leaves nothing mounted on dir, whatever state it is in.
func forceUnmount(t *testing.T, dir string) {
	if !rundir.IsMounted(dir) {
		return
	}
	pid := 0
	if info, err := rundir.ReadInfo(dir); err == nil {
		pid = info.PID
	}
	done := make(chan error, 1)
	go func() { _, err := runCkptfs("umount", dir); done <- err }()
	hung := false
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		t.Errorf("ckptfs umount %s hung", dir)
		hung = true
	}
	// A hung umount may have unmounted and left its daemon stuck in its
	// shutdown: it must not outlive the test either.
	if hung || rundir.IsMounted(dir) {
		if pid > 0 {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		unix.Unmount(dir, unix.MNT_DETACH)
	}
	if rundir.IsMounted(dir) {
		t.Errorf("%s is still mounted after cleanup", dir)
	}
}

// runCkptfs runs the built binary and returns its combined output.
func runCkptfs(args ...string) (string, error) {
	cmd := exec.Command(ckptfsBin, args...)
	var b bytes.Buffer
	cmd.Stdout = &b
	cmd.Stderr = &b
	err := cmd.Run()
	return b.String(), err
}

// runIn runs a shell script with dir as cwd, with a fixed environment so
// that runs in different directories produce the same bytes (git dates).
func runIn(t *testing.T, dir, script string) string {
	t.Helper()
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com",
		"GIT_AUTHOR_DATE=2026-01-01T00:00:00Z", "GIT_COMMITTER_DATE=2026-01-01T00:00:00Z",
		"GIT_CONFIG_NOSYSTEM=1", "HOME="+t.TempDir(), "LC_ALL=C", "TZ=UTC",
	)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("script in %s: %v\n%s\n--- script:\n%s", dir, err, out, script)
	}
	return string(out)
}

// entry is the comparable state of one path of a tree: what a rewind
// must give back.
type entry struct {
	Type   string
	Mode   fs.FileMode
	Owner  string // "uid:gid"
	Sum    string // regular files: sha256 of the bytes
	Target string // symlinks
	Rdev   string // devices: "major:minor"
	// Link: for anything but a directory with other names in the tree,
	// the first of its names: which paths share an inode, without inode
	// numbers.
	Link string
}

func (e entry) String() string {
	s := fmt.Sprintf("%s %v %s %s%s", e.Type, e.Mode, e.Owner, e.Sum, e.Target)
	if e.Rdev != "" {
		s += " rdev " + e.Rdev
	}
	if e.Link != "" {
		s += " =" + e.Link
	}
	return s
}

// snapshot walks a tree and returns every path's state. skip lists
// root-relative paths left out (with everything below them); noBytes lists
// files whose bytes are not compared (e.g. .git/index holds inode numbers).
func snapshot(t *testing.T, root string, skip []string, noBytes []string) map[string]entry {
	t.Helper()
	out := map[string]entry{}
	inodes := map[[2]uint64][]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == "." {
			return nil
		}
		rel = filepath.ToSlash(rel)
		for _, s := range skip {
			if rel == s || strings.HasPrefix(rel, s+"/") {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		e := entry{Mode: fi.Mode()}
		st := fi.Sys().(*syscall.Stat_t)
		e.Owner = fmt.Sprintf("%d:%d", st.Uid, st.Gid)
		if st.Nlink > 1 && !fi.IsDir() {
			k := [2]uint64{st.Dev, st.Ino}
			inodes[k] = append(inodes[k], rel)
		}
		switch {
		case fi.Mode().IsRegular():
			e.Type = "file"
			if !contains(noBytes, rel) {
				b, err := os.ReadFile(p)
				if err != nil {
					return err
				}
				s := sha256.Sum256(b)
				e.Sum = hex.EncodeToString(s[:8])
			}
		case fi.IsDir():
			e.Type = "dir"
		case fi.Mode()&fs.ModeSymlink != 0:
			e.Type = "symlink"
			e.Target, _ = os.Readlink(p)
		case fi.Mode()&fs.ModeNamedPipe != 0:
			e.Type = "fifo"
		case fi.Mode()&fs.ModeSocket != 0:
			e.Type = "socket"
		case fi.Mode()&fs.ModeDevice != 0:
			e.Type = "blockdev"
			if fi.Mode()&fs.ModeCharDevice != 0 {
				e.Type = "chardev"
			}
			e.Rdev = fmt.Sprintf("%d:%d", unix.Major(st.Rdev), unix.Minor(st.Rdev))
		default:
			e.Type = "unknown"
		}
		out[rel] = e
		return nil
	})
	if err != nil {
		t.Fatalf("walk %s: %v", root, err)
	}
	for _, names := range inodes {
		if len(names) > 1 {
			sort.Strings(names)
			for _, n := range names {
				e := out[n]
				e.Link = names[0]
				out[n] = e
			}
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// diffTrees reports every difference between two snapshots.
func diffTrees(t *testing.T, want, got map[string]entry) {
	t.Helper()
	var keys []string
	for k := range want {
		keys = append(keys, k)
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	n := 0
	for _, k := range keys {
		w, wok := want[k]
		g, gok := got[k]
		switch {
		case !gok:
			t.Errorf("missing through ckptfs: %s (%v)", k, w)
		case !wok:
			t.Errorf("extra through ckptfs: %s (%v)", k, g)
		case w != g:
			t.Errorf("differs: %s: plain %v, ckptfs %v", k, w, g)
		default:
			continue
		}
		if n++; n > 30 {
			t.Fatalf("too many differences")
		}
	}
}

// writeTree creates files from a map of relative path to content.
func writeTree(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for p, c := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// runTurnctl runs the built turnctl with -C dir and returns its combined
// output; it skips the test when cmd/turnctl does not build yet.
func runTurnctl(t *testing.T, dir string, args ...string) (string, error) {
	t.Helper()
	if turnctlBin == "" {
		t.Skip("cmd/turnctl does not build yet")
	}
	cmd := exec.Command(turnctlBin, append([]string{"-C", dir}, args...)...)
	var b bytes.Buffer
	cmd.Stdout = &b
	cmd.Stderr = &b
	err := cmd.Run()
	return b.String(), err
}

// checkDaemonLog fails the test if the daemon logged a data race or a
// panic (its stderr goes to <store>/daemon.log).
func checkDaemonLog(t *testing.T, store string) {
	b, err := os.ReadFile(filepath.Join(store, "daemon.log"))
	if err != nil {
		return
	}
	s := string(b)
	if t.Failed() {
		// Whatever the daemon said may explain the failure.
		t.Logf("daemon log (last 3000 bytes):\n%s", s[max(0, len(s)-3000):])
	}
	for _, bad := range []string{"DATA RACE", "panic:", "BUG:"} {
		if i := strings.Index(s, bad); i >= 0 {
			end := min(len(s), i+3000)
			t.Errorf("daemon log has %q:\n%s", bad, s[i:end])
			return
		}
	}
}

// mapFile starts a python3 that maps the file at p (MAP_SHARED, its fd
// closed: the map alone holds the file) and waits; it returns the
// process and a func that ends it, or nil where python3 is missing.
func mapFile(t *testing.T, p string) (*exec.Cmd, func()) {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		return nil, nil
	}
	cmd := exec.Command(py, "-c", `import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
fd = os.open(sys.argv[1], os.O_RDONLY)
p = libc.mmap(None, 4096, 1, 1, fd, 0)  # PROT_READ, MAP_SHARED (Python's mmap keeps an fd)
assert p not in (None, ctypes.c_void_p(-1).value), ctypes.get_errno()
os.close(fd)  # the map alone holds the file
print("mapped", flush=True)
sys.stdin.read()`, p)
	cmd.Dir = "/"
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stop := func() { stdin.Close(); cmd.Process.Kill(); cmd.Wait() }
	t.Cleanup(stop)
	line := make([]byte, 7)
	if _, err := io.ReadFull(stdout, line); err != nil || string(line) != "mapped\n" {
		t.Fatalf("python3 mmap: %q %v", line, err)
	}
	return cmd, stop
}
