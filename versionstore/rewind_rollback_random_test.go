package versionstore

import (
	"errors"
	"fmt"
	"io"
	"math/rand"
	rand2 "math/rand/v2"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"ckptfs/internal/ckpt"
	"ckptfs/internal/crashpoint"
)

// corruptTree fails the k-th write of bytes read from the store (a
// WriteFile from anything but a live file, a PatchFile) or link (a
// Hardlink) with ErrCorrupt, as a chunk found missing half-way does: a
// WriteFile after reading part of its bytes, a PatchFile after patching
// its first span. Then it lets everything through (the rollback); with
// always, it fails every such write from the k-th on.
type corruptTree struct {
	ckpt.Tree
	k, n   int
	hit    bool
	always bool
}

var errInjectedCorrupt = fmt.Errorf("injected: %w", ErrCorrupt)

func (c *corruptTree) fire() bool {
	if c.always && c.hit {
		return true
	}
	if c.hit || c.k == 0 {
		return false
	}
	c.n++
	if c.n == c.k {
		c.hit = true
		st := string(debug.Stack())
		switch {
		case strings.Contains(st, "split") || strings.Contains(st, "relink"):
			phaseCount["links"]++
		case strings.Contains(st, "runActions"):
			phaseCount["actions"]++
		case strings.Contains(st, "replay"):
			phaseCount["replay"]++
		default:
			phaseCount["other"]++
		}
		return true
	}
	return false
}

func (c *corruptTree) WriteFile(p string, st ckpt.State, r io.Reader) error {
	if _, live := r.(*os.File); !live && c.fire() {
		return c.Tree.WriteFile(p, st, io.MultiReader(io.LimitReader(r, st.Size/2), failReader{}))
	}
	return c.Tree.WriteFile(p, st, r)
}

func (c *corruptTree) PatchFile(p string, size int64, spans []int64, r io.ReaderAt) error {
	if c.fire() {
		phaseCount["patch"]++
		if len(spans) >= 2 {
			if cur, err := c.Tree.Lstat(p); err == nil {
				c.Tree.PatchFile(p, cur.Size, spans[:2], r)
			}
		}
		return errInjectedCorrupt
	}
	return c.Tree.PatchFile(p, size, spans, r)
}

// TestRollbackIsExactRandom: random histories (renames, exchanges,
// directories, hard links, symlinks, nodes, ranges), then rewinds,
// restores and reverts that meet unreadable bytes at a random write:
// each must leave the tree exactly as before it (bytes, modes, types,
// which names share an inode), and every turn must still rewind exactly
// afterwards. 100 seeds; make test-long (CKPTFS_LONG) runs 400.
func TestRollbackIsExactRandom(t *testing.T) {
	rolled, done := 0, 0
	seeds := int64(100)
	if longRun() {
		seeds = 400
	}
	for seed := int64(1); seed <= seeds; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewSource(seed))
			m, _ := newCrashSim(t, seed)
			defer m.tree.Close()
			defer m.store.Close()
			m.moves = seed%2 == 0
			m.link = true
			if seed%3 == 0 { // many hard links: failures in the link pass
				m.linkOps, m.flat = 8, true
			}
			s, root := m.store, m.root
			turns, snaps := m.buildHistory(rng, 15, 25)
			for round := 0; round < 8; round++ {
				j := rng.Intn(len(turns))
				how := []string{"rewind", "restore", "revert"}[rng.Intn(3)]
				before := takeSnapshot(t, root)
				ct := &corruptTree{Tree: m.tree, k: 1 + rng.Intn(8)}
				var err error
				var p string
				switch how {
				case "rewind":
					_, err = s.Rewind(turns[j], ct, RewindOptions{})
				case "restore":
					p = []string{"a", "b", "c", "d.txt"}[rng.Intn(4)]
					_, err = s.Rewind(turns[j], ct, RewindOptions{Paths: []string{p}})
				case "revert":
					if j == 0 {
						j = 1
					}
					_, err = s.Revert(turns[j], ct, RevertOptions{})
				}
				what := fmt.Sprintf("seed %d round %d: %s %s %d (write %d)", seed, round, how, p, turns[j], ct.k)
				var rb *RolledBackError
				switch {
				case errors.As(err, &rb):
					rolled++
					if d := diffSnap(before, takeSnapshot(t, root)); d != "" {
						t.Fatalf("%s: rolled back, but the tree differs from before:\n%s", what, d)
					}
					tn, terr := s.Turn(rb.Turn)
					if terr != nil {
						t.Fatal(terr)
					}
					if cs, err := s.TurnChanges(tn.Num, m.tree); err != nil || len(cs) > 0 {
						t.Fatalf("%s: the rolled back turn changed %v (%v)", what, cs, err)
					}
					turns, snaps = append(turns, tn.Num), append(snaps, before)
				case err == nil || errors.Is(err, ErrConflict) || errors.Is(err, ErrNotOnLine):
					done++
					if how == "rewind" && err == nil && !ct.hit {
						if d := diffSnap(snaps[j], takeSnapshot(t, root)); d != "" {
							t.Fatalf("%s: the tree differs from the target:\n%s", what, d)
						}
					}
					if tn, ok := s.Current(); ok {
						t.Fatalf("%s: turn %d left open", what, tn.Num)
					}
					if l := s.Latest(); l != turns[len(turns)-1] {
						turns, snaps = append(turns, l), append(snaps, takeSnapshot(t, root))
					}
				default:
					t.Fatalf("%s: %v", what, err)
				}
				// Some work, then a rewind that must be exact.
				more, moreSnaps := m.buildHistory(rng, 1, 6)
				turns, snaps = append(turns, more[1:]...), append(snaps, moreSnaps[1:]...)
				k := rng.Intn(len(turns))
				rewindsExactly(t, what, s, m, turns[k], snaps[k])
				turns, snaps = append(turns, s.Latest()), append(snaps, takeSnapshot(t, root))
			}
		})
		if t.Failed() {
			break
		}
	}
	t.Logf("%d rolled back, %d not; %v", rolled, done, phaseCount)
}

