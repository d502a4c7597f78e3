package tests

import (
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// noStoreListed fails the test if a listing of the parent's history names
// a path in a .ckptfs directory: another project's store.
func noStoreListed(t *testing.T, what, out string) {
	t.Helper()
	if strings.Contains(out, ".ckptfs") {
		t.Errorf("%s lists another project's store:\n%s", what, out)
	}
}

// newestTurn returns the number of the newest turn in a `turnctl log`.
func newestTurn(t *testing.T, log string) int {
	t.Helper()
	n, err := strconv.Atoi(strings.Fields(log)[0])
	if err != nil {
		t.Fatalf("turnctl log: %v\n%s", err, log)
	}
	return n
}

// A project inside a project, each mounted on its own in turn: the
// child's store, made while the parent was not mounted, is no change of
// the parent's (neither at its next mount nor at any later one), no turn
// of the parent's lists it, and the parent's rewinds, mounted or offline,
// leave it byte for byte as it was.
func TestNestedStoreIsNotVersioned(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"a.txt": "a\n", "child/c.txt": "c\n"})
	child := filepath.Join(dir, "child")
	childStore := filepath.Join(child, ".ckptfs")

	// The parent has a history, and a manifest of its tree when unmounted.
	m := mountProject(t, dir)
	m.turnctl(t, "begin", "--label", "parent one")
	writeTree(t, dir, map[string]string{"a.txt": "a1\n"})
	m.turnctl(t, "end")
	m.Unmount(t)

	// The child becomes a project of its own, with a turn.
	c := mountProject(t, child)
	c.turnctl(t, "begin", "--label", "child one")
	writeTree(t, child, map[string]string{"c.txt": "c1\n"})
	c.turnctl(t, "end")
	childLog := c.turnctl(t, "log")
	c.Unmount(t)
	want := snapshot(t, childStore, nil, nil)
	if len(want) < 5 {
		t.Fatalf("the child's store holds %d paths", len(want))
	}

	m = mountProject(t, dir)
	log := m.turnctl(t, "log")
	noStoreListed(t, "turnctl log", log)
	newest := newestTurn(t, log)
	for n := 1; n <= newest; n++ {
		noStoreListed(t, "turnctl show "+strconv.Itoa(n), m.turnctl(t, "show", strconv.Itoa(n), "--all"))
	}
	// The child's c.txt changed while the parent was not mounted: the
	// parent's offline turn has it, and nothing of the child's store.
	if !strings.Contains(log, "changed while unmounted") {
		t.Errorf("no offline turn for child/c.txt:\n%s", log)
	}
	m.turnctl(t, "begin", "--label", "parent two")
	writeTree(t, dir, map[string]string{"a.txt": "a2\n", "child/c.txt": "c2\n", "child/new.txt": "n\n"})
	m.turnctl(t, "end")
	noStoreListed(t, "turnctl diff 1", m.turnctl(t, "diff", "1"))

	out := m.turnctl(t, "rewind", "0")
	noStoreListed(t, "turnctl rewind 0", out)
	checkFiles(t, dir, map[string]string{"a.txt": "a\n"}, []string{"child/new.txt"})
	diffTrees(t, want, snapshot(t, childStore, nil, nil))
	log = m.turnctl(t, "log")
	noStoreListed(t, "turnctl log after the rewind", log)
	noStoreListed(t, "turnctl show of the rewind", m.turnctl(t, "show", strconv.Itoa(newestTurn(t, log)), "--all"))
	m.Unmount(t)

	// The manifest of that unmount left the store out: the next mount
	// finds no change, and an offline rewind leaves it too.
	m = mountProject(t, dir)
	if got := m.turnctl(t, "log"); got != log {
		t.Errorf("a mount with nothing changed added to the log:\nbefore:\n%s\nafter:\n%s", log, got)
	}
	m.Unmount(t)
	out = m.turnctl(t, "rewind", strconv.Itoa(newest))
	noStoreListed(t, "offline turnctl rewind", out)
	diffTrees(t, want, snapshot(t, childStore, nil, nil))

	// The child's history is whole.
	if _, err := os.Stat(filepath.Join(childStore, "db")); err != nil {
		t.Fatal(err)
	}
	c = mountProject(t, child)
	if got := c.turnctl(t, "log"); !strings.Contains(got, "child one") || newestTurn(t, got) < newestTurn(t, childLog) {
		t.Errorf("the child's history after the parent's rewinds:\n%s\nwas:\n%s", got, childLog)
	}
	c.Unmount(t)
}

