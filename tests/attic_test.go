package tests

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"ckptfs/internal/crashpoint"
)

// An unlink that fails after its capture linked the file's inode into the
// store's attic leaves the file in the tree, where a later write would
// have changed the bytes history keeps of it. The daemon copies them
// instead: the rewind puts back what the file held.
func TestFailedUnlinkLeavesHistoryItsBytes(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	writeTree(t, dir, map[string]string{"a.txt": "orig\n"})
	t.Setenv(crashpoint.FailEnv, "fuse.unlink")
	m := mountProject(t, dir)
	t.Setenv(crashpoint.FailEnv, "")
	p := filepath.Join(dir, "a.txt")
	m.turnctl(t, "begin", "--label", "rm fails")
	if err := os.Remove(p); err == nil {
		t.Fatal("rm of a.txt succeeded though its unlink was to fail")
	}
	writeInPlaceThenRewind(t, m, p, "orig\n")
}

// The same for a rename over a file that fails to be recorded after the
// capture of the file it replaces linked that file into the attic.
func TestFailedRenameLeavesHistoryItsBytes(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	writeTree(t, dir, map[string]string{"a.txt": "orig\n", "b.txt": "bee\n"})
	t.Setenv(crashpoint.FailEnv, "fuse.rename.record")
	m := mountProject(t, dir)
	t.Setenv(crashpoint.FailEnv, "")
	b := filepath.Join(dir, "b.txt")
	m.turnctl(t, "begin", "--label", "mv fails")
	if err := os.Rename(filepath.Join(dir, "a.txt"), b); err == nil {
		t.Fatal("mv a.txt b.txt succeeded though its record was to fail")
	}
	writeInPlaceThenRewind(t, m, b, "bee\n")
}

// writeInPlaceThenRewind writes into the file at p in place (the same
// inode), ends the turn, rewinds to turn 0 and checks that p holds want.
func writeInPlaceThenRewind(t *testing.T, m *Mount, p, want string) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("CHANGED"), 0); err != nil {
		t.Fatal(err)
	}
	f.Close()
	m.turnctl(t, "end")
	m.turnctl(t, "rewind", "0")
	if got, err := os.ReadFile(p); err != nil || string(got) != want {
		t.Fatalf("%s after the rewind: %q, %v; want %q", filepath.Base(p), got, err, want)
	}
}

// TestRewindKeepsHoles: a sparse file the turn deleted, or replaced,
// comes back with its holes, taking the space it took (a 1 GiB image of
// a few blocks was written out in full: seconds, and 1 GiB of disk).
func TestRewindKeepsHoles(t *testing.T) {
	dir := t.TempDir()
	const size = 256 << 20
	for _, name := range []string{"deleted", "replaced"} {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		f.Truncate(size)
		f.WriteAt([]byte("in the middle"), 100<<20)
		f.Close()
	}
	m := mountProject(t, dir)
	m.turnctl(t, "begin")
	runIn(t, dir, `rm deleted; echo small > replaced.new && mv replaced.new replaced`)
	m.turnctl(t, "end")
	m.turnctl(t, "rewind", "0")
	for _, name := range []string{"deleted", "replaced"} {
		p := filepath.Join(dir, name)
		b, err := os.ReadFile(p)
		if err != nil || len(b) != size || string(b[100<<20:100<<20+13]) != "in the middle" {
			t.Fatalf("%s after the rewind: %d bytes, %v", name, len(b), err)
		}
		var st unix.Stat_t
		if err := unix.Stat(p, &st); err != nil {
			t.Fatal(err)
		}
		if alloc := st.Blocks * 512; alloc > 1<<20 {
			t.Errorf("%s after the rewind: %d bytes allocated for a file of one written block", name, alloc)
		}
	}

	// Grown by a turn (a truncate, then a block past the old end), cut
	// back by a rewind, grown again by its undo: still sparse.
	m.turnctl(t, "begin")
	runIn(t, dir, `truncate -s 512M deleted && printf far | dd of=deleted bs=1 seek=400000000 conv=notrunc 2>/dev/null`)
	m.turnctl(t, "end")
	grown := readFile(t, filepath.Join(dir, "deleted"))
	m.turnctl(t, "rewind", "2")
	m.turnctl(t, "undo")
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(dir, "deleted"), &st); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(dir, "deleted")); got != grown {
		t.Errorf("the file grown back differs")
	}
	if alloc := st.Blocks * 512; alloc > 1<<20 {
		t.Errorf("grown back by an undo: %d bytes allocated for a file of two written blocks", alloc)
	}
}
