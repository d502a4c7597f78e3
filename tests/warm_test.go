package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A root mount primes the kernel's caches once it is live (cmd/ckptfs
// warm.go): after the warm-up, an lstat of every file by its path, as git
// status does from its index (no directory read first), reaches the
// daemon as no LOOKUP (its --debug log lists every request). With
// CKPTFS_WARMUP=0 the same lstats make one per path.
//
// The kernel may reclaim unused dentries at any moment: under memory
// pressure from other work on the machine (go test runs the other
// packages meanwhile, writing GiBs), all 240 of the tree's were seen gone
// between the warm-up and the lstats. So a warm mount that finds its
// caches emptied is tried again, up to three times in all: a warm-up that
// does not prime fails every time.
func TestWarmUpPrimesTheKernelsCaches(t *testing.T) {
	for _, warm := range []bool{true, false} {
		t.Run(fmt.Sprint("warm=", warm), func(t *testing.T) {
			if !warm {
				t.Setenv("CKPTFS_WARMUP", "0") // the daemon inherits it
			}
			for try := 1; ; try++ {
				lookups, files := warmMountLookups(t, warm)
				t.Logf("try %d: lstat of %d files by path after the mount settled: %d LOOKUPs", try, files, lookups)
				if warm && lookups > 0 {
					if try < 3 {
						continue
					}
					t.Errorf("after the warm-up, the lstats made %d LOOKUPs, %d times: the kernel's caches were not primed", lookups, try)
				}
				if !warm && lookups < files {
					t.Errorf("without the warm-up, the lstats made %d LOOKUPs, want one per path at least (%d files)", lookups, files)
				}
				return
			}
		})
	}
}

// warmMountLookups mounts a new tree of 200 files (warm: with the
// warm-up), waits for the daemon to settle, lstats every file by path and
// returns the LOOKUPs of the tree's names that reached the daemon.
func warmMountLookups(t *testing.T, warm bool) (lookups, n int) {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{}
	for d := 0; d < 20; d++ {
		for f := 0; f < 10; f++ {
			files[fmt.Sprintf("d%02d/sub/f%02d.txt", d, f)] = "x\n"
		}
	}
	writeTree(t, dir, files)
	m := mountProject(t, dir, "--debug")
	logPath := filepath.Join(fmt.Sprintf("/proc/%d/cwd", m.PID(t)), "daemon.log")
	// The warm-up logs its end; then the log must settle (the
	// mount's own requests).
	var before []byte
	for deadline := time.Now().Add(60 * time.Second); ; {
		b, err := os.ReadFile(logPath)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) == len(before) && (!warm || strings.Contains(string(b), "warm-up: read")) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the daemon's log did not settle (warm-up logged: %v)", strings.Contains(string(b), "warm-up: read"))
		}
		before = b
		time.Sleep(300 * time.Millisecond)
	}
	if !warm && strings.Contains(string(before), "warm-up: read") {
		t.Fatal("CKPTFS_WARMUP=0, but the daemon warmed up")
	}
	runIn(t, dir, `python3 -c "import os; [os.lstat(f'd{d:02d}/sub/f{f:02d}.txt') for d in range(20) for f in range(10)]"`)
	after, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	// LOOKUPs of the tree's names (python looks for names of its
	// own too, which do not exist).
	ours := regexp.MustCompile(`: LOOKUP n\d+ +"(d\d\d|sub|f\d\d\.txt)"`)
	m.Unmount(t)
	return len(ours.FindAllIndex(after[len(before):], -1)), len(files)
}

// ckptfs umount right after the mount, while the warm-up still reads the
// tree, unmounts: the warm-up is the daemon's child, ended by the daemon
// before it unmounts, not a user of the mount to refuse for.
func TestUmountDuringTheWarmUp(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{}
	for d := 0; d < 400; d++ {
		files[fmt.Sprintf("d%03d/a/b/f", d)] = "x\n"
	}
	writeTree(t, dir, files)
	for i := 0; i < 3; i++ {
		m := mountProject(t, dir)
		m.Unmount(t)
	}
}

