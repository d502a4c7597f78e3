package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// A write through one name of a hard-linked file changes every name, so
// every name's prior bytes must be captured, also when the kernel forgot
// the inode in between (and so looked it up again under one name only),
// and when a directory holding one name was renamed since.
func TestHardLinkNamesSurviveTheKernelForgetting(t *testing.T) {
	dir := t.TempDir()
	m := mountProject(t, dir)
	p := func(rel string) string { return filepath.Join(dir, rel) }
	appendTo := func(rel, s string) {
		t.Helper()
		f, err := os.OpenFile(p(rel), os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteString(s); err != nil {
			t.Fatal(err)
		}
	}
	forget := func() {
		t.Helper()
		if err := dropCaches(); err != nil {
			t.Fatal(err)
		}
	}

	m.turnctl(t, "begin", "--label", "link")
	if err := os.Mkdir(p("d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p("h1"), []byte("orig"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(p("h1"), p("d/h2")); err != nil {
		t.Fatal(err)
	}
	m.turnctl(t, "end")
	forget()
	m.turnctl(t, "begin", "--label", "write through h1")
	appendTo("h1", "+")
	m.turnctl(t, "end")
	m.turnctl(t, "begin", "--label", "rename d")
	if err := os.Rename(p("d"), p("e")); err != nil {
		t.Fatal(err)
	}
	m.turnctl(t, "end")
	forget()
	m.turnctl(t, "begin", "--label", "write through h1 again")
	appendTo("h1", "!")
	m.turnctl(t, "end")

	want := map[int]map[string]string{
		1: {"h1": "orig", "d/h2": "orig"},
		2: {"h1": "orig+", "d/h2": "orig+"},
		3: {"h1": "orig+", "e/h2": "orig+"},
		4: {"h1": "orig+!", "e/h2": "orig+!"},
	}
	for _, n := range []int{1, 3, 2, 4} {
		m.turnctl(t, "rewind", itoa(n))
		for rel, w := range want[n] {
			if b, err := os.ReadFile(p(rel)); err != nil || string(b) != w {
				t.Errorf("after rewind %d: %s = %q, %v; want %q", n, rel, b, err, w)
			}
		}
	}
}

// A file hard-linked before the mount (or while unmounted) has names no
// lookup has shown the overlay: a write through one name must capture
// the others too, on a first mount and on a remount alike.
func TestHardLinksMadeBeforeTheMountAreCaptured(t *testing.T) {
	dir := t.TempDir()
	p := func(rel string) string { return filepath.Join(dir, rel) }
	writeTree(t, dir, map[string]string{"a": "a0", "deep/er/b": "b0"})
	if err := os.Link(p("a"), p("deep/er/a2")); err != nil {
		t.Fatal(err)
	}
	m := mountProject(t, dir)
	write := func(rel, s string) {
		t.Helper()
		f, err := os.OpenFile(p(rel), os.O_WRONLY|os.O_TRUNC, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteString(s); err != nil {
			t.Fatal(err)
		}
	}
	m.turnctl(t, "begin", "--label", "write a")
	write("a", "a1")
	m.turnctl(t, "end")
	m.Unmount(t)
	// While unmounted: another pair.
	if err := os.Link(p("deep/er/b"), p("b2")); err != nil {
		t.Fatal(err)
	}
	m = mountProject(t, dir)
	m.turnctl(t, "begin", "--label", "write b2")
	write("b2", "b1")
	m.turnctl(t, "end")

	m.turnctl(t, "rewind", "0")
	checkFiles(t, dir, map[string]string{"a": "a0", "deep/er/a2": "a0", "deep/er/b": "b0"}, []string{"b2"})
	m.turnctl(t, "undo")
	checkFiles(t, dir, map[string]string{"a": "a1", "deep/er/a2": "a1", "deep/er/b": "b1", "b2": "b1"}, nil)
}

// linkState describes the regular files of a tree as `stat -c %i` and
// sha256sum see them: each path's bytes, and which paths share an inode
// (classes named by their first path, not by inode numbers).
func linkState(t *testing.T, dir string) string {
	t.Helper()
	out := runIn(t, dir, `find . -path ./.ckptfs -prune -o -type f -printf '%P\n' | LC_ALL=C sort | while read -r p; do
  printf '%s %s %s\n' "$(stat -c %i "$p")" "$(sha256sum < "$p" | cut -c1-12)" "$p"
done`)
	first := map[string]string{}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(l)
		if len(f) != 3 {
			continue
		}
		ino, sum, p := f[0], f[1], f[2]
		if _, ok := first[ino]; !ok {
			first[ino] = p
		}
		lines = append(lines, fmt.Sprintf("%s %s =%s", p, sum, first[ino]))
	}
	return strings.Join(lines, "\n")
}

// sharedInode reports whether the files a and b are one inode, and a's
// link count.
func sharedInode(t *testing.T, a, b string) (bool, uint32) {
	t.Helper()
	var sa, sb syscall.Stat_t
	if err := syscall.Stat(a, &sa); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Stat(b, &sb); err != nil {
		t.Fatal(err)
	}
	return sa.Dev == sb.Dev && sa.Ino == sb.Ino, uint32(sa.Nlink)
}

// Hard-linked files come back as hard links: a rewind to any turn gives
// back which paths share an inode as well as the bytes, and so does the
// undo of that rewind, through ln, writes through one name, rm of one
// name, ln -f and a rename over a linked name.
func TestRewindAndUndoKeepHardLinks(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"a": "a0\n", "c": "c0\n", "d/x": "x0\n", "twin": "a0\n"})
	m := mountProject(t, dir)
	steps := []string{
		"ln a b; ln d/x d/y; ln d/x e",      // 1: new names of two files
		"echo more >> b; echo y >> d/y",     // 2: writes through one name
		"rm a; rm d/x",                      // 3: one name goes
		"ln -f b c; ln -f e twin",           // 4: ln -f over other files
		"mv c d/y; echo z >> twin; ln b a",  // 5: a rename over a linked name
		"rm twin; cp e twin; chmod 600 d/y", // 6: a copy, not a link; a chmod
	}
	states := []string{linkState(t, dir)}
	for i, s := range steps {
		m.turnctl(t, "begin", "--label", fmt.Sprintf("step %d", i+1))
		runIn(t, dir, s)
		m.turnctl(t, "end")
		states = append(states, linkState(t, dir))
	}
	check := func(what, want string) {
		t.Helper()
		if got := linkState(t, dir); got != want {
			t.Fatalf("%s:\n%s\nwant\n%s", what, got, want)
		}
	}
	for _, n := range []int{0, 3, 1, 5, 2, 4, 6} {
		before := linkState(t, dir)
		m.turnctl(t, "rewind", itoa(n))
		check(fmt.Sprintf("after rewind %d", n), states[n])
		m.turnctl(t, "undo")
		check(fmt.Sprintf("after undo of rewind %d", n), before)
		m.turnctl(t, "undo")
		check(fmt.Sprintf("after redo of rewind %d", n), states[n])
	}
	// The kernel forgets, the overlay still knows every name: a write
	// through one name after a rewind is captured under all of them.
	m.turnctl(t, "rewind", "2")
	if err := dropCaches(); err != nil {
		t.Fatal(err)
	}
	m.turnctl(t, "begin", "--label", "write after rewind")
	runIn(t, dir, "echo w >> e")
	m.turnctl(t, "end")
	m.turnctl(t, "undo")
	check("after undoing a write through a name the rewind linked", states[2])
}