// inodes maps every path below root to its inode number.
func inodes(t *testing.T, root string) map[string]uint64 {
	t.Helper()
	out := map[string]uint64{}
	err := filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		out[p] = fi.Sys().(*syscall.Stat_t).Ino
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// The parent made lib/, which later became a project of its own: a
// rewind of the parent to before lib/ existed removes lib's files but
// leaves lib/.ckptfs as it is, the same files, without recording them;
// so that a later rewind across that one does not write the child's
// store back as it was then over what it has become since.
func TestNestedStoreSurvivesRewindOfItsDirectory(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"a.txt": "a\n"})
	lib := filepath.Join(dir, "lib")
	libStore := filepath.Join(lib, ".ckptfs")

	m := mountProject(t, dir)
	m.turnctl(t, "begin", "--label", "make lib")
	writeTree(t, dir, map[string]string{"lib/l.txt": "l\n"})
	m.turnctl(t, "end")
	m.Unmount(t)

	childTurn := func(label, content string) {
		t.Helper()
		c := mountProject(t, lib)
		c.turnctl(t, "begin", "--label", label)
		writeTree(t, lib, map[string]string{"l.txt": content})
		c.turnctl(t, "end")
		c.Unmount(t)
	}
	childTurn("child one", "l1\n")
	want, wantIno := snapshot(t, libStore, nil, nil), inodes(t, libStore)

	m = mountProject(t, dir)
	out := m.turnctl(t, "rewind", "0")
	noStoreListed(t, "turnctl rewind 0", out)
	checkFiles(t, dir, map[string]string{"a.txt": "a\n"}, []string{"lib/l.txt"})
	diffTrees(t, want, snapshot(t, libStore, nil, nil))
	if got := inodes(t, libStore); !reflect.DeepEqual(got, wantIno) {
		t.Errorf("the child's store was written again by the rewind (inodes differ)")
	}
	log := m.turnctl(t, "log")
	noStoreListed(t, "turnctl show of the rewind", m.turnctl(t, "show", strconv.Itoa(newestTurn(t, log)), "--all"))
	m.Unmount(t)

	// The child goes on; then the parent rewinds across its first rewind,
	// back to the end of "make lib".
	childTurn("child two", "l2\n")
	want = snapshot(t, libStore, nil, nil)
	m = mountProject(t, dir)
	out = m.turnctl(t, "rewind", "1")
	noStoreListed(t, "turnctl rewind 1", out)
	diffTrees(t, want, snapshot(t, libStore, nil, nil))
	m.Unmount(t)

	c := mountProject(t, lib)
	if got := c.turnctl(t, "log"); !strings.Contains(got, "child one") || !strings.Contains(got, "child two") {
		t.Errorf("the child's history after the parent's rewinds:\n%s", got)
	}
	c.Unmount(t)
}

