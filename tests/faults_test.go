package tests

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"ckptfs/internal/schematest"
)

// Store faults end to end: the store's disk full, and damaged stored
// content. (Injected I/O errors are unit tests: versionstore/faults_test.go.)

// mountTmpfs mounts a tmpfs of size bytes on a new directory and unmounts
// it when the test ends (after any FUSE mount made later: cleanups run in
// reverse).
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size="+size+",mode=0700"); err != nil {
		t.Skipf("cannot mount a tmpfs: %v", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, 0); err != nil {
			unix.Unmount(dir, unix.MNT_DETACH)
		}
	})
	return dir
}

// ckptfsStatus runs `ckptfs status --json DIR`.
func ckptfsStatus(t *testing.T, m *Mount) map[string]any {
	t.Helper()
	cmd := exec.Command(ckptfsBin, "status", "--json", m.Dir)
	cmd.Env = append(os.Environ(), "CKPTFS_RUNTIME_DIR="+m.Runtime)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("ckptfs status: %v\n%s", err, out)
	}
	schematest.Check(t, "ckptfs-status", "ckptfs status --json", out)
	var rep map[string]any
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("ckptfs status --json: %v\n%s", err, out)
	}
	return rep
}

func isFull(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EIO)
}

// TestStoreDiskFull puts the store on a small tmpfs and overwrites files
// through the mount until the store is full. Every refused change fails
// with ENOSPC and does not land; reads, status and turn boundaries keep
// working; `ckptfs status` says the store is full; once the tmpfs grows,
// changes are accepted again; and every closed turn rewinds exactly.
// (TestRecordReclaimsBeforeRefusing in versionstore covers a policy that
// lets turns go before a write is refused.)
func TestStoreDiskFull(t *testing.T) {
	needTurnctl(t)
	fsDir := mountTmpfs(t, "64m")
	proj := t.TempDir()
	const nfiles, size = 6, 1 << 20
	rng := rand.New(rand.NewSource(1))
	model := map[string][]byte{} // the live tree as the successful operations left it
	for i := 0; i < nfiles; i++ {
		b := make([]byte, size)
		rng.Read(b)
		p := fmt.Sprintf("f%d", i)
		model[p] = b
		os.WriteFile(filepath.Join(proj, p), b, 0o644)
	}
	// A budget above the disk: this test is of a full disk, not of the
	// retention policy, which would otherwise forget turns to make room
	// (the default budget is 10 % of this 64 MiB tmpfs).
	m := mountProject(t, proj, "--store", filepath.Join(fsDir, "store"), "--keep-size", "1G")
	copyModel := func() map[string][]byte {
		c := map[string][]byte{}
		for k, v := range model {
			c[k] = v
		}
		return c
	}
	atEnd := map[int]map[string][]byte{}
	refused := 0
	var turn int
	// Overwrite every file with new random bytes in each turn (each turn
	// stores nfiles*size of prior bytes), until writes are refused.
	for turn = 1; turn < 100 && refused == 0; turn++ {
		m.turnctl(t, "begin")
		for i := 0; i < nfiles; i++ {
			p := fmt.Sprintf("f%d", i)
			b := make([]byte, size)
			rng.Read(b)
			err := os.WriteFile(filepath.Join(proj, p), b, 0o644)
			if err != nil {
				if !isFull(err) {
					t.Fatalf("turn %d: write %s: %v, want ENOSPC or EIO", turn, p, err)
				}
				refused++
				continue
			}
			model[p] = b
		}
		if refused == 0 {
			m.turnctl(t, "end")
			atEnd[turn] = copyModel()
		}
	}
	if refused == 0 {
		t.Fatal("the store never filled up")
	}
	full := turn - 1 // the turn that met the full store, still open
	t.Logf("store full in turn %d (%d writes refused)", full, refused)
	// Removing a file needs a copy of its bytes here (the store is on
	// another filesystem: no attic link), so unlink and rename over it are
	// refused too.
	for what, err := range map[string]error{
		"unlink":      os.Remove(filepath.Join(proj, "f5")),
		"rename over": os.Rename(filepath.Join(proj, "f4"), filepath.Join(proj, "f3")),
	} {
		if !isFull(err) {
			t.Errorf("%s with the store full: %v, want ENOSPC", what, err)
		}
		refused++
	}
	// A change that stores no bytes needs only the store's headroom: it is
	// refused or lands whole.
	if err := os.WriteFile(filepath.Join(proj, "new"), []byte("x"), 0o644); err == nil {
		model["new"] = []byte("x")
	} else if !isFull(err) {
		t.Errorf("create with the store full: %v, want success or ENOSPC", err)
	}
	if err := os.Mkdir(filepath.Join(proj, "newdir"), 0o755); err == nil {
		if err := os.Remove(filepath.Join(proj, "newdir")); err != nil {
			t.Errorf("rmdir of a new directory with the store full: %v", err)
		}
	} else if !isFull(err) {
		t.Errorf("mkdir with the store full: %v, want success or ENOSPC", err)
	}
	// Reads keep working, and show what the successful operations wrote.
	for p, want := range model {
		if b, err := os.ReadFile(filepath.Join(proj, p)); err != nil || !bytes.Equal(b, want) {
			t.Fatalf("read %s with the store full: %d bytes, %v", p, len(b), err)
		}
	}
	st := ckptfsStatus(t, m)
	if st["store_full"] != true || !strings.Contains(fmt.Sprint(st["store_error"]), "store full") {
		t.Errorf("ckptfs status with the store full: %v", st)
	}
	out, _ := exec.Command(ckptfsBin, "status", m.Dir).CombinedOutput()
	if !strings.Contains(string(out), "store full") {
		t.Errorf("ckptfs status does not say the store is full:\n%s", out)
	}
	if out := m.turnctl(t, "status"); !strings.Contains(out, "store full") {
		t.Errorf("turnctl status does not say the store is full:\n%s", out)
	}
	m.turnctl(t, "log")
	m.turnctl(t, "end") // a boundary still works
	atEnd[full] = copyModel()

	// Space comes back: the tmpfs grows.
	if err := unix.Mount("tmpfs", fsDir, "tmpfs", unix.MS_REMOUNT, "size=512m"); err != nil {
		t.Fatalf("grow tmpfs: %v", err)
	}
	m.turnctl(t, "begin")
	for i := 0; i < nfiles; i++ {
		p := fmt.Sprintf("f%d", i)
		b := []byte(fmt.Sprintf("after %d\n", i))
		if err := os.WriteFile(filepath.Join(proj, p), b, 0o644); err != nil {
			t.Fatalf("write %s after space was freed: %v", p, err)
		}
		model[p] = b
	}
	m.turnctl(t, "end")
	last := full + 1
	atEnd[last] = copyModel()
	if st := ckptfsStatus(t, m); st["store_full"] != false {
		t.Errorf("ckptfs status after space came back: %v", st)
	}
	m.Unmount(t)
	// Nothing unrecorded landed: the backing tree is exactly the model.
	checkModel(t, proj, model)

	// Every closed turn rewinds exactly (newest first: each rewind stores
	// the current bytes again).
	m = mountProject(t, proj, "--store", filepath.Join(fsDir, "store"))
	for n := last; n >= 1; n-- {
		want, ok := atEnd[n]
		if !ok {
			continue
		}
		m.turnctl(t, "rewind", fmt.Sprint(n))
		checkModel(t, proj, want)
	}
	if out := m.turnctl(t, "verify"); strings.Contains(out, "corrupt") && !strings.Contains(out, "0 corrupt") {
		t.Errorf("verify after the store was full:\n%s", out)
	}
}

