package tests

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"ckptfs/internal/rundir"
)

// mountAt mounts the view of turn on a new directory and unmounts it when
// the test ends, also on failure (before the project's own cleanup).
func mountAt(t *testing.T, m *Mount, turn string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "at"+turn)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := runCkptfs("mount", "--at", turn, m.Dir, dir)
	if err != nil {
		t.Fatalf("ckptfs mount --at %s: %v\n%s", turn, err, out)
	}
	if want := "mounted turn " + turn + " of " + m.Dir + " on " + dir + " (read-only)\n"; out != want {
		t.Errorf("ckptfs mount --at %s said %q, want %q", turn, out, want)
	}
	t.Cleanup(func() { unmountView(t, dir) })
	if !isView(dir) {
		t.Fatalf("ckptfs mount --at returned but %s is no view in /proc/mounts", dir)
	}
	return dir
}

func isView(dir string) bool {
	ms, _ := rundir.ViewTable()
	for _, m := range ms {
		if m.Dir == dir {
			return true
		}
	}
	return false
}

// unmountView leaves nothing mounted on dir.
func unmountView(t *testing.T, dir string) {
	if !isView(dir) {
		return
	}
	runCkptfs("umount", "--lazy", dir)
	if isView(dir) {
		unix.Unmount(dir, unix.MNT_DETACH)
		t.Errorf("ckptfs umount --lazy left the view %s mounted", dir)
	}
}

// runCkptfsCode runs ckptfs and returns its stderr, stdout and exit code.
func runCkptfsCode(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(ckptfsBin, args...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return stderr.String(), stdout.String(), ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return stderr.String(), stdout.String(), 0
}

// preadDirect reads a whole file with O_DIRECT: past the kernel's page
// cache, so the daemon answers every read.
func preadDirect(t *testing.T, path string) []byte {
	t.Helper()
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECT, 0)
	if err != nil {
		t.Fatalf("open O_DIRECT %s: %v", path, err)
	}
	defer unix.Close(fd)
	return preadAll(t, fd, path)
}

func preadAll(t *testing.T, fd int, path string) []byte {
	t.Helper()
	var out []byte
	buf := make([]byte, 1<<16)
	for off := int64(0); ; {
		n, err := unix.Pread(fd, buf, off)
		if err != nil {
			t.Fatalf("pread %s at %d: %v", path, off, err)
		}
		if n == 0 {
			return out
		}
		out = append(out, buf[:n]...)
		off += int64(n)
	}
}