// nodeLinks describes every path below dir but the directories (the store
// left out) as lstat(2) sees it: type, mode, owner, device number, symlink
// target, size and link count, and which paths share an inode (classes
// named by their first path, not by inode numbers).
func nodeLinks(t *testing.T, dir string) string {
	t.Helper()
	var lines []string
	first := map[[2]uint64]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == ".ckptfs" {
				return filepath.SkipDir
			}
			return nil
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		k := [2]uint64{st.Dev, st.Ino}
		if _, ok := first[k]; !ok {
			first[k] = rel // WalkDir goes in lexical order
		}
		target, _ := os.Readlink(p)
		lines = append(lines, fmt.Sprintf("%s: fmt %#o mode %#o owner %d:%d rdev %d:%d target %q size %d nlink %d =%s",
			rel, st.Mode&unix.S_IFMT, st.Mode&0o7777, st.Uid, st.Gid, unix.Major(st.Rdev), unix.Minor(st.Rdev),
			target, st.Size, st.Nlink, first[k]))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n")
}

// Hard links of symlinks, FIFOs, sockets and device nodes come back as
// exactly as those of regular files: a rewind to any turn, its undo and
// the redo give back each path's type, mode, owner, device number and
// symlink target, and which paths share an inode, through links, a chmod
// and chown through one name, rm of one name, renames over linked names
// and ln -f across types.
func TestRewindAndUndoKeepHardLinksOfEveryType(t *testing.T) {
	dir := t.TempDir()
	m := mountProject(t, dir)
	p := func(rel string) string { return filepath.Join(dir, rel) }
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	link := func(a, b string) { // link(2): a symlink itself, not its target
		t.Helper()
		must("link "+a+" "+b, unix.Linkat(unix.AT_FDCWD, p(a), unix.AT_FDCWD, p(b), 0))
	}
	mknod := func(rel string, fmtBits, mode uint32, dev uint64) {
		t.Helper()
		must("mknod "+rel, unix.Mknod(p(rel), fmtBits|mode, int(dev)))
		must("chmod "+rel, unix.Chmod(p(rel), mode))
	}
	steps := []func(){
		func() { // 1: each kind with a second name
			must("mkdir", os.Mkdir(p("d"), 0o755))
			must("symlink", os.Symlink("target/one", p("s")))
			link("s", "d/s2")
			mknod("fifo", unix.S_IFIFO, 0o640, 0)
			link("fifo", "d/fifo2")
			must("chown", os.Lchown(p("fifo"), 1234, 5678))
			mknod("null", unix.S_IFCHR, 0o666, unix.Mkdev(1, 3))
			link("null", "d/null2")
			mknod("sock", unix.S_IFSOCK, 0o600, 0)
			link("sock", "sock2")
		},
		func() { // 2: changes through one name; a third name; a lookalike
			must("chmod", unix.Chmod(p("d/fifo2"), 0o600))
			must("chown", os.Lchown(p("d/s2"), 42, 43))
			must("chmod", unix.Chmod(p("null"), 0o620))
			link("null", "n3")
			must("symlink", os.Symlink("target/one", p("s3"))) // alike, its own inode
		},
		func() { // 3: a name goes, renames over linked names, ln -f across types
			must("rm", os.Remove(p("s")))
			must("mv", os.Rename(p("d/fifo2"), p("sock2")))
			must("rm", os.Remove(p("d/null2")))
			link("fifo", "d/null2")
			link("s3", "s")
		},
		func() { // 4: a device's names all go, another at one of them
			must("rm", os.Remove(p("null")))
			must("rm", os.Remove(p("n3")))
			mknod("null", unix.S_IFBLK, 0o660, unix.Mkdev(7, 200))
			link("d/s2", "d/s4")
			must("chmod", unix.Chmod(p("fifo"), 0o644))
		},
	}
	states := []string{nodeLinks(t, dir)}
	for i, step := range steps {
		m.turnctl(t, "begin", "--label", fmt.Sprintf("step %d", i+1))
		step()
		m.turnctl(t, "end")
		states = append(states, nodeLinks(t, dir))
	}
	check := func(what, want string) {
		t.Helper()
		if got := nodeLinks(t, dir); got != want {
			t.Fatalf("%s:\n%s\nwant\n%s", what, got, want)
		}
	}
	// Which paths share an inode, asked of lstat(2) directly.
	sameInode := func(what string, fmtBits uint32, nlink uint64, paths ...string) {
		t.Helper()
		var first unix.Stat_t
		for i, rel := range paths {
			var st unix.Stat_t
			must("lstat", unix.Lstat(p(rel), &st))
			if st.Mode&unix.S_IFMT != fmtBits || st.Nlink != nlink {
				t.Errorf("%s: %s is fmt %#o with %d links, want fmt %#o with %d", what, rel, st.Mode&unix.S_IFMT, st.Nlink, fmtBits, nlink)
			}
			if i == 0 {
				first = st
			} else if st.Ino != first.Ino || st.Dev != first.Dev {
				t.Errorf("%s: %s is inode %d, %s inode %d: want one inode", what, paths[0], first.Ino, rel, st.Ino)
			}
		}
	}
	for _, n := range []int{1, 0, 3, 2, 4, 1} {
		before := nodeLinks(t, dir)
		m.turnctl(t, "rewind", itoa(n))
		check(fmt.Sprintf("after rewind %d", n), states[n])
		m.turnctl(t, "undo")
		check(fmt.Sprintf("after undo of rewind %d", n), before)
		m.turnctl(t, "undo")
		check(fmt.Sprintf("after redo of rewind %d", n), states[n])
	}
	// Rewound to turn 1: each pair is one inode again.
	sameInode("rewound to 1", unix.S_IFLNK, 2, "s", "d/s2")
	sameInode("rewound to 1", unix.S_IFIFO, 2, "fifo", "d/fifo2")
	sameInode("rewound to 1", unix.S_IFCHR, 2, "null", "d/null2")
	sameInode("rewound to 1", unix.S_IFSOCK, 2, "sock", "sock2")
	var st unix.Stat_t
	must("lstat", unix.Lstat(p("d/null2"), &st))
	if unix.Major(st.Rdev) != 1 || unix.Minor(st.Rdev) != 3 || st.Mode&0o7777 != 0o666 {
		t.Errorf("rewound to 1: d/null2 is device %d:%d mode %#o, want 1:3 mode 0666", unix.Major(st.Rdev), unix.Minor(st.Rdev), st.Mode&0o7777)
	}
	must("lstat", unix.Lstat(p("d/fifo2"), &st))
	if st.Mode&0o7777 != 0o640 || st.Uid != 1234 || st.Gid != 5678 {
		t.Errorf("rewound to 1: d/fifo2 is mode %#o owner %d:%d, want 0640 1234:5678", st.Mode&0o7777, st.Uid, st.Gid)
	}
	if target, err := os.Readlink(p("d/s2")); err != nil || target != "target/one" {
		t.Errorf("rewound to 1: d/s2 points to %q, %v", target, err)
	}
	// The kernel forgets, the overlay still knows every name the rewind
	// linked: a chmod through one name is captured under all of them.
	if err := dropCaches(); err != nil {
		t.Fatal(err)
	}
	m.turnctl(t, "begin", "--label", "chmod after rewind")
	must("chmod", unix.Chmod(p("d/fifo2"), 0o604))
	must("chmod", unix.Chmod(p("d/null2"), 0o604))
	m.turnctl(t, "end")
	m.turnctl(t, "undo")
	check("after undoing a chmod through a name the rewind linked", states[1])
}

