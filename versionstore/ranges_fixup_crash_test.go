package versionstore

import (
	"fmt"
	"math/rand"
	rand2 "math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"ckptfs/internal/backing"
	"ckptfs/internal/ckpt"
	"ckptfs/internal/crashpoint"
)

// fixupCase is a random history of range-captured writes, cuts and
// growths among renames, exchanges, hard links, rewrites and chmods of
// a few files, in a store in memory (so a kill can be simulated).
type fixupCase struct {
	m     *sim
	mem   *vfs.MemFS
	turns []uint64
	snaps []snapshot
}

var fixupNames = []string{"a", "b", "c", "d", "e"}

func newFixupCase(t *testing.T, seed int64) *fixupCase {
	t.Helper()
	mem := vfs.NewCrashableMem()
	root := t.TempDir()
	tree, err := backing.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tree.Close() })
	rng := rand.New(rand.NewSource(seed))
	m := &sim{t: t, rng: rng, root: root, tree: tree, store: openOn(t, mem), ranges: true}
	c := &fixupCase{m: m, mem: mem}
	blocks := func() []byte {
		b := make([]byte, (2+rng.Intn(12))*rangeBlock+rng.Intn(3)*rng.Intn(rangeBlock))
		k := rng.Intn(256)
		for i := range b {
			b[i] = byte(i/97 + k)
		}
		return b
	}
	for _, p := range fixupNames[:3] {
		os.WriteFile(m.abs(p), blocks(), 0o644)
	}
	c.turns, c.snaps = []uint64{0}, []snapshot{takeSnapshot(t, root)}
	exists := func(p string) bool { return m.lstat(p).Exists() }
	pick := func() string { return fixupNames[rng.Intn(len(fixupNames))] }
	data := func(n int) []byte {
		b := make([]byte, n)
		k := byte(rng.Intn(256))
		for i := range b {
			b[i] = k + byte(i%7)
		}
		return b
	}
	for turn := 0; turn < 2+rng.Intn(5); turn++ {
		if _, err := m.store.Begin(ckpt.KindAgent, "", ""); err != nil {
			t.Fatal(err)
		}
		for step := 0; step < 1+rng.Intn(6); step++ {
			p, q := pick(), pick()
			st := m.lstat(p)
			switch op := rng.Intn(14); {
			case op < 5: // a write at an offset, maybe past the end
				if st.Type != ckpt.Regular {
					continue
				}
				off := int64(rng.Intn(int(st.Size) + 2*rangeBlock))
				if rng.Intn(2) == 0 {
					off &^= rangeBlock - 1
				}
				b := data(1 + rng.Intn(3*rangeBlock))
				m.captureRange(p, off, off+int64(len(b)))
				f, err := os.OpenFile(m.abs(p), os.O_WRONLY, 0)
				if err != nil {
					t.Fatal(err)
				}
				f.WriteAt(b, off)
				f.Close()
			case op < 7: // a cut or a growth
				if st.Type != ckpt.Regular {
					continue
				}
				n := int64(rng.Intn(int(st.Size) + 3*rangeBlock))
				if rng.Intn(2) == 0 {
					n &^= rangeBlock - 1
				}
				m.captureRange(p, min(n, st.Size), ckpt.ToTheEnd)
				if err := os.Truncate(m.abs(p), n); err != nil {
					t.Fatal(err)
				}
			case op == 7: // rename, maybe over a file
				qs := m.lstat(q)
				if !st.Exists() || p == q || sameInode(m, p, q) {
					continue
				}
				if qs.Exists() {
					m.capture(q, true)
				}
				mvRecorded(m, p, q)
			case op == 8: // exchange
				if !st.Exists() || !exists(q) || p == q {
					continue
				}
				ip, _ := m.tree.Ident(p)
				iq, _ := m.tree.Ident(q)
				commit, err := m.store.RecordExchange(p, q, ip, iq, ckpt.Program{Comm: "mv"})
				if err != nil {
					t.Fatal(err)
				}
				err = m.tree.Exchange(p, q)
				commit(err == nil)
				if err != nil {
					t.Fatal(err)
				}
			case op == 9: // create
				if st.Exists() {
					continue
				}
				m.capture(p, false)
				os.WriteFile(m.abs(p), blocks(), 0o644)
			case op == 10: // unlink
				if !st.Exists() {
					continue
				}
				m.capture(p, true)
				os.Remove(m.abs(p))
			case op == 11: // chmod
				if st.Type != ckpt.Regular {
					continue
				}
				m.captureAll(p, true)
				os.Chmod(m.abs(p), []os.FileMode{0o600, 0o644, 0o755, 0o4755}[rng.Intn(4)])
			case op == 12: // rewritten whole (O_TRUNC)
				if st.Type != ckpt.Regular {
					continue
				}
				m.captureRange(p, 0, ckpt.ToTheEnd)
				m.captureAll(p, false)
				os.WriteFile(m.abs(p), blocks(), 0o644)
			case op == 13: // a hard link, now and then
				if st.Type != ckpt.Regular || exists(q) || rng.Intn(3) > 0 {
					continue
				}
				m.capture(q, false)
				if err := os.Link(m.abs(p), m.abs(q)); err != nil {
					t.Fatal(err)
				}
			}
		}
		tn, err := m.store.End("")
		if err != nil {
			t.Fatal(err)
		}
		c.turns = append(c.turns, tn.Num)
		c.snaps = append(c.snaps, takeSnapshot(t, root))
	}
	return c
}

