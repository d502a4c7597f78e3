package versionstore

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"golang.org/x/sys/unix"

	"ckptfs/internal/backing"
	"ckptfs/internal/ckpt"
)

// rangeFixture is a store on disk (so it can save a manifest) that
// range-captures every file, and a tree.
func rangeFixture(t *testing.T) (*Store, *backing.Tree, string) {
	t.Helper()
	s, tree, root := offlineFixture(t)
	s.rangeFrom = 0
	return s, tree, root
}

// recordRange records p's prior state before a change of its bytes
// [off, end) only, as the overlay does before a write or truncate.
func recordRange(t *testing.T, s *Store, tree *backing.Tree, p string, off, end int64) {
	t.Helper()
	st, ino, err := tree.LstatInode(p)
	if err != nil {
		t.Fatal(err)
	}
	if !s.NeedsRange(p, off, end) {
		return
	}
	c := ckpt.Capture{Path: p, Prior: st, Inode: ino, Range: &ckpt.ByteRange{Off: off, End: end},
		Open: func() (*os.File, error) { return tree.Open(p) }}
	if err := s.Record(c, ckpt.Program{Comm: "test"}); err != nil {
		t.Fatal(err)
	}
}

func fill(n int, c byte) []byte { return bytes.Repeat([]byte{c}, n) }

// versionBytes reads p's bytes at the end of turn n (tree: the live
// tree, nil if every answer is in the log).
func versionBytes(t *testing.T, s *Store, n uint64, p string, tree ckpt.Tree) ([]byte, error) {
	t.Helper()
	rc, _, err := s.OpenAt(n, p, tree)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// A file rewritten whole in a turn after a write into it has every
// prior byte in its range records: a change made to it while unmounted,
// later, costs none of its versions (the unmount sealed its bytes, and
// those before the turn are in the records anyway).
func TestRangeWholeCaptureSurvivesAnOfflineChange(t *testing.T) {
	s, tree, root := rangeFixture(t)
	p := filepath.Join(root, "big")
	orig := fill(3*rangeBlock+100, 'a')
	os.WriteFile(p, orig, 0o644)

	if _, err := s.Begin(ckpt.KindAgent, "t1", ""); err != nil {
		t.Fatal(err)
	}
	// A write into the first block, then a truncate to 0: between them
	// the range records hold every prior byte. (A first capture of the
	// whole file, O_TRUNC, is a whole record.)
	recordRange(t, s, tree, "big", 10, 20)
	recordRange(t, s, tree, "big", 0, ckpt.ToTheEnd)
	os.WriteFile(p, fill(1000, 'b'), 0o644)
	t1, err := s.End("")
	if err != nil {
		t.Fatal(err)
	}
	if n := countOps(t, s, opRange); n != 2 {
		t.Fatalf("%d range records, want 2", n)
	}

	// Unmounted: the file changes.
	if err := s.SaveManifest(tree, nil, nil); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(p, fill(2000, 'c'), 0o644)
	if res, err := s.RecordOffline(tree, nil, nil, false); err != nil || res.Paths != 1 || res.Lost != 0 {
		t.Fatalf("offline: %+v %v", res, err)
	}

	got, err := versionBytes(t, s, t1.Num-1, "big", tree)
	if err != nil || !bytes.Equal(got, orig) {
		t.Fatalf("big before turn %d: %d bytes, %v; want the %d bytes it had", t1.Num, len(got), err, len(orig))
	}
	res, err := s.Rewind(t1.Num-1, tree, RewindOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); !bytes.Equal(b, orig) {
		t.Fatalf("after the rewind big has %d bytes (lost: %v), want the %d it had", len(b), res.NotRestored, len(orig))
	}
}

// A file written in place in a turn, then changed while unmounted after
// an unmount that could not seal it (no room): its bytes before the turn
// are lost (the range records hold only what the turn overwrote). A
// rewind there names it and leaves it as it is, as it does any file whose
// bytes were never seen; it does not put the turn's spans into the bytes
// written while unmounted (while it undoes the turn's other changes).
func TestRangeRewindLeavesAFileChangedOfflineAsItIs(t *testing.T) {
	s, tree, root := rangeFixture(t)
	p := filepath.Join(root, "big")
	os.WriteFile(p, fill(4*rangeBlock, 'a'), 0o644)

	if _, err := s.Begin(ckpt.KindAgent, "t1", ""); err != nil {
		t.Fatal(err)
	}
	recordRange(t, s, tree, "big", 0, 10)
	// Another change of the turn, which the rewind undoes.
	if err := s.Record(ckpt.Capture{Path: "other"}, ckpt.Program{Comm: "test"}); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(root, "other"), []byte("x"), 0o644)
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte("0123456789"), 0)
	f.Close()
	t1, err := s.End("")
	if err != nil {
		t.Fatal(err)
	}

	if err := s.SaveManifest(tree, nil, nil); err != nil {
		t.Fatal(err)
	}
	dropSeals(t, s)
	offline := fill(4*rangeBlock+1, 'c')
	os.WriteFile(p, offline, 0o644)
	if _, err := s.RecordOffline(tree, nil, nil, false); err != nil {
		t.Fatal(err)
	}

	if _, err := versionBytes(t, s, t1.Num-1, "big", tree); !errors.Is(err, ErrNotCaptured) {
		t.Fatalf("big before turn %d: %v, want ErrNotCaptured", t1.Num, err)
	}
	res, err := s.Rewind(t1.Num-1, tree, RewindOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	if len(res.NotRestored) != 1 || res.NotRestored[0] != "big" {
		t.Fatalf("rewind names %v as not restored, want big", res.NotRestored)
	}
	if !bytes.Equal(b, offline) {
		t.Fatalf("big, named as left as it is, was rewritten: %q… (%d bytes), want the %d bytes written while unmounted", b[:12], len(b), len(offline))
	}
}