// A restore of one name of a hard-linked file gives it its bytes then on
// an inode of its own, leaves the other name as it is, and says so, as
// does its dry run (text and JSON); restoring both names keeps them one
// inode, as they were.
func TestRestoreOfOneHardLinkSaysItSplits(t *testing.T) {
	dir := t.TempDir()
	m := mountProject(t, dir)
	p := func(rel string) string { return filepath.Join(dir, rel) }
	m.turnctl(t, "begin", "--label", "a and its link b")
	runIn(t, dir, "echo one > a; ln a b")
	m.turnctl(t, "end")
	m.turnctl(t, "begin", "--label", "write through a")
	runIn(t, dir, "echo two > a") // truncates and writes the one inode
	m.turnctl(t, "end")
	stat := func(rel string) unix.Stat_t {
		t.Helper()
		var st unix.Stat_t
		if err := unix.Lstat(p(rel), &st); err != nil {
			t.Fatal(err)
		}
		return st
	}
	check := func(what string, want map[string]string, linked bool) {
		t.Helper()
		for rel, w := range want {
			if b, err := os.ReadFile(p(rel)); err != nil || string(b) != w {
				t.Errorf("%s: %s = %q, %v; want %q", what, rel, b, err, w)
			}
		}
		a, b := stat("a"), stat("b")
		nlink := uint64(1)
		if linked {
			nlink = 2
		}
		if (a.Ino == b.Ino) != linked || uint64(a.Nlink) != nlink || uint64(b.Nlink) != nlink {
			t.Errorf("%s: a inode %d nlink %d, b inode %d nlink %d; want linked %v", what, a.Ino, a.Nlink, b.Ino, b.Nlink, linked)
		}
	}
	check("before", map[string]string{"a": "two\n", "b": "two\n"}, true)

	const note = "hard links %s (the names not restored keep their bytes; restore them too, or rewind, to link them as at turn 1):\n  a from b\n"
	if out := m.turnctl(t, "restore", "--dry-run", "1", "a"); !strings.HasSuffix(out, fmt.Sprintf(note, "it would split")) {
		t.Errorf("restore --dry-run 1 a says:\n%s", out)
	}
	const js = `"split_links": [
    {
      "path": "a",
      "names": [
        "b"
      ]
    }
  ]`
	if out := m.turnctl(t, "--json", "restore", "--dry-run", "1", "a"); !strings.Contains(out, js) {
		t.Errorf("restore --json --dry-run 1 a says:\n%s", out)
	}
	check("after the dry run", map[string]string{"a": "two\n", "b": "two\n"}, true)
	out := m.turnctl(t, "restore", "1", "a")
	want := "restore of a from turn 1 done as turn 3: 1 file (+1 -1)\n  modified  a  +1 -1\n" + fmt.Sprintf(note, "split")
	if out != want {
		t.Errorf("restore 1 a says:\n%s\nwant\n%s", out, want)
	}
	check("after restore 1 a", map[string]string{"a": "one\n", "b": "two\n"}, false)

	m.turnctl(t, "undo")
	check("after the undo", map[string]string{"a": "two\n", "b": "two\n"}, true)
	out = m.turnctl(t, "--json", "restore", "1", "a", "b")
	if !strings.Contains(out, `"split_links": []`) {
		t.Errorf("restore --json 1 a b says:\n%s", out)
	}
	check("after restore 1 a b", map[string]string{"a": "one\n", "b": "one\n"}, true)
}