// checkModel fails unless the files of dir (store excluded) are exactly
// model.
func checkModel(t *testing.T, dir string, model map[string][]byte) {
	t.Helper()
	got := snapshot(t, dir, []string{".ckptfs"}, nil)
	want := map[string]entry{}
	tmp := t.TempDir()
	for p, b := range model {
		os.WriteFile(filepath.Join(tmp, p), b, 0o644)
	}
	want = snapshot(t, tmp, nil, nil)
	diffTrees(t, want, got)
}

// TestCorruptStoreRefused damages stored content (an attic file, changed
// in place at the same size, and a byte in a Pebble table) and checks that
// `turnctl verify` reports it and that cat, restore and rewind refuse with
// a one-line error instead of restoring wrong bytes.
func TestCorruptStoreRefused(t *testing.T) {
	needTurnctl(t)
	proj := t.TempDir()
	aOld := bytes.Repeat([]byte("original line of a\n"), 20000) // stored as chunks
	bOld := []byte("the only copy of b\n")                      // kept in the attic
	os.WriteFile(filepath.Join(proj, "a"), aOld, 0o644)
	os.WriteFile(filepath.Join(proj, "b"), bOld, 0o644)
	m := mountProject(t, proj)
	m.turnctl(t, "begin")
	os.WriteFile(filepath.Join(proj, "a"), []byte("new a\n"), 0o644)
	os.Remove(filepath.Join(proj, "b"))
	m.turnctl(t, "end")
	if out := m.turnctl(t, "cat", "0", "b"); out != string(bOld) {
		t.Fatalf("cat 0 b before the damage: %q", out)
	}
	m.Unmount(t)

	attic, _ := filepath.Glob(filepath.Join(m.Store, "attic", "*"))
	if len(attic) != 1 {
		t.Fatalf("attic holds %v, want one file", attic)
	}
	f, err := os.OpenFile(attic[0], os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte("X"), 4) // same size, other bytes
	f.Close()

	m = mountProject(t, proj)
	before := snapshot(t, proj, nil, nil)
	out, code := m.turnctlFail(t, "verify")
	if code != 1 || !strings.Contains(out, "corrupt") {
		t.Errorf("verify with a damaged attic file: exit %d, %q", code, out)
	}
	for _, args := range [][]string{{"cat", "0", "b"}, {"restore", "0", "--", "b"}, {"rewind", "0"}} {
		out, code := m.turnctlFail(t, args...)
		if code != 1 || strings.Count(strings.TrimSpace(out), "\n") != 0 || !strings.Contains(out, "corrupt") {
			t.Errorf("turnctl %v with a damaged attic file: exit %d, %q; want exit 1, one line saying corrupt", args, code, out)
		}
		if b, err := os.ReadFile(filepath.Join(proj, "b")); err == nil {
			t.Fatalf("turnctl %v restored b from a damaged attic file: %q", args, b)
		}
	}
	// Nothing else was touched either (rewind checks its bytes before it
	// changes anything).
	diffTrees(t, before, snapshot(t, proj, nil, nil))
	m.turnctl(t, "status") // still serving
	m.Unmount(t)

	// A flipped byte in a Pebble table: caught by Pebble's block checksums
	// or ours; never returned as a's old bytes changed.
	ssts, _ := filepath.Glob(filepath.Join(m.Store, "db", "*.sst"))
	var biggest string
	var bsize int64
	for _, p := range ssts {
		if fi, err := os.Stat(p); err == nil && fi.Size() > bsize {
			biggest, bsize = p, fi.Size()
		}
	}
	if biggest == "" {
		t.Fatal("no sstable in the store")
	}
	sf, _ := os.OpenFile(biggest, os.O_RDWR, 0)
	var one [1]byte
	sf.ReadAt(one[:], bsize/3)
	one[0] ^= 0x55
	sf.WriteAt(one[:], bsize/3)
	sf.Close()
	out, err = runCkptfs("mount", "--store", m.Store, proj)
	if err != nil {
		// The damaged block holds turn records the daemon needs at once.
		if !strings.Contains(out, "checksum mismatch") && !strings.Contains(out, "corrupt") {
			t.Fatalf("mount of a store with a damaged table: %v, %q; want a message naming the damage", err, out)
		}
		return
	}
	t.Cleanup(func() { forceUnmount(t, proj) })
	if out, code := m.turnctlFail(t, "verify"); code == 0 {
		t.Logf("verify passed a damaged table (the byte may sit in unused space): %q", out)
	}
	if got, err := m.turnctlCmd("cat", "0", "a").Output(); err == nil && !bytes.Equal(got, aOld) {
		t.Fatalf("cat 0 a returned wrong bytes from a damaged table (%d bytes)", len(got))
	}
	m.turnctlFail(t, "rewind", "0")
	if b, err := os.ReadFile(filepath.Join(proj, "a")); err != nil || !(bytes.Equal(b, aOld) || string(b) == "new a\n") {
		t.Fatalf("a after a rewind from a damaged table: %d bytes, %v", len(b), err)
	}
}

