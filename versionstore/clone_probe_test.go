package versionstore

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"ckptfs/internal/xfstest"
)

// TestCapturesByCloneMeansAClone: CapturesByClone(dev, size) says a
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
		var st unix.Stat_t
		if err := unix.Stat(filepath.Join(root, "big"), &st); err != nil {
			t.Fatal(err)
		}
		promised := s.CapturesByClone(st.Dev, st.Size)
		captureFile(t, s, tree, "big")
		ref := contentOf(t, s, 1, "big")
		if promised && ref.Attic == "" {
			t.Errorf("CapturesByClone(dev %d:%d) was true after Open (state %d), but the capture copied the file", unix.Major(st.Dev), unix.Minor(st.Dev), s.cloneState)
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