// A revert of a turn that wrote through one name of a hard-linked file
// gives both names their bytes back and keeps them one inode, as they
// were before the turn and after it: a revert changes no link it does not
// have to.
func TestRevertKeepsAHardLinkTheTurnWroteThrough(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"a": "one\n", "other": "o\n"})
	runIn(t, dir, "ln a b")
	before := linkState(t, dir)
	m := mountProject(t, dir)
	m.turnctl(t, "begin", "--label", "append")
	runIn(t, dir, "echo two >> a")
	m.turnctl(t, "end")
	m.turnctl(t, "begin", "--label", "later")
	runIn(t, dir, "echo x > other")
	m.turnctl(t, "end")
	m.turnctl(t, "revert", "1")
	runIn(t, dir, "echo o > other") // the later turn's change kept; set back to compare
	if got := linkState(t, dir); got != before {
		t.Errorf("after the revert:\n%s\nwant, as before the turn:\n%s", got, before)
	}
	m.Unmount(t)
}

// A revert of the turn that made b a hard link of a (rm b; ln a b) gives
// b its bytes from before that turn on an inode of its own and leaves a
// on its inode with its bytes: it splits the link, and says so as a
// restore does, its dry run the same (text and JSON, by the schema). An
// undo links them again.
func TestRevertOfALinkTheTurnMadeSaysItSplits(t *testing.T) {
	dir := t.TempDir()
	m := mountProject(t, dir)
	p := func(rel string) string { return filepath.Join(dir, rel) }
	stat := func(rel string) unix.Stat_t {
		t.Helper()
		var st unix.Stat_t
		if err := unix.Lstat(p(rel), &st); err != nil {
			t.Fatal(err)
		}
		return st
	}
	check := func(what string, want map[string]string) {
		t.Helper()
		for rel, w := range want {
			if b, err := os.ReadFile(p(rel)); err != nil || string(b) != w {
				t.Errorf("%s: %s = %q, %v; want %q", what, rel, b, err, w)
			}
		}
	}
	m.turnctl(t, "begin", "--label", "a and b")
	runIn(t, dir, "echo one > a; echo two > b")
	m.turnctl(t, "end")
	m.turnctl(t, "begin", "--label", "b a link of a")
	runIn(t, dir, "rm b; ln a b")
	m.turnctl(t, "end")
	m.turnctl(t, "begin", "--label", "later")
	runIn(t, dir, "echo three > c")
	m.turnctl(t, "end")
	a, b := stat("a"), stat("b")
	if a.Ino != b.Ino || a.Nlink != 2 {
		t.Fatalf("before: a inode %d nlink %d, b inode %d: want one inode, nlink 2", a.Ino, a.Nlink, b.Ino)
	}
	ino := a.Ino

	const note = "hard links %s (the names not reverted keep their bytes):\n  b from a\n"
	dryText := m.turnctl(t, "revert", "--dry-run", "2")
	if !strings.HasSuffix(dryText, fmt.Sprintf(note, "it would split")) {
		t.Errorf("revert --dry-run 2 says:\n%s", dryText)
	}
	dry := m.jsonOut(t, "turnctl-rewind", "revert", "--dry-run", "2")
	const js = `[map[names:[a] path:b]]`
	if got := fmt.Sprint(dry["split_links"]); got != js {
		t.Errorf("revert --json --dry-run 2: split_links %s, want %s", got, js)
	}
	check("after the dry runs", map[string]string{"a": "one\n", "b": "one\n", "c": "three\n"})
	if a, b := stat("a"), stat("b"); a.Ino != ino || b.Ino != ino || a.Nlink != 2 {
		t.Errorf("after the dry runs: a inode %d nlink %d, b inode %d: want both %d, nlink 2", a.Ino, a.Nlink, b.Ino, ino)
	}

	out := m.turnctl(t, "revert", "2")
	want := "revert of turn 2 done as turn 4: 1 file (+1 -1)\n  modified  b  +1 -1\n" + fmt.Sprintf(note, "split")
	if out != want {
		t.Errorf("revert 2 says:\n%s\nwant\n%s", out, want)
	}
	check("after revert 2", map[string]string{"a": "one\n", "b": "two\n", "c": "three\n"})
	a, b = stat("a"), stat("b")
	if a.Ino != ino || a.Nlink != 1 || b.Ino == ino || b.Nlink != 1 {
		t.Errorf("after revert 2: a inode %d nlink %d, b inode %d nlink %d; want a %d nlink 1, b another inode, nlink 1",
			a.Ino, a.Nlink, b.Ino, b.Nlink, ino)
	}

	// The same revert again, as JSON: what its dry run said.
	m.turnctl(t, "undo")
	check("after the undo", map[string]string{"a": "one\n", "b": "one\n", "c": "three\n"})
	if a, b := stat("a"), stat("b"); a.Ino != b.Ino || a.Nlink != 2 {
		t.Errorf("after the undo: a inode %d nlink %d, b inode %d: want one inode, nlink 2", a.Ino, a.Nlink, b.Ino)
	}
	rep := m.jsonOut(t, "turnctl-rewind", "revert", "2")
	if got := fmt.Sprint(rep["split_links"]); got != js {
		t.Errorf("revert --json 2: split_links %s, want %s", got, js)
	}
	check("after revert 2 again", map[string]string{"a": "one\n", "b": "two\n", "c": "three\n"})
	if a, b := stat("a"), stat("b"); a.Ino == b.Ino || a.Nlink != 1 || b.Nlink != 1 {
		t.Errorf("after revert 2 again: a inode %d nlink %d, b inode %d nlink %d; want two inodes, nlink 1", a.Ino, a.Nlink, b.Ino, b.Nlink)
	}
}

