package tests

import (
	"bytes"
	"fmt"
	"io"
	mrand "math/rand"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"ckptfs/internal/rundir"
)

// tree is a snapshot of a whole project through the mount, for comparing
// states byte for byte (.git/index holds inode numbers and timestamps that
// a rewind legitimately renews, so its bytes are compared too: a rewind
// restores them exactly).
func tree(t *testing.T, dir string) map[string]entry {
	t.Helper()
	return snapshot(t, dir, []string{".ckptfs"}, nil)
}

// sameTree fails the test (naming what) when two snapshots differ.
func sameTree(t *testing.T, what string, want, got map[string]entry) {
	t.Helper()
	diffTrees(t, want, got)
	if t.Failed() {
		t.Fatalf("%s: the tree differs (above)", what)
	}
}

func needTurnctl(t *testing.T) {
	t.Helper()
	if turnctlBin == "" {
		t.Fatal("cmd/turnctl does not build")
	}
}

// turnctlCmd returns a turnctl command aimed at the mount.
func (m *Mount) turnctlCmd(args ...string) *exec.Cmd {
	cmd := exec.Command(turnctlBin, append([]string{"-C", m.Dir}, args...)...)
	cmd.Env = append(os.Environ(), "CKPTFS_RUNTIME_DIR="+m.Runtime)
	return cmd
}

