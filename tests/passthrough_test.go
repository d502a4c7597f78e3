package tests

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Files created, truncated or already written in a turn are written through
// FUSE passthrough, past the daemon (unless CKPTFS_WRITE_PASSTHROUGH=0). A
// handle kept open across turn boundaries must still leave each turn's end
// state in history, written through the daemon or not: the boundary
// captures passthrough writers again (Root.Exclusive).
func TestPassthroughWritersKeepBoundariesExact(t *testing.T) {
	t.Run("daemon-served", func(t *testing.T) {
		t.Setenv("CKPTFS_WRITE_PASSTHROUGH", "0") // the daemon inherits it
		writersAcrossBoundaries(t)
	})
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

// TestPassthroughMixedOpensUnderLoad opens three files over and over from
// twelve goroutines, readers (passthrough) and writers (daemon-served)
// mixed, and expects no open or I/O to fail. go-fuse's bridge used to drop
// a passthrough reference at every RELEASE, also a daemon-served one's,
// and close an inode's backing ID under a live passthrough handle: the
// next passthrough open got another ID, which the kernel refuses with EIO
// (one backing file per inode). About 200 opens in 127,000 failed so.
func TestPassthroughMixedOpensUnderLoad(t *testing.T) {
	t.Setenv("CKPTFS_PASSTHROUGH", "1")
	dir := t.TempDir()
	files := []string{"a", "b", "c"}
	want := map[string]string{}
	for _, f := range files {
		want[f] = strings.Repeat("x", 64<<10)
	}
	writeTree(t, dir, want)
	m := mountProject(t, dir)
	m.turnctl(t, "begin")
	var mu sync.Mutex
	fails := map[string]int{}
	ops := 0
	stop := time.Now().Add(3 * time.Second)
	var wg sync.WaitGroup
	for g := 0; g < 12; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			buf := bytes.Repeat([]byte("x"), 4096)
			for i := 0; time.Now().Before(stop); i++ {
				p := filepath.Join(dir, files[(g+i)%len(files)])
				flag := []int{os.O_WRONLY, os.O_RDWR, os.O_RDONLY, os.O_RDONLY}[g%4]
				f, err := os.OpenFile(p, flag, 0)
				if err == nil {
					if flag == os.O_RDONLY {
						_, err = f.ReadAt(buf[:4096], 0)
					} else {
						_, err = f.WriteAt(buf, int64(i%16)*4096) // the same bytes: content stays
					}
					f.Close()
				}
				mu.Lock()
				ops++
				if err != nil {
					fails[err.Error()]++
				}
				mu.Unlock()
			}
		}(g)
	}
	wg.Wait()
	m.turnctl(t, "end")
	if len(fails) > 0 {
		t.Fatalf("%d ops, failures: %v", ops, fails)
	}
	for _, f := range files {
		if b, err := os.ReadFile(filepath.Join(dir, f)); err != nil || string(b) != want[f] {
			t.Fatalf("%s after the load: %d bytes, %v", f, len(b), err)
		}
	}
	t.Logf("%d opens of mixed kinds, none failed", ops)
}

// A file read through passthrough once keeps its backing file registered
// while the kernel remembers it: later read-only opens cost the daemon no
// open of its own (no fd, no registration), and a handle opens its fd only
// for what needs one, such as a lock, which stays its own (an OFD lock per
// handle). A file written through passthrough keeps nothing open for
// writing once closed: it executes at once (no ETXTBSY).
func TestPassthroughReopensOpenNothing(t *testing.T) {
	dir := t.TempDir()
	m := mountProject(t, dir)
	pid := m.PID(t)
	m.turnctl(t, "begin")
	p := filepath.Join(m.Dir, "tool")
	src, err := os.ReadFile("/bin/true")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, src, 0o755); err != nil { // created in the turn: a passthrough writer
		t.Fatal(err)
	}
	if err := exec.Command(p).Run(); err != nil {
		t.Fatalf("run the file just written: %v", err)
	}
	if _, err := os.ReadFile(p); err != nil { // registers the file read-only
		t.Fatal(err)
	}
	// openFDs counts the daemon's fds of the backing file that are not
	// O_PATH (a node's own fd is).
	backingFile := filepath.Join(dir, "tool")
	openFDs := func() int {
		ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, e := range ents {
			if l, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, e.Name())); l != backingFile {
				continue
			}
			info, _ := os.ReadFile(fmt.Sprintf("/proc/%d/fdinfo/%s", pid, e.Name()))
			for _, line := range strings.Split(string(info), "\n") {
				if f := strings.Fields(line); len(f) == 2 && f[0] == "flags:" {
					if fl, _ := strconv.ParseInt(f[1], 8, 64); fl&unix.O_PATH == 0 {
						n++
					}
				}
			}
		}
		return n
	}
	var held []*os.File
	for range 20 {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		held = append(held, f)
	}
	if n := openFDs(); n != 0 {
		t.Errorf("20 read-only opens of a file read before: the daemon holds %d fds of it, want 0", n)
	}
	b := make([]byte, 4)
	if _, err := held[3].ReadAt(b, 0); err != nil || string(b) != string(src[:4]) {
		t.Fatalf("read %q, %v", b, err)
	}
	// A lock needs the handle's own fd: opened then, and its own.
	if err := unix.Flock(int(held[0].Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		t.Fatalf("flock: %v", err)
	}
	if err := unix.Flock(int(held[1].Fd()), unix.LOCK_EX|unix.LOCK_NB); err != unix.EWOULDBLOCK {
		t.Fatalf("a second handle's flock: %v, want EWOULDBLOCK", err)
	}
	if n := openFDs(); n < 1 || n > 2 {
		t.Errorf("after the locks the daemon holds %d fds of the file, want 1 or 2", n)
	}
	m.turnctl(t, "end")
	// Written again through passthrough, closed, run at once.
	if err := os.WriteFile(p, src, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := exec.Command(p).Run(); err != nil {
		t.Fatalf("run the file written again: %v", err)
	}
}