// TestAt: a view of every turn of a history with adds, deletes, renames,
// modes, symlinks, hard links, a FIFO and a rewind is exactly the tree
// `turnctl checkout` writes (types, modes, owners, bytes, targets, which
// paths share an inode), while the project stays mounted and changes; it
// keeps showing the turn's bytes after the live files change, open or
// not; every write fails with EROFS; umount unmounts it, and bad turns
// are refused with one line and nothing mounted.
func TestAt(t *testing.T) {
	m, last := exportHistory(t, false)
	// A file kept through every turn, big enough for several reads, and
	// read live by the views until the project changes it.
	big := strings.Repeat("0123456789abcdef", 64<<10) // 1 MiB
	if err := os.WriteFile(filepath.Join(m.Dir, "big"), []byte(big), 0o640); err != nil {
		t.Fatal(err)
	}
	m.turnctl(t, "end") // the manual turn that wrote it
	last++
	before := tree(t, m.Dir)
	out := t.TempDir()
	views := map[int]string{}
	for n := 0; n <= last; n++ {
		s := strconv.Itoa(n)
		views[n] = mountAt(t, m, s)
		co := filepath.Join(out, "t"+s)
		m.turnctl(t, "checkout", s, co)
		want := tree(t, co)
		if len(want) < 5 {
			t.Fatalf("checkout of turn %d: %d paths", n, len(want))
		}
		sameTree(t, "the view of turn "+s+" against its checkout", want, tree(t, views[n]))
		assertRootLike(t, views[n], co)
		listsDots(t, views[n])
	}
	// status names a view for what it is, not an unmounted project.
	want := "ckptfs: status: " + views[0] + " is a read-only view of " + m.Dir + " at the end of turn 0 (ckptfs mount --at); ckptfs status " + m.Dir + " tells of the project\n"
	if out, err := runCkptfs("status", views[0]); exitCode(err) != 1 || out != want {
		t.Errorf("ckptfs status of a view: exit %d, %q; want exit 1 and %q", exitCode(err), out, want)
	}
	sameTree(t, "the project with views of every turn mounted", before, tree(t, m.Dir))
	// Inodes: the hard links of turn 2 (h1, h2, h3) are one inode with
	// three links, as in its checkout.
	var st1, st3 unix.Stat_t
	unix.Lstat(filepath.Join(views[2], "h1"), &st1)
	unix.Lstat(filepath.Join(views[2], "h3"), &st3)
	if st1.Ino != st3.Ino || st1.Nlink != 3 {
		t.Errorf("view of turn 2: h1 ino %d nlink %d, h3 ino %d (want one inode, 3 links)", st1.Ino, st1.Nlink, st3.Ino)
	}

	// The project changes under the views: in place, by truncation,
	// rename, delete and chmod, and a rewind. A view mounted before the
	// change and not read yet, and a file of the newest view open across
	// the change, still give the turn's bytes.
	k := strconv.Itoa(last) // the newest turn: its files are the live ones
	wantK := tree(t, filepath.Join(out, "t"+k))
	fresh := mountAt(t, m, k)
	f, err := os.Open(filepath.Join(views[last], "big"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if b := preadAll(t, int(f.Fd()), "big"); string(b) != big {
		t.Fatalf("big through the newest view before the change: %d bytes, not its own", len(b))
	}
	runIn(t, m.Dir, `
		printf 'X' | dd of=big bs=1 seek=100 conv=notrunc status=none
		printf 'new bytes\n' > d/b.txt
		mv h1 h1.moved; rm -f h2; chmod 600 run.sh; mv d d.moved
		printf 'tail\n' >> a.txt`)
	m.turnctl(t, "end")
	m.turnctl(t, "rewind", "0")
	if b := preadAll(t, int(f.Fd()), "big"); string(b) != big {
		t.Errorf("big through a file of the newest view open across the change: not its bytes at the turn")
	}
	if b := preadDirect(t, filepath.Join(views[last], "big")); string(b) != big {
		t.Errorf("big through the newest view (O_DIRECT) after the change: not its bytes at the turn")
	}
	sameTree(t, "a view of turn "+k+" mounted before the project changed, read after", wantK, tree(t, fresh))
	for _, p := range []string{"d/b.txt", "a.txt", "h1", "run.sh"} {
		b := preadDirect(t, filepath.Join(views[last], p))
		w, err := os.ReadFile(filepath.Join(out, "t"+k, p))
		if err != nil || string(b) != string(w) {
			t.Errorf("%s through the newest view after the change (O_DIRECT): %q, its checkout has %q (%v)", p, b, w, err)
		}
	}
	later := mountAt(t, m, k)
	sameTree(t, "a view of turn "+k+" mounted after the project changed", wantK, tree(t, later))

	// Every write is refused with EROFS, and changes nothing.
	v := views[1]
	for what, op := range map[string]func() error{
		"open for writing": func() error {
			f, err := os.OpenFile(filepath.Join(v, "a.txt"), os.O_WRONLY, 0)
			if err == nil {
				f.Close()
			}
			return err
		},
		"truncate": func() error { return os.Truncate(filepath.Join(v, "a.txt"), 0) },
		"create":   func() error { return os.WriteFile(filepath.Join(v, "new"), nil, 0o644) },
		"mkdir":    func() error { return os.Mkdir(filepath.Join(v, "nd"), 0o755) },
		"mknod":    func() error { return unix.Mkfifo(filepath.Join(v, "nf"), 0o644) },
		"symlink":  func() error { return os.Symlink("a.txt", filepath.Join(v, "ns")) },
		"link":     func() error { return os.Link(filepath.Join(v, "a.txt"), filepath.Join(v, "nl")) },
		"unlink":   func() error { return os.Remove(filepath.Join(v, "a.txt")) },
		"rmdir":    func() error { return unix.Rmdir(filepath.Join(v, "d")) },
		"rename":   func() error { return os.Rename(filepath.Join(v, "a.txt"), filepath.Join(v, "z")) },
		"chmod":    func() error { return os.Chmod(filepath.Join(v, "a.txt"), 0o777) },
		"chown":    func() error { return os.Lchown(filepath.Join(v, "a.txt"), 1, 1) },
		"utimes":   func() error { return unix.UtimesNano(filepath.Join(v, "a.txt"), make([]unix.Timespec, 2)) },
		"setxattr": func() error { return unix.Lsetxattr(filepath.Join(v, "a.txt"), "user.x", []byte("1"), 0) },
	} {
		if err := op(); !errors.Is(err, syscall.EROFS) {
			t.Errorf("%s in the view: %v, want EROFS", what, err)
		}
	}
	sameTree(t, "the view of turn 1 after the refused writes", tree(t, filepath.Join(out, "t1")), tree(t, v))

	// Bad input: one line, nothing mounted.
	m.turnctl(t, "begin", "--label", "open")
	spare := filepath.Join(out, "spare")
	os.Mkdir(spare, 0o755)
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"99", m.Dir, spare}, 2, "no turn 99"},
		{[]string{"x", m.Dir, spare}, 2, "is not a turn"},
		{[]string{"1.1", m.Dir, spare}, 2, `"1.1" is a step`}, // turn 1's one step: the whole turn, named as a step
		{[]string{strconv.Itoa(last + 3), m.Dir, spare}, 1, "still open"},
		{[]string{"1", m.Dir, filepath.Join(m.Dir, "dir")}, 2, "is inside the project"},
		{[]string{"1", m.Dir, filepath.Join(out, "none")}, 1, "no such file or directory"},
		{[]string{"1", m.Dir, v}, 1, "is a view already"},
		{[]string{"1", t.TempDir(), spare}, 1, "is not mounted and has no history store"},
	} {
		stderr, stdout, code := runCkptfsCode(t, append([]string{"mount", "--at"}, c.args...)...)
		if code != c.code || !strings.Contains(stderr, c.want) || strings.Count(stderr, "\n") != 1 || stdout != "" {
			t.Errorf("ckptfs mount --at %s: exit %d, %q %q (want exit %d and %q)", strings.Join(c.args, " "), code, stdout, stderr, c.code, c.want)
		}
		if isView(spare) {
			t.Fatalf("ckptfs mount --at %s mounted a view", strings.Join(c.args, " "))
		}
	}
	m.turnctl(t, "end")
	// A turn is kept while a view of it is mounted.
	if stderr, code := m.turnctlFail(t, "forget", "--before", "1"); code != 1 || !strings.Contains(stderr, "cannot forget turn 0: a view of it is mounted") {
		t.Errorf("forget of a viewed turn: exit %d, %q", code, stderr)
	}
	if out, err := runCkptfs("umount", views[0]); err != nil || isView(views[0]) {
		t.Fatalf("ckptfs umount %s: %v %s", views[0], err, out)
	}
	// The daemon lets the turn go once its server of the view has seen
	// the unmount, a moment after umount returns (longer on a loaded
	// machine).
	for i := 0; ; i++ {
		stderr, code := m.turnctlFail(t, "forget", "--before", "1", "--dry-run")
		if code == 0 {
			break
		}
		if i == 100 || !strings.Contains(stderr, "a view of it is mounted") {
			t.Fatalf("forget --dry-run after the view's umount: exit %d, %q", code, stderr)
		}
		time.Sleep(50 * time.Millisecond)
	}
	m.turnctl(t, "forget", "--before", "1")
	stderr, _, code := runCkptfsCode(t, "mount", "--at", "0", m.Dir, spare)
	if code == 0 || !strings.Contains(stderr, "forgotten") || strings.Count(stderr, "\n") != 1 || isView(spare) {
		t.Errorf("ckptfs mount --at a forgotten turn: exit %d, %q", code, stderr)
	}

	// umount: refused while in use, then done; the project's umount
	// takes the remaining views with it.
	cmd := exec.Command("sleep", "60")
	cmd.Dir = v
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	stderr, _, code = runCkptfsCode(t, "umount", v)
	if code != 1 || !strings.Contains(stderr, "in use by") || !isView(v) {
		t.Errorf("ckptfs umount of a view in use: exit %d, %q, mounted %v", code, stderr, isView(v))
	}
	cmd.Process.Kill()
	cmd.Wait()
	if _, stdout, code := runCkptfsCode(t, "umount", v); code != 0 || stdout != "unmounted the view "+v+"\n" || isView(v) {
		t.Errorf("ckptfs umount %s: exit %d, %q, still mounted %v", v, code, stdout, isView(v))
	}
	if names, err := os.ReadDir(v); err != nil || len(names) != 0 {
		t.Errorf("%s after umount: %v %v, want the empty directory", v, names, err)
	}
	m.Unmount(t)
	for _, d := range []string{views[last], fresh, later} {
		if isView(d) {
			t.Errorf("the view %s is still mounted after its project's umount", d)
		}
	}
}