// lines is n numbered lines of text.
func lines(n int, tag string) []byte {
	var b bytes.Buffer
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "%s line %06d\n", tag, i)
	}
	return b.Bytes()
}

// writeAt writes b at off of the file p of tree, recording the range
// first.
func writeAt(t *testing.T, s *Store, tree *backing.Tree, root, p string, b []byte, off int64) {
	t.Helper()
	recordRange(t, s, tree, p, off, off+int64(len(b)))
	f, err := os.OpenFile(filepath.Join(root, p), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// Revert, forget in the middle, gc and verify over range records: every
// kept turn keeps its bytes, and a revert of a turn that wrote in place
// puts back only that turn's lines.
func TestRangeRevertForgetGC(t *testing.T) {
	s, tree, root := rangeFixture(t)
	p := filepath.Join(root, "big")
	v0 := lines(2000, "orig") // 32000 bytes: eight blocks
	os.WriteFile(p, v0, 0o644)
	var vs [][]byte
	var turns []uint64
	edit := func(off int64, tag string) {
		if _, err := s.Begin(ckpt.KindAgent, tag, ""); err != nil {
			t.Fatal(err)
		}
		writeAt(t, s, tree, root, "big", []byte(tag), off)
		tn, err := s.End("")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(p)
		vs, turns = append(vs, b), append(turns, tn.Num)
	}
	edit(16, "AAAA")             // block 0
	edit(20000, "BBBB")          // block 4
	edit(17, "CC")               // block 0 again
	edit(31990, "DDDD")          // block 7
	edit(int64(len(v0)), "EEEE") // appended
	check := func(what string) {
		t.Helper()
		if got, err := versionBytes(t, s, turns[0]-1, "big", tree); err != nil || !bytes.Equal(got, v0) {
			t.Fatalf("%s: before turn %d: %v", what, turns[0], err)
		}
		for i, n := range turns {
			if merged, _, _ := s.mergedInto(n); merged != 0 {
				continue
			}
			if got, err := versionBytes(t, s, n, "big", tree); err != nil || !bytes.Equal(got, vs[i]) {
				t.Fatalf("%s: end of turn %d: %v", what, n, err)
			}
		}
	}
	check("written")
	if _, err := s.Forget([]uint64{turns[1]}, "test"); err != nil {
		t.Fatal(err)
	}
	check("forgotten in the middle")
	if _, err := s.GC(GCOptions{}); err != nil {
		t.Fatal(err)
	}
	check("collected")
	if rep, err := s.Verify(); err != nil || len(rep.Corrupt) > 0 {
		t.Fatalf("verify: %+v %v", rep, err)
	}
	// Revert of the turn that wrote DDDD: only those bytes go back.
	if _, err := s.Revert(turns[3], tree, RevertOptions{}); err != nil {
		t.Fatal(err)
	}
	want := bytes.Clone(vs[4])
	copy(want[31990:], v0[31990:31994])
	if b, _ := os.ReadFile(p); !bytes.Equal(b, want) {
		i := 0
		for i < len(b) && i < len(want) && b[i] == want[i] {
			i++
		}
		t.Fatalf("after the revert of turn %d the file differs at %d: %q, want %q", turns[3], i, b[max(0, i-20):min(len(b), i+20)], want[max(0, i-20):min(len(want), i+20)])
	}
	check("reverted")
}

// A view of a turn before range records reads their spans over the live
// file while the open turn goes on writing it: in the blocks it holds
// (no event), past the end (none either), and in new blocks (an event).
func TestRangeViewWhileTheTurnWrites(t *testing.T) {
	s, tree, root := rangeFixture(t)
	p := filepath.Join(root, "big")
	v0 := lines(2000, "orig")
	os.WriteFile(p, v0, 0o644)
	if _, err := s.Begin(ckpt.KindAgent, "t1", ""); err != nil {
		t.Fatal(err)
	}
	writeAt(t, s, tree, root, "big", []byte("AAAA"), 16)
	t1, err := s.End("")
	if err != nil {
		t.Fatal(err)
	}
	v1, _ := os.ReadFile(p)
	if _, err := s.Begin(ckpt.KindAgent, "t2", ""); err != nil {
		t.Fatal(err)
	}
	writeAt(t, s, tree, root, "big", []byte("BBBB"), 100)
	check := func(what string) {
		t.Helper()
		for i, n := range []uint64{t1.Num - 1, t1.Num} {
			sn, err := s.ViewAt(n, tree, ViewOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range sn.Entries {
				if e.Path != "big" {
					continue
				}
				f, err := s.OpenView(sn, e, tree)
				if err != nil {
					t.Fatal(err)
				}
				got := make([]byte, f.Size())
				_, err = f.ReadAt(got, 0)
				f.Close()
				if want := [][]byte{v0, v1}[i]; (err != nil && err != io.EOF) || !bytes.Equal(got, want) {
					t.Fatalf("%s: view of turn %d: %v, bytes equal %v", what, n, err, bytes.Equal(got, want))
				}
			}
		}
	}
	check("written")
	writeAt(t, s, tree, root, "big", []byte("CCCC"), 200) // held: no event
	writeAt(t, s, tree, root, "big", []byte("DDDD"), int64(len(v0))+5)
	check("written in held blocks and past the end")
	writeAt(t, s, tree, root, "big", []byte("EEEE"), 20000)
	check("written in a new block")
	if _, err := s.End(""); err != nil {
		t.Fatal(err)
	}
	check("ended")
}

// Range records of two turns that together hold every byte of the first
// turn's start, then a change made while unmounted, unsealed: the first
// turn's start is still known (the second's is not), and a rewind there
// gives it back.
func TestRangeLayersOfTwoTurnsSurviveAnOfflineChange(t *testing.T) {
	s, tree, root := rangeFixture(t)
	p := filepath.Join(root, "big")
	v0 := fill(4*rangeBlock, 'a')
	os.WriteFile(p, v0, 0o644)
	var turns []uint64
	for i, off := range []int64{0, 2 * rangeBlock} {
		if _, err := s.Begin(ckpt.KindAgent, "t", ""); err != nil {
			t.Fatal(err)
		}
		writeAt(t, s, tree, root, "big", fill(2*rangeBlock, byte('b'+i)), off)
		if err := s.Record(ckpt.Capture{Path: fmt.Sprint("other", i)}, ckpt.Program{Comm: "test"}); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(root, fmt.Sprint("other", i)), []byte("x"), 0o644)
		tn, err := s.End("")
		if err != nil {
			t.Fatal(err)
		}
		turns = append(turns, tn.Num)
	}
	if err := s.SaveManifest(tree, nil, nil); err != nil {
		t.Fatal(err)
	}
	dropSeals(t, s)
	os.WriteFile(p, fill(100, 'z'), 0o644)
	if _, err := s.RecordOffline(tree, nil, nil, false); err != nil {
		t.Fatal(err)
	}
	if _, err := versionBytes(t, s, turns[0], "big", tree); !errors.Is(err, ErrNotCaptured) {
		t.Fatalf("big at the end of turn %d: %v, want ErrNotCaptured", turns[0], err)
	}
	if got, err := versionBytes(t, s, turns[0]-1, "big", tree); err != nil || !bytes.Equal(got, v0) {
		t.Fatalf("big before turn %d: %v", turns[0], err)
	}
	if _, err := s.Rewind(turns[0]-1, tree, RewindOptions{}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); !bytes.Equal(b, v0) {
		t.Fatalf("after the rewind big has %d bytes, not those it had", len(b))
	}
}

// A rewind undoes range records in place: the file keeps its inode (a
// process holding it open sees the old bytes back), and the rewind's turn
// keeps only the bytes it changes, as range records, so undoing a 4 KiB
// write costs about 4 KiB, however big the file. Undoing the rewind
// brings the later bytes back, in place again. A cut, an append and a
// mode change are undone the same way.
func TestRangeRewindInPlace(t *testing.T) {
	s, tree, root := rangeFixture(t)
	p, orig, held := heldBigFile(t, root)
	who := ckpt.Program{Comm: "test"}
	turn := func(name string, change func(f *os.File)) ckpt.Turn {
		t.Helper()
		if _, err := s.Begin(ckpt.KindAgent, name, ""); err != nil {
			t.Fatal(err)
		}
		f, err := os.OpenFile(p, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		change(f)
		f.Close()
		tn, err := s.End("")
		if err != nil {
			t.Fatal(err)
		}
		return tn
	}
	// kept sums the bytes the records from seq on keep.
	kept := func(seq uint64) (n int64) {
		s.scanEvents(seq, s.nextSeq, func(r *record) (bool, error) {
			if r.Content != nil {
				n += r.Content.Size
			}
			return true, nil
		})
		return n
	}
	rewind := func(what string, to uint64, want []byte, mode os.FileMode, maxKept int64) ckpt.Turn {
		t.Helper()
		seq := s.nextSeq
		res, err := s.Rewind(to, tree, RewindOptions{})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(p)
		if !bytes.Equal(b, want) {
			t.Fatalf("%s: big has %d bytes, want %d (first difference at %d)", what, len(b), len(want), firstDiff(b, want))
		}
		if fi, _ := os.Lstat(p); fi.Mode().Perm() != mode {
			t.Fatalf("%s: mode %v, want %v", what, fi.Mode().Perm(), mode)
		}
		if got, was := inodeOf(t, p), fdInode(t, held); got != was {
			t.Fatalf("%s: big is inode %d, want %d (changed in place)", what, got, was)
		}
		if k := kept(seq); k > maxKept {
			t.Fatalf("%s: the rewind kept %d bytes, want at most %d", what, k, maxKept)
		}
		return res.Turn
	}

	t1 := turn("t1", func(f *os.File) {
		recordRange(t, s, tree, "big", 100*rangeBlock, 101*rangeBlock)
		f.WriteAt(fill(rangeBlock, 'x'), 100*rangeBlock)
	})
	afterT1, _ := os.ReadFile(p)
	r1 := rewind("t1 rewound", t1.Num-1, orig, 0o640, rangeBlock)
	rewind("that rewind undone", r1.Num-1, afterT1, 0o640, rangeBlock)

	t3 := turn("t3", func(f *os.File) {
		// An append needs no record after the first (the file's size at
		// the turn's start is in it); a cut keeps what it cuts.
		recordRange(t, s, tree, "big", 3*rangeBlock+5, ckpt.ToTheEnd)
		f.Truncate(3*rangeBlock + 5)
		recordRange(t, s, tree, "big", 3*rangeBlock+5, 3*rangeBlock+5005)
		f.WriteAt(fill(5000, 'y'), 3*rangeBlock+5)
		st, _ := tree.Lstat("big")
		if err := s.Record(ckpt.Capture{Path: "big", Prior: st, MetaOnly: true}, who); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, 0o600)
	})
	afterT3, _ := os.ReadFile(p)
	// Undoing the cut writes back what it cut; the rewind keeps only the
	// bytes it overwrites (the 5000 appended).
	r3 := rewind("t3 rewound", t3.Num-1, afterT1, 0o640, 2*rangeBlock)
	rewind("that rewind undone", r3.Num-1, afterT3, 0o600, 300*rangeBlock)
}

// heldBigFile writes root/big (256 blocks and 100 bytes, mode 0640) and
// holds it open until the test ends: its inode cannot be reused by a
// file that replaced it, so an inode kept is a file changed in place.
func heldBigFile(t *testing.T, root string) (p string, orig []byte, held *os.File) {
	t.Helper()
	p = filepath.Join(root, "big")
	orig = patterned(256*rangeBlock+100, 7, 13)
	if err := os.WriteFile(p, orig, 0o640); err != nil {
		t.Fatal(err)
	}
	held, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { held.Close() })
	return p, orig, held
}

func fdInode(t *testing.T, f *os.File) uint64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

func inodeOf(t *testing.T, p string) uint64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// A rewind that undoes a cut at a block boundary writes back only bytes
// the file does not hold now: none of the record's spans overlap it, yet
// the file grows. The rewind's turn must still hold the size it started
// with, or undoing the rewind leaves the file grown.
func TestRangeRewindInPlaceOfABlockAlignedCut(t *testing.T) {
	s, tree, root := rangeFixture(t)
	p := filepath.Join(root, "big")
	orig := patterned(256*rangeBlock+100, 7, 13)
	os.WriteFile(p, orig, 0o640)
	if _, err := s.Begin(ckpt.KindAgent, "t1", ""); err != nil {
		t.Fatal(err)
	}
	recordRange(t, s, tree, "big", 128*rangeBlock, ckpt.ToTheEnd)
	os.Truncate(p, 128*rangeBlock)
	t1, err := s.End("")
	if err != nil {
		t.Fatal(err)
	}
	afterT1, _ := os.ReadFile(p)
	r1, err := s.Rewind(t1.Num-1, tree, RewindOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); !bytes.Equal(b, orig) {
		t.Fatalf("t1 rewound: big has %d bytes, want %d", len(b), len(orig))
	}
	if b, err := versionBytes(t, s, r1.Turn.Num-1, "big", tree); err != nil || !bytes.Equal(b, afterT1) {
		t.Fatalf("big before the rewind: %d bytes (%v), want %d", len(b), err, len(afterT1))
	}
	if _, err := s.Rewind(r1.Turn.Num-1, tree, RewindOptions{}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); !bytes.Equal(b, afterT1) {
		t.Fatalf("that rewind undone: big has %d bytes, want %d", len(b), len(afterT1))
	}
}

// Two resolutions over one live file differ only where their own layers
// put spans or cut the file (not the layers both carry): only there does
// a comparison or log -S read.
func TestDifferOnlyTheLayers(t *testing.T) {
	const size = 100 * rangeBlock
	liveFile := resolved{State: ckpt.State{Type: ckpt.Regular, Size: size}, Live: "f"}
	over := func(base int64, ls ...layer) resolved {
		return resolved{State: ckpt.State{Type: ckpt.Regular, Size: size}, FromLog: true,
			Patch: &patched{Live: "f", BaseSize: base, Layers: ls}}
	}
	for _, c := range []struct {
		name string
		x, y resolved
		want []int64
		ok   bool
	}{
		{"the live file and a layer", liveFile, over(size, layer{Size: size, Spans: []int64{4 * rangeBlock, rangeBlock, 9 * rangeBlock, 2 * rangeBlock}}),
			[]int64{4 * rangeBlock, rangeBlock, 9 * rangeBlock, 2 * rangeBlock}, true},
		{"overlapping layers of both, merged", over(size, layer{Size: size, Spans: []int64{0, 2 * rangeBlock}}),
			over(size, layer{Size: size, Spans: []int64{rangeBlock, 2 * rangeBlock}}, layer{Size: size, Spans: []int64{3 * rangeBlock, rangeBlock}}),
			[]int64{0, 4 * rangeBlock}, true},
		{"a layer that cut the file", liveFile, over(size, layer{Size: 50 * rangeBlock, Spans: []int64{rangeBlock, rangeBlock}}, layer{Size: size}),
			[]int64{rangeBlock, rangeBlock, 50 * rangeBlock, 50 * rangeBlock}, true},
		{"a base shorter than the version", over(size-10, layer{Size: size, Spans: []int64{size - rangeBlock, rangeBlock}}), liveFile, nil, false},
		{"a stored version", resolved{State: liveFile.State, FromLog: true, Content: &contentRef{Size: size}}, liveFile, nil, false},
		{"a later layer both carry drops out", over(size, layer{Size: size, Spans: []int64{0, rangeBlock}}, layer{Size: size, Spans: []int64{8 * rangeBlock, rangeBlock}}),
			over(size, layer{Size: size, Spans: []int64{2 * rangeBlock, rangeBlock}}, layer{Size: size, Spans: []int64{8 * rangeBlock, rangeBlock}}),
			[]int64{0, rangeBlock, 2 * rangeBlock, rangeBlock}, true},
	} {
		got, ok := differIn(c.x, c.y)
		if ok != c.ok || fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("%s: %v %v, want %v %v", c.name, got, ok, c.want, c.ok)
		}
	}
}

