package tests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestWritesThroughDescriptorsARewindMoved: a process holds a file open
// across a rewind that moves the file's directory in the backing tree
// underneath the mount (and perhaps deletes the file), then writes
// through the descriptor in the next turn. A file the rewind deleted has
// no name, even once a lookup has found its directory again: the write changes no
// path and must not be recorded as a change of the name it had. A file
// the rewind moved is changed under its real name: the write must be
// recorded there, also with nothing looked up in between, so that a rewind to before the write undoes it. Either
// way, a rewind to the end of the rewind's turn gives its tree back.
func TestWritesThroughDescriptorsARewindMoved(t *testing.T) {
	for _, c := range []struct {
		name  string
		files map[string]string // the tree at turn 0 ("/"-ended: a directory)
		work  string            // turn 1
		held  string            // opened after turn 1
		real  string            // where the rewind to 0 leaves it ("": deleted)
	}{
		// The rewind moves a away, deletes a/a there, moves it back.
		{"deleted", map[string]string{"a/": ""}, `mv a c && echo made > c/a && mv c a`, "a/a", ""},
		// ... into a directory the rewind makes, deleting d/f there.
		{"deleted in a new directory", map[string]string{"n/d/": ""}, `echo made > n/d/f && mv n/d d && rmdir n`, "d/f", ""},
		// The rewind moves b back to a, with the file.
		{"moved", map[string]string{"a/f": "zero\n"}, `mv a b`, "b/f", "a/f"},
		// ... into a directory the rewind makes.
		{"moved into a new directory", map[string]string{"n/d/f": "zero\n"}, `mv n/d d && rmdir n`, "d/f", "n/d/f"},
	} {
		t.Run(c.name, func(t *testing.T) {
			proj := t.TempDir()
			for p, content := range c.files {
				if strings.HasSuffix(p, "/") {
					if err := os.MkdirAll(filepath.Join(proj, p), 0o755); err != nil {
						t.Fatal(err)
					}
				} else {
					writeTree(t, proj, map[string]string{p: content})
				}
			}
			m := mountProject(t, proj)
			before := tree(t, proj) // turn 0
			m.turnctl(t, "begin", "--label", "work")
			runIn(t, proj, c.work)
			m.turnctl(t, "end")
			fd, err := unix.Open(filepath.Join(proj, c.held), unix.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Close(fd)
			m.turnctl(t, "rewind", "0") // turn 2
			if c.real == "" {
				// The lookups find the directory again.
				sameTree(t, "after the rewind to 0", before, tree(t, proj))
			}
			m.turnctl(t, "begin", "--label", "write through the old fd")
			if _, err := unix.Pwrite(fd, []byte("one!\n"), 0); err != nil {
				t.Fatal(err)
			}
			m.turnctl(t, "end") // turn 3
			var st unix.Stat_t
			if err := unix.Fstat(fd, &st); err != nil {
				t.Fatal(err)
			}
			show := m.turnctl(t, "show", "3")
			if c.real == "" {
				if st.Nlink != 0 {
					t.Fatalf("the held file has %d links; the rewind should have deleted it", st.Nlink)
				}
				sameTree(t, "after the write through the old fd", before, tree(t, proj))
				if strings.Contains(show, "/") {
					t.Errorf("turn 3 lists a path no name of the written file held:\n%s", show)
				}
			} else {
				if b, err := os.ReadFile(filepath.Join(proj, c.real)); err != nil || string(b) != "one!\n" {
					t.Fatalf("%s = %q, %v; want the write", c.real, b, err)
				}
				if !strings.Contains(show, c.real) {
					t.Errorf("turn 3 does not list %s:\n%s", c.real, show)
				}
			}
			m.turnctl(t, "rewind", "2")
			sameTree(t, "after the rewind to 2", before, tree(t, proj))
		})
	}
}