// assertRootLike checks the view's root as checkout's: mode and owner.
func assertRootLike(t *testing.T, view, co string) {
	t.Helper()
	var a, b unix.Stat_t
	if err := unix.Lstat(view, &a); err != nil {
		t.Fatal(err)
	}
	if err := unix.Lstat(co, &b); err != nil {
		t.Fatal(err)
	}
	if a.Mode != b.Mode || a.Uid != b.Uid || a.Gid != b.Gid || a.Ino != 1 {
		t.Errorf("the view's root: mode %o %d:%d ino %d; its checkout's: mode %o %d:%d", a.Mode, a.Uid, a.Gid, a.Ino, b.Mode, b.Uid, b.Gid)
	}
}

// TestAtUser: an ordinary user's view, mounted through fusermount3 by the
// user's daemon: private to the user as the project is, the turn's bytes
// after the live file changed, EROFS on writes, and unmounted by the
// user's ckptfs umount.
func TestAtUser(t *testing.T) {
	needTurnctl(t)
	p := newUserProject(t)
	p.sh(t, `printf 'zero\n' > a.txt; printf 'keep\n' > k.txt`)
	p.mount(t)
	p.run(t, p.Dir, turnctlBin, "begin", "--label", "one")
	p.sh(t, `printf 'one\n' > a.txt; chmod 600 k.txt; ln -s a.txt l`)
	p.run(t, p.Dir, turnctlBin, "end")
	view := filepath.Join(p.Home, "view")
	p.run(t, p.Home, "mkdir", view)
	t.Cleanup(func() {
		if isView(view) {
			unix.Unmount(view, unix.MNT_DETACH)
			t.Errorf("the view %s was left mounted", view)
		}
	})
	if out := p.run(t, p.Home, ckptfsBin, "mount", "--at", "1", p.Dir, view); out != "mounted turn 1 of "+p.Dir+" on "+view+" (read-only)\n" {
		t.Errorf("mount --at said %q", out)
	}
	ms, _ := rundir.ViewTable()
	found := false
	for _, m := range ms {
		if m.Dir == view {
			found = true
			if m.UID != int(p.uid) || m.AllowOther {
				t.Errorf("the view: %+v, want uid %d and private", m, p.uid)
			}
		}
	}
	if !found {
		t.Fatalf("no view on %s", view)
	}
	p.sh(t, `printf 'two\n' > a.txt; printf 'changed\n' > k.txt`)
	got := p.run(t, view, "bash", "-c", `cat a.txt k.txt; stat -c '%A %U %n' a.txt k.txt; readlink l; echo x > a.txt 2>&1 || true; rm k.txt 2>&1 || true`)
	want := "one\nkeep\n-rw-r--r-- " + testUserName + " a.txt\n-rw------- " + testUserName + " k.txt\na.txt\n" +
		"bash: line 1: a.txt: Read-only file system\nrm: cannot remove 'k.txt': Read-only file system\n"
	if got != want {
		t.Errorf("through the user's view of turn 1:\n%s\nwant:\n%s", got, want)
	}
	if out := p.run(t, p.Home, ckptfsBin, "umount", view); out != "unmounted the view "+view+"\n" || isView(view) {
		t.Errorf("umount of the view as the user: %q, still mounted %v", out, isView(view))
	}
}