// A rewind of the parent that a crash cuts short is finished by the next
// start's Recover; that must leave lib/.ckptfs as the rewind itself does,
// not record and remove it: Recover runs with the same unversioned paths
// as the rewind it finishes.
func TestNestedStoreSurvivesARecoveredRewind(t *testing.T) {
	needTurnctl(t)
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"a.txt": "a\n"})
	lib := filepath.Join(dir, "lib")
	libStore := filepath.Join(lib, ".ckptfs")

	m := mountProject(t, dir)
	m.turnctl(t, "begin", "--label", "make lib")
	writeTree(t, dir, map[string]string{"lib/l.txt": "l\n"})
	m.turnctl(t, "end")
	m.Unmount(t)

	c := mountProject(t, lib)
	c.turnctl(t, "begin", "--label", "child one")
	writeTree(t, lib, map[string]string{"l.txt": "l1\n"})
	c.turnctl(t, "end")
	c.Unmount(t)
	want, wantIno := snapshot(t, libStore, nil, nil), inodes(t, libStore)

	// An offline rewind to before lib/, killed once its journal is
	// written (nothing changed yet).
	cmd := m.turnctlCmd("rewind", "0")
	cmd.Env = append(cmd.Env, "CKPTFS_CRASH=rewind.journaled@1")
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Fatalf("turnctl rewind 0 was not killed:\n%s", out)
	}
	// The next offline command finishes it.
	m.turnctl(t, "log")
	checkFiles(t, dir, map[string]string{"a.txt": "a\n"}, []string{"lib/l.txt"})
	if _, err := os.Stat(libStore); err != nil {
		t.Fatalf("the child's store after the recovered rewind: %v", err)
	}
	diffTrees(t, want, snapshot(t, libStore, nil, nil))
	if got := inodes(t, libStore); !reflect.DeepEqual(got, wantIno) {
		t.Errorf("the child's store was written again by the recovered rewind (inodes differ)")
	}
	log := m.turnctl(t, "log")
	noStoreListed(t, "turnctl show of the recovered rewind", m.turnctl(t, "show", strconv.Itoa(newestTurn(t, log)), "--all"))

	// The child goes on; then the parent rewinds across the recovered
	// rewind: the child's store must be what the child made it.
	c = mountProject(t, lib)
	c.turnctl(t, "begin", "--label", "child two")
	writeTree(t, lib, map[string]string{"l.txt": "l2\n"})
	c.turnctl(t, "end")
	c.Unmount(t)
	want = snapshot(t, libStore, nil, nil)
	m.turnctl(t, "rewind", "1")
	diffTrees(t, want, snapshot(t, libStore, nil, nil))
	c = mountProject(t, lib)
	if got := c.turnctl(t, "log"); !strings.Contains(got, "child one") || !strings.Contains(got, "child two") {
		t.Errorf("the child's history after the parent's rewinds:\n%s", got)
	}
	c.Unmount(t)
}

// The daemon that mounted DIR --exclude build/ is killed (no manifest of
// an unmount); an offline rewind that removes out/ must still leave
// out/build as the daemon's rewind would: the offline commands pass by
// the patterns the store keeps, not only the built-in one.
func TestOfflineRewindAfterAKillLeavesExcludedPaths(t *testing.T) {
	needTurnctl(t)
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"a.txt": "a\n"})
	m := mountProject(t, dir, "--exclude", "build/")
	m.turnctl(t, "begin", "--label", "make out")
	writeTree(t, dir, map[string]string{"out/src.c": "c\n", "out/build/obj.o": "o\n"})
	m.turnctl(t, "end")
	pid := m.PID(t)
	syscall.Kill(pid, syscall.SIGKILL)
	for i := 0; i < 200 && alive(pid); i++ {
		time.Sleep(10 * time.Millisecond)
	}
	if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
		t.Fatal(err)
	}
	obj := filepath.Join(dir, "out/build/obj.o")
	ino := inodes(t, obj)
	m.turnctl(t, "rewind", "0")
	checkFiles(t, dir, map[string]string{"a.txt": "a\n", "out/build/obj.o": "o\n"}, []string{"out/src.c"})
	if got := inodes(t, obj); !reflect.DeepEqual(got, ino) {
		t.Errorf("out/build/obj.o was removed and written again by the offline rewind")
	}
	log := m.turnctl(t, "log")
	if show := m.turnctl(t, "show", strconv.Itoa(newestTurn(t, log)), "--all"); strings.Contains(show, "build") {
		t.Errorf("the offline rewind recorded an excluded path:\n%s", show)
	}
}
