package control

import (
	"bytes"
	"context"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/cockroachdb/pebble/v2/vfs"

	"ckptfs/fusefs/fusefstest"
	"ckptfs/internal/ckpt"
	"ckptfs/turnctl"
	"ckptfs/versionstore"
)

// TestCountIn: occurrences across the reads of a block count once, and
// as bytes.Count counts them (left to right, without overlaps).
func TestCountIn(t *testing.T) {
	big := strings.Repeat("x", 256<<10-2) + "needle" + strings.Repeat("aaa", 100000) + "needle"
	for _, c := range []struct{ data, text string }{
		{"", "a"}, {"aaaa", "aa"}, {"abababa", "aba"}, {"needle", "needle"},
		{big, "needle"}, {big, "aa"}, {big, "xn"}, {big, "ea"},
	} {
		want := bytes.Count([]byte(c.data), []byte(c.text))
		if got, err := countIn(strings.NewReader(c.data), []byte(c.text)); err != nil || got != want {
			t.Errorf("countIn(%d bytes, %q) = %d, %v; want %d", len(c.data), c.text, got, err, want)
		}
		if got, err := countIn(iotest.HalfReader(strings.NewReader(c.data)), []byte(c.text)); err != nil || got != want {
			t.Errorf("countIn(half reads of %d bytes, %q) = %d, %v; want %d", len(c.data), c.text, got, err, want)
		}
	}
}

// guardedReader is a ReaderAt that fails the test for a read outside
// windows.
type guardedReader struct {
	t       *testing.T
	b       []byte
	windows [][2]int64
}

func (g guardedReader) ReadAt(p []byte, off int64) (int, error) {
	end := off + int64(len(p))
	ok := false
	for _, w := range g.windows {
		ok = ok || off >= w[0] && min(end, int64(len(g.b))) <= w[1]
	}
	if !ok {
		g.t.Fatalf("read [%d, %d) outside the widened ranges %v", off, end, g.windows)
	}
	return bytes.NewReader(g.b).ReadAt(p, off)
}

// TestOccurrencesDiffer: for two files equal outside some ranges, the
// answer is the whole files' (bytes.Count), from reads of the ranges
// widened by the text's length less one only.
func TestOccurrencesDiffer(t *testing.T) {
	base := []byte(strings.Repeat("filler needle filler ", 50000)) // 1 MB
	type edit struct {
		off  int
		text string
	}
	for _, c := range []struct {
		name  string
		edits []edit
		grow  string // appended to b
		cut   int    // b cut to this many bytes (0: not)
		text  string
	}{
		{"one replaced", []edit{{7, "NEEDLE"}}, "", 0, "needle"},
		{"same count", []edit{{7, "NEEDLE"}, {5000, "needle"}}, "", 0, "needle"},
		{"one made across a range's end", []edit{{500000, "need"}}, "", 0, "needle"},
		{"half of one changed", []edit{{28, "x"}}, "", 0, "needle"},
		{"changed elsewhere", []edit{{5, "y"}}, "", 0, "needle"},
		{"appended", nil, "needle", 0, "needle"},
		{"appended, no text", nil, "zzz", 0, "needle"},
		{"cut", nil, "", 700001, "needle"},
		{"one byte", []edit{{3, "q"}}, "", 0, "q"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := bytes.Clone(base)
			var ranges []int64
			for _, e := range c.edits {
				copy(b[e.off:], e.text)
				ranges = append(ranges, int64(e.off), int64(len(e.text)))
			}
			if c.cut > 0 {
				b = b[:c.cut]
				ranges = append(ranges, int64(c.cut), int64(len(base)-c.cut))
			}
			if c.grow != "" {
				ranges = append(ranges, int64(len(b)), int64(len(c.grow)))
				b = append(b, c.grow...)
			}
			w := int64(len(c.text) - 1)
			var windows [][2]int64
			for i := 0; i < len(ranges); i += 2 {
				windows = append(windows, [2]int64{max(0, ranges[i]-w), ranges[i] + ranges[i+1] + w})
			}
			want := bytes.Count(base, []byte(c.text)) != bytes.Count(b, []byte(c.text))
			got, err := occurrencesDiffer(guardedReader{t, base, windows}, guardedReader{t, b, windows},
				int64(len(base)), int64(len(b)), ranges, []byte(c.text))
			if err != nil || got != want {
				t.Fatalf("occurrencesDiffer = %v, %v; want %v", got, err, want)
			}
		})
	}
}