// rollbackCrashCase builds seed's history and returns it with the
// tree to fail (a random how and target).
func rollbackCrashCase(t *testing.T, seed int64) (m *sim, mem *vfs.MemFS, run func(*Store, ckpt.Tree) error, before snapshot, turns []uint64, snaps []snapshot, how string) {
	rng := rand.New(rand.NewSource(seed))
	m, mem = newCrashSim(t, seed)
	m.moves = seed%2 == 0
	m.link = true
	turns, snaps = m.buildHistory(rng, 12, 20)
	j := rng.Intn(len(turns)-1) + 1
	how = []string{"rewind", "restore", "revert"}[seed%3]
	p := []string{"a", "b", "c", "d.txt"}[rng.Intn(4)]
	k := 1 + rng.Intn(3)
	run = func(s *Store, tree ckpt.Tree) error {
		ct := &corruptTree{Tree: tree, k: k}
		var err error
		switch how {
		case "rewind":
			_, err = s.Rewind(turns[j], ct, RewindOptions{})
		case "restore":
			_, err = s.Rewind(turns[j], ct, RewindOptions{Paths: []string{p}})
		case "revert":
			_, err = s.Revert(turns[j], ct, RevertOptions{})
		}
		return err
	}
	return m, mem, run, takeSnapshot(t, m.root), turns, snaps, how
}

// TestCrashPointsOfRollback kills a rolled-back rewind, restore or
// revert at every crash point hit from its failure on (the rollback),
// then Recover must report the rollback, leave the tree exactly as
// before, drop the journal; and every turn must still rewind exactly.
func TestCrashPointsOfRollback(t *testing.T) {
	for _, power := range []bool{false, true} {
		t.Run(fmt.Sprint(power), func(t *testing.T) { crashPointsOfRollback(t, power) })
	}
}

func crashPointsOfRollback(t *testing.T, power bool) {
	crashes := 0
	for seed := int64(1); seed <= 30; seed++ {
		trace, rb := rollbackTrace(t, seed)
		if rb == nil {
			continue
		}
		from := slices.Index(trace, "rewind.rollback")
		if from < 0 {
			t.Fatalf("seed %d: no rewind.rollback in %v", seed, trace)
		}
		for n := from + 1; n <= len(trace); n++ {
			m, mem, run, before, turns, snaps, how := rollbackCrashCase(t, seed)
			what := fmt.Sprintf("seed %d (%s), crash at hit %d of %d", seed, how, n, len(trace))
			point, err := untilCrash(t, fmt.Sprintf("*@%d", n), func() error { return run(m.store, m.tree) })
			if point == "" {
				t.Fatalf("%s: no crash (%v)", what, err)
			}
			what += " (" + point + ")"
			crashes++
			s2, _ := killClone(t, mem)
			if power {
				s2.Close()
				s2 = openOn(t, mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0, RNG: rand2.New(rand2.NewPCG(1, 2))}))
			}
			m.store.Close()
			did, err := s2.Recover(m.tree)
			if point == "rewind.finished" && !did && err == nil {
				// The journal is gone already.
			} else if !did || !errors.As(err, &rb) {
				t.Fatalf("%s: recover: %v %v, want a RolledBackError", what, did, err)
			}
			if d := diffSnap(before, takeSnapshot(t, m.root)); d != "" {
				t.Fatalf("%s: after recovery the tree is not as before:\n%s", what, d)
			}
			if did, err := s2.Recover(m.tree); did || err != nil {
				t.Fatalf("%s: second recover: %v %v", what, did, err)
			}
			tn, err := s2.Turn(rb.Turn)
			if err != nil || tn.Open || strings.Count(tn.Label, "undone") != 1 {
				t.Errorf("%s: rolled back turn: %+v %v", what, tn, err)
			}
			k := int(seed+int64(n)) % len(turns)
			rewindsExactly(t, what, s2, m, turns[k], snaps[k])
			s2.Close()
			m.tree.Close()
		}
	}
	t.Logf("%d crashes", crashes)
}

