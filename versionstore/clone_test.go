package versionstore

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"ckptfs/internal/backing"
	"ckptfs/internal/ckpt"
	"ckptfs/internal/xfstest"
)

// writeRandom writes n incompressible bytes (a seeded stream) to p, so
// that a copy into chunks would cost the store about n bytes, syncs it and
// returns their SHA-256.
func writeRandom(t *testing.T, p string, n int64, seed uint64) [32]byte {
	t.Helper()
	sum := xfstest.WriteSeeded(t, p, n, byte(seed))
	xfstest.SyncFile(t, p)
	return sum
}

// overwriteAt writes b into p at off, in place (the inode stays), and
// syncs it.
func overwriteAt(t *testing.T, p string, off int64, b []byte) {
	t.Helper()
	xfstest.WriteAt(t, p, off, b)
	xfstest.SyncFile(t, p)
}

// sumAt returns the SHA-256 of p's bytes at the end of turn n, as cat
// gives them.
func sumAt(t *testing.T, s *Store, n uint64, p string, tree ckpt.Tree) [32]byte {
	t.Helper()
	rc, _, err := s.OpenAt(n, p, tree)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	return xfstest.SumOf(t, rc)
}

// TestCloneCapture: on a filesystem that clones (XFS, btrfs), the first
// write of a turn into a 256 MiB file keeps its prior bytes as a clone in
// the attic: the filesystem's free space hardly moves, cat and rewind give
// the exact prior bytes after the file was overwritten in place, verify
// passes, and gc removes the clone once no kept turn needs it. A file
// under cloneMin is copied as before.
func TestCloneCapture(t *testing.T) {
	t.Run("xfs", func(t *testing.T) { cloneCapture(t, xfstest.Mount(t, 1280<<20)) })
	t.Run("btrfs", func(t *testing.T) { cloneCapture(t, xfstest.MountBtrfs(t, 1280<<20)) })
}

