package versionstore

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"ckptfs/internal/backing"
	"ckptfs/internal/ckpt"
)

// fullDisk stands in for the store's disk (diskOf) of total bytes with
// *free bytes available besides what the ballast gave back: the store's
// own records are too small to count, and what the store releases of its
// ballast becomes free.
func fullDisk(t *testing.T, total int64, free *int64) {
	t.Helper()
	diskOf = func(s *Store) (int64, int64) {
		avail := *free
		if s.dirf != nil {
			avail += ballastSize(total) - ballastBytes(s)
		}
		return avail, total
	}
	t.Cleanup(func() { diskOf = nil })
}

// ballastBytes is the size of s's ballast (0: none).
func ballastBytes(s *Store) int64 {
	fi, err := os.Stat(s.ballastPath())
	if err != nil {
		return 0
	}
	return fi.Size()
}

// openOnFullDisk opens a store on a 256 MiB disk (a 32 MiB ballast) with
// *free bytes available, and a tree on the same filesystem (the attic can
// link its files).
func openOnFullDisk(t *testing.T, free *int64) (*Store, *backing.Tree, string) {
	t.Helper()
	dir := t.TempDir()
	fullDisk(t, 256<<20, free)
	s, err := Open(filepath.Join(dir, "store"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if ballastBytes(s) != 32<<20 {
		t.Skipf("no ballast here (%d bytes): fallocate unsupported", ballastBytes(s))
	}
	root := filepath.Join(dir, "tree")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	return s, openTree(t, root), root
}

// TestChangesWithoutBytesOnAFullDisk: on a disk with no byte free, an rm
// of a file the attic keeps by a hard link, a rename and a chmod are
// recorded (the ballast pays for their records), exactly: the rm'd file
// reads back at the turn's start. A capture whose bytes must be copied is
// still refused.
func TestChangesWithoutBytesOnAFullDisk(t *testing.T) {
	var free int64
	s, tree, root := openOnFullDisk(t, &free)
	big := make([]byte, 1<<20)
	for i := range big {
		big[i] = byte(i * 7)
	}
	writeFile(t, filepath.Join(root, "gone"), big)
	writeFile(t, filepath.Join(root, "moved"), []byte("m"))
	writeFile(t, filepath.Join(root, "mode"), []byte("x"))
	writeFile(t, filepath.Join(root, "copied"), big)
	who := ckpt.Program{Comm: "test"}
	s.Begin(ckpt.KindAgent, "", "")

	// rm gone: its bytes go to the attic by a hard link.
	st, ino, err := tree.LstatInode("gone")
	if err != nil {
		t.Fatal(err)
	}
	c := ckpt.Capture{Path: "gone", Prior: st, Inode: ino,
		Link: func(dir *os.File, name string) error { return tree.Link("gone", dir, name) },
		Open: func() (*os.File, error) { return tree.Open("gone") }}
	if err := s.Record(c, who); err != nil {
		t.Fatalf("rm on a full disk: %v", err)
	}
	if err := os.Remove(filepath.Join(root, "gone")); err != nil {
		t.Fatal(err)
	}
	// mv moved moved2
	commit, err := s.RecordRename("moved", "moved2", false, who)
	if err != nil {
		t.Fatalf("mv on a full disk: %v", err)
	}
	commit(os.Rename(filepath.Join(root, "moved"), filepath.Join(root, "moved2")) == nil)
	// chmod 600 mode
	st, ino, err = tree.LstatInode("mode")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Record(ckpt.Capture{Path: "mode", Prior: st, Inode: ino, MetaOnly: true}, who); err != nil {
		t.Fatalf("chmod on a full disk: %v", err)
	}
	if b := ballastBytes(s); b >= 32<<20 {
		t.Errorf("the ballast is whole (%d bytes): it did not pay for the records", b)
	}
	// A capture whose bytes must be copied does not fit.
	st, ino, err = tree.LstatInode("copied")
	if err != nil {
		t.Fatal(err)
	}
	c = ckpt.Capture{Path: "copied", Prior: st, Inode: ino, Open: func() (*os.File, error) { return tree.Open("copied") }}
	if err := s.Record(c, who); !errors.Is(err, ckpt.ErrStoreFull) {
		t.Errorf("a 1 MiB copy on a full disk: %v, want store full", err)
	}
	if _, err := s.End(""); err != nil {
		t.Fatal(err)
	}
	rc, _, err := s.OpenAt(0, "gone", tree)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	got, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(big) {
		t.Errorf("gone at turn 0: %d bytes, not the %d it had", len(got), len(big))
	}
}

// TestFullStoreTakesCapturesOnceSpaceIsBack: a store refused a capture on
// a full disk; once space is back (22 MiB free, the ballast whole), a
// small capture lands and the store is no longer reported full. After the
// ballast paid for records, space back refills it first.
func TestFullStoreTakesCapturesOnceSpaceIsBack(t *testing.T) {
	var free int64
	s, tree, root := openOnFullDisk(t, &free)
	writeFile(t, filepath.Join(root, "small"), []byte("a small file"))
	writeFile(t, filepath.Join(root, "other"), []byte("another"))
	who := ckpt.Program{Comm: "test"}
	s.Begin(ckpt.KindAgent, "", "")
	st, ino, err := tree.LstatInode("small")
	if err != nil {
		t.Fatal(err)
	}
	c := ckpt.Capture{Path: "small", Prior: st, Inode: ino, Open: func() (*os.File, error) { return tree.Open("small") }}
	if err := s.Record(c, who); !errors.Is(err, ckpt.ErrStoreFull) {
		t.Fatalf("a capture with no byte free: %v, want store full", err)
	}
	if !s.Health().Full {
		t.Fatal("not reported full after a refused capture")
	}
	free = 22 << 20
	if s.Health().Full {
		t.Error("still reported full with 22 MiB free and the ballast whole")
	}
	if err := s.Record(c, who); err != nil {
		t.Fatalf("a 12-byte capture with 22 MiB free: %v", err)
	}

	// The ballast pays for a rename with no byte free, and is refilled
	// once space is back. (Past spaceCheckEvery: the 22 MiB found free
	// last is not trusted any longer.)
	free = 0
	time.Sleep(2 * spaceCheckEvery)
	commit, err := s.RecordRename("other", "other2", false, who)
	if err != nil {
		t.Fatalf("mv on a full disk: %v", err)
	}
	commit(os.Rename(filepath.Join(root, "other"), filepath.Join(root, "other2")) == nil)
	if ballastBytes(s) >= 32<<20 {
		t.Fatal("the ballast did not pay for the rename")
	}
	if !s.Health().Full {
		t.Error("not reported full while the ballast pays for records")
	}
	free = 100 << 20
	if s.Health().Full {
		t.Error("still reported full with 100 MiB free")
	}
	if b := ballastBytes(s); b != 32<<20 {
		t.Errorf("the ballast is %d bytes once space is back, want %d", b, 32<<20)
	}
}

// TestRefusedCopyKeepsTheBallast: on a full disk, an rm whose bytes the
// attic cannot link (the store on another filesystem: EXDEV) needs a copy
// and is refused, without giving up any of the ballast, which is there
// for the records that need no bytes.
func TestRefusedCopyKeepsTheBallast(t *testing.T) {
	var free int64
	s, tree, root := openOnFullDisk(t, &free)
	writeFile(t, filepath.Join(root, "f"), make([]byte, 1<<20))
	s.Begin(ckpt.KindAgent, "", "")
	st, ino, err := tree.LstatInode("f")
	if err != nil {
		t.Fatal(err)
	}
	c := ckpt.Capture{Path: "f", Prior: st, Inode: ino,
		Link: func(*os.File, string) error { return syscall.EXDEV },
		Open: func() (*os.File, error) { return tree.Open("f") }}
	if err := s.Record(c, ckpt.Program{Comm: "test"}); !errors.Is(err, ckpt.ErrStoreFull) {
		t.Fatalf("rm needing a 1 MiB copy on a full disk: %v, want store full", err)
	}
	if b := ballastBytes(s); b != 32<<20 {
		t.Errorf("the ballast is %d bytes after a refused copy, want %d", b, 32<<20)
	}
}

// TestShortBallastAtOpenOnAFullDisk: a store reopened on a disk too full
// to make its ballast whole (it paid for records before) keeps what the
// ballast has and is full; once space is back the ballast is whole again
// and the store is not full.
func TestShortBallastAtOpenOnAFullDisk(t *testing.T) {
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=64m,mode=0700"); err != nil {
		t.Skipf("cannot mount a tmpfs: %v", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, 0); err != nil {
			unix.Unmount(dir, unix.MNT_DETACH)
		}
	})
	store := filepath.Join(dir, "store")
	s, err := Open(store, Options{})
	if err != nil {
		t.Fatal(err)
	}
	whole := ballastBytes(s)
	s.Close()
	if whole != 8<<20 {
		t.Fatalf("a %d-byte ballast on a 64 MiB tmpfs, want %d", whole, 8<<20)
	}
	// Half the ballast paid for records.
	if err := os.Truncate(filepath.Join(store, "ballast"), whole/2); err != nil {
		t.Fatal(err)
	}
	// 2 MiB free: room for Pebble to open, not for the ballast's 4 MiB.
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Fallocate(int(f.Fd()), 0, 0, int64(st.Bavail)*int64(st.Bsize)-2<<20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	s, err = Open(store, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if b := ballastBytes(s); b != whole/2 {
		t.Errorf("the ballast is %d bytes after a failed refill, want the %d it had", b, whole/2)
	}
	// (s.full, not Health: Pebble's opening may free space meanwhile.)
	s.mu.Lock()
	full := s.full
	s.mu.Unlock()
	if !full {
		t.Error("not full with the ballast short and no room to refill it")
	}
	if err := os.Remove(filepath.Join(dir, "filler")); err != nil {
		t.Fatal(err)
	}
	if s.Health().Full {
		t.Error("still full once space is back")
	}
	if b := ballastBytes(s); b != whole {
		t.Errorf("the ballast is %d bytes once space is back, want %d", b, whole)
	}
}