// rollbackTrace runs seed's case through and returns the crash points
// it hit and, if it was rolled back, the rolled back turn.
func rollbackTrace(t *testing.T, seed int64) (trace []string, rolled *RolledBackError) {
	m, _, run, _, _, _, _ := rollbackCrashCase(t, seed)
	stop := crashpoint.Trace()
	err := run(m.store, m.tree)
	trace = stop()
	m.store.Close()
	m.tree.Close()
	errors.As(err, &rolled)
	return trace, rolled
}

// rewindsExactly checks that a rewind of s to turn, after what, makes
// m's tree snap.
func rewindsExactly(t *testing.T, what string, s *Store, m *sim, turn uint64, snap snapshot) {
	t.Helper()
	if _, err := s.Rewind(turn, m.tree, RewindOptions{}); err != nil {
		t.Fatalf("%s: then a rewind to %d: %v", what, turn, err)
	}
	if d := diffSnap(snap, takeSnapshot(t, m.root)); d != "" {
		t.Fatalf("%s: then a rewind to %d:\n%s", what, turn, d)
	}
}

// phaseCount counts where corruptTree's failures landed, for the log.
var phaseCount = map[string]int{}

// TestCrashThenRecoverRollsBack kills a rewind, restore or revert at
// every crash point hit before it meets the unreadable bytes; Recover,
// which meets them (the first or second write of stored bytes it makes),
// must roll back exactly, or finish.
func TestCrashThenRecoverRollsBack(t *testing.T) {
	rolled := 0
	for seed := int64(1); seed <= 30; seed++ {
		trace, rb := rollbackTrace(t, seed)
		if rb == nil {
			continue
		}
		to := slices.Index(trace, "rewind.rollback")
		for n := 1; n < to; n++ {
			for _, k := range []int{1, 2} {
				m, mem, run, before, turns, snaps, how := rollbackCrashCase(t, seed)
				what := fmt.Sprintf("seed %d (%s), crash at hit %d of %d, recovery fails write %d", seed, how, n, len(trace), k)
				point, err := untilCrash(t, fmt.Sprintf("*@%d", n), func() error { return run(m.store, m.tree) })
				if point == "" {
					t.Fatalf("%s: no crash (%v)", what, err)
				}
				what += " (" + point + ")"
				s2, _ := killClone(t, mem)
				m.store.Close()
				ct := &corruptTree{Tree: m.tree, k: k}
				did, err := s2.Recover(ct)
				switch {
				case errors.As(err, &rb):
					rolled++
					if d := diffSnap(before, takeSnapshot(t, m.root)); d != "" {
						t.Fatalf("%s: rolled back, the tree is not as before:\n%s", what, d)
					}
				case err != nil:
					t.Fatalf("%s: recover: %v %v", what, did, err)
				}
				if did, err := s2.Recover(m.tree); did || err != nil {
					t.Fatalf("%s: second recover: %v %v", what, did, err)
				}
				k := int(seed+int64(n)) % len(turns)
				rewindsExactly(t, what, s2, m, turns[k], snaps[k])
				s2.Close()
				m.tree.Close()
			}
		}
	}
	t.Logf("%d rolled back by Recover", rolled)
}

type failReader struct{}

func (failReader) Read([]byte) (int, error) { return 0, errInjectedCorrupt }

func (c *corruptTree) Hardlink(a, b string) error {
	if c.fire() {
		return errInjectedCorrupt
	}
	return c.Tree.Hardlink(a, b)
}
