package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"ckptfs/internal/xfstest"
)

// On btrfs, a store that has learnt it clones still keeps only the
// overwritten ranges of a file with the no-copy-on-write attribute
// (chattr +C, as VM images and databases often have): its clone would
// fail, and the capture at a writable open would copy the file whole.
// The first 4 KiB write of a turn into a 32 MiB such file stores about
// 4 KiB, and a rewind gives its exact prior bytes back.
func TestNoCopyOnWriteFileIsRangeCaptured(t *testing.T) {
	needTurnctl(t)
	mnt := xfstest.MountBtrfs(t, 512<<20)
	if !xfstest.Clones(mnt) {
		t.Skip("the btrfs image does not clone")
	}
	dir := filepath.Join(mnt, "proj")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	xfstest.WriteSeeded(t, filepath.Join(dir, "a.bin"), 4<<20, 1)
	img := filepath.Join(dir, "vm.img")
	if err := os.WriteFile(img, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("chattr", "+C", img).CombinedOutput(); err != nil {
		t.Skipf("chattr +C: %v %s", err, out)
	}
	want := xfstest.WriteSeeded(t, img, 32<<20, 2)
	t.Setenv("CKPTFS_WRITE_PASSTHROUGH", "1") // the daemon inherits it
	m := mountProject(t, dir)
	store := filepath.Join("/proc", itoa(m.PID(t)), "cwd")

	// The store learns that it clones from its first whole capture of a
	// big file (btrfs has no probe at the open).
	m.turnctl(t, "begin", "--label", "truncate")
	if err := os.Truncate(filepath.Join(dir, "a.bin"), 1<<20); err != nil {
		t.Fatal(err)
	}
	m.turnctl(t, "end")
	if attic, err := os.ReadDir(filepath.Join(store, "attic")); err != nil || len(attic) != 1 {
		t.Fatalf("attic %v (%v): want the clone of a.bin", attic, err)
	}

	before := storeSpace(t, m, false)
	m.turnctl(t, "begin", "--label", "write into the image")
	xfstest.WriteAt(t, img, 8<<20, make([]byte, 4096))
	m.turnctl(t, "end")
	grew := storeSpace(t, m, false) - before
	t.Logf("the store grew by %d KiB for a 4 KiB write into a 32 MiB NOCOW file", grew>>10)
	if grew > 4<<20 {
		t.Errorf("the store grew by %d KiB for a 4 KiB write into a 32 MiB NOCOW file: it was copied whole", grew>>10)
	}
	m.turnctl(t, "rewind", "1")
	if xfstest.FileSum(t, img) != want {
		t.Error("rewind 1: vm.img is not its prior bytes")
	}
}
