package tests

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// Changes made while the project is not mounted are found at the next
// mount and recorded as a turn of their own, before anything is served.
// What was never captured (the earlier bytes of a file changed or deleted
// while unmounted) is named as such: cat refuses, a rewind leaves the path
// as it is and says so, and nothing shows today's bytes as old ones.
func TestChangesWhileUnmountedAreRecorded(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"main.go": "package main\n", "keep.txt": "keep\n", "mode.txt": "mode\n", "gone.txt": "gone\n", "sub/x": "x\n",
	})
	p := func(rel string) string { return filepath.Join(dir, rel) }
	m := mountProject(t, dir)
	m.turnctl(t, "begin", "--label", "edit main.go")
	if err := os.WriteFile(p("main.go"), []byte("package main // v1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m.turnctl(t, "end")
	m.Unmount(t)

	// While unmounted.
	f, err := os.OpenFile(p("main.go"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("// offline\n")
	f.Close()
	writeTree(t, dir, map[string]string{"new.txt": "new\n"})
	if err := os.Chmod(p("mode.txt"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(p("gone.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(p("newdir"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("keep.txt", p("ln")); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(p("sub/fifo"), 0o640); err != nil {
		t.Fatal(err)
	}

	m = mountProject(t, dir)
	log := m.turnctl(t, "log")
	if !strings.Contains(log, "offline") || !strings.Contains(log, "changed while unmounted") {
		t.Fatalf("turnctl log shows no offline turn:\n%s", log)
	}
	show := m.turnctl(t, "show", "2")
	for _, want := range []string{"main.go", "bytes never captured", "new.txt", "mode.txt", "gone.txt", "newdir", "ln", "sub/fifo"} {
		if !strings.Contains(show, want) {
			t.Errorf("turnctl show 2 does not name %q:\n%s", want, show)
		}
	}
	if strings.Contains(show, "keep.txt ") || strings.Contains(show, "sub/x") {
		t.Errorf("turnctl show 2 names an unchanged path:\n%s", show)
	}
	// The bytes main.go had before the offline turn were never seen.
	out, code := m.turnctlFail(t, "cat", "1", "main.go")
	if code != 1 || !strings.Contains(out, "never captured") || strings.Contains(out, "offline") {
		t.Errorf("turnctl cat 1 main.go: exit %d, %q; want a refusal naming the bytes as never captured", code, out)
	}
	// Older bytes, captured through the mount, are there.
	if got := m.turnctl(t, "cat", "0", "main.go"); got != "package main\n" {
		t.Errorf("turnctl cat 0 main.go = %q", got)
	}

	out = m.turnctl(t, "rewind", "1")
	if !strings.Contains(out, "not restored") || !strings.Contains(out, "main.go") || !strings.Contains(out, "gone.txt") {
		t.Errorf("rewind 1 does not name what it could not restore:\n%s", out)
	}
	checkFiles(t, dir, map[string]string{
		"main.go":  "package main // v1\n// offline\n", // left as it is, and said so
		"keep.txt": "keep\n", "mode.txt": "mode\n", "sub/x": "x\n",
	}, []string{"new.txt", "newdir", "ln", "sub/fifo", "gone.txt"})
	if fi, err := os.Stat(p("mode.txt")); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("mode.txt after rewind 1: %v, %v; want 0644", fi.Mode(), err)
	}
	// Before turn 1, main.go's bytes are known again.
	m.turnctl(t, "rewind", "0")
	checkFiles(t, dir, map[string]string{"main.go": "package main\n"}, nil)
	m.Unmount(t)

	// A rewind made while unmounted (turnctl's offline commands) is history
	// already: the next mount does not take it for changes made by hand.
	// (Turn 3 is the rewind to 1, which left main.go as it was.)
	if out := m.turnctl(t, "rewind", "3"); !strings.Contains(out, "done as turn") || !strings.Contains(out, "main.go") {
		t.Fatalf("offline rewind 3: %s", out)
	}
	m = mountProject(t, dir)
	before := m.turnctl(t, "log")
	if n := strings.Count(before, "changed while unmounted"); n != 1 {
		t.Errorf("%d offline turns after an offline rewind, want 1:\n%s", n, before)
	}
	checkFiles(t, dir, map[string]string{"main.go": "package main // v1\n// offline\n"}, []string{"new.txt"})
	m.Unmount(t)

	// A clean unmount and mount with nothing changed in between records
	// no turn.
	m = mountProject(t, dir)
	if after := m.turnctl(t, "log"); after != before {
		t.Errorf("a mount after no offline change added to the log:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// checkFiles fails unless each file of want has its bytes under dir and
// each of absent is missing.
func checkFiles(t *testing.T, dir string, want map[string]string, absent []string) {
	t.Helper()
	for rel, w := range want {
		if b, err := os.ReadFile(filepath.Join(dir, rel)); err != nil || string(b) != w {
			t.Errorf("%s = %q, %v; want %q", rel, b, err, w)
		}
	}
	for _, rel := range absent {
		if _, err := os.Lstat(filepath.Join(dir, rel)); err == nil {
			t.Errorf("%s exists, want it gone", rel)
		}
	}
}

// turnctl's offline commands (the project not mounted) see changes made
// by hand since the unmount as history too, before they read or rewind:
// a hand edit is never shown or restored as the bytes of an older turn.
func TestOfflineCommandsRecordHandEditsFirst(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"f": "f0"})
	m := mountProject(t, dir)
	m.turnctl(t, "begin", "--label", "f1")
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("f1"), 0o644); err != nil {
		t.Fatal(err)
	}
	m.turnctl(t, "end")
	m.Unmount(t)
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("HAND-EDIT"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, code := m.turnctlFail(t, "cat", "1", "f")
	if code != 1 || !strings.Contains(out, "never captured") {
		t.Errorf("offline cat 1 f: exit %d, %q; want a refusal (f1 was never captured)", code, out)
	}
	if got := m.turnctl(t, "cat", "0", "f"); got != "f0" {
		t.Errorf("offline cat 0 f = %q, want f0", got)
	}
	out = m.turnctl(t, "rewind", "1")
	if !strings.Contains(out, "not restored") {
		t.Errorf("offline rewind 1 does not say f was not restored:\n%s", out)
	}
	checkFiles(t, dir, map[string]string{"f": "HAND-EDIT"}, nil)
	m = mountProject(t, dir)
	if log := m.turnctl(t, "log"); strings.Count(log, "changed while unmounted") != 1 {
		t.Errorf("want one offline turn:\n%s", log)
	}
	if got := m.turnctl(t, "cat", "0", "f"); got != "f0" {
		t.Errorf("cat 0 f = %q, want f0", got)
	}
}

// The project directory's own mode is part of its history like any
// other directory's: changed through the mount or while unmounted, a
// rewind gives it back.
func TestRootModeComesBack(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeTree(t, dir, map[string]string{"a": "a\n"})
	mode := func() os.FileMode {
		t.Helper()
		fi, err := os.Stat(dir)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Mode().Perm()
	}
	m := mountProject(t, dir)
	m.turnctl(t, "begin", "--label", "chmod the root")
	if err := os.Chmod(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	m.turnctl(t, "end")
	m.turnctl(t, "rewind", "0")
	if got := mode(); got != 0o755 {
		t.Errorf("after rewind 0 the root has mode %v, want 0755", got)
	}
	m.turnctl(t, "undo")
	if got := mode(); got != 0o750 {
		t.Errorf("after undo the root has mode %v, want 0750", got)
	}
	m.Unmount(t)

	// While unmounted.
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	m = mountProject(t, dir)
	if log := m.turnctl(t, "log"); !strings.Contains(log, "changed while unmounted") {
		t.Fatalf("the root's chmod while unmounted made no turn:\n%s", log)
	}
	m.turnctl(t, "rewind", "0")
	if got := mode(); got != 0o755 {
		t.Errorf("after rewind 0 the root has mode %v, want 0755", got)
	}
	m.turnctl(t, "undo")
	if got := mode(); got != 0o700 {
		t.Errorf("after undo of that rewind the root has mode %v, want 0700", got)
	}
}

// A rename made while unmounted is recorded as a rename: the object kept
// its bytes, so a rewind to before gives them back under the old name
// (nothing is "never captured"), and undo moves them again.
func TestRenamesWhileUnmountedComeBackExactly(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"a.txt": "a\n", "pkg/x.go": "package x\n", "pkg/sub/y.go": "package sub\n", "other": "o\n",
	})
	p := func(rel string) string { return filepath.Join(dir, rel) }
	m := mountProject(t, dir)
	m.turnctl(t, "begin", "--label", "edit")
	if err := os.WriteFile(p("other"), []byte("o1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m.turnctl(t, "end")
	before := tree(t, dir)
	m.Unmount(t)

	// While unmounted: a file renamed, a directory renamed and a file
	// renamed inside the renamed directory, and a file renamed and then
	// changed (its new bytes were never seen).
	for _, mv := range [][2]string{{"a.txt", "b.txt"}, {"pkg", "lib"}, {"lib/x.go", "lib/z.go"}, {"other", "other2"}} {
		if err := os.Rename(p(mv[0]), p(mv[1])); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(p("other2"), []byte("o2 longer\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	after := tree(t, dir)

	m = mountProject(t, dir)
	show := m.turnctl(t, "show", "2")
	for _, want := range []string{"a.txt", "b.txt", "pkg", "lib"} {
		if !strings.Contains(show, want) {
			t.Errorf("turnctl show 2 does not name %q:\n%s", want, show)
		}
	}
	// Only the changed file's bytes at the unmount were never seen.
	out := m.turnctl(t, "rewind", "1")
	_, notRestored, _ := strings.Cut(out, "not restored")
	if !strings.Contains(notRestored, "other") || strings.Contains(notRestored, "a.txt") || strings.Contains(notRestored, "pkg") {
		t.Errorf("rewind 1 should name other alone as not restored:\n%s", out)
	}
	delete(before, "other")
	sameTree(t, "after rewind 1", before, tree(t, dir))
	m.turnctl(t, "undo")
	sameTree(t, "after undo of the rewind to 1", after, tree(t, dir))
}

// A symlink replaced while unmounted by a hard link to another symlink in
// the same state is a change: a rewind gives the path its own inode back.
func TestLinkWhileUnmountedIsAChange(t *testing.T) {
	dir := t.TempDir()
	p := func(rel string) string { return filepath.Join(dir, rel) }
	for _, l := range []string{"s1", "s2"} {
		if err := os.Symlink("target", p(l)); err != nil {
			t.Fatal(err)
		}
	}
	m := mountProject(t, dir)
	m.turnctl(t, "begin", "--label", "nothing")
	m.turnctl(t, "end")
	before := tree(t, dir)
	m.Unmount(t)
	if err := os.Remove(p("s2")); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(p("s1"), p("s2")); err != nil {
		t.Fatal(err)
	}
	m = mountProject(t, dir)
	if log := m.turnctl(t, "log"); !strings.Contains(log, "changed while unmounted") {
		t.Fatalf("the link made while unmounted made no turn:\n%s", log)
	}
	m.turnctl(t, "rewind", "1")
	sameTree(t, "after rewind 1", before, tree(t, dir))
}

// TestRangeKeptFileEditedWhileUnmounted: a big file written in place in
// two turns is kept by ranges over its bytes; the unmount seals those
// bytes, so an edit while unmounted costs none of its versions: each
// reads back exactly, a rewind to the start is exact, and the mount
// notes no bytes it never captured.
func TestRangeKeptFileEditedWhileUnmounted(t *testing.T) {
	dir, big, before, versions := rangeKeptHistory(t)
	// While unmounted: rewritten in place, other bytes, the same size.
	if err := os.WriteFile(big, randomBytes(t, 2<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	m, stderr := mountStderr(t, dir)
	if want := "ckptfs: recorded 1 change made while unmounted as turn 3\n"; stderr != want {
		t.Errorf("mount: stderr %q, want %q", stderr, want)
	}
	for n, want := range versions {
		got, err := runTurnctl(t, dir, "cat", fmt.Sprint(n), "big.db")
		if err != nil || got != string(want) {
			t.Errorf("cat %d big.db: %d bytes (%v), want the %d it had", n, len(got), err, len(want))
		}
	}
	m.turnctl(t, "rewind", "0")
	diffTrees(t, before, snapshot(t, dir, []string{".ckptfs"}, nil))
}

// TestEditAfterAnOfflineRewind: a rewind run with no mount patches a
// range-kept file in place; an edit made after it, before the next mount,
// is recorded as any change made while unmounted, with the bytes the
// rewind left (sealed when it ended), and every version reads back
// exactly.
func TestEditAfterAnOfflineRewind(t *testing.T) {
	dir, big, _, versions := rangeKeptHistory(t)
	v0 := versions[0]
	if out, err := runTurnctl(t, dir, "rewind", "0"); err != nil {
		t.Fatalf("offline rewind 0: %v\n%s", err, out)
	}
	if b, _ := os.ReadFile(big); !bytes.Equal(b, v0) {
		t.Fatal("the offline rewind did not give big.db back")
	}
	versions = append(versions, v0) // turn 3, the rewind's
	f, err := os.OpenFile(big, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt(bytes.Repeat([]byte("z"), 8192), 0)
	f.Close()
	_, stderr := mountStderr(t, dir)
	if want := "ckptfs: recorded 1 change made while unmounted as turn 4\n"; stderr != want {
		t.Errorf("mount: stderr %q, want %q", stderr, want)
	}
	for n, want := range versions {
		got, err := runTurnctl(t, dir, "cat", fmt.Sprint(n), "big.db")
		if err != nil || got != string(want) {
			t.Errorf("cat %d big.db: %d bytes (%v), want the %d it had", n, len(got), err, len(want))
		}
	}
}

// rangeKeptHistory makes a project with a 2 MiB file, big.db, written in
// place in two turns through a mount (kept by ranges), then unmounted. It
// returns the project, the file, the tree before the mount, and the
// file's bytes at the end of turns 0, 1 and 2.
func rangeKeptHistory(t *testing.T) (dir, big string, before map[string]entry, versions [][]byte) {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	big = filepath.Join(dir, "big.db")
	v0 := randomBytes(t, 2<<20)
	if err := os.WriteFile(big, v0, 0o644); err != nil {
		t.Fatal(err)
	}
	before = snapshot(t, dir, nil, nil)
	m := mountProject(t, dir)
	versions = [][]byte{v0}
	for i, off := range []int64{4096, 1 << 20} {
		m.turnctl(t, "begin", "--label", fmt.Sprint("write ", i))
		f, err := os.OpenFile(big, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteAt(bytes.Repeat([]byte{byte('a' + i)}, 8192), off)
		f.Close()
		m.turnctl(t, "end")
		b, _ := os.ReadFile(big)
		versions = append(versions, b)
	}
	m.Unmount(t)
	return dir, big, before, versions
}

// A file rewritten in place while unmounted with its size kept and its
// mtime put back (rsync --inplace -t, touch -r) is an offline change: the
// history never shows today's bytes as the turn's.
func TestEditWhoseMtimeWasPutBackWhileUnmounted(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"k": "k\n"})
	m := mountProject(t, dir)
	m.turnctl(t, "begin", "--label", "v1")
	runIn(t, dir, "echo version-one > v.txt")
	m.turnctl(t, "end")
	m.turnctl(t, "begin", "--label", "other")
	runIn(t, dir, "echo k2 > k")
	m.turnctl(t, "end")
	m.Unmount(t)
	runIn(t, dir, "sleep 0.01; touch -r v.txt ref && printf 'version-TWO\\n' | dd of=v.txt conv=notrunc status=none && touch -r ref v.txt && rm ref")
	m = mountProject(t, dir)
	if show := m.turnctl(t, "show", "3"); !strings.Contains(show, "v.txt") || !strings.Contains(show, "never captured") {
		t.Errorf("the offline turn does not name v.txt as changed:\n%s", show)
	}
	if out, code := m.turnctlFail(t, "cat", "1", "v.txt"); code != 1 || !strings.Contains(out, "never captured") {
		t.Errorf("turnctl cat 1 v.txt: exit %d, %q; want a refusal, not today's bytes", code, out)
	}
	m.Unmount(t)
}

// A rewind past changes made while unmounted leaves the files whose bytes
// it never saw, names them quoted, one per line, and warns when some are
// under .git: git's refs and index left at their later bytes beside its
// objects put back may name objects that are gone.
func TestRewindPastOfflineGitChangesWarns(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{".git/HEAD": "ref: refs/heads/main\n", ".git/refs/heads/main": "aaa\n", "odd\nname": "0"})
	m := mountProject(t, dir)
	m.turnctl(t, "begin")
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("f1"), 0o644); err != nil {
		t.Fatal(err)
	}
	m.turnctl(t, "end") // turn 1
	m.Unmount(t)
	writeTree(t, dir, map[string]string{".git/refs/heads/main": "bbb\n", ".git/objects/bb/b": "object", "odd\nname": "1"})
	m = mountProject(t, dir)
	if dry := m.turnctl(t, "rewind", "1", "--dry-run"); !strings.Contains(dry, "warning: 1 path under .git above would keep later bytes") {
		t.Errorf("the dry run does not warn:\n%s", dry)
	}
	out := m.turnctl(t, "rewind", "1")
	if _, err := os.Stat(filepath.Join(dir, ".git/objects/bb/b")); !os.IsNotExist(err) {
		t.Errorf("the object added while unmounted is still there: %v", err)
	}
	for name, want := range map[string]string{".git/refs/heads/main": "bbb\n", "odd\nname": "1"} {
		if b, err := os.ReadFile(filepath.Join(dir, name)); err != nil || string(b) != want {
			t.Errorf("%q: %q %v, want it left as %q", name, b, err, want)
		}
	}
	_, list, _ := strings.Cut(out, "not restored, left as they are")
	if !strings.Contains(list, "\n  .git/refs/heads/main\n") || !strings.Contains(list, "\n  \"odd\\nname\"\n") {
		t.Errorf("the paths not restored are not listed one per line, quoted:\n%s", out)
	}
	if !strings.Contains(list, "warning: 1 path under .git above kept later bytes") || !strings.Contains(list, "git fsck") {
		t.Errorf("no warning for the path under .git:\n%s", out)
	}
}