func TestOverlapsItself(t *testing.T) {
	for text, want := range map[string]bool{"a": false, "aa": true, "abab": true, "aba": true, "needle": false, "abc": false, "abca": true} {
		if got := overlapsItself([]byte(text)); got != want {
			t.Errorf("overlapsItself(%q) = %v, want %v", text, got, want)
		}
	}
}

// newRangeFixture is a fixture whose store keeps files of 4 KiB and more
// by ranges.
func newRangeFixture(t *testing.T) (*fixture, *versionstore.Store) {
	store, err := versionstore.Open("/store", versionstore.Options{FS: vfs.NewMem(), RangeFrom: 4096})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	ov := fusefstest.New(t, t.TempDir(), store)
	return &fixture{t: t, ov: ov, gate: &fakeGate{}, svc: NewService(store, ov.Tree, &fakeGate{}), ctx: context.Background()}, store
}

// TestPickaxeOverRangeRecords: log -S over turns that wrote into a file
// kept by ranges finds the turns that changed the count, for a text that
// may overlap itself (read whole) and one that cannot (read around the
// ranges only).
func TestPickaxeOverRangeRecords(t *testing.T) {
	f, _ := newRangeFixture(t)
	f.begin("made")
	f.ov.Write("big", strings.Repeat("filler needle aaa ", 20000)) // 360 kB
	f.end()
	one := f.begin("one needle more")
	f.ov.WriteAt("big", 99990, "needle") // over a "filler"
	f.end()
	moved := f.begin("a needle moved")
	f.ov.WriteAt("big", 7, "NEEDLE")
	f.ov.WriteAt("big", 300001, "needle")
	f.end()
	aa := f.begin("aa added")
	f.ov.WriteAt("big", 200000, "aaaa")
	f.end()
	for text, want := range map[string][]uint64{
		"needle": {one, 1},
		"NEEDLE": {moved},
		"aa":     {aa, moved, 1},
		"zzz":    nil,
	} {
		rep, err := f.svc.Log(f.ctx, turnctl.LogRequest{Pickaxe: text})
		if err != nil {
			t.Fatal(err)
		}
		var got []uint64
		for _, tn := range rep.Turns {
			got = append(got, tn.Num)
		}
		if !slices.Equal(got, want) {
			t.Errorf("log -S %q: turns %v, want %v", text, got, want)
		}
	}
}

// decoyTree opens path as a copy of it whose k-th open holds k more
// copies of mark at far: a search that reads a file kept by ranges
// beyond the turn's own blocks counts them, and sees the two sides differ.
type decoyTree struct {
	ckpt.Tree
	t          *testing.T
	path, mark string
	far        int64
	opens      int
}

func (d *decoyTree) Open(p string) (*os.File, error) {
	f, err := d.Tree.Open(p)
	if err != nil || p != d.path {
		return f, err
	}
	defer f.Close()
	d.opens++
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, err
	}
	for k := 0; k < d.opens; k++ {
		copy(data[d.far+int64(k*len(d.mark)):], d.mark)
	}
	c := filepath.Join(d.t.TempDir(), "decoy")
	if err := os.WriteFile(c, data, 0o600); err != nil {
		return nil, err
	}
	return os.Open(c)
}

// TestPickaxeReadsOnlyTheTurnsBlocks: log -S over a file kept by ranges
// reads the blocks each turn wrote and the text's length around them,
// nothing else of the file (the live file both sides rest on differs at
// every open beyond them here, so a search that read more would find
// every turn).
func TestPickaxeReadsOnlyTheTurnsBlocks(t *testing.T) {
	f, store := newRangeFixture(t)
	ov := f.ov
	f.begin("made")
	ov.Write("big", strings.Repeat("filler ", 100000)) // 700 kB
	f.end()
	one := f.begin("a needle")
	ov.WriteAt("big", 10000, "needle")
	f.end()
	f.begin("no needle")
	ov.WriteAt("big", 20000, "thread")
	f.end()
	decoy := &decoyTree{Tree: ov.Tree, t: t, path: "big", mark: "needle", far: 600000}
	f.svc = NewService(store, decoy, &fakeGate{})
	// -n 1: the newest turn that changed the count, before the search
	// reaches the turn that made the file (read whole: it has no before).
	rep, err := f.svc.Log(f.ctx, turnctl.LogRequest{N: 1, Pickaxe: "needle"})
	if err != nil {
		t.Fatal(err)
	}
	var got []uint64
	for _, tn := range rep.Turns {
		got = append(got, tn.Num)
	}
	if want := []uint64{one}; !slices.Equal(got, want) {
		t.Errorf("log -n 1 -S needle: turns %v, want %v", got, want)
	}
	if decoy.opens < 2 {
		t.Errorf("the search opened the live file %d times: the test needs it read for both sides", decoy.opens)
	}
}

