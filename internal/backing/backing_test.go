package backing

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"ckptfs/internal/ckpt"
)

// A symlink planted where a directory was must never lead a write, a
// removal or a read outside the tree.
func TestSymlinkedParentIsNeverFollowed(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "victim"), []byte("keep"), 0o644)
	if err := os.Symlink(outside, filepath.Join(root, "dir")); err != nil {
		t.Fatal(err)
	}
	tree, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	defer tree.Close()

	if err := tree.WriteFile("dir/victim", ckpt.State{Type: ckpt.Regular, Mode: 0o644}, strings.NewReader("pwned")); err == nil {
		t.Error("WriteFile through a symlinked parent succeeded")
	}
	if err := tree.RemoveAll("dir/victim"); err != nil {
		t.Logf("RemoveAll: %v", err)
	}
	if err := tree.Mkdir("dir/new", 0o755); err == nil {
		t.Error("Mkdir through a symlinked parent succeeded")
	}
	if err := tree.Chmod("dir/victim", 0o777); err == nil {
		t.Error("Chmod through a symlinked parent succeeded")
	}
	if err := tree.Rename("dir/victim", "stolen"); err == nil {
		t.Error("Rename out of a symlinked parent succeeded")
	}
	if _, err := tree.Open("dir/victim"); err == nil {
		t.Error("Open through a symlinked parent succeeded")
	}
	if st, err := tree.Lstat("dir/victim"); err != nil || st.Exists() {
		t.Errorf("Lstat through a symlinked parent: %+v %v", st, err)
	}
	b, err := os.ReadFile(filepath.Join(outside, "victim"))
	if err != nil || string(b) != "keep" {
		t.Fatalf("the file outside the tree changed: %q %v", b, err)
	}
	if fi, err := os.Stat(filepath.Join(outside, "victim")); err != nil || fi.Mode().Perm() != 0o644 {
		t.Fatalf("mode outside changed: %v %v", fi.Mode(), err)
	}
	// RemoveAll of the symlink itself removes the link, not its target.
	if err := tree.RemoveAll("dir"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(outside, "victim")); err != nil {
		t.Fatal("RemoveAll followed the symlink")
	}
	// A final symlink is not followed by Chmod either.
	os.Symlink(filepath.Join(outside, "victim"), filepath.Join(root, "link"))
	if err := tree.Chmod("link", 0o600); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(filepath.Join(outside, "victim")); fi.Mode().Perm() != 0o644 {
		t.Fatal("Chmod followed a final symlink")
	}
}

func TestWriteFileReplacesAndKeepsMode(t *testing.T) {
	root := t.TempDir()
	tree, _ := Open(root)
	defer tree.Close()
	os.MkdirAll(filepath.Join(root, "a/b/c"), 0o755)
	os.WriteFile(filepath.Join(root, "a/b/c/f"), []byte("x"), 0o644)
	// A regular file replaces a whole directory.
	if err := tree.WriteFile("a/b", ckpt.State{Type: ckpt.Regular, Mode: 0o4755}, strings.NewReader("new")); err != nil {
		t.Fatal(err)
	}
	st, err := tree.Lstat("a/b")
	if err != nil || st.Type != ckpt.Regular || st.Mode != 0o4755 || st.Size != 3 {
		t.Fatalf("after WriteFile: %+v %v", st, err)
	}
	if err := tree.Mkdir("a/d", 0o1777); err != nil {
		t.Fatal(err)
	}
	if st, _ := tree.Lstat("a/d"); st.Mode != 0o1777 {
		t.Fatalf("Mkdir mode %o", st.Mode)
	}
	names, _ := tree.ReadDir("a")
	for _, n := range names {
		if strings.HasPrefix(n, TempPrefix) {
			t.Fatalf("temporary file left: %s", n)
		}
	}
}

// Hardlink replaces what is at the destination (a file, a directory)
// with another name of the source's inode, does nothing when it is one
// already, and never goes through a symlinked parent.
func TestHardlink(t *testing.T) {
	root := t.TempDir()
	tree, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	defer tree.Close()
	os.WriteFile(filepath.Join(root, "a"), []byte("a"), 0o644)
	os.WriteFile(filepath.Join(root, "b"), []byte("b"), 0o600)
	os.MkdirAll(filepath.Join(root, "d/e"), 0o755)
	os.Symlink(t.TempDir(), filepath.Join(root, "out"))
	ino := func(p string) ckpt.Inode {
		t.Helper()
		_, i, err := tree.LstatInode(p)
		if err != nil {
			t.Fatal(err)
		}
		return i
	}
	for _, to := range []string{"b", "c", "d", "b"} {
		if err := tree.Hardlink("a", to); err != nil {
			t.Fatalf("Hardlink a %s: %v", to, err)
		}
		if !ino(to).Same(ino("a")) {
			t.Fatalf("%s is not a name of a", to)
		}
	}
	if n := ino("a").Nlink; n != 4 {
		t.Fatalf("a has %d links, want 4 (a b c d)", n)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "b")); string(b) != "a" {
		t.Fatalf("b = %q", b)
	}
	if err := tree.Hardlink("a", "out/x"); err == nil {
		t.Error("Hardlink through a symlinked parent succeeded")
	}
	os.Mkdir(filepath.Join(root, "dir"), 0o755)
	if err := tree.Hardlink("dir", "x"); err == nil {
		t.Error("Hardlink of a directory succeeded")
	}
	ents, _ := os.ReadDir(root)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), TempPrefix) {
			t.Errorf("temporary left behind: %s", e.Name())
		}
	}
}

