package tests

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestTmpfile: a file made with O_TMPFILE through the mount, written while
// a turn ends with it still open and nameless, then named by linkat in
// the next turn, is that turn's new file: a rewind before it removes it,
// one after it gives its bytes and mode back. One never named leaves no
// trace. (O_TMPFILE answered EOPNOTSUPP.)
func TestTmpfile(t *testing.T) {
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "sub"), 0o755)
	m := mountProject(t, dir)
	m.turnctl(t, "begin")
	fd, err := unix.Open(filepath.Join(dir, "sub"), unix.O_TMPFILE|unix.O_WRONLY, 0o640)
	if err != nil {
		t.Fatalf("O_TMPFILE: %v", err)
	}
	defer unix.Close(fd)
	unix.Write(fd, []byte("first\n"))
	lost, err := unix.Open(dir, unix.O_TMPFILE|unix.O_RDWR|unix.O_EXCL, 0o600)
	if err != nil {
		t.Fatalf("O_TMPFILE|O_EXCL: %v", err)
	}
	unix.Write(lost, []byte("never named\n"))
	unix.Close(lost)
	m.turnctl(t, "end")
	m.turnctl(t, "begin")
	unix.Write(fd, []byte("second\n"))
	// linkat(fd, "", AT_EMPTY_PATH) needs CAP_DAC_READ_SEARCH: the tests
	// run as root.
	if err := unix.Linkat(fd, "", unix.AT_FDCWD, filepath.Join(dir, "sub/named"), unix.AT_EMPTY_PATH); err != nil {
		t.Fatalf("linkat of the O_TMPFILE file: %v", err)
	}
	unix.Write(fd, []byte("third\n"))
	m.turnctl(t, "end")
	want := "first\nsecond\nthird\n"
	if got := readFile(t, filepath.Join(dir, "sub/named")); got != want {
		t.Fatalf("sub/named: %q", got)
	}
	if out := m.turnctl(t, "show", "1"); !strings.Contains(out, "no files changed") {
		t.Errorf("show 1 (the nameless files alone):\n%s", out)
	}
	if out := m.turnctl(t, "show", "2"); !regexp.MustCompile(`(?m)^  added +sub/named +\+3 -0$`).MatchString(out) {
		t.Errorf("show 2:\n%s", out)
	}
	m.turnctl(t, "rewind", "1")
	if _, err := os.Lstat(filepath.Join(dir, "sub/named")); !os.IsNotExist(err) {
		t.Errorf("after rewind 1, sub/named: %v", err)
	}
	if names, _ := os.ReadDir(dir); len(names) != 1 { // sub (the store is hidden)
		t.Errorf("after rewind 1 the project holds %d names", len(names))
	}
	m.turnctl(t, "rewind", "2")
	fi, err := os.Stat(filepath.Join(dir, "sub/named"))
	if err != nil || fi.Mode().Perm() != 0o640 || readFile(t, filepath.Join(dir, "sub/named")) != want {
		t.Errorf("after rewind 2, sub/named: %v %v", fi, err)
	}
}
