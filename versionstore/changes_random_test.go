package versionstore

import (
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"testing"

	"ckptfs/internal/backing"
	"ckptfs/internal/ckpt"
)

// randomHistory makes turns of random steps (half of them renames and
// exchanges, directories included) in a new tree; it returns the store,
// the tree, the sim, each turn's number and the tree's snapshot at its end.
func randomHistory(t *testing.T, seed int64, nTurns int) (*Store, *backing.Tree, *sim, []uint64, []snapshot) {
	t.Helper()
	s := NewTestStore(t)
	root := t.TempDir()
	tree, err := backing.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tree.Close() })
	m := &sim{t: t, rng: rand.New(rand.NewSource(seed)), root: root, tree: tree, store: s, moves: true}
	turns, snaps := []uint64{0}, []snapshot{takeSnapshot(t, root)}
	for len(turns) <= nTurns {
		if _, err := s.Begin(ckpt.KindAgent, "", ""); err != nil {
			t.Fatal(err)
		}
		for k := 1 + m.rng.Intn(12); k > 0; k-- {
			m.step()
		}
		tn, err := s.End("")
		if err != nil {
			t.Fatal(err)
		}
		turns, snaps = append(turns, tn.Num), append(snaps, takeSnapshot(t, root))
	}
	return s, tree, m, turns, snaps
}

// perPath describes changes path by path, a rename as its two halves (the
// path it left, deleted, and the one it came to, added): "path: before ->
// after" with each side's type, mode and, for a file, size.
func perPath(cs []Change) map[string]string {
	out := map[string]string{}
	side := func(st ckpt.State) string {
		switch st.Type {
		case ckpt.Absent:
			return "absent"
		case ckpt.Regular:
			return fmt.Sprintf("file %o %d", st.Mode, st.Size)
		case ckpt.Symlink:
			return "symlink " + st.Target
		}
		return fmt.Sprintf("%v %o %d", st.Type, st.Mode, st.Rdev)
	}
	for _, c := range cs {
		if c.Kind == ckpt.Renamed {
			out[c.From] = side(c.Before) + " -> absent"
			out[c.Path] = "absent -> " + side(c.After)
			continue
		}
		out[c.Path] = side(c.Before) + " -> " + side(c.After)
	}
	return out
}

// snapSide is side of perPath for a snapshot entry.
func snapSide(e snapEntry, ok bool) string {
	switch {
	case !ok:
		return "absent"
	case e.Type == ckpt.Regular:
		return fmt.Sprintf("file %o %d", e.Mode, len(e.Data))
	case e.Type == ckpt.Symlink:
		return "symlink " + e.Target
	}
	return fmt.Sprintf("%v %o %d", e.Type, e.Mode, e.Rdev)
}

// TestChangesArePerPath: on random histories full of renames of files and
// directories, Changes between any two turns (either way round) names
// every path whose type, mode, bytes or target differ, with its state at
// each end, whatever directory renames moved it: the difference of the two
// snapshots, path by path. Seeds are replayable: go test -run
// 'TestChangesArePerPath/SEED'.
func TestChangesArePerPath(t *testing.T) {
	for seed := int64(1); seed <= 12; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			s, tree, m, turns, snaps := randomHistory(t, seed, 30)
			for k := 0; k < 40; k++ {
				i, j := m.rng.Intn(len(turns)), m.rng.Intn(len(turns))
				cs, err := s.Changes(turns[i], turns[j], tree)
				if err != nil {
					t.Fatal(err)
				}
				got := perPath(cs)
				want := map[string]string{}
				for _, p := range slices.Concat(slices.Collect(mapKeys(snaps[i])), slices.Collect(mapKeys(snaps[j]))) {
					a, oka := snaps[i][p]
					b, okb := snaps[j][p]
					if oka == okb && sameEntry(a, b) && (oka || okb) {
						continue
					}
					if oka || okb {
						want[p] = snapSide(a, oka) + " -> " + snapSide(b, okb)
					}
				}
				var diffs []string
				for p, w := range want {
					if got[p] != w {
						diffs = append(diffs, fmt.Sprintf("%s: got %q, want %q", p, got[p], w))
					}
				}
				for p, g := range got {
					if _, ok := want[p]; ok {
						continue
					}
					// Same type, mode and bytes at both ends: only which
					// paths share an inode changed (kind link), or a
					// directory was renamed over one like it.
					if e, ok := snaps[i][p]; ok && g == snapSide(e, true)+" -> "+snapSide(snaps[j][p], true) {
						continue
					}
					diffs = append(diffs, fmt.Sprintf("%s: got %q, no change", p, g))
				}
				if len(diffs) > 0 {
					slices.Sort(diffs)
					t.Fatalf("seed %d: Changes(%d, %d):\n%s", seed, turns[i], turns[j], strings.Join(diffs, "\n"))
				}
			}
		})
	}
}

