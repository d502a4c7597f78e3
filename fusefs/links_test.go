package fusefs

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

func names(l *linkNames, ino uint64) []string {
	out := l.list(ino)
	slices.Sort(out)
	return out
}

// Renames move remembered names below them; a rename over a path forgets
// what was remembered there; an exchange swaps.
func TestLinkNamesFollowRenames(t *testing.T) {
	var l linkNames
	l.add(1, "d/a")
	l.add(1, "d/e/b")
	l.add(1, "x")
	l.add(2, "y/c")
	l.add(3, "d-x") // sorts between "d" and "d/": must not move with d

	l.renamed("d", "f/g", false)
	if got := names(&l, 1); !slices.Equal(got, []string{"f/g/a", "f/g/e/b", "x"}) {
		t.Fatalf("after mv d f/g: %v", got)
	}
	if got := names(&l, 3); !slices.Equal(got, []string{"d-x"}) {
		t.Fatalf("d-x moved: %v", got)
	}
	l.renamed("x", "y", false) // over y: y/c is gone
	if got := names(&l, 2); len(got) != 0 {
		t.Fatalf("a replaced directory's names stay: %v", got)
	}
	if got := names(&l, 1); !slices.Equal(got, []string{"f/g/a", "f/g/e/b", "y"}) {
		t.Fatalf("after mv x y: %v", got)
	}
	l.add(2, "z/c")
	l.renamed("f", "z", true)
	if got := names(&l, 1); !slices.Equal(got, []string{"y", "z/g/a", "z/g/e/b"}) {
		t.Fatalf("after exchange f z, ino 1: %v", got)
	}
	if got := names(&l, 2); !slices.Equal(got, []string{"f/c"}) {
		t.Fatalf("after exchange f z, ino 2: %v", got)
	}
	l.drop(1, "y")
	l.drop(1, "z/g/a")
	l.drop(1, "z/g/e/b")
	if l.has(1) || l.root.children["z"] != nil || l.root.children["y"] != nil {
		t.Fatalf("dropped names leave nodes: %v %v", names(&l, 1), l.root.children)
	}
}

// A rename costs the depth of its paths, not the names remembered: 100k
// names (a pnpm tree found at mount) and 1000 renames stay well under a
// second (a scan of every name per rename took 20 ms each).
func TestLinkNamesRenameIsCheap(t *testing.T) {
	var l linkNames
	for i := 0; i < 100000; i++ {
		l.add(uint64(i), fmt.Sprintf("node_modules/.pnpm/p%d/f%d", i/100, i))
	}
	start := time.Now()
	for i := 0; i < 1000; i++ {
		l.renamed(fmt.Sprintf("src/a%d.tmp", i), fmt.Sprintf("src/a%d", i), false)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("1000 renames with 100k names took %v", d)
	}
}

// A capture of a file with several links names its inode and its other
// names, whichever name the change came through (a write, an unlink);
// an unversioned name is not among them.
func TestCapturesNameTheInodeAndItsOtherNames(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{"a", "solo"} {
		if err := os.WriteFile(filepath.Join(dir, p), []byte(p), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.Mkdir(filepath.Join(dir, "d"), 0o755)
	os.Mkdir(filepath.Join(dir, "skip"), 0o755)
	f := newFakeRec(t)
	mountFake(t, dir, Options{Recorder: f, Exclude: func(p string, isDir bool) bool { return p == "skip" || strings.HasPrefix(p, "skip/") }})
	for _, l := range []string{"d/b", "skip/c"} {
		if err := os.Link(filepath.Join(dir, "a"), filepath.Join(dir, l)); err != nil {
			t.Fatal(err)
		}
	}
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(dir, "a"), &st); err != nil {
		t.Fatal(err)
	}
	f.take()
	f.newTurn()
	fh, err := os.OpenFile(filepath.Join(dir, "d/b"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	fh.WriteString("+")
	fh.Close()
	os.WriteFile(filepath.Join(dir, "solo"), []byte("s"), 0o644)
	f.newTurn()
	os.Remove(filepath.Join(dir, "a"))
	recs, _ := f.take()
	got := map[string]string{}
	for _, r := range recs {
		if r.Inode.Known() && (r.Inode.Ino != st.Ino) != (r.Path == "solo") {
			t.Errorf("%s: inode %+v, want %d", r.Path, r.Inode, st.Ino)
		}
		l := slices.Clone(r.Links)
		slices.Sort(l)
		got[fmt.Sprintf("%s %d", r.Path, r.Inode.Nlink)] = strings.Join(l, " ")
	}
	want := map[string]string{"d/b 3": "a", "a 3": "d/b", "solo 1": ""}
	if len(recs) != 4 { // a twice: at the write, and at the unlink
		t.Errorf("%d records %v, want %v, a twice", len(recs), got, want)
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s: links %q (%v), want %q", k, g, ok, v)
		}
	}
}
