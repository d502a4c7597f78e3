// Package xfstest gives tests a filesystem that clones (FICLONE): a
// sparse image made with mkfs.xfs -m reflink=1 (Mount) or mkfs.btrfs
// (MountBtrfs) and loop-mounted, removed again when the test ends, also
// when it fails. Tests only.
package xfstest

import (
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// MinSize is the smallest image mkfs.xfs makes.
const MinSize = 300 << 20

// Mount makes a sparse XFS image of size bytes (at least MinSize) with
// reflink on, mounts it
// on a new directory and returns that directory (owned by root, mode
// 0755). The test is skipped, saying why, when it cannot be done here:
// not root, no mkfs.xfs (Debian: xfsprogs; .ci/run installs it), or no
// loop device. A t.Cleanup unmounts it (lazily if it is busy) and removes
// the image.
func Mount(t testing.TB, size int64) string {
	t.Helper()
	return mountImage(t, max(size, MinSize), "mkfs.xfs", "xfsprogs", "-q", "-m", "reflink=1")
}

// BtrfsMinSize is the smallest image MountBtrfs makes.
const BtrfsMinSize = 256 << 20

// MountBtrfs is Mount with a btrfs image (of at least BtrfsMinSize;
// Debian: btrfs-progs, which .ci/run installs).
func MountBtrfs(t testing.TB, size int64) string {
	t.Helper()
	return mountImage(t, max(size, BtrfsMinSize), "mkfs.btrfs", "btrfs-progs", "-q")
}

// mountImage makes a sparse image of size bytes with the mkfs tool of
// package pkg, run with args and the image, and loop-mounts it (Mount).
func mountImage(t testing.TB, size int64, tool, pkg string, args ...string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("xfstest: needs root to loop-mount an image")
	}
	mkfs := lookSbin(tool)
	if mkfs == "" {
		t.Skipf("xfstest: %s not found (apt-get install %s)", tool, pkg)
	}
	// The image and the mount point go first, so that their removal runs
	// after the unmount registered below (cleanups run last in, first out).
	work := t.TempDir()
	img := filepath.Join(work, "fs.img")
	dir := filepath.Join(work, "mnt")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(img)
	if err != nil {
		t.Fatal(err)
	}
	err = f.Truncate(size)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(mkfs, append(args, img)...).CombinedOutput()
	if err != nil && strings.Contains(string(out), "cannot check mount status") {
		// mkfs.btrfs stats the source of every mount to be sure the image
		// is in use by none, and gives up at a FUSE mount private to
		// another user (root included: the tests of the user mode make
		// them, in another package that may run meanwhile). In a mount
		// namespace of its own without FUSE mounts it sees none.
		out, err = exec.Command("unshare", append([]string{"--mount", "--propagation", "private", "sh", "-c",
			`for m in $(awk '$3 ~ /^fuse/ {print $2}' /proc/self/mounts); do umount -l "$m"; done; exec "$0" "$@"`,
			mkfs}, append(args, img)...)...).CombinedOutput()
	}
	if err != nil {
		t.Fatalf("xfstest: %s: %v\n%s", tool, err, out)
	}
	if out, err := exec.Command("mount", "-o", "loop", img, dir).CombinedOutput(); err != nil {
		t.Skipf("xfstest: cannot loop-mount a %s image here: %v\n%s", tool, err, out)
	}
	t.Cleanup(func() { unmount(t, dir) })
	return dir
}

// lookSbin finds a tool on $PATH, else in the sbin directories a user's
// $PATH may lack.
func lookSbin(name string) string {
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, d := range []string{"/usr/sbin", "/sbin"} {
		if p := filepath.Join(d, name); unix.Access(p, unix.X_OK) == nil {
			return p
		}
	}
	return ""
}

// unmount unmounts dir, retrying a busy one for a while, and detaches it
// lazily as a last resort (the loop device goes with its last user).
func unmount(t testing.TB, dir string) {
	var err error
	for i := 0; i < 50; i++ {
		if err = unix.Unmount(dir, 0); err == nil || err == unix.EINVAL {
			return
		}
		if err != unix.EBUSY {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Errorf("xfstest: unmount %s: %v; detaching it lazily", dir, err)
	unix.Unmount(dir, unix.MNT_DETACH)
}

// Clones reports whether dir's filesystem clones: it clones a one-block
// file into another and removes both.
func Clones(dir string) bool {
	a, err := os.CreateTemp(dir, "probe-")
	if err != nil {
		return false
	}
	defer os.Remove(a.Name())
	defer a.Close()
	if _, err := a.Write(make([]byte, 4096)); err != nil {
		return false
	}
	b, err := os.CreateTemp(dir, "probe-")
	if err != nil {
		return false
	}
	defer os.Remove(b.Name())
	defer b.Close()
	return unix.IoctlFileClone(int(b.Fd()), int(a.Fd())) == nil
}

// FreeBytes returns the bytes free for use in dir's filesystem.
func FreeBytes(t testing.TB, dir string) int64 {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * st.Bsize
}

// Sync flushes dir's filesystem, so that statfs counts what was written
// (XFS reserves blocks of delayed allocations until they are written).
func Sync(t testing.TB, dir string) {
	t.Helper()
	f, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Syncfs(int(f.Fd())); err != nil {
		t.Fatal(err)
	}
}

// SharedBytes returns how many bytes of the file at p lie in extents it
// shares with another file (FIEMAP's FIEMAP_EXTENT_SHARED), after
// flushing its dirty pages.
func SharedBytes(t testing.TB, p string) int64 {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const (
		fsIocFiemap  = 0xC020660B // _IOWR('f', 11, struct fiemap)
		flagSync     = 0x1        // FIEMAP_FLAG_SYNC
		extentLast   = 0x1        // FIEMAP_EXTENT_LAST
		extentShared = 0x2000     // FIEMAP_EXTENT_SHARED
		perCall      = 256
		header       = 32 // struct fiemap
		extent       = 56 // struct fiemap_extent
	)
	buf := make([]byte, header+perCall*extent)
	var shared int64
	for start := uint64(0); ; {
		clear(buf)
		binary.NativeEndian.PutUint64(buf[0:], start)
		binary.NativeEndian.PutUint64(buf[8:], ^uint64(0)-start)
		binary.NativeEndian.PutUint32(buf[16:], flagSync)
		binary.NativeEndian.PutUint32(buf[24:], perCall)
		if _, _, e := unix.Syscall(unix.SYS_IOCTL, f.Fd(), fsIocFiemap, uintptr(unsafe.Pointer(&buf[0]))); e != 0 {
			t.Fatalf("FIEMAP %s: %v", p, e)
		}
		n := int(binary.NativeEndian.Uint32(buf[20:]))
		if n == 0 {
			return shared
		}
		for i := 0; i < n; i++ {
			e := buf[header+i*extent:]
			logical, length := binary.NativeEndian.Uint64(e[0:]), binary.NativeEndian.Uint64(e[16:])
			flags := binary.NativeEndian.Uint32(e[40:])
			if flags&extentShared != 0 {
				shared += int64(length)
			}
			if flags&extentLast != 0 {
				return shared
			}
			start = logical + length
		}
	}
}
