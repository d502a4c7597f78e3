package tests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestWriteThroughAnFdTheRewindUnlinked: a process holds a file open
// while a rewind moves its directory away, deletes the file there and
// moves the directory back. The file then has no name, so a write through
// the open descriptor changes nothing in the tree: it must not be taken
// for a change of the path the file had before the rewind, and a later
// rewind must not bring that file back.
func TestWriteThroughAnFdTheRewindUnlinked(t *testing.T) {
	proj := t.TempDir()
	if err := os.Mkdir(filepath.Join(proj, "a"), 0o755); err != nil {
		t.Fatal(err)
	}
	m := mountProject(t, proj)
	before := tree(t, proj) // turn 0: a/ empty
	m.turnctl(t, "begin", "--label", "make a/a by way of c")
	runIn(t, proj, `mv a c && echo made > c/a && mv c a`)
	m.turnctl(t, "end")
	fd, err := unix.Open(filepath.Join(proj, "a/a"), unix.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	m.turnctl(t, "rewind", "0") // turn 2: a/a goes, a/ stays
	sameTree(t, "after the rewind to 0", before, tree(t, proj))
	m.turnctl(t, "begin", "--label", "write through the old fd")
	if _, err := unix.Pwrite(fd, []byte("written through an unlinked file\n"), 0); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Nlink != 0 {
		t.Fatalf("the held file: nlink %d, err %v; want an unlinked file", st.Nlink, err)
	}
	m.turnctl(t, "end")
	sameTree(t, "after the write through the old fd", before, tree(t, proj))
	if out := m.turnctl(t, "show", "3"); strings.Contains(out, "a/a") {
		t.Errorf("turn 3 lists a/a, which no name held:\n%s", out)
	}
	m.turnctl(t, "rewind", "2")
	sameTree(t, "after the rewind to 2", before, tree(t, proj))
}

// TestWriteThroughAnFdTheRewindUnlinkedInANewDirectory: as above, but the
// rewind moves the directory into one it creates itself (which the kernel
// never looked up), deletes the held file there, and a lookup then finds
// the directory again under its new name.
func TestWriteThroughAnFdTheRewindUnlinkedInANewDirectory(t *testing.T) {
	proj := t.TempDir()
	if err := os.MkdirAll(filepath.Join(proj, "n/d"), 0o755); err != nil {
		t.Fatal(err)
	}
	m := mountProject(t, proj)
	before := tree(t, proj) // turn 0: n/d/ empty
	m.turnctl(t, "begin", "--label", "make d/f")
	runIn(t, proj, `echo made > n/d/f && mv n/d d && rmdir n`)
	m.turnctl(t, "end")
	fd, err := unix.Open(filepath.Join(proj, "d/f"), unix.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	m.turnctl(t, "rewind", "0") // turn 2: d/f goes, d is n/d again
	sameTree(t, "after the rewind to 0", before, tree(t, proj))
	m.turnctl(t, "begin", "--label", "write through the old fd")
	if _, err := unix.Pwrite(fd, []byte("written through an unlinked file\n"), 0); err != nil {
		t.Fatal(err)
	}
	m.turnctl(t, "end")
	sameTree(t, "after the write through the old fd", before, tree(t, proj))
	if out := m.turnctl(t, "show", "3"); strings.Contains(out, "/f") {
		t.Errorf("turn 3 lists a file no name held:\n%s", out)
	}
	m.turnctl(t, "rewind", "2")
	sameTree(t, "after the rewind to 2", before, tree(t, proj))
}

// TestWriteThroughAnFdAfterTheRewindMovedItsDirectory: a process holds a
// file open while a rewind moves its directory back to its old name. A
// write through the descriptor changes the file under that name, and must
// be recorded there, so that a rewind to before the write undoes it.
func TestWriteThroughAnFdAfterTheRewindMovedItsDirectory(t *testing.T) {
	proj := t.TempDir()
	writeTree(t, proj, map[string]string{"a/f": "zero\n"})
	m := mountProject(t, proj)
	before := tree(t, proj) // turn 0
	m.turnctl(t, "begin", "--label", "rename a")
	runIn(t, proj, `mv a b`)
	m.turnctl(t, "end")
	fd, err := unix.Open(filepath.Join(proj, "b/f"), unix.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	// Nothing looks a up between the rewind and the write: the node
	// has only the path go-fuse gave it.
	m.turnctl(t, "rewind", "0") // turn 2: b is a again
	m.turnctl(t, "begin", "--label", "write through the old fd")
	if _, err := unix.Pwrite(fd, []byte("one!\n"), 0); err != nil {
		t.Fatal(err)
	}
	m.turnctl(t, "end")
	if b, err := os.ReadFile(filepath.Join(proj, "a/f")); err != nil || string(b) != "one!\n" {
		t.Fatalf("a/f = %q, %v; want the write", b, err)
	}
	if out := m.turnctl(t, "show", "3"); !strings.Contains(out, "a/f") {
		t.Errorf("turn 3 does not list a/f:\n%s", out)
	}
	m.turnctl(t, "rewind", "2")
	sameTree(t, "after the rewind to 2", before, tree(t, proj))
}

// TestWriteThroughAnFdAfterTheRewindMovedItsDirectoryIntoANewOne: as
// above, but the rewind moves the directory into one it creates itself,
// which the kernel never looked up: the write must still be recorded
// under the file's real path.
func TestWriteThroughAnFdAfterTheRewindMovedItsDirectoryIntoANewOne(t *testing.T) {
	proj := t.TempDir()
	writeTree(t, proj, map[string]string{"n/d/f": "zero\n"})
	m := mountProject(t, proj)
	before := tree(t, proj) // turn 0
	m.turnctl(t, "begin", "--label", "move d up")
	runIn(t, proj, `mv n/d d && rmdir n`)
	m.turnctl(t, "end")
	fd, err := unix.Open(filepath.Join(proj, "d/f"), unix.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	m.turnctl(t, "rewind", "0") // turn 2: mkdir n, d is n/d again
	m.turnctl(t, "begin", "--label", "write through the old fd")
	if _, err := unix.Pwrite(fd, []byte("one!\n"), 0); err != nil {
		t.Fatal(err)
	}
	m.turnctl(t, "end")
	if b, err := os.ReadFile(filepath.Join(proj, "n/d/f")); err != nil || string(b) != "one!\n" {
		t.Fatalf("n/d/f = %q, %v; want the write", b, err)
	}
	if out := m.turnctl(t, "show", "3"); !strings.Contains(out, "n/d/f") {
		t.Errorf("turn 3 does not list n/d/f:\n%s", out)
	}
	m.turnctl(t, "rewind", "2")
	sameTree(t, "after the rewind to 2", before, tree(t, proj))
}
