package tests

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"ckptfs/internal/rundir"
)

// TestResourceBounds creates files through the mount and accumulates turns,
// then checks the daemon's file descriptors come back to their baseline
// once the kernel forgets the inodes, and reports its peak RSS. The fast
// variant runs in `make test`; CKPTFS_LONG=1 runs 100k files and 10k turns.
func TestResourceBounds(t *testing.T) {
	files, turns, maxRSS := 5000, 500, int64(512<<20)
	if os.Getenv("CKPTFS_LONG") != "" {
		files, turns, maxRSS = 100000, 10000, 1<<30
	}
	proj := t.TempDir()
	m := mountProject(t, proj)
	pid := m.PID(t)
	sock, err := rundir.Socket(m.Dir)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	post := func(what string) {
		resp, err := client.Post("http://ckptfs/v1/"+what, "application/json", strings.NewReader("{}"))
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %s", what, resp.Status)
		}
	}
	post("status")
	fdsBefore := countFDs(t, pid)
	perTurn := files / turns
	start := time.Now()
	n := 0
	for turn := 0; turn < turns; turn++ {
		post("begin")
		dir := filepath.Join(proj, fmt.Sprintf("d%03d", turn%1000))
		os.Mkdir(dir, 0o755)
		for i := 0; i < perTurn; i++ {
			p := filepath.Join(dir, fmt.Sprintf("f%d", n))
			if err := os.WriteFile(p, []byte(p), 0o644); err != nil {
				t.Fatal(err)
			}
			n++
		}
		// Rewrite one older file too, so turns also carry prior bytes.
		if turn > 0 {
			os.WriteFile(filepath.Join(proj, "d000", "f0"), []byte(fmt.Sprint(turn)), 0o644)
		}
		post("end")
	}
	took := time.Since(start)
	fdsLoaded := countFDs(t, pid)
	// Let the kernel forget the inodes: the daemon's node fds must follow.
	os.WriteFile("/proc/sys/vm/drop_caches", []byte("2"), 0)
	var fdsAfter int
	for i := 0; i < 50; i++ {
		if fdsAfter = countFDs(t, pid); fdsAfter <= fdsBefore+16 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	hwm := vmHWM(t, pid)
	t.Logf("%d files, %d turns in %v; daemon fds: %d before, %d with the tree cached, %d after the kernel forgot it; peak RSS %d MiB",
		n, turns, took.Round(time.Millisecond), fdsBefore, fdsLoaded, fdsAfter, hwm>>20)
	if fdsAfter > fdsBefore+16 {
		t.Errorf("daemon fds grew from %d to %d", fdsBefore, fdsAfter)
	}
	if hwm > maxRSS {
		t.Errorf("daemon peak RSS %d MiB, want under %d MiB", hwm>>20, maxRSS>>20)
	}
	out := m.turnctl(t, "log", "-n", "3")
	if !strings.Contains(out, strconv.Itoa(turns)) {
		t.Errorf("log does not show turn %d:\n%s", turns, out)
	}
}

func countFDs(t *testing.T, pid int) int {
	t.Helper()
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// vmHWM is the peak resident set size of pid in bytes.
func vmHWM(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	t.Fatal("no VmHWM")
	return 0
}