// A revert of a chmod made through one name of a hard-linked file gives
// both names their mode back and keeps them one inode, and splits
// nothing: the names that share the inode are all the revert's.
func TestRevertOfAChmodThroughAHardLinkKeepsItLinked(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"a": "one\n", "other": "o\n"})
	runIn(t, dir, "chmod 644 a; ln a b")
	before := linkState(t, dir)
	m := mountProject(t, dir)
	m.turnctl(t, "begin", "--label", "chmod")
	runIn(t, dir, "chmod 600 a")
	m.turnctl(t, "end")
	m.turnctl(t, "begin", "--label", "later")
	runIn(t, dir, "echo x > other")
	m.turnctl(t, "end")
	rep := m.jsonOut(t, "turnctl-rewind", "revert", "1")
	if got := fmt.Sprint(rep["split_links"]); got != "[]" {
		t.Errorf("revert --json 1: split_links %s, want []", got)
	}
	runIn(t, dir, "echo o > other") // the later turn's change kept; set back to compare
	if got := linkState(t, dir); got != before {
		t.Errorf("after the revert:\n%s\nwant, as before the turn:\n%s", got, before)
	}
	for _, rel := range []string{"a", "b"} {
		if fi, err := os.Lstat(filepath.Join(dir, rel)); err != nil || fi.Mode().Perm() != 0o644 {
			t.Errorf("after the revert: %s mode %v, %v; want 0644", rel, fi.Mode().Perm(), err)
		}
	}
}

