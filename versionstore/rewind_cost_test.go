package versionstore

import (
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"testing"

	"ckptfs/internal/backing"
	"ckptfs/internal/ckpt"
)

// turnWork counts the events turn n recorded, and how many of them are
// renames or exchanges.
func turnWork(t *testing.T, s *Store, n uint64) (events, moves int) {
	t.Helper()
	tn, err := s.Turn(n)
	if err != nil {
		t.Fatal(err)
	}
	err = s.scanEvents(tn.FirstSeq, tn.LastSeq+1, func(r *record) (bool, error) {
		events++
		if r.Op == opRename || r.Op == opExchange {
			moves++
		}
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return events, moves
}

// mvRecorded renames p to q in the tree of m as the overlay does.
func mvRecorded(m *sim, p, q string) {
	m.t.Helper()
	commit, err := m.store.RecordRename(p, q, false, ckpt.Program{Comm: "mv"})
	if err != nil {
		m.t.Fatal(err)
	}
	err = os.Rename(m.abs(p), m.abs(q))
	commit(err == nil)
	if err != nil {
		m.t.Fatal(err)
	}
}

// TestRewindCostBackAndForth: a turn renames r files; then the tree is
// rewound back and forth over it k times (to before it, to after it).
// Every rewind must undo only what differs: O(r) events, never the
// renames of the earlier rewinds, which would make the k-th cost O(k·r).
func TestRewindCostBackAndForth(t *testing.T) {
	const r, k = 20, 12
	s := NewTestStore(t)
	root := t.TempDir()
	for i := 0; i < r; i++ {
		os.WriteFile(filepath.Join(root, fmt.Sprintf("f%02d", i)), []byte(fmt.Sprint("file ", i)), 0o644)
	}
	tree, err := backing.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	defer tree.Close()
	m := &sim{t: t, root: root, tree: tree, store: s}
	before := takeSnapshot(t, root)
	s.Begin(ckpt.KindAgent, "renames", "")
	for i := 0; i < r; i++ {
		mvRecorded(m, fmt.Sprintf("f%02d", i), fmt.Sprintf("g%02d", i))
	}
	t1, err := s.End("")
	if err != nil {
		t.Fatal(err)
	}
	after := takeSnapshot(t, root)
	most, fixed := 0, fixups.Load()
	for i := 0; i < 2*k; i++ {
		target, want := uint64(0), before
		if i%2 == 1 {
			target, want = t1.Num, after
		}
		res, err := s.Rewind(target, tree, RewindOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if d := diffSnap(want, takeSnapshot(t, root)); d != "" {
			t.Fatalf("rewind %d to %d: the tree differs:\n%s", i, target, d)
		}
		ev, mv := turnWork(t, s, res.Turn.Num)
		t.Logf("rewind %d to %d: %d events, %d renames", i, target, ev, mv)
		most = max(most, ev)
	}
	if most > 2*r {
		t.Errorf("a rewind over %d renames recorded up to %d events, want at most %d", r, most, 2*r)
	}
	if n := fixups.Load() - fixed; n != 0 {
		t.Errorf("the fix-up passes took %d actions, want none", n)
	}
}

// TestRewindCostMixed: random turns of renames on a small tree, with
// rewinds to random earlier turns among them (the load test's pattern).
// The renames a rewind records must stay bounded by the renames made by
// the turns that are not rewinds, not grow with the rewinds before it
// (each of which replayed those before it: geometrically).
func TestRewindCostMixed(t *testing.T) {
	s := NewTestStore(t)
	root := t.TempDir()
	tree, err := backing.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	defer tree.Close()
	rng := rand.New(rand.NewSource(7))
	m := &sim{t: t, rng: rng, root: root, tree: tree, store: s, flat: true}
	for i := 0; i < 8; i++ {
		os.WriteFile(filepath.Join(root, string(rune('a'+i))), []byte{byte(i)}, 0o644)
	}
	snaps := []snapshot{takeSnapshot(t, root)}
	turns := []uint64{0}
	total, most, real := 0, 0, 0
	fixed := fixups.Load()
	for n := 1; n <= 40; n++ {
		if n%3 == 0 {
			j := rng.Intn(len(turns))
			res, err := s.Rewind(turns[j], tree, RewindOptions{})
			if err != nil {
				t.Fatal(err)
			}
			got := takeSnapshot(t, root)
			if d := diffSnap(snaps[j], got); d != "" {
				t.Fatalf("rewind to %d: the tree differs:\n%s", turns[j], d)
			}
			if res.Turn.Num != 0 {
				_, mv := turnWork(t, s, res.Turn.Num)
				total += mv
				most = max(most, mv)
				snaps, turns = append(snaps, got), append(turns, res.Turn.Num)
			}
			continue
		}
		s.Begin(ckpt.KindAgent, "", "")
		for i := 0; i < 6; i++ {
			p, q := m.randPath(), m.randPath()
			if m.lstat(p).Type == ckpt.Regular && p != q {
				if m.lstat(q).Exists() {
					m.capture(q, false)
				}
				mvRecorded(m, p, q)
			}
		}
		tn, err := s.End("")
		if err != nil {
			t.Fatal(err)
		}
		_, mv := turnWork(t, s, tn.Num)
		real += mv
		snaps, turns = append(snaps, takeSnapshot(t, root)), append(turns, tn.Num)
	}
	t.Logf("renames recorded by rewinds: %d in all, at most %d in one; %d by the other turns; %d events in the store", total, most, real, s.Events())
	// Not O(real) in general: a rewind to a turn after an earlier
	// rewind's target must undo that rewind's renames too (rewindJumps).
	// Replaying every earlier rewind made it 4542 in all, 1522 in one.
	if total > 10*real {
		t.Errorf("the rewinds recorded %d renames, the other turns %d", total, real)
	}
	if n := fixups.Load() - fixed; n != 0 {
		t.Errorf("the fix-up passes took %d actions: a jump did not land where its rewind left the tree", n)
	}
}

// TestRewindCostReinstall: a turn deletes a tree of n files (rm -rf
// node_modules) and the next one makes it again, most files with the
// same bytes (npm install). A rewind to before both differs from the
// tree only in the files whose bytes changed: with no rename among its
// changes the replay would save nothing, so it must take the fix-up pass
// (an action per file that differs) rather than undo the 2n events one by
// one, which costs time and events in proportion to the tree (a rewind
// of a 57k-file node_modules across such a reinstall: 110 s by replay,
// 30 s by the fix-up pass alone).
func TestRewindCostReinstall(t *testing.T) {
	const n, changed = 2500, 300
	s := NewTestStore(t)
	root := t.TempDir()
	name := func(i int) string { return fmt.Sprintf("f%04d", i) }
	for i := 0; i < n; i++ {
		if err := os.WriteFile(filepath.Join(root, name(i)), []byte(fmt.Sprint("v1 ", i)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tree, err := backing.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	defer tree.Close()
	m := &sim{t: t, root: root, tree: tree, store: s, link: true}
	before := takeSnapshot(t, root)
	m.turn("rm -rf", func() {
		for i := 0; i < n; i++ {
			m.capture(name(i), true)
			if err := os.Remove(m.abs(name(i))); err != nil {
				t.Fatal(err)
			}
		}
	})
	m.turn("install", func() {
		for i := 0; i < n; i++ {
			m.capture(name(i), false)
			v := "v1 "
			if i < changed {
				v = "v2 "
			}
			if err := os.WriteFile(m.abs(name(i)), []byte(fmt.Sprint(v, i)), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	})
	res, err := s.Rewind(0, tree, RewindOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d := diffSnap(before, takeSnapshot(t, root)); d != "" {
		t.Fatalf("the tree differs from turn 0:\n%s", d)
	}
	if len(res.Changes) != changed {
		t.Errorf("the rewind changed %d files, want %d", len(res.Changes), changed)
	}
	if ev, _ := turnWork(t, s, res.Turn.Num); ev > 2*changed {
		t.Errorf("the rewind of %d changed files recorded %d events (the turns before it: %d): it undid them one by one", changed, ev, 2*n)
	}
}