// TestAtConcurrent: a view read without pause (O_DIRECT, past the page
// cache) while the project changes each of its files in place, renames
// their directories and rewinds gives the turn's bytes at every read:
// the race between a read from a live file and the change that lands
// just after it is the one the view's check after each read closes.
// Then the project is unmounted under a view in use: the view is
// detached, and its daemon stops cleanly (no panic in its log).
func TestAtConcurrent(t *testing.T) {
	proj := t.TempDir()
	const nfiles = 24
	want := map[string]string{}
	for i := 0; i < nfiles; i++ {
		p := filepath.Join("d"+strconv.Itoa(i%4), "f"+strconv.Itoa(i))
		want[p] = strings.Repeat(strconv.Itoa(i)+"-turn-one ", 6000+i*100)
	}
	m := mountProject(t, proj)
	m.turnctl(t, "begin", "--label", "one")
	writeTree(t, proj, want)
	m.turnctl(t, "end")
	view := mountAt(t, m, "1")

	errc := make(chan error, 1)
	go func() {
		defer close(errc)
		script := func(s string) error {
			cmd := exec.Command("bash", "-euo", "pipefail", "-c", s)
			cmd.Dir = proj
			if out, err := cmd.CombinedOutput(); err != nil {
				return fmt.Errorf("%s: %v\n%s", s, err, out)
			}
			return nil
		}
		tc := func(args ...string) error {
			out, err := m.turnctlCmd(args...).CombinedOutput()
			if err != nil {
				return fmt.Errorf("turnctl %v: %v\n%s", args, err, out)
			}
			return nil
		}
		for i := 0; i < nfiles; i++ {
			p := filepath.Join("d"+strconv.Itoa(i%4), "f"+strconv.Itoa(i))
			steps := []func() error{
				func() error { return tc("begin", "--label", "change "+p) },
				func() error {
					return script(fmt.Sprintf(`printf 'CHANGED%%.0s' $(seq 200) | dd of=%s bs=4096 conv=notrunc status=none`, p))
				},
				func() error { return tc("end") },
			}
			if i%6 == 5 {
				d := "d" + strconv.Itoa(i%4)
				steps = append(steps, func() error { return script("mv " + d + " " + d + ".x && mv " + d + ".x " + d) })
			}
			if i == nfiles/2 {
				steps = append(steps, func() error { return tc("rewind", "0") }, func() error { return tc("rewind", "1") })
			}
			for _, s := range steps {
				if err := s(); err != nil {
					errc <- err
					return
				}
			}
		}
	}()
	reads := 0
	for running := true; running; {
		select {
		case err, ok := <-errc:
			if ok && err != nil {
				t.Fatal(err)
			}
			running = false
		default:
		}
		for p, w := range want {
			if b := preadDirect(t, filepath.Join(view, p)); string(b) != w {
				t.Fatalf("read %d: %s through the view of turn 1: %d bytes, not the turn's (%.40q...)", reads, p, len(b), b)
			}
			reads++
		}
	}
	t.Logf("%d reads while the project changed", reads)
	if reads < 2*nfiles {
		t.Errorf("only %d reads while the project changed", reads)
	}

	// The project goes while a file of the view is open: the view is
	// detached with it.
	f, err := os.Open(filepath.Join(view, "d0", "f0"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m.Unmount(t)
	if isView(view) {
		t.Errorf("the view %s is still mounted after its project's umount", view)
	}
}

// TestAtOffline: a view of a project that is not mounted, served by a
// daemon of its own that holds the store: the same tree as checkout; the
// project cannot be mounted meanwhile (the error names the view); a live
// file changed on disk under it is EIO, never other bytes; bad turns are
// refused with nothing left running; after its umount the project mounts
// at once.
func TestAtOffline(t *testing.T) {
	m, _ := exportHistory(t, false)
	co := filepath.Join(t.TempDir(), "t1")
	m.turnctl(t, "checkout", "1", co)
	m.Unmount(t)

	view := filepath.Join(t.TempDir(), "view")
	os.Mkdir(view, 0o755)
	t.Cleanup(func() { unmountView(t, view) })
	// A step, even the one of a turn that has only it, is refused by
	// its form, nothing mounted.
	stderr, stdout, code := runCkptfsCode(t, "mount", "--at", "1.1", m.Dir, view)
	if code != 2 || !strings.Contains(stderr, `"1.1" is a step: a view shows a whole turn`) || isView(view) {
		t.Errorf("mount --at 1.1 of an unmounted project: exit %d, %q %q", code, stdout, stderr)
	}
	stderr, stdout, code = runCkptfsCode(t, "mount", "--at", "1", m.Dir, view)
	if code != 0 || !strings.HasPrefix(stdout, "mounted turn 1 of "+m.Dir+" on "+view+" (read-only; ") || !isView(view) {
		t.Fatalf("mount --at of an unmounted project: exit %d, %q %q", code, stdout, stderr)
	}
	sameTree(t, "the view of turn 1 of an unmounted project against its checkout", tree(t, co), tree(t, view))

	stderr, _, code = runCkptfsCode(t, "mount", m.Dir)
	if code != 1 || !strings.Contains(stderr, "is in use by the view of "+m.Dir+" on "+view) || rundir.IsMounted(m.Dir) {
		t.Errorf("mount of the project while its view holds the store: exit %d, %q", code, stderr)
	}
	if out, err := runTurnctl(t, m.Dir, "log"); err == nil || !strings.Contains(out, "is in use by the view of "+m.Dir+" on "+view) {
		t.Errorf("turnctl log while the view holds the store: %v, %q", err, out)
	}

	// run.sh is read from the live file (unchanged since turn 1); changed
	// on disk, with nothing to record it, it cannot be read any more.
	if err := os.WriteFile(filepath.Join(m.Dir, "run.sh"), []byte("#!/bin/sh\necho ho\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(filepath.Join(view, "run.sh"), unix.O_RDONLY|unix.O_DIRECT, 0)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	n, err := unix.Pread(fd, buf, 0)
	unix.Close(fd)
	if !errors.Is(err, syscall.EIO) {
		t.Errorf("run.sh through the view after it changed on disk: %q, %v; want EIO", buf[:max(n, 0)], err)
	}

	if _, stdout, code := runCkptfsCode(t, "umount", view); code != 0 || stdout != "unmounted the view "+view+"\n" || isView(view) {
		t.Fatalf("umount of the view: exit %d, %q", code, stdout)
	}
	spare := filepath.Join(t.TempDir(), "spare")
	os.Mkdir(spare, 0o755)
	for _, c := range []struct {
		turn string
		code int
		want string
	}{{"99", 2, "no turn 99"}, {"x", 2, "is not a turn"}} {
		stderr, _, code := runCkptfsCode(t, "mount", "--at", c.turn, m.Dir, spare)
		if code != c.code || !strings.Contains(stderr, c.want) || strings.Count(stderr, "\n") != 1 || isView(spare) {
			t.Errorf("mount --at %s of an unmounted project: exit %d, %q (want exit %d and %q)", c.turn, code, stderr, c.code, c.want)
		}
	}
	// Detached while in use, the view's daemon stops all the same and
	// lets the store go.
	if _, stdout, code := runCkptfsCode(t, "mount", "--at", "2", m.Dir, view); code != 0 || !isView(view) {
		t.Fatalf("mount --at 2 of an unmounted project: exit %d, %q", code, stdout)
	}
	sleeper := exec.Command("sleep", "60")
	sleeper.Dir = view
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { sleeper.Process.Kill(); sleeper.Wait() }()
	if stderr, _, code := runCkptfsCode(t, "umount", "--lazy", view); code != 0 || !strings.Contains(stderr, "detached it lazily") || isView(view) {
		t.Errorf("umount --lazy of a view in use: exit %d, %q", code, stderr)
	}
	// Nothing holds the store now: the project mounts.
	m = mountProject(t, m.Dir)
	if out := m.turnctl(t, "log"); !strings.Contains(out, "changed while unmounted") {
		t.Errorf("the change made while unmounted is not in the log:\n%s", out)
	}
}

// listsDots checks that dir's listing (ls -a, which lists what the
// filesystem gives) starts with "." and "..", as a local directory's does.
func listsDots(t *testing.T, dir string) {
	t.Helper()
	out, err := exec.Command("ls", "-a", "-f", dir).Output()
	names := strings.Split(strings.TrimSpace(string(out)), "\n")
	if err != nil || len(names) < 2 || !slices.Contains(names, ".") || !slices.Contains(names, "..") {
		t.Errorf("ls -a %s: %q (%v), want . and .. among them", dir, names, err)
	}
}