// TestWriteThroughAnUnlinkedNameOfAHardLink: a file opened by one of its
// two names, which is then removed, is still in the tree by the other:
// a write through the open handle changes that name, and must be
// recorded so, or no rewind gives the old bytes back.
func TestWriteThroughAnUnlinkedNameOfAHardLink(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"a": "hello\n"})
	if err := os.Link(filepath.Join(dir, "a"), filepath.Join(dir, "b")); err != nil {
		t.Fatal(err)
	}
	// No warm-up: it would have the kernel look b up, which gives the
	// node a second parent in the tree.
	t.Setenv("CKPTFS_WARMUP", "0")
	m := mountProject(t, dir)
	m.turnctl(t, "begin", "--label", "write")
	f, err := os.OpenFile(filepath.Join(dir, "a"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := os.Remove(filepath.Join(dir, "a")); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("HELLO\n"), 0); err != nil {
		t.Fatal(err)
	}
	f.Close()
	m.turnctl(t, "end")
	if show := m.turnctl(t, "show", "1"); !strings.Contains(show, "modified  b  +1 -1") {
		t.Errorf("turnctl show 1:\n%s\nwant b modified", show)
	}
	m.turnctl(t, "rewind", "0")
	var sa, sb unix.Stat_t
	for _, c := range []struct {
		name string
		st   *unix.Stat_t
	}{{"a", &sa}, {"b", &sb}} {
		if b, err := os.ReadFile(filepath.Join(dir, c.name)); err != nil || string(b) != "hello\n" {
			t.Errorf("%s after the rewind to 0: %q, %v; want hello", c.name, b, err)
		}
		if err := unix.Lstat(filepath.Join(dir, c.name), c.st); err != nil {
			t.Fatal(err)
		}
	}
	if sa.Ino != sb.Ino || sa.Nlink != 2 {
		t.Errorf("after the rewind to 0: a inode %d nlink %d, b inode %d: want one inode with 2 links", sa.Ino, sa.Nlink, sb.Ino)
	}
}
