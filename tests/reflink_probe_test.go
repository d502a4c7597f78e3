package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"ckptfs/internal/xfstest"
)

// A project on a filesystem that does not clone (the test's TempDir)
// whose store is on one that does (--store on XFS with reflink=1): a
// 4 KiB write into a big file is range-captured, as on any filesystem
// that does not clone. The probe at the store's open says only that the
// attic clones; it must not make the first writable open of a big file
// of the project a passthrough open captured by a whole copy.
func TestStoreThatClonesProjectThatDoesNot(t *testing.T) {
	needTurnctl(t)
	mnt := xfstest.Mount(t, xfstest.MinSize)
	if !xfstest.Clones(mnt) {
		t.Skip("the XFS image does not clone")
	}
	dir := t.TempDir()
	const size = 64 << 20
	xfstest.WriteSeeded(t, filepath.Join(dir, "db.bin"), size, 4)
	t.Setenv("CKPTFS_PASSTHROUGH", "1")
	t.Setenv("CKPTFS_WRITE_PASSTHROUGH", "1")
	store := filepath.Join(mnt, "store")
	m := mountProject(t, dir, "--debug", "--store", store)
	logPath := filepath.Join(store, "daemon.log")

	m.turnctl(t, "begin", "--label", "one page")
	xfstest.Sync(t, mnt)
	free0 := xfstest.FreeBytes(t, mnt)
	before, _ := os.ReadFile(logPath)
	f, err := os.OpenFile(filepath.Join(dir, "db.bin"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(make([]byte, 4096), 1<<20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	m.turnctl(t, "end")
	xfstest.Sync(t, mnt)
	grew := free0 - xfstest.FreeBytes(t, mnt)
	after, _ := os.ReadFile(logPath)
	t.Logf("store grew %d KiB; daemon WRITEs %d", grew>>10, strings.Count(string(after[len(before):]), ": WRITE "))
	if grew > 16<<20 {
		t.Errorf("a 4 KiB write into a %d MiB file grew the store by %d MiB: the file was copied whole", size>>20, grew>>20)
	}
	if s := string(after); strings.Contains(s, "is not on the filesystem of device") {
		t.Error(fmt.Sprint("the daemon tried to clone a file of the project's filesystem: ", s[strings.Index(s, "versionstore: the store is not"):][:120]))
	}
}

// An offline turnctl command on a project whose store is on XFS says
// nothing on stderr but what the command has to say.
func TestOfflineTurnctlQuietOnXFS(t *testing.T) {
	needTurnctl(t)
	mnt := xfstest.Mount(t, xfstest.MinSize)
	dir := filepath.Join(mnt, "proj")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeTree(t, dir, map[string]string{"a.txt": "a\n"})
	m := mountProject(t, dir)
	m.turnctl(t, "begin", "--label", "edit")
	writeTree(t, dir, map[string]string{"a.txt": "b\n"})
	m.turnctl(t, "end")
	m.Unmount(t)
	cmd := m.turnctlCmd("--json", "log")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if _, err := cmd.Output(); err != nil {
		t.Fatalf("turnctl --json log (offline): %v\n%s", err, stderr.String())
	}
	if stderr.Len() > 0 {
		t.Errorf("turnctl --json log (offline) wrote to stderr:\n%s", stderr.String())
	}
}
