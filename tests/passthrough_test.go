package tests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Files created, truncated or already written in a turn are written through
// FUSE passthrough, past the daemon, with CKPTFS_WRITE_PASSTHROUGH=1. A
// handle kept open across turn boundaries must still leave each turn's end
// state in history, written through the daemon or not: the boundary
// captures passthrough writers again (Root.Exclusive).
func TestPassthroughWritersKeepBoundariesExact(t *testing.T) {
	t.Run("daemon-served", writersAcrossBoundaries)
	t.Run("passthrough", func(t *testing.T) {
		t.Setenv("CKPTFS_WRITE_PASSTHROUGH", "1") // the daemon inherits it
		t.Setenv("CKPTFS_PASSTHROUGH", "1")
		writersAcrossBoundaries(t)
	})
}

func writersAcrossBoundaries(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"old.txt": "old content\n"})
	m := mountProject(t, dir)

	m.turnctl(t, "begin") // turn 1
	created, err := os.OpenFile(filepath.Join(dir, "new.txt"), os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer created.Close()
	// O_TRUNC records the prior content first; the handle is then passthrough.
	trunc, err := os.OpenFile(filepath.Join(dir, "old.txt"), os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer trunc.Close()
	write := func(f *os.File, s string) {
		t.Helper()
		if _, err := f.WriteString(s); err != nil {
			t.Fatal(err)
		}
	}
	write(created, "one\n")
	write(trunc, "first\n")
	m.turnctl(t, "end")
	s1 := tree(t, dir)

	m.turnctl(t, "begin") // turn 2: the same handles write on
	write(created, "two\n")
	write(trunc, "second\n")
	m.turnctl(t, "end")
	s2 := tree(t, dir)

	m.turnctl(t, "begin") // turn 3: a new writable open of a file written in this turn
	write(created, "three\n")
	again, err := os.OpenFile(filepath.Join(dir, "new.txt"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	write(again, "appended\n")
	again.Close()
	m.turnctl(t, "end")
	if b, _ := os.ReadFile(filepath.Join(dir, "new.txt")); string(b) != "one\ntwo\nthree\nappended\n" {
		t.Fatalf("new.txt through the mount: %q", b)
	}
	created.Close()
	trunc.Close()

	// Turn numbers are 1, 2, 3 (no empty turn for the captures made at
	// the boundaries), and the writer is credited though its writes
	// bypassed the daemon.
	for _, line := range strings.Split(m.turnctl(t, "log"), "\n") {
		f := strings.Fields(line)
		if len(f) > 0 && (f[0] == "1" || f[0] == "2" || f[0] == "3") && (!strings.Contains(line, "agent") || !strings.HasSuffix(line, "tests.test")) {
			t.Errorf("log line %q: want an agent turn credited to tests.test", line)
		}
	}
	m.turnctl(t, "rewind", "1")
	sameTree(t, "after rewind 1", s1, tree(t, dir))
	if b, _ := os.ReadFile(filepath.Join(dir, "old.txt")); string(b) != "first\n" {
		t.Fatalf("old.txt after rewind 1: %q, want %q", b, "first\n")
	}
	m.turnctl(t, "rewind", "2")
	sameTree(t, "after rewind 2", s2, tree(t, dir))
	m.turnctl(t, "rewind", "0")
	if b, _ := os.ReadFile(filepath.Join(dir, "old.txt")); string(b) != "old content\n" {
		t.Fatalf("old.txt after rewind 0: %q", b)
	}
	if _, err := os.Lstat(filepath.Join(dir, "new.txt")); !os.IsNotExist(err) {
		t.Fatalf("new.txt after rewind 0: %v, want absent", err)
	}
}
