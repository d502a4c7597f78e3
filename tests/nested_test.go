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
	// It lists none of the store's files among its changes, and names
	// lib/ as left for the store it holds.
	changes, left, _ := strings.Cut(out, "left 1 directory in place")
	noStoreListed(t, "turnctl rewind 0", changes)
	if !strings.Contains(left, "\n  lib/ (not there at turn 0): holds lib/.ckptfs\n") {
		t.Errorf("turnctl rewind 0 does not name lib/ as left:\n%s", out)
	}
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

// rewindJSONLists returns a rewind's --json changes as "kind path"
// lines and its left directories as "path (then): unversioned..." lines.
func rewindJSONLists(t *testing.T, rep map[string]any) (changes, left []string) {
	t.Helper()
	for _, c := range rep["changes"].([]any) {
		c := c.(map[string]any)
		changes = append(changes, c["kind"].(string)+" "+c["path"].(string))
	}
	for _, l := range rep["left"].([]any) {
		l := l.(map[string]any)
		var unv []string
		for _, p := range l["unversioned"].([]any) {
			unv = append(unv, p.(string))
		}
		left = append(left, l["path"].(string)+" ("+l["then"].(string)+"): "+strings.Join(unv, " "))
	}
	return changes, left
}

// A rewind leaves the directories that hold --exclude paths, and says so:
// its dry run lists what it then does (not the directories it leaves),
// both name each directory left and why, and the same rewind again has
// nothing to do and adds no turn.
func TestRewindNamesTheDirectoriesItLeavesForExcludedPaths(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"a.txt": "a\n", "cfg": "c0\n"})
	m := mountProject(t, dir, "--exclude", "build/")
	m.turnctl(t, "begin", "--label", "make out")
	runIn(t, dir, "mkdir -p out/build && echo c > out/src.c && echo o > out/build/obj.o && "+
		"rm cfg && mkdir -p cfg/build && echo k > cfg/k.txt && echo y > cfg/build/y.o")
	m.turnctl(t, "end")

	wantChanges := []string{"deleted cfg/k.txt", "deleted out/src.c"}
	wantLeft := []string{"cfg (file): cfg/build", "out (absent): out/build"}
	dry := m.jsonOut(t, "turnctl-rewind", "rewind", "0", "--dry-run")
	changes, left := rewindJSONLists(t, dry)
	if !reflect.DeepEqual(changes, wantChanges) || !reflect.DeepEqual(left, wantLeft) {
		t.Errorf("rewind 0 --dry-run: changes %q, left %q; want %q, %q", changes, left, wantChanges, wantLeft)
	}
	out := m.turnctl(t, "rewind", "0", "--dry-run")
	for _, line := range []string{
		"would leave 2 directories in place: they hold unversioned paths",
		"  cfg/ (a file at turn 0): holds cfg/build\n",
		"  out/ (not there at turn 0): holds out/build\n",
	} {
		if !strings.Contains(out, line) {
			t.Errorf("rewind 0 --dry-run does not say %q:\n%s", line, out)
		}
	}

	rep := m.jsonOut(t, "turnctl-rewind", "rewind", "0")
	if rep["turn"] == nil {
		t.Fatalf("rewind 0 made no turn: %v", rep)
	}
	changes, left = rewindJSONLists(t, rep)
	if !reflect.DeepEqual(changes, wantChanges) || !reflect.DeepEqual(left, wantLeft) {
		t.Errorf("rewind 0: changes %q, left %q; want those of its dry run, %q, %q", changes, left, wantChanges, wantLeft)
	}
	checkFiles(t, dir, map[string]string{"a.txt": "a\n", "out/build/obj.o": "o\n", "cfg/build/y.o": "y\n"},
		[]string{"out/src.c", "cfg/k.txt"})
	log := m.turnctl(t, "log")

	// Again: nothing to do, no turn, and the same directories named.
	out = m.turnctl(t, "rewind", "0")
	for _, line := range []string{
		"rewind to turn 0: nothing to change\n",
		"left 2 directories in place: they hold unversioned paths",
		"  cfg/ (a file at turn 0): holds cfg/build\n",
		"  out/ (not there at turn 0): holds out/build\n",
	} {
		if !strings.Contains(out, line) {
			t.Errorf("rewind 0 again does not say %q:\n%s", line, out)
		}
	}
	again := m.jsonOut(t, "turnctl-rewind", "rewind", "0")
	if changes, left = rewindJSONLists(t, again); again["turn"] != nil || len(changes) > 0 || !reflect.DeepEqual(left, wantLeft) {
		t.Errorf("rewind 0 a third time: turn %v, changes %q, left %q; want no turn, no change, %q", again["turn"], changes, left, wantLeft)
	}
	if got := m.turnctl(t, "log"); got != log {
		t.Errorf("the rewinds again changed the log:\nbefore:\n%s\nafter:\n%s", log, got)
	}
	m.Unmount(t)
}

// A revert of the turn that made directories now holding --exclude paths
// leaves them as a rewind does: no conflict, its dry run lists what it
// then does, and both name the directories left.
func TestRevertLeavesTheDirectoriesOfExcludedPaths(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"a.txt": "a\n"})
	m := mountProject(t, dir, "--exclude", "build/")
	m.turnctl(t, "begin", "--label", "make out")
	runIn(t, dir, "mkdir out && echo c > out/src.c")
	m.turnctl(t, "end")
	m.turnctl(t, "begin", "--label", "build")
	runIn(t, dir, "mkdir out/build && echo o > out/build/obj.o")
	m.turnctl(t, "end")

	wantChanges := []string{"deleted out/src.c"}
	wantLeft := []string{"out (absent): out/build"}
	dry := m.jsonOut(t, "turnctl-rewind", "revert", "1", "--dry-run")
	changes, left := rewindJSONLists(t, dry)
	if !reflect.DeepEqual(changes, wantChanges) || !reflect.DeepEqual(left, wantLeft) {
		t.Errorf("revert 1 --dry-run: changes %q, left %q; want %q, %q", changes, left, wantChanges, wantLeft)
	}
	rep := m.jsonOut(t, "turnctl-rewind", "revert", "1")
	changes, left = rewindJSONLists(t, rep)
	if rep["turn"] == nil || !reflect.DeepEqual(changes, wantChanges) || !reflect.DeepEqual(left, wantLeft) {
		t.Errorf("revert 1: turn %v, changes %q, left %q; want those of its dry run", rep["turn"], changes, left)
	}
	checkFiles(t, dir, map[string]string{"a.txt": "a\n", "out/build/obj.o": "o\n"}, []string{"out/src.c"})
	m.Unmount(t)
}