// TestChangedRangesAreTheTurnsOwn: each of five turns writes one block
// of a file kept by ranges; a turn's two sides both carry the later
// turns' layers, yet only its own block may differ (log -S over a file
// written every turn reads each turn's writes, not all later ones too).
func TestChangedRangesAreTheTurnsOwn(t *testing.T) {
	f, store := newRangeFixture(t)
	ov := f.ov
	f.begin("made")
	ov.Write("big", strings.Repeat("x", 1<<20))
	f.end()
	var turns []uint64
	for k := 0; k < 5; k++ {
		turns = append(turns, f.begin("w"))
		ov.WriteAt("big", int64(k)*100000, "y")
		f.end()
	}
	// Each turn's two sides share the later turns' layers: only the
	// turn's own block may differ.
	for k, n := range turns {
		cs, err := store.TurnChanges(n, ov.Tree)
		if err != nil || len(cs) != 1 {
			t.Fatalf("turn %d: %d changes, %v", n, len(cs), err)
		}
		r, ok := store.ChangedRanges(cs[0])
		if want := []int64{int64(k) * 100000 &^ 4095, 4096}; !ok || !slices.Equal(r, want) {
			t.Errorf("turn %d: ChangedRanges %v %v, want %v", n, r, ok, want)
		}
	}
}