// writtenPastTree is a tree whose files are all open for writing past the
// daemon: PatchFile refuses them.
type writtenPastTree struct{ *backing.Tree }

func (writtenPastTree) PatchFile(string, int64, []int64, io.ReaderAt) error {
	return ckpt.ErrWrittenPast
}

// A file a process writes past the daemon is not changed in place: the
// rewind replaces it (the writer keeps writing into the old inode), and
// the rewind still rewinds and undoes exactly.
func TestRangeRewindReplacesAFileWrittenPast(t *testing.T) {
	s, tree, root := rangeFixture(t)
	p := filepath.Join(root, "big")
	orig := fill(64*rangeBlock, 'a')
	os.WriteFile(p, orig, 0o644)
	held, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if _, err := s.Begin(ckpt.KindAgent, "t1", ""); err != nil {
		t.Fatal(err)
	}
	recordRange(t, s, tree, "big", 10*rangeBlock, 11*rangeBlock)
	held.WriteAt(fill(rangeBlock, 'b'), 10*rangeBlock)
	t1, err := s.End("")
	if err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadFile(p)
	res, err := s.Rewind(t1.Num-1, writtenPastTree{tree}, RewindOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); !bytes.Equal(b, orig) {
		t.Fatalf("after the rewind: first difference at %d", firstDiff(b, orig))
	}
	if inodeOf(t, p) == fdInode(t, held) {
		t.Fatal("the rewind changed the file a process writes past the daemon in place")
	}
	// The writer's next write goes into the old inode, not the rewound file.
	held.WriteAt(fill(rangeBlock, 'c'), 0)
	if b, _ := os.ReadFile(p); !bytes.Equal(b, orig) {
		t.Fatalf("a write past the daemon after the rewind changed it: first difference at %d", firstDiff(b, orig))
	}
	if _, err := s.Rewind(res.Turn.Num-1, writtenPastTree{tree}, RewindOptions{}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); !bytes.Equal(b, after) {
		t.Fatalf("the rewind undone: first difference at %d", firstDiff(b, after))
	}
}