// A private mount warms up as root's does: the user's lstats of every
// file after the warm-up reach the daemon as no LOOKUP. (Tried up to
// three times, as above.)
func TestWarmUpPrimesAPrivateMountsCaches(t *testing.T) {
	p := newUserProject(t)
	p.sh(t, `for d in $(seq -w 0 19); do mkdir -p d$d/sub; for f in $(seq 0 9); do echo x > d$d/sub/f0$f.txt; done; done`)
	for try := 1; ; try++ {
		p.run(t, p.Dir, ckptfsBin, "mount", "--debug", p.Dir)
		p.cleanupMount(t)
		log, before := settledWarmLog(t, p, "warm-up: read")
		p.sh(t, `python3 -c "import os; [os.lstat(f'd{d:02d}/sub/f{f:02d}.txt') for d in range(20) for f in range(10)]"`)
		after, err := os.ReadFile(log)
		if err != nil {
			t.Fatal(err)
		}
		p.run(t, "/", ckptfsBin, "umount", p.Dir)
		ours := regexp.MustCompile(`: LOOKUP n\d+ +"(d\d\d|sub|f\d\d\.txt)"`)
		lookups := len(ours.FindAllIndex(after[len(before):], -1))
		t.Logf("try %d: lstat of 200 files by path after the mount settled: %d LOOKUPs", try, lookups)
		if lookups == 0 {
			return
		}
		if try == 3 {
			t.Fatalf("after the warm-up, the user's lstats made %d LOOKUPs, %d times: the kernel's caches were not primed", lookups, try)
		}
	}
}

// Every entry the kernel keeps holds one of the daemon's fds: under a low
// open-file limit the warm-up reads no more than half of the mark at
// which the daemon has the kernel forget inodes (3/4 of the limit), and
// so never brings that on by itself.
func TestWarmUpStaysWithinTheFDBudget(t *testing.T) {
	const limit = 400 // mark 300: the warm-up reads up to 150 entries
	p := newUserProject(t)
	p.sh(t, `for d in $(seq -w 0 59); do mkdir d$d; for f in $(seq 0 9); do echo x > d$d/f$f; done; done`)
	p.mountLimited(t, limit)
	// It stops once it has read 150; the last directory comes whole
	// (the root's 60 entries, then 10 a directory).
	if entries := warmUpEntries(t, p); entries < 150 || entries > 150+60 {
		t.Errorf("the warm-up read %d entries of 660 under an open-file limit of %d; want 150 and at most one directory more", entries, limit)
	}
}

// warmUpEntries waits for the warm-up of p's mount to end and returns how
// many entries it read; it fails the test if the warm-up brought on the
// daemon's fd relief.
func warmUpEntries(t *testing.T, p *userProject) int {
	t.Helper()
	_, b := settledWarmLog(t, p, "warm-up: read")
	m := regexp.MustCompile(`warm-up: read (\d+) directories, (\d+) entries`).FindStringSubmatch(string(b))
	if m == nil {
		t.Fatalf("no warm-up line in the daemon's log:\n%s", b)
	}
	if strings.Contains(string(b), "near the open-file limit") {
		t.Errorf("the warm-up brought on the fd relief:\n%s", b)
	}
	entries, _ := strconv.Atoi(m[2])
	return entries
}

// settledWarmLog waits until the daemon of p's mount has logged want and
// its log stopped growing, and returns the log's path (in the daemon's
// working directory, the store) and its contents then.
func settledWarmLog(t *testing.T, p *userProject, want string) (string, []byte) {
	t.Helper()
	info, err := p.info()
	if err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(fmt.Sprintf("/proc/%d/cwd", info.PID), "daemon.log")
	var before []byte
	for deadline := time.Now().Add(60 * time.Second); ; {
		b, err := os.ReadFile(logPath)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) == len(before) && strings.Contains(string(b), want) {
			return logPath, b
		}
		if time.Now().After(deadline) {
			t.Fatalf("the daemon's log did not settle with %q in it:\n%s", want, b)
		}
		before = b
		time.Sleep(300 * time.Millisecond)
	}
}

// TestWarmUpStaysWithinTheFDBudgetInOneBigDirectory: the budget holds
// within a directory too: a tree whose files are all in one directory
// larger than the budget is not read whole (each entry READDIRPLUS
// returns costs the daemon an fd), nor brings on the fd relief.
func TestWarmUpStaysWithinTheFDBudgetInOneBigDirectory(t *testing.T) {
	const limit = 400 // mark 300: the warm-up reads about 150 entries
	p := newUserProject(t)
	p.sh(t, `mkdir big && cd big && for f in $(seq 0 999); do : > f$f; done`)
	p.mountLimited(t, limit)
	if entries := warmUpEntries(t, p); entries > 225 {
		t.Errorf("the warm-up read %d entries of 1001 under an open-file limit of %d; want about 150", entries, limit)
	}
}