// onlyReader hides a reader's WriteTo: bytes as the store's chunks give them.
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }

// WriteFile leaves holes where whole blocks are zero: a sparse file
// written back from the store takes the space it took, not its size.
func TestWriteFileKeepsHoles(t *testing.T) {
	root := t.TempDir()
	tree, _ := Open(root)
	defer tree.Close()
	for _, c := range []struct {
		name string
		data []byte
	}{
		{"holes", func() []byte {
			b := make([]byte, 64<<20)
			copy(b[10<<20:], "middle")
			copy(b[40<<20+5:], "later, unaligned")
			return b
		}()},
		{"trailing", append([]byte("head"), make([]byte, 32<<20)...)},
		{"short tail", append(make([]byte, 8<<20), []byte("tail")...)},
		{"dense", bytes.Repeat([]byte("abcdefgh"), 1<<20)},
		{"empty", nil},
	} {
		if err := tree.WriteFile(c.name, ckpt.State{Type: ckpt.Regular, Mode: 0o644}, onlyReader{bytes.NewReader(c.data)}); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(root, c.name))
		if err != nil || !bytes.Equal(got, c.data) {
			t.Fatalf("%s: %d bytes back, want %d (%v)", c.name, len(got), len(c.data), err)
		}
		var st unix.Stat_t
		if err := unix.Stat(filepath.Join(root, c.name), &st); err != nil {
			t.Fatal(err)
		}
		nonZero := int64(len(bytes.ReplaceAll(c.data, []byte{0}, nil)))
		if alloc := st.Blocks * 512; c.name != "dense" && alloc > 1<<20+nonZero {
			t.Errorf("%s: %d bytes allocated for %d bytes of which %d not zero", c.name, alloc, len(c.data), nonZero)
		}
	}
}

// OpenBeneath and Lstatat take paths longer than PATH_MAX, a part at a
// time, still refusing a symlink on the way and a "..".
func TestLongPaths(t *testing.T) {
	root := t.TempDir()
	rfd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(rfd)
	name := strings.Repeat("n", 255)
	var parts []string
	fd, _ := unix.Dup(rfd)
	for i := 0; i < 20; i++ {
		if i == 10 {
			unix.Symlinkat(".", fd, "link") // a symlink, halfway down
		}
		unix.Mkdirat(fd, name, 0o755)
		nfd, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		unix.Close(fd)
		if err != nil {
			t.Fatal(err)
		}
		fd, parts = nfd, append(parts, name)
	}
	f, _ := unix.Openat(fd, "leaf", unix.O_CREAT|unix.O_WRONLY, 0o644)
	unix.Write(f, []byte("deep"))
	unix.Close(f)
	unix.Close(fd)
	long := strings.Join(parts, "/") + "/leaf"
	lfd, err := OpenBeneath(rfd, long, unix.O_RDONLY, 0)
	if err != nil {
		t.Fatalf("OpenBeneath of %d bytes: %v", len(long), err)
	}
	b := make([]byte, 8)
	n, _ := unix.Read(lfd, b)
	unix.Close(lfd)
	if string(b[:n]) != "deep" {
		t.Errorf("read %q", b[:n])
	}
	if st, err := Lstatat(rfd, long); err != nil || st.Size != 4 {
		t.Errorf("Lstatat of %d bytes: %+v %v", len(long), st, err)
	}
	viaLink := strings.Join(parts[:10], "/") + "/link/" + strings.Join(parts[10:], "/") + "/leaf"
	if fd, err := OpenBeneath(rfd, viaLink, unix.O_RDONLY, 0); err == nil {
		unix.Close(fd)
		t.Error("a symlink on the way of a long path was followed")
	}
	up := strings.Join(parts, "/") + "/../" + strings.Join(parts[:19], "/") + "/leaf"
	if fd, err := OpenBeneath(rfd, up, unix.O_RDONLY, 0); err == nil {
		unix.Close(fd)
		t.Error(`a long path with ".." was opened`)
	}
}

// CopyExtents of a source shorter than the size it was given fails with
// ErrShortSource, rather than making up the rest as a hole of zeros.
func TestCopyExtentsShortSource(t *testing.T) {
	dir := t.TempDir()
	src, _ := os.Create(filepath.Join(dir, "src"))
	defer src.Close()
	src.WriteAt([]byte("data"), 0)
	src.Truncate(8192)
	dst, _ := os.Create(filepath.Join(dir, "dst"))
	defer dst.Close()
	if err := CopyExtents(dst, src, 16384); !errors.Is(err, ErrShortSource) {
		t.Errorf("CopyExtents of 8 KiB as 16 KiB: %v, want ErrShortSource", err)
	}
	dst.Truncate(0)
	if err := CopyExtents(dst, src, 8192); err != nil {
		t.Errorf("CopyExtents of 8 KiB: %v", err)
	}
}
