package versionstore

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"ckptfs/internal/backing"
	"ckptfs/internal/ckpt"
)

// TestChangesKinds drives one turn of each kind of change through the
// capture API and checks how Changes classifies it.
func TestChangesKinds(t *testing.T) {
	root := t.TempDir()
	s := NewTestStore(t)
	tree, _ := backing.Open(root)
	defer tree.Close()
	m := &sim{t: t, root: root, tree: tree, store: s}
	w := func(p, data string) { os.WriteFile(filepath.Join(root, p), []byte(data), 0o644) }
	w("keep", "k")
	w("mod", "old")
	w("gone", "bye")
	w("mv-src", "moving")
	w("chm", "x")
	os.Mkdir(filepath.Join(root, "dir"), 0o755)

	s.Begin(ckpt.KindAgent, "", "")
	m.capture("mod", false)
	w("mod", "new")
	m.capture("gone", true)
	os.Remove(filepath.Join(root, "gone"))
	m.capture("added", false)
	w("added", "hi")
	commit, _ := s.RecordRename("mv-src", "mv-dst", false, ckpt.Program{})
	commit(os.Rename(filepath.Join(root, "mv-src"), filepath.Join(root, "mv-dst")) == nil)
	s.Record(ckpt.Capture{Path: "chm", Prior: m.lstat("chm"), MetaOnly: true}, ckpt.Program{})
	os.Chmod(filepath.Join(root, "chm"), 0o755)
	m.capture("dir", false)
	os.Remove(filepath.Join(root, "dir"))
	os.Symlink("keep", filepath.Join(root, "dir"))
	// A file written back to its old bytes is no change at all.
	m.capture("keep", false)
	w("keep", "k")
	tn, _ := s.End("")

	cs, err := s.Changes(tn.Num-1, tn.Num, tree)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, c := range cs {
		got[c.Path] = string(c.Kind) + " " + c.From
	}
	want := map[string]string{
		"mod": "modified ", "gone": "deleted ", "added": "added ",
		"mv-dst": "renamed mv-src", "chm": "mode ", "dir": "type ",
	}
	if len(got) != len(want) {
		t.Fatalf("changes %v, want %v", got, want)
	}
	for p, k := range want {
		if got[p] != k {
			t.Errorf("%s: %q, want %q", p, got[p], k)
		}
	}
	// Rewind's dry run lists the same paths, in the other direction.
	res, err := s.Rewind(tn.Num-1, tree, RewindOptions{DryRun: true})
	if err != nil || len(res.Changes) != len(want) {
		t.Fatalf("dry run: %d changes, %v", len(res.Changes), err)
	}
	if st, _ := tree.Lstat("added"); st.Type != ckpt.Regular {
		t.Fatal("dry run changed the tree")
	}
}

// TestChangesInsideDirectoryMovedBack: a file changed while its directory
// had another name (an exchange, then the exchange undone) is a change
// under its own name, which no event names; a rewind must see it.
func TestChangesInsideDirectoryMovedBack(t *testing.T) {
	root := t.TempDir()
	s := NewTestStore(t)
	tree, _ := backing.Open(root)
	defer tree.Close()
	m := &sim{t: t, root: root, tree: tree, store: s}
	os.MkdirAll(filepath.Join(root, "a"), 0o755)
	os.MkdirAll(filepath.Join(root, "d"), 0o755)
	os.WriteFile(filepath.Join(root, "a/b"), []byte("one"), 0o644)
	exchange := func() {
		commit, err := s.RecordRename("a", "d", true, ckpt.Program{})
		if err != nil {
			t.Fatal(err)
		}
		err = tree.Exchange("a", "d")
		commit(err == nil)
		if err != nil {
			t.Fatal(err)
		}
	}
	s.Begin(ckpt.KindAgent, "", "")
	exchange()
	m.capture("d/b", false)
	os.WriteFile(filepath.Join(root, "d/b"), []byte("two"), 0o644)
	exchange()
	tn, _ := s.End("")

	cs, err := s.Changes(tn.Num-1, tn.Num, tree)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 1 || cs[0].Path != "a/b" || cs[0].Kind != ckpt.Modified {
		t.Fatalf("changes %+v, want a/b modified", cs)
	}
	if _, err := s.Rewind(tn.Num-1, tree, RewindOptions{}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "a/b")); string(b) != "one" {
		t.Fatalf("after the rewind a/b = %q", b)
	}
}

// TestChangesSeeHardLinks: a file replaced by a hard link of another with
// the same bytes differs only in which paths share its inode; Changes
// says so (kind link), and a rewind undoes it.
func TestChangesSeeHardLinks(t *testing.T) {
	root := t.TempDir()
	s := NewTestStore(t)
	tree, _ := backing.Open(root)
	defer tree.Close()
	m := &sim{t: t, root: root, tree: tree, store: s}
	p := func(rel string) string { return filepath.Join(root, rel) }
	os.WriteFile(p("a"), []byte("x"), 0o644)
	os.WriteFile(p("b"), []byte("x"), 0o644)
	ino := func(rel string) uint64 {
		_, i, err := tree.LstatInode(rel)
		if err != nil {
			t.Fatal(err)
		}
		return i.Ino
	}
	kinds := func(from, to uint64) string {
		cs, err := s.Changes(from, to, tree)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, c := range cs {
			out = append(out, string(c.Kind)+" "+c.Path)
		}
		return strings.Join(out, ", ")
	}

	s.Begin(ckpt.KindAgent, "", "")
	m.capture("b", true)
	os.Remove(p("b"))
	os.Link(p("a"), p("b"))
	t1, _ := s.End("")
	if got := kinds(0, t1.Num); got != "link b" {
		t.Fatalf("turn 1 changed %q, want link b", got)
	}
	res, err := s.Rewind(0, tree, RewindOptions{DryRun: true})
	if err != nil || len(res.Changes) != 1 || res.Changes[0].Kind != ckpt.Relinked {
		t.Fatalf("dry run: %+v, %v", res.Changes, err)
	}
	if _, err := s.Rewind(0, tree, RewindOptions{}); err != nil {
		t.Fatal(err)
	}
	if ino("a") == ino("b") {
		t.Fatal("after the rewind a and b still share an inode")
	}
	if got := kinds(t1.Num, Now); got != "link b" {
		t.Fatalf("the rewind changed %q, want link b", got)
	}
	// Its undo links them again.
	if _, err := s.Rewind(t1.Num, tree, RewindOptions{}); err != nil {
		t.Fatal(err)
	}
	if ino("a") != ino("b") {
		t.Fatal("after the undo a and b do not share an inode")
	}
	for _, f := range []string{"a", "b"} {
		if b, _ := os.ReadFile(p(f)); string(b) != "x" {
			t.Fatalf("%s = %q", f, b)
		}
	}
}
