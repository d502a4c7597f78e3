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
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	const depth = 40 // 40 × 256 bytes ≈ 10 KiB of path
	for i := 0; i < depth; i++ {
		if err := unix.Mkdirat(fd, name, 0o755); err != nil {
			t.Fatalf("mkdir at depth %d: %v", i, err)
		}
		nfd, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		unix.Close(fd)
		if err != nil {
			t.Fatalf("open at depth %d: %v", i, err)
		}
		fd = nfd
	}
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
