package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The daemon holds an fd per inode the kernel remembers; past its mark
// (3/4 of the open-file limit, lowered here by CKPTFS_NODE_MARK) it has the
// kernel forget unused inodes, so a tree larger than the limit works.
//
// What the kernel forgets on its own (memory pressure, another test's
// drop_caches: both machine-wide) must not decide the outcome. So the test
// holds more inodes than the mark, which the kernel cannot forget, before it
// expects the daemon to ask; and it waits for the fds to follow rather than
// reading them at one moment. To keep it so, the kernel is made to forget
// on its own throughout (a drop every 50 ms: without the pins, the daemon
// would then never see its mark passed, as once on a fresh machine).
func TestManyNodesStayUnderTheFDLimit(t *testing.T) {
	const mark, held, n = 500, 600, 3000
	t.Setenv("CKPTFS_NODE_MARK", fmt.Sprint(mark))
	dir := t.TempDir()
	m := mountProject(t, dir)
	stop := make(chan struct{})
	dropped := make(chan struct{})
	go func() {
		defer close(dropped)
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
				dropCaches()
			}
		}
	}()
	defer func() { close(stop); <-dropped }()
	pid := m.PID(t)
	name := func(i int) string { return filepath.Join(dir, fmt.Sprintf("f%04d", i)) }
	create := func(i int) {
		t.Helper()
		if err := os.WriteFile(name(i), []byte(fmt.Sprint(i)), 0o644); err != nil {
			t.Fatalf("file %d: %v", i, err)
		}
	}

	// An O_PATH fd holds the kernel's inode (and so the daemon's node)
	// without opening the file through the daemon.
	var pins []int
	defer func() {
		for _, fd := range pins {
			unix.Close(fd)
		}
	}()
	for i := 0; i < held; i++ {
		create(i)
		fd, err := unix.Open(name(i), unix.O_PATH, 0)
		if err != nil {
			t.Fatalf("pin %d: %v", i, err)
		}
		pins = append(pins, fd)
	}
	// The log is <store>/daemon.log, hidden by the mount: read it through
	// the daemon's stderr.
	daemonLog := func() string {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/fd/2", pid))
		return string(b)
	}
	asked := func() bool { return strings.Contains(daemonLog(), "asked the kernel to forget unused inodes") }
	waitUntil(t, 10*time.Second, asked, func() string {
		return fmt.Sprintf("%d live nodes held, mark %d: the daemon log does not say it asked the kernel to forget:\n%s", held, mark, daemonLog())
	})
	for _, fd := range pins {
		unix.Close(fd)
	}
	pins = nil

	// A tree six times the mark: the daemon's fds follow the kernel's
	// forgetting. Each new file is a new node, which lets the daemon ask
	// again (at most once a second) while its nodes are over the mark.
	for i := held; i < n; i++ {
		create(i)
	}
	next := n
	fds := func() int { return countFDs(t, pid) }
	waitUntil(t, 10*time.Second, func() bool {
		if fds() <= 2*mark {
			return true
		}
		create(next)
		next++
		return false
	}, func() string {
		return fmt.Sprintf("daemon holds %d fds after %d files with its mark at %d: the kernel was not asked to forget", fds(), next, mark)
	})
	for i := 0; i < next; i += 97 {
		if b, err := os.ReadFile(name(i)); err != nil || string(b) != fmt.Sprint(i) {
			t.Fatalf("f%04d: %q %v", i, b, err)
		}
	}
	m.Unmount(t)
}

// waitUntil polls cond every 100 ms until it holds, and fails the test with
// why() when it does not hold within d.
func waitUntil(t *testing.T, d time.Duration, cond func() bool, why func() string) {
	t.Helper()
	for deadline := time.Now().Add(d); !cond(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal(why())
		}
	}
}

// A private mount's daemon can neither raise its hard open-file limit nor
// drop the kernel's caches (root only): it has the kernel forget its own
// unused inodes (FUSE_NOTIFY_PRUNE; entry invalidation where the kernel
// lacks it, forced here by CKPTFS_FD_RELIEF=entry). With its limit at 1024
// a turn creates three times as many files: every create must succeed,
// every file hold its bytes, the daemon's fds stay below the limit and come
// back under its mark of nodes (plus the fds it held before), and rewinds
// across the turn are exact.
func TestPrivateMountManyFilesStayUnderTheFDLimit(t *testing.T) {
	needTurnctl(t)
	for _, mode := range []string{"default", "entry"} {
		t.Run(mode, func(t *testing.T) {
			const limit, mark, n = 1024, 768, 3000
			p := newUserProject(t)
			p.sh(t, `mkdir keep && for i in $(seq 20); do echo "keep $i" > keep/k$i; done`)
			var env []string
			if mode != "default" {
				env = append(env, "CKPTFS_FD_RELIEF="+mode)
			}
			p.mountLimited(t, limit, env...)
			info, err := p.info()
			if err != nil {
				t.Fatal(err)
			}
			fds := func() int { return countFDs(t, info.PID) }
			base := fds() // the store's, the socket's, /dev/fuse...
			states := []string{p.listing(t)}

			// The daemon's fds, sampled while the turn runs.
			stop, sampled := make(chan struct{}), make(chan int)
			go func() {
				most := 0
				for {
					most = max(most, fds())
					select {
					case <-stop:
						sampled <- most
						return
					case <-time.After(20 * time.Millisecond):
					}
				}
			}()
			p.run(t, p.Dir, turnctlBin, "begin", "--label", "many")
			_, err = p.try(p.Dir, "bash", "-euo", "pipefail", "-c", fmt.Sprintf(`
				mkdir d0 d1 d2 d3
				for i in $(seq %d); do printf 'file %%d\n' $i > d$((i%%4))/f$i; done
				for i in $(seq 2 2 20); do echo changed >> keep/k$i; done
				rm keep/k3`, n))
			close(stop)
			most := <-sampled
			if err != nil {
				t.Fatalf("creating %d files with the daemon's open-file limit at %d: %v (its fds peaked at %d)", n, limit, err, most)
			}
			p.run(t, p.Dir, turnctlBin, "end")
			if most >= limit {
				t.Errorf("the daemon's fds reached %d, its limit %d", most, limit)
			}
			// Every file, read back through the mount (a new lookup of
			// each file the kernel forgot).
			bad := p.sh(t, fmt.Sprintf(`for i in $(seq %d); do
				read -r l < d$((i%%4))/f$i; [ "$l" = "file $i" ] || echo "f$i: $l"; done`, n))
			if bad != "" {
				t.Fatalf("files read back wrong:\n%.2000s", bad)
			}
			waitUntil(t, 10*time.Second, func() bool { return fds() <= base+mark }, func() string {
				return fmt.Sprintf("the daemon holds %d fds after %d files, %d of them before any, with its mark at %d nodes", fds(), n, base, mark)
			})
			states = append(states, p.listing(t))
			for _, to := range []int{0, 1, 0} {
				p.run(t, p.Dir, turnctlBin, "rewind", fmt.Sprint(to))
				if got := p.listing(t); got != states[to] {
					t.Fatalf("after rewind %d: the tree differs (%d lines, want %d)", to, strings.Count(got, "\n"), strings.Count(states[to], "\n"))
				}
			}
			if most := fds(); most >= limit {
				t.Errorf("the daemon holds %d fds after the rewinds, its limit %d", most, limit)
			}
		})
	}
}
