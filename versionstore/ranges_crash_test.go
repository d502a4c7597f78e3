package versionstore

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"ckptfs/internal/backing"
	"ckptfs/internal/ckpt"
	"ckptfs/internal/crashpoint"
)

// inPlaceCase is a history of three turns of writes, cuts and growths of
// three big files, range-captured into a store in memory (so a kill can
// be simulated), and the rewind to before them, which undoes each range
// record in place.
type inPlaceCase struct {
	mem    *vfs.MemFS
	s      *Store
	tree   *backing.Tree
	root   string
	target uint64
	want   snapshot // at the target
	before snapshot // before the rewind
}

func newInPlaceCase(t *testing.T) *inPlaceCase {
	c := &inPlaceCase{mem: vfs.NewCrashableMem(), root: t.TempDir()}
	c.s = openOn(t, c.mem)
	var err error
	if c.tree, err = backing.Open(c.root); err != nil {
		t.Fatal(err)
	}
	pat := func(n int, k int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i*7/13 + k)
		}
		return b
	}
	os.WriteFile(filepath.Join(c.root, "big"), pat(3<<20+100, 1), 0o644)
	os.WriteFile(filepath.Join(c.root, "cut"), pat(2<<20, 2), 0o644)
	os.WriteFile(filepath.Join(c.root, "grown"), pat(1<<20+300, 3), 0o644)
	c.target = c.s.Latest()
	c.want = takeSnapshot(t, c.root)
	write := func(p string, off int64, b []byte) {
		recordRange(t, c.s, c.tree, p, off, off+int64(len(b)))
		f, _ := os.OpenFile(filepath.Join(c.root, p), os.O_WRONLY, 0)
		f.WriteAt(b, off)
		f.Close()
	}
	cut := func(p string, size int64) {
		recordRange(t, c.s, c.tree, p, size, ckpt.ToTheEnd)
		os.Truncate(filepath.Join(c.root, p), size)
	}
	turn := func(fn func()) {
		if _, err := c.s.Begin(ckpt.KindAgent, "", ""); err != nil {
			t.Fatal(err)
		}
		fn()
		if _, err := c.s.End(""); err != nil {
			t.Fatal(err)
		}
	}
	// big: spans over 1 MiB (PatchFile writes them in parts), cut
	// unaligned then grown; cut: cut at a block boundary; grown: grown
	// with a truncate, then cut at a block boundary.
	turn(func() {
		write("big", 100*rangeBlock+7, fill(3<<19, 'x'))
		write("big", 2900<<10, fill(10, 'y'))
		cut("cut", 1<<20)
		write("grown", 5, fill(3, 'g'))
	})
	turn(func() {
		cut("big", 2<<20+5)
		write("big", 2<<20+5, fill(8000, 'z'))
		cut("grown", 3<<20)
		write("grown", 3<<20-10, fill(10, 'h'))
	})
	turn(func() {
		st, _ := c.tree.Lstat("big")
		write("big", st.Size, fill(1<<20, 'w'))
		write("big", 10, fill(1<<20+5000, 'v'))
		cut("grown", 1<<20)
	})
	c.before = takeSnapshot(t, c.root)
	return c
}