// suidClearingTree clears the set-user-ID bit of a file it patches, as
// the kernel does for a writer without CAP_FSETID (a user's daemon).
type suidClearingTree struct{ *backing.Tree }

func (t suidClearingTree) PatchFile(p string, size int64, spans []int64, r io.ReaderAt) error {
	if err := t.Tree.PatchFile(p, size, spans, r); err != nil {
		return err
	}
	st, err := t.Tree.Lstat(p)
	if err != nil {
		return err
	}
	return t.Tree.Chmod(p, st.Mode&^unix.S_ISUID)
}

// An in-place undo puts back a set-user-ID bit its own writes cleared,
// in its own step: the fix-up pass finds nothing left to do.
func TestRangeRewindInPlaceKeepsSetUID(t *testing.T) {
	s, tree, root := rangeFixture(t)
	p := filepath.Join(root, "big")
	os.WriteFile(p, fill(64*rangeBlock, 'a'), 0o755)
	unix.Chmod(p, 0o4755)
	if _, err := s.Begin(ckpt.KindAgent, "t1", ""); err != nil {
		t.Fatal(err)
	}
	recordRange(t, s, tree, "big", 3*rangeBlock, 4*rangeBlock)
	xf, _ := os.OpenFile(p, os.O_WRONLY, 0)
	xf.WriteAt(fill(rangeBlock, 'b'), 3*rangeBlock)
	xf.Close()
	unix.Chmod(p, 0o4755) // a root writer keeps it; make sure
	t1, err := s.End("")
	if err != nil {
		t.Fatal(err)
	}
	before := fixups.Load()
	if _, err := s.Rewind(t1.Num-1, suidClearingTree{tree}, RewindOptions{}); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Lstat(p); fi.Mode()&os.ModeSetuid == 0 || fi.Mode().Perm() != 0o755 {
		t.Fatalf("after the rewind big's mode is %v, want setuid 0755", fi.Mode())
	}
	if n := fixups.Load() - before; n != 0 {
		t.Fatalf("the fix-up pass took %d actions, want 0", n)
	}
}

