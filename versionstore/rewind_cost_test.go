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