// A rewind that undoes range records in place, killed at any of its crash
// points (every write PatchFile makes among them) and recovered (the
// recovery killed too, now and then), leaves the target, in place; and
// the recovered rewind undoes exactly: its turn's range records hold the
// bytes and sizes from before it, whatever the crash left written.
func TestRangeRewindInPlaceCrashes(t *testing.T) {
	c := newInPlaceCase(t)
	inos := map[string]uint64{}
	for _, p := range []string{"big", "cut", "grown"} {
		inos[p] = inodeOf(t, filepath.Join(c.root, p))
	}
	stop := crashpoint.Trace()
	_, err := c.s.Rewind(c.target, c.tree, RewindOptions{})
	trace := stop()
	if err != nil {
		t.Fatal(err)
	}
	if d := diffSnap(c.want, takeSnapshot(t, c.root)); d != "" {
		t.Fatalf("no crash: %s", d)
	}
	for p, ino := range inos {
		if inodeOf(t, filepath.Join(c.root, p)) != ino {
			t.Fatalf("%s: not in place", p)
		}
	}
	rt, _ := c.s.Turn(c.s.Latest())
	if _, err := c.s.Rewind(rt.Num-1, c.tree, RewindOptions{}); err != nil {
		t.Fatal(err)
	}
	if d := diffSnap(c.before, takeSnapshot(t, c.root)); d != "" {
		t.Fatalf("no crash, undo: %s", d)
	}
	c.s.Close()
	c.tree.Close()
	t.Logf("crashing at each of %d hits", len(trace))
	for n := 1; n <= len(trace); n++ {
		c := newInPlaceCase(t)
		what := fmt.Sprintf("hit %d (%s)", n, trace[n-1])
		p, err := untilCrash(t, fmt.Sprintf("*@%d", n), func() error { _, err := c.s.Rewind(c.target, c.tree, RewindOptions{}); return err })
		if p == "" {
			t.Fatalf("%s: no crash: %v", what, err)
		}
		s2, clone := killClone(t, c.mem)
		c.s.Close()
		if n%2 == 0 {
			m := 1 + n%7
			if p2, _ := untilCrash(t, fmt.Sprintf("*@%d", m), func() error { _, err := s2.Recover(c.tree); return err }); p2 != "" {
				what += fmt.Sprintf(", recovery at %d (%s)", m, p2)
				s3, _ := killClone(t, clone)
				s2.Close()
				s2 = s3
			}
		}
		did, err := s2.Recover(c.tree)
		if err != nil {
			t.Fatalf("%s: recover: %v", what, err)
		}
		if !did {
			if _, err := s2.Rewind(c.target, c.tree, RewindOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		if d := diffSnap(c.want, takeSnapshot(t, c.root)); d != "" {
			t.Fatalf("%s: recovered: %s", what, d)
		}
		rt, _ := s2.Turn(s2.Latest())
		if _, err := s2.Rewind(rt.Num-1, c.tree, RewindOptions{}); err != nil {
			t.Fatal(err)
		}
		if d := diffSnap(c.before, takeSnapshot(t, c.root)); d != "" {
			t.Fatalf("%s: recovered rewind undone: %s", what, d)
		}
		s2.Close()
		c.tree.Close()
	}
}

// A restore that patches files in place, killed at its first action and
// then a file cut while unmounted: Recover leaves that file as it is (the
// layers no longer rest on it) and finishes the others; it does not fail,
// which would stop every later mount.
func TestRangePatchOfAFileCutSinceACrash(t *testing.T) {
	c := newInPlaceCase(t)
	paths := []string{"big", "cut", "grown"}
	p, err := untilCrash(t, "rewind.fixup@1", func() error {
		_, err := c.s.Rewind(c.target, c.tree, RewindOptions{Paths: paths})
		return err
	})
	if p == "" {
		t.Fatalf("no crash: %v", err)
	}
	s2, _ := killClone(t, c.mem)
	c.s.Close()
	defer s2.Close()
	defer c.tree.Close()
	if err := os.Truncate(filepath.Join(c.root, "big"), 100); err != nil {
		t.Fatal(err)
	}
	if _, err := s2.Recover(c.tree); err != nil {
		t.Fatalf("recover: %v", err)
	}
	if fi, _ := os.Stat(filepath.Join(c.root, "big")); fi.Size() != 100 {
		t.Errorf("big has %d bytes, want the 100 it was cut to", fi.Size())
	}
	got := takeSnapshot(t, c.root)
	for _, p := range []string{"cut", "grown"} {
		if got[p] != c.want[p] {
			t.Errorf("%s not restored", p)
		}
	}
}
