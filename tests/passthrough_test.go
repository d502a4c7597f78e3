package tests

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
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