// turnctl runs turnctl and fails the test if it fails.
func (m *Mount) turnctl(t *testing.T, args ...string) string {
	t.Helper()
	needTurnctl(t)
	out, err := m.turnctlCmd(args...).CombinedOutput()
	if err != nil {
		t.Fatalf("turnctl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// turnctlFail runs turnctl expecting failure; it returns stderr and the
// exit code.
func (m *Mount) turnctlFail(t *testing.T, args ...string) (string, int) {
	t.Helper()
	needTurnctl(t)
	cmd := m.turnctlCmd(args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return stderr.String(), code
}

// kill SIGKILLs the daemon and detaches the dead mount, as a crash would
// leave it (the next mountProject must cope with what is left).
func (m *Mount) kill(t *testing.T) {
	t.Helper()
	pid := m.PID(t)
	syscall.Kill(pid, syscall.SIGKILL)
	for i := 0; i < 200 && alive(pid); i++ {
		time.Sleep(10 * time.Millisecond)
	}
}

// TestTurnsRewindToEveryTurn runs turns of real tools through the mount,
// records the whole tree at every boundary, then rewinds to every turn in
// random order and compares byte for byte; then back to the newest state;
// then restores single paths.
func TestTurnsRewindToEveryTurn(t *testing.T) {
	proj := t.TempDir()
	// A project with a git repo that has two branches, made before mounting.
	runIn(t, proj, `
		mkdir -p src/pkg docs build/obj old
		printf 'package main\n\nfunc foo() int { return 1 }\n' > src/main.go
		printf 'hello\nworld\n' > docs/readme.txt
		for i in 1 2 3 4 5; do echo obj$i > build/obj/o$i; done
		echo keep > old/a.txt
		head -c 20000 /dev/urandom > blob.bin
		git init -q -b main .
		git add -A && git commit -qm init
		git checkout -q -b feature
		echo feature > feature.txt && git rm -q docs/readme.txt && git add -A && git commit -qm feature
		git checkout -q main`)
	m := mountProject(t, proj)
	states := []map[string]entry{tree(t, proj)} // turn 0
	turnWork := []string{
		`sed -i 's/return 1/return 42/' src/main.go; echo new > src/pkg/new.go`,
		`rm -rf build; mv old renamed`,
		`chmod +x src/main.go; ln -s src/main.go link.go; ln -s missing dangling`,
		`git checkout -q feature`,
		`head -c 30000 /dev/urandom > blob.bin; truncate -s 3 src/pkg/new.go; mkdir empty`,
	}
	for i, work := range turnWork {
		m.turnctl(t, "begin", "--label", fmt.Sprintf("turn %d", i+1))
		runIn(t, proj, work)
		m.turnctl(t, "end")
		states = append(states, tree(t, proj))
	}
	order := mrand.New(mrand.NewSource(1)).Perm(len(states))
	for _, n := range order {
		m.turnctl(t, "rewind", fmt.Sprint(n))
		sameTree(t, fmt.Sprintf("after rewind %d", n), states[n], tree(t, proj))
	}
	// Back to the newest state: the last agent turn.
	newest := len(turnWork)
	m.turnctl(t, "rewind", fmt.Sprint(newest))
	sameTree(t, "back to the newest turn", states[newest], tree(t, proj))
	// Restore single paths from turn 0.
	m.turnctl(t, "restore", "0", "--", "src/main.go", "build")
	got := tree(t, proj)
	for p, want := range states[0] {
		if p == "src/main.go" || strings.HasPrefix(p, "build") {
			if got[p] != want {
				t.Fatalf("restore: %s = %q, want %q", p, got[p], want)
			}
		}
	}
	if got["blob.bin"] != states[newest]["blob.bin"] {
		t.Fatal("restore changed a path it was not asked to")
	}
	// The backing directory holds the same after unmount.
	m.Unmount(t)
	sameTree(t, "the backing tree after unmount", got, tree(t, proj))
}

// TestRewindDoesNotFollowPlantedSymlink: a symlink to a directory outside
// the project, planted where a directory used to be, is replaced by the
// rewind, never followed.
func TestRewindDoesNotFollowPlantedSymlink(t *testing.T) {
	proj := t.TempDir()
	outside := t.TempDir()
	runIn(t, proj, `mkdir -p d/sub && echo inside > d/sub/f && echo top > d/g`)
	runIn(t, outside, `mkdir sub && echo outside > sub/f && echo outside > g`)
	before := tree(t, outside)
	m := mountProject(t, proj)
	m.turnctl(t, "begin")
	runIn(t, proj, `echo changed > d/sub/f`)
	m.turnctl(t, "end")
	m.turnctl(t, "begin")
	runIn(t, proj, fmt.Sprintf(`rm -rf d && ln -s %s d`, outside))
	m.turnctl(t, "end")
	m.turnctl(t, "rewind", "0")
	sameTree(t, "the directory outside the project", before, tree(t, outside))
	fi, err := os.Lstat(filepath.Join(proj, "d"))
	if err != nil || !fi.IsDir() {
		t.Fatalf("d is not a directory again: %v %v", fi, err)
	}
	if b, _ := os.ReadFile(filepath.Join(proj, "d/sub/f")); string(b) != "inside\n" {
		t.Fatalf("d/sub/f = %q", b)
	}
}

// TestSigkillMidTurn kills the daemon during a turn, remounts, and checks
// that every closed turn still rewinds exactly and the open turn's changes
// were kept.
func TestSigkillMidTurn(t *testing.T) {
	proj := t.TempDir()
	runIn(t, proj, `mkdir a && for i in $(seq 1 50); do echo $i > a/f$i; done`)
	m := mountProject(t, proj)
	t0 := tree(t, proj)
	m.turnctl(t, "begin")
	runIn(t, proj, `sed -i 's/$/ more/' a/f1 a/f2; rm a/f3`)
	m.turnctl(t, "end")
	t1 := tree(t, proj)
	m.turnctl(t, "begin")
	runIn(t, proj, `echo during > a/f4; mv a/f5 a/g5`)
	m.kill(t)
	m = mountProject(t, proj)
	if b, _ := os.ReadFile(filepath.Join(proj, "a/f4")); string(b) != "during\n" {
		t.Fatalf("a change of the open turn was lost by the kill: a/f4 = %q", b)
	}
	m.turnctl(t, "rewind", "1")
	sameTree(t, "rewind 1 after the kill", t1, tree(t, proj))
	m.turnctl(t, "rewind", "0")
	sameTree(t, "rewind 0 after the kill", t0, tree(t, proj))
}

// TestSigkillMidRewind kills the daemon while a large rewind runs. The
// next mount finishes a journaled rewind before it serves anything, so the
// tree is exactly the target — or, if the kill came before the rewind
// began, exactly what it was — never a mix. make test rewinds 300 files
// and kills twice; make test-long 2000 files, four times.
func TestSigkillMidRewind(t *testing.T) {
	files := scale(t, 300, 2000)
	delays := []time.Duration{300 * time.Millisecond, 700 * time.Millisecond, 1200 * time.Millisecond, 2 * time.Second}
	if !long(t) {
		delays = []time.Duration{100 * time.Millisecond, 250 * time.Millisecond}
	}
	proj := t.TempDir()
	runIn(t, proj, fmt.Sprintf(`mkdir d && for i in $(seq 1 %d); do echo v0 $i > d/f$i; done`, files))
	m := mountProject(t, proj)
	t0 := tree(t, proj)
	m.turnctl(t, "begin")
	runIn(t, proj, fmt.Sprintf(`for i in $(seq 1 %d); do echo v1 $i > d/f$i; done`, files))
	m.turnctl(t, "end")
	t1 := tree(t, proj)
	midway := 0
	for _, delay := range delays {
		cmd := m.turnctlCmd("rewind", "0")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(delay)
		m.kill(t)
		cmd.Wait()
		// Count the files already rewound in the dead daemon's backing tree.
		unix.Unmount(proj, unix.MNT_DETACH)
		rewound := 0
		for i := 1; i <= files; i++ {
			if b, _ := os.ReadFile(filepath.Join(proj, fmt.Sprintf("d/f%d", i))); strings.HasPrefix(string(b), "v0") {
				rewound++
			}
		}
		if rewound > 0 && rewound < files {
			midway++
		}
		m = mountProject(t, proj)
		got := tree(t, proj)
		switch {
		case equalTrees(got, t0):
			t.Logf("kill after %v: %d of %d files rewound when killed; rewind completed on remount", delay, rewound, files)
		case equalTrees(got, t1):
			t.Logf("kill after %v: the rewind had not begun", delay)
		default:
			sameTree(t, fmt.Sprintf("after a kill %v into the rewind and remount", delay), t0, got)
		}
		// Back to turn 1 for the next round, through the rewind's own history.
		m.turnctl(t, "rewind", "1")
		sameTree(t, "rewind 1", t1, tree(t, proj))
	}
	if midway == 0 {
		t.Log("no kill landed in the middle of the rewind this time")
	}
}

func equalTrees(a, b map[string]entry) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestBadInput: each is a clear error, and the daemon keeps serving.
func TestBadInput(t *testing.T) {
	proj := t.TempDir()
	runIn(t, proj, `echo x > f`)
	m := mountProject(t, proj)
	// A TURN that is not one, or names no turn there is, is a usage
	// error (exit 2); the rest are failures (exit 1).
	for _, c := range []struct {
		args []string
		code int
	}{
		{[]string{"rewind", "99"}, 2}, {[]string{"show", "ref:nope"}, 2}, {[]string{"cat", "0", "never-existed"}, 1},
		{[]string{"restore", "0", "--", "../../etc"}, 1}, {[]string{"rewind", "abc"}, 2},
	} {
		out, code := m.turnctlFail(t, c.args...)
		if code != c.code || strings.Count(strings.TrimSpace(out), "\n") != 0 || !strings.HasPrefix(out, "turnctl: ") {
			t.Errorf("turnctl %v: exit %d, stderr %q; want exit %d and one line", c.args, code, out, c.code)
		}
	}
	// Garbage on the socket.
	sock, err := rundir.Socket(m.Dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, junk := range []string{"GARBAGE\r\n\r\n\x00\xff", "POST /v1/begin HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n{{{{{",
		"POST /v1/nope HTTP/1.1\r\nHost: x\r\n\r\n", ""} {
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		c.Write([]byte(junk))
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		io.ReadAll(c)
		c.Close()
	}
	// Still serving.
	m.turnctl(t, "begin")
	runIn(t, proj, `echo y > f`)
	m.turnctl(t, "end")
	if b, _ := os.ReadFile(filepath.Join(proj, "f")); !bytes.Equal(b, []byte("y\n")) {
		t.Fatalf("f = %q", b)
	}
}

// hooks install into a project that is mounted works, and warns that the
// edit is history a rewind can take away; before mounting it does not.
func TestHooksInstallWarnsWhenMounted(t *testing.T) {
	needTurnctl(t)
	dir := t.TempDir()
	t.Setenv("HOME", t.TempDir())
	out, err := exec.Command(turnctlBin, "-C", dir, "hooks", "install", "claude-code").CombinedOutput()
	if err != nil || strings.Contains(string(out), "warning") {
		t.Fatalf("install before mounting: %v\n%s", err, out)
	}
	m := mountProject(t, dir)
	m.turnctl(t, "hooks", "uninstall", "claude-code")
	out = []byte(m.turnctl(t, "hooks", "install", "claude-code"))
	if !strings.Contains(string(out), "warning: "+filepath.Join(dir, ".claude/settings.json")+" lies in the mounted project") {
		t.Errorf("install while mounted does not warn:\n%s", out)
	}
}