// TestPickaxeRandom: over random histories of writes (some ending or
// starting at a block's edge), cuts, growths and rewrites of a file kept
// by ranges, the last turn open or closed, log -S's answer for each turn
// and each text (some that can overlap themselves) is bytes.Count's over
// the file's bytes before and after the turn, and so is the answer from
// the changed ranges alone wherever that is taken. CKPTFS_LONG: 600
// histories.
func TestPickaxeRandom(t *testing.T) {
	seeds := int64(60)
	if os.Getenv("CKPTFS_LONG") != "" {
		seeds = 600
	}
	fast, checked := 0, 0
	texts := []string{"ab", "abc", "aab", "cab", "b", "abcab", "aa", "aba", "bca", "acbb"}
	for seed := int64(1); seed <= seeds; seed++ {
		rng := rand.New(rand.NewSource(seed))
		store, err := versionstore.Open("/store", versionstore.Options{FS: vfs.NewMem(), RangeFrom: 4096})
		if err != nil {
			t.Fatal(err)
		}
		ov := fusefstest.New(t, t.TempDir(), store)
		f := &fixture{t: t, ov: ov, gate: &fakeGate{}, svc: NewService(store, ov.Tree, &fakeGate{}), ctx: context.Background()}
		rnd := func(n int) string {
			b := make([]byte, n)
			for i := range b {
				b[i] = "abc"[rng.Intn(3)]
			}
			return string(b)
		}
		abs := filepath.Join(ov.Dir, "big")
		snap := map[uint64][]byte{}
		n0 := f.begin("made")
		ov.Write("big", rnd(8192+rng.Intn(40000)))
		f.end()
		snap[n0], _ = os.ReadFile(abs)
		nturns := 2 + rng.Intn(5)
		var open uint64
		for k := 0; k < nturns; k++ {
			n := f.begin("t")
			for step := 0; step < 1+rng.Intn(4); step++ {
				st, ino, _ := ov.Tree.LstatInode("big")
				switch op := rng.Intn(10); {
				case op < 6:
					off := int64(rng.Intn(int(st.Size) + 100))
					d := rnd(1 + rng.Intn(40))
					switch rng.Intn(3) {
					case 0:
						off &^= 4095
					case 1:
						off = off&^4095 + 4096 - int64(len(d))
					}
					ov.WriteAt("big", max(0, off), d)
				case op < 9:
					sz := int64(rng.Intn(int(st.Size) + 5000))
					if store.NeedsRange("big", min(sz, st.Size), ckpt.ToTheEnd) {
						c := ckpt.Capture{Path: "big", Prior: st, Inode: ino, Range: &ckpt.ByteRange{Off: min(sz, st.Size), End: ckpt.ToTheEnd},
							Open: func() (*os.File, error) { return ov.Tree.Open("big") }}
						if err := store.Record(c, ckpt.Program{PID: 1, Comm: "test"}); err != nil {
							t.Fatal(err)
						}
					}
					if err := os.Truncate(abs, sz); err != nil {
						t.Fatal(err)
					}
					if sz > st.Size { // fill the hole with text sometimes
						if rng.Intn(2) == 0 {
							ov.WriteAt("big", st.Size, rnd(int(sz-st.Size)))
						}
					}
				default:
					ov.Write("big", rnd(8192+rng.Intn(40000)))
				}
			}
			if k == nturns-1 && rng.Intn(2) == 0 {
				open = n
			} else {
				f.end()
			}
			snap[n], _ = os.ReadFile(abs)
		}
		for n := n0 + 1; n <= n0+uint64(nturns); n++ {
			var cs []versionstore.Change
			if n == open {
				cs, err = store.Changes(n-1, versionstore.Now, ov.Tree)
			} else {
				cs, err = store.TurnChanges(n, ov.Tree)
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range cs {
				if c.Path != "big" || c.Kind == ckpt.ModeOnly {
					continue
				}
				for _, text := range texts {
					want := bytes.Count(snap[n-1], []byte(text)) != bytes.Count(snap[n], []byte(text))
					got, err := f.svc.pickaxe([]versionstore.Change{c}, []byte(text))
					if err != nil {
						t.Fatal(err)
					}
					checked++
					if got != want {
						t.Fatalf("seed %d turn %d text %q: pickaxe %v want %v", seed, n, text, got, want)
					}
					if ranges, ok := store.ChangedRanges(c); ok && !overlapsItself([]byte(text)) {
						d, ok, err := f.svc.occurrencesDifferIn(c, ranges, []byte(text))
						if err != nil || !ok {
							t.Fatalf("seed %d: fast path %v %v", seed, ok, err)
						}
						fast++
						if d != want {
							t.Fatalf("seed %d turn %d text %q: fast %v want %v", seed, n, text, d, want)
						}
					}
				}
			}
		}
		if open != 0 {
			f.end()
		}
		store.Close()
	}
	t.Logf("%d checked, %d by the fast path", checked, fast)
}

// log --follow -- PATH follows a file back through its renames, its own
// and a directory's above it: the turns before a rename are those that
// changed it under the name it had, and a later file at its old name is
// not its history.
func TestLogFollowsRenames(t *testing.T) {
	f := newFixture(t)
	f.ov.Mkdir("d")
	create := f.begin("create")
	f.ov.Write("d/a.txt", "1\n")
	f.end()
	edit := f.begin("edit")
	f.ov.Write("d/a.txt", "2\n")
	f.end()
	f.begin("other")
	f.ov.Write("x.txt", "x\n")
	f.end()
	mv := f.begin("rename")
	f.ov.Rename("d/a.txt", "d/b.txt")
	f.end()
	mvDir := f.begin("rename the directory")
	f.ov.Rename("d", "e")
	f.end()
	reuse := f.begin("a new d/a.txt")
	f.ov.Mkdir("d")
	f.ov.Write("d/a.txt", "not the same file\n")
	f.ov.Write("e/b.txt", "3\n")
	f.end()
	nums := func(req turnctl.LogRequest) []uint64 {
		t.Helper()
		rep, err := f.svc.Log(f.ctx, req)
		if err != nil {
			t.Fatalf("log %+v: %v", req, err)
		}
		var out []uint64
		for _, t := range rep.Turns {
			out = append(out, t.Num)
		}
		return out
	}
	if got, want := nums(turnctl.LogRequest{Paths: []string{"e/b.txt"}, Follow: true}), []uint64{reuse, mvDir, mv, edit, create}; !slices.Equal(got, want) {
		t.Errorf("log --follow e/b.txt: turns %v, want %v", got, want)
	}
	if got, want := nums(turnctl.LogRequest{Paths: []string{"e/b.txt"}}), []uint64{reuse, mvDir}; !slices.Equal(got, want) {
		t.Errorf("log e/b.txt: turns %v, want %v", got, want)
	}
	if got, want := nums(turnctl.LogRequest{Paths: []string{"e/b.txt"}, Follow: true, N: 3}), []uint64{reuse, mvDir, mv}; !slices.Equal(got, want) {
		t.Errorf("log -n 3 --follow e/b.txt: turns %v, want %v", got, want)
	}
	// The renames are followed through turns another filter drops.
	if got, want := nums(turnctl.LogRequest{Paths: []string{"e/b.txt"}, Follow: true, Grep: "^(create|edit)$"}), []uint64{edit, create}; !slices.Equal(got, want) {
		t.Errorf("log --follow --grep e/b.txt: turns %v, want %v", got, want)
	}
	for _, paths := range [][]string{{"a", "b"}, {""}, nil} {
		if _, err := f.svc.Log(f.ctx, turnctl.LogRequest{Paths: paths, Follow: true}); !isCode(err, turnctl.CodeBadRequest) {
			t.Errorf("log --follow of %q: %v, want a bad request", paths, err)
		}
	}
}
