package tests

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// fsync of a directory (what a program does to make a rename durable)
// succeeds and syncs the backing directory: strace, attached to the daemon,
// sees fsync and fdatasync of an fd of the backing directory.
func TestFsyncOfADirectorySyncsTheBackingDirectory(t *testing.T) {
	strace, err := exec.LookPath("strace")
	if err != nil {
		t.Fatalf("strace is needed (.ci/run installs it): %v", err)
	}
	dir := t.TempDir()
	m := mountProject(t, dir)
	d := filepath.Join(dir, "d")
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d, "a.tmp"), []byte("a"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(d, "a.tmp"), filepath.Join(d, "a")); err != nil {
		t.Fatal(err)
	}

	out := filepath.Join(t.TempDir(), "strace.out")
	var stderr lockedBuffer
	cmd := exec.Command(strace, "-f", "-y", "-e", "trace=fsync,fdatasync", "-o", out, "-p", fmt.Sprint(m.PID(t)))
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	waitUntil(t, 10*time.Second, func() bool { return strings.Contains(stderr.String(), "attached") }, func() string {
		return "strace did not attach to the daemon: " + stderr.String()
	})

	for _, p := range []string{d, dir} {
		fd, err := unix.Open(p, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := unix.Fsync(fd); err != nil {
			t.Errorf("fsync of directory %s: %v", p, err)
		}
		if err := unix.Fdatasync(fd); err != nil {
			t.Errorf("fdatasync of directory %s: %v", p, err)
		}
		unix.Close(fd)
	}
	cmd.Process.Signal(syscall.SIGINT)
	cmd.Wait()
	b, _ := os.ReadFile(out)
	for _, call := range []string{"fsync", "fdatasync"} {
		for _, p := range []string{d, dir} {
			// "fsync(24</backing/dir>) = 0", or split by another thread:
			// "fsync(24</backing/dir> <unfinished ...>" (the test saw 0).
			re := regexp.MustCompile(` ` + call + `\(\d+<` + regexp.QuoteMeta(p) + `>[) ]`)
			if !re.Match(b) {
				t.Errorf("the daemon did not %s the backing directory %s; it made:\n%s", call, p, b)
			}
		}
	}
}

// lockedBuffer is a bytes.Buffer that a process's output goroutine may
// write while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
