package tests

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"ckptfs/internal/xfstest"
)

// A project on a filesystem that clones (a loop-mounted XFS image with
// reflink=1), mounted for real: the first 4 KiB write of a turn into a
// 256 MiB file takes almost none of the filesystem's space (its prior
// bytes are a clone in the store's attic); cat, show --patch and a rewind
// give the exact prior bytes after the file was overwritten in place;
// verify passes; and a gc after forgetting the turns removes the clones.
func TestReflinkCaptureOnAMount(t *testing.T) {
	needTurnctl(t)
	mnt := xfstest.Mount(t, 1280<<20) // its cleanup runs after the mount's
	if !xfstest.Clones(mnt) {
		t.Skip("the XFS image does not clone (kernel without reflink?)")
	}
	dir := filepath.Join(mnt, "proj")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	const size = 256 << 20
	want := xfstest.WriteSeeded(t, filepath.Join(dir, "big.bin"), size, 1)
	// A 2 MiB text file (over the 1 MiB below which captures copy, under
	// the 8 MiB of show --patch).
	var text strings.Builder
	for i := 0; text.Len() < 2<<20; i++ {
		fmt.Fprintf(&text, "line %06d of a log that is long enough to be cloned\n", i)
	}
	if err := os.WriteFile(filepath.Join(dir, "log.txt"), []byte(text.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	// The budget counts a clone's blocks whole (shared or not): on this
	// small image the default would have the gc at the turn's end forget
	// the turn whose clones the test looks at.
	m := mountProject(t, dir, "--keep-size", "4GiB")

	m.turnctl(t, "begin", "--label", "edit in place")
	xfstest.Sync(t, mnt)
	free0 := xfstest.FreeBytes(t, mnt)
	xfstest.WriteAt(t, filepath.Join(dir, "big.bin"), 1<<20, make([]byte, 4096))
	xfstest.Sync(t, mnt)
	grew := free0 - xfstest.FreeBytes(t, mnt)
	t.Logf("the first 4 KiB write of a turn into a %d MiB file took %d KiB of the filesystem", size>>20, grew>>10)
	if grew > 8<<20 {
		t.Errorf("the filesystem lost %d KiB to a 4 KiB write into a %d MiB file: its capture is not a clone", grew>>10, size>>20)
	}
	xfstest.WriteAt(t, filepath.Join(dir, "big.bin"), size-4096, make([]byte, 4096))
	xfstest.WriteAt(t, filepath.Join(dir, "log.txt"), 0, []byte("LINE"))
	m.turnctl(t, "end")

	store := fmt.Sprintf("/proc/%d/cwd", m.PID(t)) // the store, hidden by the mount
	attic, err := os.ReadDir(filepath.Join(store, "attic"))
	if err != nil || len(attic) != 2 {
		t.Fatalf("attic %v (%v), want the clones of big.bin and log.txt", attic, err)
	}
	for _, e := range attic {
		p := filepath.Join(store, "attic", e.Name())
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if n := xfstest.SharedBytes(t, p); n < fi.Size()-(1<<20) {
			t.Errorf("attic file %s shares %d of its %d bytes: not a clone", e.Name(), n, fi.Size())
		}
	}

	cat := m.turnctlCmd("cat", "0", "big.bin")
	h := sha256.New()
	cat.Stdout = h
	if err := cat.Run(); err != nil {
		t.Fatalf("turnctl cat 0 big.bin: %v", err)
	}
	if [32]byte(h.Sum(nil)) != want {
		t.Error("turnctl cat 0 big.bin: not the prior bytes")
	}
	patch := m.turnctl(t, "show", "1", "--patch", "--", "log.txt")
	if !strings.Contains(patch, "\n-line 000000 ") || !strings.Contains(patch, "\n+LINE 000000 ") {
		t.Errorf("show 1 --patch -- log.txt does not show the changed line:\n%.2000s", patch)
	}
	if out := m.turnctl(t, "verify"); strings.Contains(strings.ToLower(out), "corrupt") {
		t.Errorf("verify:\n%s", out)
	}

	m.turnctl(t, "rewind", "0")
	if xfstest.FileSum(t, filepath.Join(dir, "big.bin")) != want {
		t.Error("rewind 0: big.bin is not its prior bytes")
	}
	if b, err := os.ReadFile(filepath.Join(dir, "log.txt")); err != nil || string(b) != text.String() {
		t.Errorf("rewind 0: log.txt is not its prior bytes (%v)", err)
	}

	// Once the turns naming them are forgotten, gc removes the clones
	// (the edit's and the rewind's own captures).
	m.turnctl(t, "begin", "--label", "nothing")
	m.turnctl(t, "end")
	m.turnctl(t, "forget", "--before", "3")
	m.turnctl(t, "gc")
	if attic, err := os.ReadDir(filepath.Join(store, "attic")); err != nil || len(attic) != 0 {
		t.Errorf("attic after gc: %v (%v), want empty", attic, err)
	}
}

// On a store that clones, a writable open of a file the turn has not
// captured captures it by a clone at the open and writes through FUSE
// passthrough: the daemon sees no WRITE for it (its --debug log lists
// every request), and the turn still holds the exact prior bytes.
func TestCloneCapturedOpensWriteThroughPassthrough(t *testing.T) {
	needTurnctl(t)
	mnt := xfstest.Mount(t, 256<<20)
	if !xfstest.Clones(mnt) {
		t.Skip("the XFS image does not clone (kernel without reflink?)")
	}
	dir := filepath.Join(mnt, "proj")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	want := xfstest.WriteSeeded(t, filepath.Join(dir, "big.bin"), 16<<20, 2)
	t.Setenv("CKPTFS_PASSTHROUGH", "1") // the daemon inherits them
	t.Setenv("CKPTFS_WRITE_PASSTHROUGH", "1")
	m := mountProject(t, dir, "--debug")
	logPath := filepath.Join(fmt.Sprintf("/proc/%d/cwd", m.PID(t)), "daemon.log")

	// The store knows from its start that it clones (a probe): the
	// first writable open after the mount goes through passthrough.
	m.turnctl(t, "begin", "--label", "write in place")
	before, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(dir, "big.bin"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	for off := int64(0); off < 16<<20; off += 1 << 20 {
		if _, err := f.WriteAt(make([]byte, 4096), off); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	m.turnctl(t, "end")
	after, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(after[len(before):]), ": WRITE "); n > 0 {
		t.Errorf("the daemon served %d WRITE requests of a clone-captured file: not passthrough", n)
	}
	if !strings.Contains(string(after[len(before):]), ": OPEN ") {
		t.Fatal("the daemon's --debug log shows no OPEN: it logs no requests, and the check above proves nothing")
	}
	cat := m.turnctlCmd("cat", "0", "big.bin")
	h := sha256.New()
	cat.Stdout = h
	if err := cat.Run(); err != nil || [32]byte(h.Sum(nil)) != want {
		t.Fatalf("turnctl cat 0 big.bin: not the prior bytes (%v)", err)
	}
	m.turnctl(t, "rewind", "0")
	if xfstest.FileSum(t, filepath.Join(dir, "big.bin")) != want {
		t.Fatal("after rewind 0, big.bin is not what it was")
	}
}