// rm and mv need no copy of the data: on a disk with 40 MiB free, a 64 MiB
// file is removed and another renamed over an existing one (the store
// keeps their bytes by a hard link into its attic), and a rewind brings
// both back exactly.
func TestRmAndMvOfBigFilesOnAFullDisk(t *testing.T) {
	needTurnctl(t)
	fsDir := mountTmpfs(t, "400m")
	proj := filepath.Join(fsDir, "proj")
	if err := os.Mkdir(proj, 0o755); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(2))
	model := map[string][]byte{"big": make([]byte, 64<<20), "big2": make([]byte, 48<<20), "small": []byte("small\n")}
	rng.Read(model["big"])
	rng.Read(model["big2"])
	for p, b := range model {
		if err := os.WriteFile(filepath.Join(proj, p), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A budget the image's default (a tenth of it) would not hold: the
	// gc at the turn's end must not forget the turn this test rewinds.
	m := mountProject(t, proj, "--keep-size", "1GiB")
	before := copyTree(model)
	m.turnctl(t, "begin", "--label", "remove and rename")
	// Fill the disk, outside the project, up to 40 MiB free.
	var st unix.Statfs_t
	if err := unix.Statfs(fsDir, &st); err != nil {
		t.Fatal(err)
	}
	fill := int64(st.Bavail)*int64(st.Bsize) - 40<<20
	if fill > 0 {
		f, err := os.Create(filepath.Join(fsDir, "filler"))
		if err != nil {
			t.Fatal(err)
		}
		if err := unix.Fallocate(int(f.Fd()), 0, 0, fill); err != nil {
			t.Fatalf("fill the disk: %v", err)
		}
		f.Close()
	}
	if err := unix.Statfs(fsDir, &st); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d MiB free before rm and mv", int64(st.Bavail)*int64(st.Bsize)>>20)
	if err := os.Remove(filepath.Join(proj, "big")); err != nil {
		t.Fatalf("rm of a 64 MiB file with 40 MiB free: %v", err)
	}
	if err := os.Rename(filepath.Join(proj, "big2"), filepath.Join(proj, "small")); err != nil {
		t.Fatalf("mv of a 48 MiB file over another with 40 MiB free: %v", err)
	}
	m.turnctl(t, "end")
	checkModel(t, proj, map[string][]byte{"small": model["big2"]})
	// Bringing 112 MiB back needs room for them again.
	if out, code := m.turnctlFail(t, "rewind", "0"); code != 1 || !strings.Contains(out, "space") {
		t.Errorf("rewind with 40 MiB free: exit %d, %q; want a refusal that names the missing space", code, out)
	} else {
		t.Logf("rewind with 40 MiB free: %s", out)
	}
	checkModel(t, proj, map[string][]byte{"small": model["big2"]})
	if err := os.Remove(filepath.Join(fsDir, "filler")); err != nil {
		t.Fatal(err)
	}
	m.turnctl(t, "rewind", "0")
	checkModel(t, proj, before)
	m.Unmount(t)
	checkModel(t, proj, before)
}

// On a disk with no byte free (the store inside the project, on the same
// filesystem), rm, mv and chmod work: the deleted file's bytes are kept
// by a hard link into the attic and the store's reserve pays for the
// records. `ckptfs status` says the store is full until space is back,
// and no longer once a delete freed it; writes are taken again, and a
// rewind brings the tree back exactly.
func TestRmMvChmodOnADiskWithNoByteFree(t *testing.T) {
	needTurnctl(t)
	fsDir := mountTmpfs(t, "128m")
	proj := filepath.Join(fsDir, "proj")
	if err := os.Mkdir(proj, 0o755); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(3))
	model := map[string][]byte{"big": make([]byte, 16<<20), "a": []byte("a\n"), "m": []byte("m\n")}
	rng.Read(model["big"])
	for p, b := range model {
		if err := os.WriteFile(filepath.Join(proj, p), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m := mountProject(t, proj, "--keep-size", "1GiB")
	before := copyTree(model)
	m.turnctl(t, "begin", "--label", "on a full disk")
	// Fill the disk, outside the project, to the last byte.
	var st unix.Statfs_t
	if err := unix.Statfs(fsDir, &st); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(fsDir, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Fallocate(int(f.Fd()), 0, 0, int64(st.Bavail)*int64(st.Bsize)); err != nil {
		t.Fatalf("fill the disk: %v", err)
	}
	f.Close()
	if err := unix.Statfs(fsDir, &st); err != nil || st.Bavail != 0 {
		t.Fatalf("%d blocks free after filling the disk (%v)", st.Bavail, err)
	}
	if err := os.Remove(filepath.Join(proj, "big")); err != nil {
		t.Errorf("rm with no byte free: %v", err)
	}
	if err := os.Rename(filepath.Join(proj, "a"), filepath.Join(proj, "a2")); err != nil {
		t.Errorf("mv with no byte free: %v", err)
	}
	if err := os.Chmod(filepath.Join(proj, "m"), 0o600); err != nil {
		t.Errorf("chmod with no byte free: %v", err)
	}
	m.turnctl(t, "end")
	if rep := ckptfsStatus(t, m); rep["store_full"] != true {
		t.Errorf("ckptfs status while the reserve pays for records: store_full %v", rep["store_full"])
	}
	if err := os.Remove(filepath.Join(fsDir, "filler")); err != nil {
		t.Fatal(err)
	}
	if rep := ckptfsStatus(t, m); rep["store_full"] != false {
		t.Errorf("ckptfs status once space is back: store_full %v, %v", rep["store_full"], rep["store_error"])
	}
	m.turnctl(t, "begin")
	if err := os.WriteFile(filepath.Join(proj, "m"), []byte("m2\n"), 0o644); err != nil {
		t.Errorf("write once space is back: %v", err)
	}
	m.turnctl(t, "end")
	m.turnctl(t, "rewind", "0")
	checkModel(t, proj, before)
	for p := range before {
		if fi, err := os.Stat(filepath.Join(proj, p)); err != nil {
			t.Error(err)
		} else if fi.Mode().Perm() != 0o644 {
			t.Errorf("%s after the rewind: mode %v, want 0644", p, fi.Mode())
		}
	}
	m.Unmount(t)
}

// mountExt4 mounts a new ext4 image of size bytes (with its default 5 %
// reserved for root) on a new directory, by a loop device that the
// unmount at the test's end detaches.
func mountExt4(t *testing.T, size int64) string {
	t.Helper()
	img := filepath.Join(t.TempDir(), "img")
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, size); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mkfs.ext4", "-q", img).CombinedOutput(); err != nil {
		t.Skipf("mkfs.ext4: %v %s", err, out)
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-o", "loop", img, dir).CombinedOutput(); err != nil {
		t.Skipf("mount -o loop: %v %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s", dir, err, out)
		}
	})
	return dir
}

