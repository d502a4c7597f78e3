package tests

import (
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// Paths far past PATH_MAX work through the mount: the daemon never builds a
// full path (doc/FUSE-NOTES.md), so only the kernel's per-name limit applies.
func TestDeepTreeAndLongNames(t *testing.T) {
	dir := t.TempDir()
	mountProject(t, dir)
	name := strings.Repeat("n", 255)
	fd := deepDir(t, dir, 40, true) // 40 × 256 bytes ≈ 10 KiB of path
	f, err := unix.Openat(fd, "leaf", unix.O_CREAT|unix.O_WRONLY, 0o644)
	if err != nil {
		t.Fatalf("create leaf: %v", err)
	}
	unix.Write(f, []byte("deep"))
	unix.Close(f)
	if err := unix.Renameat(fd, "leaf", fd, "leaf2"); err != nil {
		t.Fatalf("rename deep: %v", err)
	}
	var st unix.Stat_t
	if err := unix.Fstatat(fd, "leaf2", &st, unix.AT_SYMLINK_NOFOLLOW); err != nil || st.Size != 4 {
		t.Fatalf("stat deep: %v size %d", err, st.Size)
	}
	if err := unix.Unlinkat(fd, "leaf2", 0); err != nil {
		t.Fatalf("unlink deep: %v", err)
	}
	unix.Close(fd)
	if err := unix.Mkdirat(unix.AT_FDCWD, dir+"/"+strings.Repeat("x", 256), 0o755); err != unix.ENAMETOOLONG {
		t.Errorf("mkdir of a 256-byte name: %v, want ENAMETOOLONG", err)
	}
	runIn(t, dir, "rm -rf "+name)
}

// deepDir opens the directory depth names of 255 bytes below root, making
// what is missing; the caller closes the fd.
func deepDir(t *testing.T, root string, depth int, make bool) int {
	t.Helper()
	name := strings.Repeat("n", 255)
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < depth; i++ {
		if make {
			if err := unix.Mkdirat(fd, name, 0o755); err != nil && err != unix.EEXIST {
				t.Fatalf("mkdir at depth %d: %v", i, err)
			}
		}
		nfd, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		unix.Close(fd)
		if err != nil {
			t.Fatalf("open at depth %d: %v", i, err)
		}
		fd = nfd
	}
	return fd
}

// readDeep reads the file leaf of deepDir(root), "" if it is missing.
func readDeep(t *testing.T, root string) string {
	t.Helper()
	d := deepDir(t, root, 20, false)
	defer unix.Close(d)
	f, err := unix.Openat(d, "leaf", unix.O_RDONLY, 0)
	if err != nil {
		t.Fatalf("open leaf: %v", err)
	}
	defer unix.Close(f)
	b := make([]byte, 64)
	n, _ := unix.Read(f, b)
	return string(b[:n])
}

// TestDeepTreeHistory: a file below a path longer than PATH_MAX has a
// history like any other: its overwrite is captured, log and show list
// it, and rewinds, undo and cat give its bytes back. Its overwrite
// went unrecorded (the capture's check of the path failed), log failed
// for the whole project, and a rewind could not bring the tree back.
func TestDeepTreeHistory(t *testing.T) {
	dir := t.TempDir()
	m := mountProject(t, dir)
	write := func(data string) {
		d := deepDir(t, dir, 20, true) // 20 × 256 bytes: 5 KiB of path
		defer unix.Close(d)
		f, err := unix.Openat(d, "leaf", unix.O_CREAT|unix.O_WRONLY|unix.O_TRUNC, 0o644)
		if err != nil {
			t.Fatalf("create leaf: %v", err)
		}
		unix.Write(f, []byte(data))
		unix.Close(f)
	}
	m.turnctl(t, "begin")
	write("v1")
	m.turnctl(t, "end")
	m.turnctl(t, "begin")
	write("v2")
	m.turnctl(t, "end")
	m.turnctl(t, "begin")
	runIn(t, dir, "rm -rf "+strings.Repeat("n", 255))
	m.turnctl(t, "end")

	if out := m.turnctl(t, "log"); !strings.Contains(out, "1 file  +1 -1") {
		t.Errorf("log does not show the overwrite (turn 2):\n%s", out)
	}
	m.turnctl(t, "rewind", "1")
	if got := readDeep(t, dir); got != "v1" {
		t.Errorf("after rewind 1: %q", got)
	}
	m.turnctl(t, "rewind", "2")
	if got := readDeep(t, dir); got != "v2" {
		t.Errorf("after rewind 2: %q", got)
	}
	m.turnctl(t, "undo")
	if got := readDeep(t, dir); got != "v1" {
		t.Errorf("after the undo of rewind 2: %q", got)
	}
	leaf := strings.Repeat(strings.Repeat("n", 255)+"/", 20) + "leaf"
	if got := m.turnctl(t, "cat", "2", leaf); got != "v2" {
		t.Errorf("cat 2 of the leaf: %q", got)
	}
}