// cloneStore opens a store in mnt/proj/.ckptfs and the tree mnt/proj,
// skipping the test where mnt's filesystem does not clone.
func cloneStore(t *testing.T, mnt string) (*Store, *backing.Tree, string) {
	t.Helper()
	if !xfstest.Clones(mnt) {
		t.Skip("the image does not clone (kernel without reflink?)")
	}
	root := filepath.Join(mnt, "proj")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	s, err := Open(filepath.Join(root, ".ckptfs"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, openTree(t, root), root
}

func cloneCapture(t *testing.T, mnt string) {
	s, tree, root := cloneStore(t, mnt)

	const size = 256 << 20
	big := filepath.Join(root, "big")
	want := writeRandom(t, big, size, 1)
	small := filepath.Join(root, "small")
	wantSmall := writeRandom(t, small, cloneMin/2, 2)
	if _, err := s.Begin(ckpt.KindAgent, "edit in place", ""); err != nil {
		t.Fatal(err)
	}
	// The space the capture takes: Pebble's files (WAL, ballast) and
	// XFS's preallocations for them are made before.
	xfstest.Sync(t, mnt)
	free0 := xfstest.FreeBytes(t, mnt)
	captureFile(t, s, tree, "big")
	xfstest.Sync(t, mnt)
	grew := free0 - xfstest.FreeBytes(t, mnt)
	t.Logf("the capture of a %d MiB file took %d KiB of the filesystem", size>>20, grew>>10)
	if grew > 4<<20 {
		t.Errorf("the filesystem lost %d KiB to the capture of a %d MiB file: not a clone", grew>>10, size>>20)
	}
	captureFile(t, s, tree, "small")
	overwriteAt(t, big, 4096, make([]byte, 4096))
	overwriteAt(t, big, size-100, []byte("changed tail"))
	overwriteAt(t, small, 0, []byte("changed head"))
	if _, err := s.End(""); err != nil {
		t.Fatal(err)
	}
	if s.cloneState != cloneYes {
		t.Errorf("cloneState %d after a clone, want cloneYes", s.cloneState)
	}
	ref := contentOf(t, s, 1, "big")
	if ref.Attic == "" || ref.Size != size {
		t.Fatalf("big's prior bytes: %+v, want an attic clone of %d bytes", ref, size)
	}
	// Still sharing all but the blocks written since.
	if n := xfstest.SharedBytes(t, filepath.Join(root, ".ckptfs", "attic", ref.Attic)); n < size-(4<<20) {
		t.Errorf("the clone shares %d of its %d bytes with the live file", n, size)
	}
	if ref := contentOf(t, s, 1, "small"); ref.Attic != "" {
		t.Errorf("small's prior bytes are in the attic (%+v), want chunks: it is under cloneMin", ref)
	}

	// cat: the bytes at the end of turn 0.
	for p, w := range map[string][32]byte{"big": want, "small": wantSmall} {
		if sumAt(t, s, 0, p, tree) != w {
			t.Errorf("cat of %s at turn 0: not its prior bytes", p)
		}
	}
	checkVerify(t, s)

	// Rewind: its own capture of the changed file is a clone too.
	if _, err := s.Rewind(0, tree, RewindOptions{}); err != nil {
		t.Fatal(err)
	}
	if xfstest.FileSum(t, big) != want || xfstest.FileSum(t, small) != wantSmall {
		t.Fatal("rewind to turn 0 did not give back the prior bytes")
	}
	// Not a contract: the restore copies with copy_file_range, which the
	// kernel (5.19 on) turns into a clone within one filesystem.
	t.Logf("the restored file shares %d MiB of its %d MiB", xfstest.SharedBytes(t, big)>>20, size>>20)
	if ref := contentOf(t, s, 2, "big"); ref.Attic == "" {
		t.Errorf("the rewind's capture of big: %+v, want an attic clone", ref)
	}
	checkVerify(t, s)

	// gc: once turns 0-2 are forgotten, no event names the clones.
	if _, err := s.Begin(ckpt.KindAgent, "nothing", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := s.End(""); err != nil {
		t.Fatal(err)
	}
	if n := len(atticNames(t, s)); n != 2 {
		t.Fatalf("%d attic files before gc, want the 2 clones", n)
	}
	if _, err := s.Forget([]uint64{0, 1, 2}, ckpt.ReasonForget); err != nil {
		t.Fatal(err)
	}
	rep, err := s.GC(GCOptions{NoPolicy: true})
	if err != nil {
		t.Fatal(err)
	}
	if n := atticNames(t, s); len(n) != 0 || rep.Attic != 2 {
		t.Errorf("after gc: attic %v, gc removed %d attic files; want none left, 2 removed", n, rep.Attic)
	}
	checkNoGarbage(t, s)
}

// TestCloneCrashBeforeRecord: a kill between the clone (made and fsynced)
// and the commit of its record leaves the tree and history as they were
// and an attic file no event names, which the next gc removes; the next
// capture clones again under a new name.
func TestCloneCrashBeforeRecord(t *testing.T) {
	mnt := xfstest.Mount(t, xfstest.MinSize)
	if !xfstest.Clones(mnt) {
		t.Skip("the XFS image does not clone (kernel without reflink?)")
	}
	root := filepath.Join(mnt, "proj")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	store := filepath.Join(root, ".ckptfs")
	s, err := Open(store, Options{})
	if err != nil {
		t.Fatal(err)
	}
	tree := openTree(t, root)
	want := writeRandom(t, filepath.Join(root, "f"), 4<<20, 3)
	if _, err := s.Begin(ckpt.KindAgent, "t", ""); err != nil {
		t.Fatal(err)
	}
	point, err := untilCrash(t, "record.cloned", func() error {
		captureFile(t, s, tree, "f")
		return nil
	})
	if point != "record.cloned" || err != nil {
		t.Fatalf("capture: killed at %q (%v), want record.cloned", point, err)
	}
	s.Close()
	s, err = Open(store, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if n := len(atticNames(t, s)); n != 1 {
		t.Fatalf("%d attic files after the kill, want the clone", n)
	}
	if !s.NeedsCapture("f", false) {
		t.Fatal("f counts as captured, but its record was never committed")
	}
	captureFile(t, s, tree, "f")
	overwriteAt(t, filepath.Join(root, "f"), 0, []byte("x"))
	if _, err := s.End(""); err != nil {
		t.Fatal(err)
	}
	if sumAt(t, s, 0, "f", tree) != want {
		t.Error("cat after a kill and a second capture: not the prior bytes")
	}
	if _, err := s.GC(GCOptions{NoPolicy: true}); err != nil {
		t.Fatal(err)
	}
	if n := len(atticNames(t, s)); n != 1 {
		t.Errorf("%d attic files after gc, want only the named clone", n)
	}
	checkNoGarbage(t, s)
}

// TestCloneFallsBackToCopy: where the store's filesystem cannot clone
// (the temporary directory: ext4 or tmpfs), and where the tree is on
// another filesystem than the store (EXDEV), the capture copies as it
// always did, the store remembers the answer, and nothing fails.
func TestCloneFallsBackToCopy(t *testing.T) {
	t.Run("no reflink", func(t *testing.T) {
		s, root := atticStore(t)
		if xfstest.Clones(root) {
			t.Skip("the temporary directory's filesystem clones")
		}
		tree := openTree(t, root)
		want := writeRandom(t, filepath.Join(root, "f"), 2*cloneMin, 4)
		captureFile(t, s, tree, "f")
		if ref := contentOf(t, s, 1, "f"); ref.Attic != "" || ref.Size != 2*cloneMin {
			t.Errorf("prior bytes %+v, want chunks of %d bytes", ref, 2*cloneMin)
		}
		if s.cloneState != cloneNo {
			t.Errorf("cloneState %d, want cloneNo once a clone failed", s.cloneState)
		}
		writeFile(t, filepath.Join(root, "f"), []byte("new"))
		if sumAt(t, s, 0, "f", tree) != want {
			t.Error("cat of a copied capture: not the prior bytes")
		}
	})
	t.Run("store on another filesystem", func(t *testing.T) {
		mnt := xfstest.Mount(t, xfstest.MinSize)
		s, _ := atticStore(t) // in the temporary directory
		tree := openTree(t, mnt)
		writeRandom(t, filepath.Join(mnt, "f"), 2*cloneMin, 5)
		captureFile(t, s, tree, "f")
		if ref := contentOf(t, s, 1, "f"); ref.Attic != "" {
			t.Errorf("prior bytes %+v, want chunks", ref)
		}
		var st unix.Stat_t
		if err := unix.Stat(mnt, &st); err != nil {
			t.Fatal(err)
		}
		if s.cloneState == cloneNo {
			if !s.cloneXDev[st.Dev] {
				t.Log("the store's filesystem does not clone: EXDEV not seen")
			}
		} else if !s.cloneXDev[st.Dev] {
			t.Errorf("the tree's device %d is not remembered as one the store cannot clone from", st.Dev)
		}
	})
}

// TestCloneFailureNeverFailsTheCapture: a clone that fails for a reason
// of its own (EIO, EINVAL) is copied instead and leaves no attic file,
// and it does not turn cloning off; once a clone has worked, not even an
// EOPNOTSUPP does.
func TestCloneFailureNeverFailsTheCapture(t *testing.T) {
	mnt := xfstest.Mount(t, xfstest.MinSize)
	if !xfstest.Clones(mnt) {
		t.Skip("the XFS image does not clone (kernel without reflink?)")
	}
	s, err := Open(filepath.Join(mnt, "store"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if s.cloneState != cloneYes {
		t.Fatalf("after opening a store on XFS with reflink=1, clone state %d; want the probe's cloneYes", s.cloneState)
	}
	s.cloneState = cloneUnknown // as where the probe could not tell
	root := filepath.Join(mnt, "proj")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	tree := openTree(t, root)
	defer func() { testHookClone = nil }()
	for i, c := range []struct {
		fail  error
		state int
		clone bool
	}{
		{unix.EIO, cloneUnknown, false},
		{unix.EINVAL, cloneUnknown, false},
		{nil, cloneYes, true},
		{unix.EOPNOTSUPP, cloneYes, false},
		{nil, cloneYes, true},
	} {
		testHookClone = func(err error) error {
			if c.fail != nil {
				return c.fail
			}
			return err
		}
		name := fmt.Sprint(i)
		want := writeRandom(t, filepath.Join(root, name), 2*cloneMin, uint64(10+i))
		captureFile(t, s, tree, name)
		ref := contentOf(t, s, 1, name)
		if (ref.Attic != "") != c.clone || s.cloneState != c.state {
			t.Errorf("clone failing with %v: ref %+v, state %d; want clone %v, state %d", c.fail, ref, s.cloneState, c.clone, c.state)
		}
		writeFile(t, filepath.Join(root, name), []byte("new"))
		if sumAt(t, s, 0, name, tree) != want {
			t.Errorf("clone failing with %v: cat gives other bytes", c.fail)
		}
	}
	if n := atticNames(t, s); len(n) != 2 {
		t.Errorf("attic %v, want the 2 clones that worked and nothing of the others", n)
	}
}

// TestRewindOfClonedBytesNeedsNoRoom: on a filesystem that clones, a
// 64 MiB file changed in place in turn 1 rewinds to turn 0 with 16 MiB
// free: its prior bytes go back by a clone from the attic, and the
// rewind's own capture of the file is a clone too, so the space check
// must not count them (it refused with ErrNoSpace when it did).
func TestRewindOfClonedBytesNeedsNoRoom(t *testing.T) {
	mnt := xfstest.Mount(t, xfstest.MinSize)
	s, tree, root := cloneStore(t, mnt)
	want := writeRandom(t, filepath.Join(root, "f"), 64<<20, 7)
	s.Begin(ckpt.KindAgent, "", "")
	captureFile(t, s, tree, "f")
	overwriteAt(t, filepath.Join(root, "f"), 0, []byte("changed"))
	if _, err := s.End(""); err != nil {
		t.Fatal(err)
	}
	xfstest.Sync(t, mnt)
	free := xfstest.FreeBytes(t, mnt)
	filler, err := os.Create(filepath.Join(mnt, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	defer filler.Close()
	if err := unix.Fallocate(int(filler.Fd()), 0, 0, free-16<<20); err != nil {
		t.Fatal(err)
	}
	xfstest.Sync(t, mnt)
	t.Logf("%d MiB free before the rewind", xfstest.FreeBytes(t, mnt)>>20)
	if _, err := s.Rewind(0, tree, RewindOptions{}); err != nil {
		t.Fatalf("rewind of a cloned file with 16 MiB free: %v", err)
	}
	if xfstest.FileSum(t, filepath.Join(root, "f")) != want {
		t.Fatal("after the rewind f is not its prior bytes")
	}
}

// TestCloneProbeAtOpen: a store on a filesystem of a kind that may clone
// learns at its opening, by a probe that leaves no file behind, whether
// it does: a probe answered EOPNOTSUPP (XFS without reflink) turns
// cloning off before any capture, one that works turns it on.
func TestCloneProbeAtOpen(t *testing.T) {
	mnt := xfstest.Mount(t, xfstest.MinSize)
	if !xfstest.Clones(mnt) {
		t.Skip("the XFS image does not clone (kernel without reflink?)")
	}
	defer func() { testHookClone = nil }()
	for _, c := range []struct {
		fail  error
		state int
	}{{unix.EOPNOTSUPP, cloneNo}, {nil, cloneYes}} {
		testHookClone = func(err error) error {
			if c.fail != nil {
				return c.fail
			}
			return err
		}
		dir := filepath.Join(mnt, fmt.Sprint("store", c.state))
		s, err := Open(dir, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if s.cloneState != c.state || s.capturesByClone(s.atticDev, cloneMin) != (c.state == cloneYes) {
			t.Errorf("probe answered %v: state %d, want %d", c.fail, s.cloneState, c.state)
		}
		s.Close()
		if ents, err := os.ReadDir(filepath.Join(dir, "attic")); err != nil || len(ents) != 0 {
			t.Errorf("the probe left %v in the attic (%v)", ents, err)
		}
	}
}
