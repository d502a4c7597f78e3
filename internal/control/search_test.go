package control

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/cockroachdb/pebble/v2/vfs"

	"ckptfs/fusefs/fusefstest"
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

// TestPickaxeOverRangeRecords: log -S over turns that wrote into a file
// kept by ranges finds the turns that changed the count, for a text that
// may overlap itself (read whole) and one that cannot (read around the
// ranges only).
func TestPickaxeOverRangeRecords(t *testing.T) {
	store, err := versionstore.Open("/store", versionstore.Options{FS: vfs.NewMem(), RangeFrom: 4096})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	ov := fusefstest.New(t, t.TempDir(), store)
	f := &fixture{t: t, ov: ov, gate: &fakeGate{}, svc: NewService(store, ov.Tree, &fakeGate{}), ctx: context.Background()}
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
