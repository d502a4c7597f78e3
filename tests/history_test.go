package tests

import (
	"io"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"ckptfs/internal/backing"
	"ckptfs/versionstore"
)

// openStore opens the store of an unmounted project with its live tree.
func openStore(t *testing.T, m *Mount) (*versionstore.Store, *backing.Tree) {
	t.Helper()
	s, err := versionstore.Open(m.Store, versionstore.Options{})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	tree, err := backing.Open(m.Dir)
	if err != nil {
		s.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(); tree.Close() })
	return s, tree
}

// TestHistoryRewindDifferential: two mount sessions (each one manual turn)
// of real programs; rewinding the store to each turn must reproduce the
// tree as it was then, byte for byte — which holds only if the overlay
// captured every prior state before it changed.
func TestHistoryRewindDifferential(t *testing.T) {
	tarSrc := t.TempDir()
	writeTree(t, tarSrc, map[string]string{"t/1.txt": "one", "t/2/3.txt": "three"})
	tarball := filepath.Join(t.TempDir(), "x.tar")
	runIn(t, tarSrc, "tar -cf "+tarball+" t")
	script := strings.Replace(programScript, "mkfifo fifo\n", "", 1) // FIFOs are not versioned
	parts := strings.SplitN(script, "git init", 2)
	partA := "export TARBALL=" + tarball + "\n" + parts[0]
	partB := "git init" + parts[1] + `
rm -rf extract src/pkg3-copy
mv docs docs2 && mkdir docs && echo fresh > docs/new.txt
chmod 0600 README.md
`
	skip := []string{".ckptfs"}
	dir := t.TempDir()
	seedTree(t, dir)
	s0 := snapshot(t, dir, skip, nil)

	m := mountProject(t, dir)
	runIn(t, dir, partA)
	m.Unmount(t)
	s1 := snapshot(t, dir, skip, nil)

	mountProject(t, dir)
	runIn(t, dir, partB)
	m.Unmount(t)
	s2 := snapshot(t, dir, skip, nil)

	store, tree := openStore(t, m)
	turns, err := store.Turns(0)
	if err != nil {
		t.Fatal(err)
	}
	if len(turns) < 2 {
		t.Fatalf("want 2 turns, got %+v", turns)
	}
	for _, tn := range turns {
		if tn.Open {
			t.Errorf("turn %d still open after unmount", tn.Num)
		}
	}
	t1, err := store.Turn(1)
	if err != nil || !containsStr(t1.Programs, "sed") || !containsStr(t1.Programs, "python3") {
		t.Errorf("turn 1 programs: %v %v", t1.Programs, err)
	}
	// The bytes of README.md before anything happened.
	rc, st, err := store.OpenAt(0, "README.md", tree)
	if err != nil {
		t.Fatalf("OpenAt(0, README.md): %v", err)
	}
	b, _ := io.ReadAll(rc)
	rc.Close()
	if string(b) != "# project\nhello world\nfoo bar\n" || st.Mode != 0o644 {
		t.Errorf("README.md at turn 0: %q mode %o", b, st.Mode)
	}

	for _, c := range []struct {
		turn uint64
		want map[string]entry
	}{{1, s1}, {0, s0}, {2, s2}, {1, s1}} {
		if _, err := store.Rewind(c.turn, tree, versionstore.RewindOptions{}); err != nil {
			t.Fatalf("rewind %d: %v", c.turn, err)
		}
		t.Logf("rewind to %d", c.turn)
		diffTrees(t, c.want, snapshot(t, dir, skip, nil))
		if t.Failed() {
			t.FailNow()
		}
	}
}

func containsStr(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// A kill -9 of the daemon loses no history of operations that returned:
// after remounting (which detaches the dead mount) the store still holds
// every prior state.
func TestKill9KeepsHistory(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"a": "orig-a", "d/b": "orig-b", "c": "orig-c"})
	s0 := snapshot(t, dir, []string{".ckptfs"}, nil)
	m := mountProject(t, dir)
	runIn(t, dir, "echo new >> a && rm d/b && mv c c2 && mkdir e && echo x > e/f && chmod 600 a")
	pid := m.PID(t)
	syscall.Kill(pid, syscall.SIGKILL)
	for i := 0; i < 200 && alive(pid); i++ {
		time.Sleep(10 * time.Millisecond)
	}
	if out, err := runCkptfs("mount", dir); err != nil {
		t.Fatalf("remount after kill -9: %v\n%s", err, out)
	}
	m.Unmount(t)
	store, tree := openStore(t, m)
	if _, err := store.Rewind(0, tree, versionstore.RewindOptions{}); err != nil {
		t.Fatalf("rewind: %v", err)
	}
	diffTrees(t, s0, snapshot(t, dir, []string{".ckptfs"}, nil))
}

// Excluded paths pass through unversioned: a rewind leaves them alone.
func TestExcludeIsUnversioned(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"src/a": "a", "build/old.o": "old", "x.log": "l"})
	m := mountProject(t, dir, "--exclude", "build/", "--exclude", "*.log", "--exclude", "gen/")
	// (gen/ is made through the mount: a directory pattern matches it too.)
	runIn(t, dir, "echo 2 > src/a && echo new > build/new.o && rm build/old.o && echo more >> x.log && echo y > y.log && mkdir gen && echo g > gen/g")
	m.Unmount(t)
	store, tree := openStore(t, m)
	changes, err := store.Changes(0, versionstore.Now, tree)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, c := range changes {
		paths = append(paths, c.Path)
	}
	if strings.Join(paths, ",") != "src/a" {
		t.Errorf("changes since turn 0: %v, want only src/a", paths)
	}
}

// The exclude patterns of a mount are kept in the store: a remount
// without --exclude leaves the same paths unversioned, and --exclude=
// versions everything again.
func TestExcludesAreRemembered(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"src/a": "a"})
	changed := func(m *Mount) string {
		t.Helper()
		m.Unmount(t)
		store, err := versionstore.Open(m.Store, versionstore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer store.Close()
		tree, err := backing.Open(m.Dir)
		if err != nil {
			t.Fatal(err)
		}
		defer tree.Close()
		changes, err := store.Changes(0, versionstore.Now, tree)
		if err != nil {
			t.Fatal(err)
		}
		var paths []string
		for _, c := range changes {
			paths = append(paths, c.Path)
		}
		return strings.Join(paths, ",")
	}
	m := mountProject(t, dir, "--exclude", "build/")
	runIn(t, dir, "mkdir build && echo 1 > build/x.o && echo 2 > src/a")
	if got := changed(m); got != "src/a" {
		t.Fatalf("with --exclude build/: changes %q, want src/a", got)
	}
	m = mountProject(t, dir) // no flags: the store's patterns
	runIn(t, dir, "echo 3 > build/y.o && echo 3 > src/a")
	if got := changed(m); got != "src/a" {
		t.Errorf("remounted without --exclude: changes %q, want src/a alone (build/ still excluded)", got)
	}
	m = mountProject(t, dir, "--exclude=")
	runIn(t, dir, "echo 4 > build/z.o")
	if got := changed(m); !strings.Contains(got, "build/z.o") {
		t.Errorf("remounted with --exclude=: changes %q, want build/z.o among them", got)
	}
}