// The tester's case: on ext4, a program of root's fills the disk to the
// last block, the blocks reserved for root too. rm, mv and chmod still
// work: what the store's reserve gives back is room for the daemon's own
// writes (root's), though none for others'.
func TestRmOnAnExt4DiskRootFilled(t *testing.T) {
	needTurnctl(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	fsDir := mountExt4(t, 128<<20)
	proj := filepath.Join(fsDir, "proj")
	if err := os.Mkdir(proj, 0o755); err != nil {
		t.Fatal(err)
	}
	model := map[string][]byte{"small": []byte("small\n"), "m": []byte("m\n")}
	for p, b := range model {
		if err := os.WriteFile(filepath.Join(proj, p), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m := mountProject(t, proj, "--keep-size", "1GiB")
	m.turnctl(t, "begin", "--label", "build fills disk")
	// Root's build fills every block (f is written through the mount).
	f, err := os.Create(filepath.Join(proj, "build.log"))
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("fill the disk: %v", err)
			}
			break
		}
	}
	f.Close()
	m.turnctl(t, "end")
	var st unix.Statfs_t
	if err := unix.Statfs(fsDir, &st); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d KiB free (%d for others) with the disk filled", int64(st.Bfree)*int64(st.Bsize)>>10, int64(st.Bavail)*int64(st.Bsize)>>10)
	if err := os.Remove(filepath.Join(proj, "build.log")); err != nil {
		t.Errorf("rm with the disk filled: %v", err)
	}
	if err := os.Rename(filepath.Join(proj, "small"), filepath.Join(proj, "small2")); err != nil {
		t.Errorf("mv with the disk filled: %v", err)
	}
	if err := os.Chmod(filepath.Join(proj, "m"), 0o600); err != nil {
		t.Errorf("chmod with the disk filled: %v", err)
	}
	m.Unmount(t)
}

func copyTree(m map[string][]byte) map[string][]byte {
	c := make(map[string][]byte, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}
