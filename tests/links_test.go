package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