func mapKeys(s snapshot) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range s {
			if !yield(k) {
				return
			}
		}
	}
}

// listOf renders changes as the lines a rewind reports, in order.
func listOf(cs []Change) string {
	var b strings.Builder
	for _, c := range cs {
		fmt.Fprintf(&b, "%s %s <- %q: %+v -> %+v\n", c.Kind, c.Path, c.From, c.Before, c.After)
	}
	return b.String()
}

// TestDryRunListsWhatTheRunDoes: on random histories, a rewind's or a
// restore's dry run lists exactly the changes the real run then reports,
// path by path, kind by kind, with the same states on both sides. Seeds
// are replayable: go test -run 'TestDryRunListsWhatTheRunDoes/SEED'.
func TestDryRunListsWhatTheRunDoes(t *testing.T) {
	for seed := int64(1); seed <= 12; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			s, tree, m, turns, _ := randomHistory(t, seed, 20)
			for k := 0; k < 12; k++ {
				target := turns[m.rng.Intn(len(turns))]
				opts := RewindOptions{}
				what := fmt.Sprintf("rewind %d", target)
				if k%2 == 1 {
					for n := 1 + m.rng.Intn(2); n > 0; n-- {
						p := m.randPath()
						if m.rng.Intn(2) == 0 {
							p = strings.Split(p, "/")[0]
						}
						opts.Paths = append(opts.Paths, p)
					}
					what = fmt.Sprintf("restore %d -- %s", target, strings.Join(opts.Paths, " "))
				}
				opts.DryRun = true
				dry, err := s.Rewind(target, tree, opts)
				if err != nil {
					t.Fatalf("seed %d: %s --dry-run: %v", seed, what, err)
				}
				opts.DryRun = false
				real, err := s.Rewind(target, tree, opts)
				if err != nil {
					t.Fatalf("seed %d: %s: %v", seed, what, err)
				}
				if d, r := listOf(dry.Changes), listOf(real.Changes); d != r {
					t.Fatalf("seed %d: %s: the dry run listed\n%sthe run did\n%s", seed, what, d, r)
				}
				if !slices.Equal(dry.NotRestored, real.NotRestored) {
					t.Fatalf("seed %d: %s: the dry run leaves %q, the run left %q", seed, what, dry.NotRestored, real.NotRestored)
				}
				// Some more work, so that the next rewind has a history.
				s.Begin(ckpt.KindAgent, "", "")
				for n := 0; n < 4; n++ {
					m.step()
				}
				tn, _ := s.End("")
				turns = append(turns, tn.Num)
			}
		})
	}
}

// TestTouchesIsSound: on random histories full of renames of files and
// directories, Touches(n, [p]) is true whenever Changes(n-1, n) lists a
// change at or below p (by either end of a rename), now that it lists
// each path a directory rename moved: log -- PATH may skip the turns it
// says false of. Seeds are replayable: go test -run
// 'TestTouchesIsSound/SEED'.
func TestTouchesIsSound(t *testing.T) {
	for seed := int64(1); seed <= 12; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			s, tree, m, turns, snaps := randomHistory(t, seed, 20)
			for i := 1; i < len(turns); i++ {
				cs, err := s.Changes(turns[i-1], turns[i], tree)
				if err != nil {
					t.Fatal(err)
				}
				paths := slices.Concat(slices.Collect(mapKeys(snaps[i-1])), slices.Collect(mapKeys(snaps[i])))
				for k := 0; k < 4; k++ {
					paths = append(paths, m.randPath())
				}
				for _, p := range paths {
					touched, err := s.Touches(turns[i], []string{p})
					if err != nil {
						t.Fatal(err)
					}
					if touched {
						continue
					}
					for _, c := range cs {
						_, at := ckpt.Under(c.Path, p)
						_, from := ckpt.Under(c.From, p)
						if at || c.From != "" && from {
							t.Fatalf("seed %d: Touches(%d, %q) is false, but the turn changed %s %q (from %q)", seed, turns[i], p, c.Kind, c.Path, c.From)
						}
					}
				}
			}
		})
	}
}
