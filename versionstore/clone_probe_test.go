package versionstore

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"ckptfs/internal/ckpt"
	"ckptfs/internal/xfstest"
)

// TestCapturesByCloneMeansAClone: CapturesByClone(fd, dev, size) says a
// capture of a file of dev would be a clone (the daemon then lets that
// file's writer go through passthrough and captures it whole at the open
// and at every turn boundary). The probe at Open learns about clones
// between two new files in the attic only; a file the probe says nothing
// about must not be promised a clone.
func TestCapturesByCloneMeansAClone(t *testing.T) {
	check := func(t *testing.T, storeDir, root string) {
		s, err := Open(storeDir, Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		tree := openTree(t, root)
		writeRandom(t, filepath.Join(root, "big"), 2*cloneMin, 5)
		promised := promisedClone(t, s, filepath.Join(root, "big"))
		captureFile(t, s, tree, "big")
		ref := contentOf(t, s, 1, "big")
		if promised && ref.Attic == "" {
			t.Errorf("CapturesByClone was true after Open (state %d), but the capture copied the file", s.cloneState)
		}
	}
	t.Run("tree on another filesystem", func(t *testing.T) {
		mnt := xfstest.Mount(t, xfstest.MinSize)
		if !xfstest.Clones(mnt) {
			t.Skip("the XFS image does not clone")
		}
		check(t, filepath.Join(mnt, "store"), t.TempDir()) // the tree on the TempDir's filesystem
	})
	t.Run("btrfs attic NOCOW", func(t *testing.T) {
		mnt := xfstest.MountBtrfs(t, xfstest.BtrfsMinSize)
		if !xfstest.Clones(mnt) {
			t.Skip("the btrfs image does not clone")
		}
		store := filepath.Join(mnt, "store")
		if err := os.Mkdir(store, 0o700); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("chattr", "+C", store).CombinedOutput(); err != nil {
			t.Skipf("chattr +C: %v %s", err, out)
		}
		root := filepath.Join(mnt, "proj")
		if err := os.Mkdir(root, 0o755); err != nil {
			t.Fatal(err)
		}
		check(t, store, root)
	})
}

// On btrfs a clone needs the same no-copy-on-write flag on both files.
// With an attic that has it (a project, and so its DIR/.ckptfs, given
// chattr +C, as VM images and databases often are), a file that has it
// too is cloned, and one without it is refused a clone (and so kept by
// ranges) rather than copied whole.
func TestClonesFollowTheNoCOWFlag(t *testing.T) {
	mnt := xfstest.MountBtrfs(t, xfstest.BtrfsMinSize)
	if !xfstest.Clones(mnt) {
		t.Skip("the btrfs image does not clone")
	}
	root := filepath.Join(mnt, "proj")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("chattr", "+C", root).CombinedOutput(); err != nil {
		t.Skipf("chattr +C: %v %s", err, out)
	}
	if err := os.Mkdir(filepath.Join(root, "cow"), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("chattr", "-C", filepath.Join(root, "cow")).CombinedOutput(); err != nil {
		t.Fatalf("chattr -C: %v %s", err, out)
	}
	s, err := Open(filepath.Join(root, ".ckptfs"), Options{}) // inherits +C
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	tree := openTree(t, root)
	writeRandom(t, filepath.Join(root, "a"), 2*cloneMin, 1)
	writeRandom(t, filepath.Join(root, "cow/b"), 2*cloneMin, 2)
	s.Begin(ckpt.KindAgent, "", "")
	captureFile(t, s, tree, "a")
	if ref := contentOf(t, s, 1, "a"); ref == nil || ref.Attic == "" || s.cloneState != cloneYes {
		t.Fatalf("a file with the attic's no-copy-on-write flag: %+v, clone state %d; want a clone", ref, s.cloneState)
	}
	a, b := promisedClone(t, s, filepath.Join(root, "a")), promisedClone(t, s, filepath.Join(root, "cow/b"))
	if !a || b {
		t.Errorf("CapturesByClone: a %v (want true), cow/b %v (want false: its flag is not the attic's)", a, b)
	}
	if !s.NeedsRange("cow/b", 0, 4096) {
		t.Fatal("cow/b needs no range")
	}
	recordRange(t, s, tree, "cow/b", 0, 4096)
	var ranged bool
	s.scanEvents(0, s.Events(), func(r *record) (bool, error) {
		ranged = ranged || (r.Path == "cow/b" && r.Op == opRange)
		return true, nil
	})
	if !ranged {
		t.Error("cow/b, whose clone the attic refuses, was not kept by ranges")
	}
}

// promisedClone is what CapturesByClone says of the file at p.
func promisedClone(t *testing.T, s *Store, p string) bool {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	return s.CapturesByClone(int(f.Fd()), st.Dev, st.Size)
}
