package tests

import (
	"os"
	"path/filepath"
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