// fixupPlan is seed's rewind: its target, and the paths restored (nil:
// the whole tree).
func fixupPlan(seed int64, c *fixupCase) (target uint64, paths []string) {
	rng := rand.New(rand.NewSource(seed + 1000))
	target = c.turns[rng.Intn(len(c.turns)-1)]
	if rng.Intn(2) == 0 {
		for _, p := range fixupNames {
			if rng.Intn(2) == 0 {
				paths = append(paths, p)
			}
		}
		if paths == nil {
			paths = []string{"a"}
		}
	}
	return target, paths
}

// The fix-up pass (alone: every rewind goes straight to it, or after the
// reverse pass) and restores of paths, over random histories of range
// records (files patched in place, or replaced when hard-linked), killed
// or the power lost at a random crash point, and the recovery killed now
// and then: the recovered tree is what the rewind without a crash leaves,
// and after a kill -9 the recovered rewind undoes exactly (a power loss
// may lose the open turn's records, SPEC §4, but never the tree the
// rewind makes).
func TestRangeFixupCrashesRandom(t *testing.T) {
	t.Run("fix-up pass alone", func(t *testing.T) {
		defer func(l func(int, int) uint64) { replayLimit = l }(replayLimit)
		replayLimit = func(int, int) uint64 { return 0 }
		fixupCrashesRandom(t)
	})
	t.Run("reverse pass first", fixupCrashesRandom)
}