// The fix-up pass (a rewind over a history longer than its changes, and
// every restore of a path) puts a range-kept file back in place too: the
// layers over the live file are written, not the whole version, and the
// file keeps its inode.
func TestRangeFixupPatchesInPlace(t *testing.T) {
	for _, how := range []string{"net rewind", "restore"} {
		t.Run(how, func(t *testing.T) {
			if how == "net rewind" {
				defer func(l func(int, int) uint64) { replayLimit = l }(replayLimit)
				replayLimit = func(int, int) uint64 { return 0 }
			}
			s, tree, root := rangeFixture(t)
			p := filepath.Join(root, "big")
			orig := patterned(256*rangeBlock+7, 5, 11)
			os.WriteFile(p, orig, 0o644)
			os.WriteFile(filepath.Join(root, "small"), []byte("s"), 0o644)
			held, err := os.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			defer held.Close()
			var first uint64
			for i, off := range []int64{100 * rangeBlock, 7*rangeBlock + 3, 250 * rangeBlock} {
				if _, err := s.Begin(ckpt.KindAgent, fmt.Sprint("t", i), ""); err != nil {
					t.Fatal(err)
				}
				recordRange(t, s, tree, "big", off, off+rangeBlock)
				f, _ := os.OpenFile(p, os.O_WRONLY, 0)
				f.WriteAt(fill(rangeBlock, byte('x'+i)), off)
				f.Close()
				tn, err := s.End("")
				if err != nil {
					t.Fatal(err)
				}
				if first == 0 {
					first = tn.Num
				}
			}
			after, _ := os.ReadFile(p)
			opts := RewindOptions{}
			if how == "restore" {
				opts.Paths = []string{"big"}
			}
			seq := s.nextSeq
			res, err := s.Rewind(first-1, tree, opts)
			if err != nil {
				t.Fatal(err)
			}
			if b, _ := os.ReadFile(p); !bytes.Equal(b, orig) {
				t.Fatalf("big: first difference at %d", firstDiff(b, orig))
			}
			if inodeOf(t, p) != fdInode(t, held) {
				t.Fatal("big was replaced, not patched in place")
			}
			var kept int64
			s.scanEvents(seq, s.nextSeq, func(r *record) (bool, error) {
				if r.Content != nil {
					kept += r.Content.Size
				}
				return true, nil
			})
			if kept > 6*rangeBlock {
				t.Fatalf("the rewind kept %d bytes for three 4 KiB writes", kept)
			}
			if _, err := s.Rewind(res.Turn.Num-1, tree, opts); err != nil {
				t.Fatal(err)
			}
			if b, _ := os.ReadFile(p); !bytes.Equal(b, after) {
				t.Fatalf("the rewind undone: first difference at %d", firstDiff(b, after))
			}
		})
	}
}