func fixupCrashesRandom(t *testing.T) {
	// CKPTFS_LONG: 400 histories, each of those whose plan patches a
	// file killed at every hit (about 80 s).
	seeds, crashes, long := int64(40), 6, os.Getenv("CKPTFS_LONG") != ""
	if long {
		seeds = 400
	}
	patches := 0
	for seed := int64(1); seed <= seeds; seed++ {
		had := patches
		// The plan, on a copy: how many files it patches in place.
		{
			c := newFixupCase(t, seed)
			target, paths := fixupPlan(seed, c)
			stop, _ := c.m.store.endSeq(target)
			prefixes := paths
			if prefixes == nil {
				prefixes = []string{""}
			}
			actions, _, _, err := c.m.store.planRestore(stop, prefixes, c.m.tree, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range actions {
				if a.Op == actPatch {
					patches++
				}
			}
			c.m.store.Close()
		}
		c := newFixupCase(t, seed)
		target, paths := fixupPlan(seed, c)
		before := takeSnapshot(t, c.m.root)
		stopTrace := crashpoint.Trace()
		res, err := c.m.store.Rewind(target, c.m.tree, RewindOptions{Paths: paths})
		trace := stopTrace()
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if res.Turn.Num == 0 {
			c.m.store.Close()
			continue // nothing to do
		}
		want := takeSnapshot(t, c.m.root)
		if paths == nil {
			if d := diffSnap(c.snaps[indexOf(c.turns, target)], want); d != "" {
				t.Fatalf("seed %d, rewind to %d: no crash:\n%s", seed, target, d)
			}
		}
		if _, err := c.m.store.Rewind(res.Turn.Num-1, c.m.tree, RewindOptions{}); err != nil {
			t.Fatal(err)
		}
		if d := diffSnap(before, takeSnapshot(t, c.m.root)); d != "" {
			t.Fatalf("seed %d, rewind to %d %v: no crash, undo:\n%s", seed, target, paths, d)
		}
		c.m.store.Close()
		if len(trace) == 0 {
			continue
		}
		rng := rand.New(rand.NewSource(seed + 2000))
		hits := make([]int, crashes)
		for k := range hits {
			hits[k] = 1 + rng.Intn(len(trace))
		}
		if long && patches > had {
			hits = hits[:0]
			for n := 1; n <= len(trace); n++ {
				hits = append(hits, n)
			}
		}
		for _, n := range hits {
			c := newFixupCase(t, seed)
			what := fmt.Sprintf("seed %d, rewind to %d %v, crash at hit %d (%s)", seed, target, paths, n, trace[n-1])
			p, err := untilCrash(t, fmt.Sprintf("*@%d", n), func() error {
				_, err := c.m.store.Rewind(target, c.m.tree, RewindOptions{Paths: paths})
				return err
			})
			if p == "" {
				t.Fatalf("%s: no crash: %v", what, err)
			}
			power := rng.Intn(2) == 0
			if power {
				what += ", power lost"
			}
			cfg := vfs.CrashCloneCfg{UnsyncedDataPercent: map[bool]int{true: 0, false: 100}[power], RNG: rand2.New(rand2.NewPCG(uint64(seed), uint64(n)))}
			clone := c.mem.CrashClone(cfg)
			c.m.store.Close()
			s2 := openOn(t, clone)
			if rng.Intn(2) == 0 {
				m := 1 + rng.Intn(8)
				if p2, _ := untilCrash(t, fmt.Sprintf("*@%d", m), func() error { _, err := s2.Recover(c.m.tree); return err }); p2 != "" {
					what += fmt.Sprintf(", recovery killed at %d (%s)", m, p2)
					clone = clone.CrashClone(cfg)
					s2.Close()
					s2 = openOn(t, clone)
				}
			}
			did, err := s2.Recover(c.m.tree)
			if err != nil {
				t.Fatalf("%s: recover: %v", what, err)
			}
			if lt, _ := s2.Turn(s2.Latest()); !did && (s2.Latest() == c.turns[len(c.turns)-1] || strings.HasSuffix(lt.Label, cutShort)) {
				// Killed before the rewind was journaled: Recover
				// closed its turn, or it was never committed.
				if _, err := s2.Rewind(target, c.m.tree, RewindOptions{Paths: paths}); err != nil {
					t.Fatalf("%s: rewind again: %v", what, err)
				}
			}
			if d := diffSnap(want, takeSnapshot(t, c.m.root)); d != "" {
				t.Fatalf("%s: recovered:\n%s", what, d)
			}
			// After a power loss the open turn's records may be lost
			// (SPEC §4): the rewind's undo is exact after a kill -9.
			if !power {
				rt, _ := s2.Turn(s2.Latest())
				if _, err := s2.Rewind(rt.Num-1, c.m.tree, RewindOptions{}); err != nil {
					t.Fatalf("%s: undo: %v", what, err)
				}
				if d := diffSnap(before, takeSnapshot(t, c.m.root)); d != "" {
					t.Fatalf("%s: the recovered rewind undone:\n%s", what, d)
				}
			}
			s2.Close()
		}
	}
	t.Logf("%d files patched in place by the plans", patches)
	if patches == 0 {
		t.Fatal("no plan patched a file in place: the test tests nothing")
	}
}

func indexOf(xs []uint64, x uint64) int {
	for i, y := range xs {
		if y == x {
			return i
		}
	}
	return -1
}