// patterned is n bytes that differ from block to block: byte i is
// i*mul/div.
func patterned(n, mul, div int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i * mul / div)
	}
	return b
}

// A rewind that patches a big file in place needs room for the bytes it
// writes, not for the file: a 4 KiB write into a 64 MiB file rewinds,
// whole tree or the one path, or reverted, with 16 MiB free (it was
// refused, the whole file counted; a revert passed the check, then
// failed with the store full as it copied the file whole).
func TestRangeRewindInPlaceNeedsRoomForTheChangeOnly(t *testing.T) {
	for _, how := range []string{"rewind", "restore", "revert"} {
		t.Run(how, func(t *testing.T) {
			fsDir := t.TempDir()
			if err := unix.Mount("tmpfs", fsDir, "tmpfs", 0, "size=112m,mode=0700"); err != nil {
				t.Skipf("cannot mount a tmpfs: %v", err)
			}
			t.Cleanup(func() { unix.Unmount(fsDir, unix.MNT_DETACH) })
			root, dir := filepath.Join(fsDir, how+"-tree"), filepath.Join(fsDir, how+"-store")
			os.Mkdir(root, 0o755)
			s, err := Open(dir, Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			tree, err := backing.Open(root)
			if err != nil {
				t.Fatal(err)
			}
			defer tree.Close()
			p := filepath.Join(root, "big")
			orig := patterned(64<<20, 3, 7)
			if err := os.WriteFile(p, orig, 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Begin(ckpt.KindAgent, "t1", ""); err != nil {
				t.Fatal(err)
			}
			recordRange(t, s, tree, "big", 40<<20, 40<<20+rangeBlock)
			f, _ := os.OpenFile(p, os.O_WRONLY, 0)
			f.WriteAt(fill(rangeBlock, 'z'), 40<<20)
			f.Close()
			t1, err := s.End("")
			if err != nil {
				t.Fatal(err)
			}
			var st unix.Statfs_t
			unix.Statfs(fsDir, &st)
			free := int64(st.Bavail) * st.Bsize
			filler := filepath.Join(fsDir, how+"-filler")
			ff, err := os.Create(filler)
			if err != nil {
				t.Fatal(err)
			}
			if err := unix.Fallocate(int(ff.Fd()), 0, 0, free-16<<20); err != nil {
				t.Fatal(err)
			}
			ff.Close()
			defer os.Remove(filler)
			opts := RewindOptions{}
			if how == "restore" {
				opts.Paths = []string{"big"}
			}
			if how == "revert" {
				_, err = s.Revert(t1.Num, tree, RevertOptions{})
			} else {
				_, err = s.Rewind(t1.Num-1, tree, opts)
			}
			if err != nil {
				t.Fatalf("with 16 MiB free: %v", err)
			}
			if b, _ := os.ReadFile(p); !bytes.Equal(b, orig) {
				t.Fatalf("big: first difference at %d", firstDiff(b, orig))
			}
		})
	}
}

// A revert of a turn that wrote into a big file no later turn changed
// patches the file in place: the same inode, the store keeps only the
// bytes the revert overwrites, and undoing the revert is exact too.
func TestRangeRevertPatchesInPlace(t *testing.T) {
	s, tree, root := rangeFixture(t)
	p, orig, held := heldBigFile(t, root)
	if _, err := s.Begin(ckpt.KindAgent, "t1", ""); err != nil {
		t.Fatal(err)
	}
	writeAt(t, s, tree, root, "big", fill(rangeBlock, 'x'), 100*rangeBlock+5)
	t1, err := s.End("")
	if err != nil {
		t.Fatal(err)
	}
	afterT1, _ := os.ReadFile(p)
	if _, err := s.Begin(ckpt.KindAgent, "t2", ""); err != nil {
		t.Fatal(err)
	}
	if err := s.Record(ckpt.Capture{Path: "other"}, ckpt.Program{Comm: "test"}); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(root, "other"), []byte("later"), 0o644)
	if _, err := s.End(""); err != nil {
		t.Fatal(err)
	}

	seq := s.nextSeq
	res, err := s.Revert(t1.Num, tree, RevertOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); !bytes.Equal(b, orig) {
		t.Fatalf("reverted: big has %d bytes, first difference at %d", len(b), firstDiff(b, orig))
	}
	if b, _ := os.ReadFile(filepath.Join(root, "other")); string(b) != "later" {
		t.Fatalf("the revert changed a later turn's file: %q", b)
	}
	if got, was := inodeOf(t, p), fdInode(t, held); got != was {
		t.Fatalf("reverted: big is inode %d, want %d (patched in place)", got, was)
	}
	var kept int64
	s.scanEvents(seq, s.nextSeq, func(r *record) (bool, error) {
		if r.Content != nil {
			kept += r.Content.Size
		}
		return true, nil
	})
	if kept > 2*rangeBlock {
		t.Fatalf("the revert kept %d bytes, want at most %d (what it overwrote)", kept, 2*rangeBlock)
	}
	if _, err := s.Rewind(res.Turn.Num-1, tree, RewindOptions{}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); !bytes.Equal(b, afterT1) {
		t.Fatalf("the revert undone: big has %d bytes, first difference at %d", len(b), firstDiff(b, afterT1))
	}
	if fi, _ := os.Lstat(p); fi.Mode().Perm() != 0o640 {
		t.Fatalf("the revert undone: mode %v", fi.Mode().Perm())
	}
}

// locateScan is locate as one pass over the layers per byte: the
// reference the flattened runs must agree with.
func (pr *patchedReader) locateScan(pos int64) (layer int, off int64, err error) {
	for i, l := range pr.layers {
		k := sort.Search(len(l.Spans)/2, func(k int) bool { return l.Spans[2*k]+l.Spans[2*k+1] > pos })
		if k < len(l.Spans)/2 && l.Spans[2*k] <= pos {
			return i, pr.cum[i][k] + pos - l.Spans[2*k], nil
		}
		next := pr.baseSize
		if i+1 < len(pr.layers) {
			next = pr.layers[i+1].Size
		} else if pr.base == nil {
			next = 0
		}
		if pos >= next {
			return 0, 0, ErrCorrupt
		}
	}
	return -1, pos, nil
}

// TestPatchedReaderRuns: over random layers (sizes, spans that overlap
// across layers, with a base or none), every byte's source by the
// flattened runs is the scan's, and each run's length keeps to it.
func TestPatchedReaderRuns(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for iter := 0; iter < 3000; iter++ {
		size := int64(rng.IntN(200))
		var layers []layer
		for range rng.IntN(12) {
			l := layer{Size: int64(rng.IntN(220))}
			if rng.IntN(8) == 0 {
				l.Size = 0 // a file that was empty
			}
			for pos := int64(rng.IntN(30)); pos < l.Size; pos += int64(rng.IntN(40)) { // spans may touch
				n := min(int64(1+rng.IntN(25)), l.Size-pos)
				l.Spans = append(l.Spans, pos, n)
				pos += n
			}
			layers = append(layers, l)
		}
		var base io.ReaderAt
		baseSize := int64(0)
		if rng.IntN(3) > 0 {
			base, baseSize = bytes.NewReader(nil), int64(rng.IntN(220))
		}
		pr := (&Store{}).newPatchedReader(size, layers, base, baseSize)
		for pos := int64(0); pos < size; {
			wl, woff, werr := pr.locateScan(pos)
			if len(layers) == 0 && base == nil {
				werr = ErrCorrupt // the scan would read a nil base
			}
			l, off, n, err := pr.locate(pos)
			if (err != nil) != (werr != nil) || err == nil && (l != wl || off != woff) {
				t.Fatalf("iter %d, byte %d: locate = %d, %d, %v; the scan says %d, %d, %v", iter, pos, l, off, err, wl, woff, werr)
			}
			if err != nil {
				pos++
				continue
			}
			if n <= 0 || pos+n > size {
				t.Fatalf("iter %d, byte %d: a run of %d bytes", iter, pos, n)
			}
			for q := pos + 1; q < pos+n; q++ {
				if ql, qoff, qerr := pr.locateScan(q); qerr != nil || ql != l || (l >= 0 && qoff != off+q-pos) || (l < 0 && qoff != q) {
					t.Fatalf("iter %d: the run from %d (%d bytes) is not one source at %d", iter, pos, n, q)
				}
			}
			pos += n
		}
	}
}
