package versionstore

import (
	"fmt"
	"io/fs"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"ckptfs/internal/backing"
	"ckptfs/internal/ckpt"
)

// review: random histories (renames, exchanges, hard links, directories),
// with unversioned files (u.o) dropped into random directories before
// each rewind or restore: the dry run lists the changes, Left, SplitLinks
// and NotRestored the real run then reports; the same rewind again does
// nothing and makes no turn; a whole rewind leaves the tree as at the
// target but for the directories it says it left.
func TestReviewDryRunAgreesWithUnversionedAndLinks(t *testing.T) {
	seeds := 30
	if raceEnabled {
		seeds = 10
	}
	for seed := int64(1); seed <= int64(seeds); seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			s := NewTestStore(t)
			root := t.TempDir()
			tree, err := backing.Open(root)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { tree.Close() })
			unv := func(p string, isDir bool) bool { return filepath.Base(p) == "u.o" }
			s.SetUnversioned(unv)
			m := &sim{t: t, rng: rand.New(rand.NewSource(seed)), root: root, tree: tree, store: s, moves: true, linkOps: 3}
			turns, snaps := []uint64{0}, []snapshot{takeSnapshot(t, root)}
			addTurn := func(steps int) {
				if _, err := s.Begin(ckpt.KindAgent, "", ""); err != nil {
					t.Fatal(err)
				}
				for k := steps; k > 0; k-- {
					m.step()
				}
				tn, err := s.End("")
				if err != nil {
					t.Fatal(err)
				}
				turns, snaps = append(turns, tn.Num), append(snaps, takeSnapshot(t, root))
			}
			for len(turns) <= 12 {
				addTurn(1 + m.rng.Intn(12))
			}
			for k := 0; k < 10; k++ {
				j := m.rng.Intn(len(turns))
				target := turns[j]
				// unversioned files in some directories
				var dirs []string
				filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
					rel, _ := filepath.Rel(root, p)
					if err == nil && d.IsDir() && rel != "." && !strings.HasPrefix(rel, ".store") {
						dirs = append(dirs, rel)
					}
					return nil
				})
				for n := m.rng.Intn(3); n > 0 && len(dirs) > 0; n-- {
					d := dirs[m.rng.Intn(len(dirs))]
					os.WriteFile(filepath.Join(root, d, "u.o"), []byte("unversioned"), 0o644)
				}
				opts := RewindOptions{}
				what := fmt.Sprintf("seed %d: rewind %d", seed, target)
				if k%2 == 1 {
					for n := 1 + m.rng.Intn(2); n > 0; n-- {
						p := m.randPath()
						if m.rng.Intn(2) == 0 {
							p = strings.Split(p, "/")[0]
						}
						opts.Paths = append(opts.Paths, p)
					}
					what = fmt.Sprintf("seed %d: restore %d -- %s", seed, target, strings.Join(opts.Paths, " "))
				}
				stop, _ := s.endSeq(target)
				evs := s.dumpEvents(stop+1, "")
				before := takeSnapshot(t, root)
				opts.DryRun = true
				dry, err := s.Rewind(target, tree, opts)
				if err != nil {
					t.Fatalf("%s --dry-run: %v", what, err)
				}
				opts.DryRun = false
				real, err := s.Rewind(target, tree, opts)
				if err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				if d, r := listOf(dry.Changes), listOf(real.Changes); d != r {
					t.Errorf("%s: the dry run listed\n%sthe run did\n%s", what, d, r)
				}
				if !reflect.DeepEqual(dry.Left, real.Left) {
					t.Errorf("%s: the dry run leaves %+v, the run left %+v", what, dry.Left, real.Left)
				}
				if !reflect.DeepEqual(dry.SplitLinks, real.SplitLinks) {
					t.Errorf("%s: the dry run splits %+v, the run split %+v", what, dry.SplitLinks, real.SplitLinks)
				}
				if !slices.Equal(dry.NotRestored, real.NotRestored) {
					t.Errorf("%s: not restored %q vs %q", what, dry.NotRestored, real.NotRestored)
				}
				again, err := s.Rewind(target, tree, opts)
				if err != nil {
					t.Fatalf("%s again: %v", what, err)
				}
				if again.Turn.Num != 0 || len(again.Changes) > 0 {
					t.Errorf("%s again: turn %d, changes\n%s", what, again.Turn.Num, listOf(again.Changes))
					if again.Turn.Num != 0 {
						t.Logf("its events:\n%s", s.dumpEvents(again.Turn.FirstSeq, ""))
						t.Logf("after:\n%v", takeSnapshot(t, root))
						t.Logf("dry: %s left %+v", listOf(dry.Changes), dry.Left)
					}
				}
				if opts.Paths == nil {
					got := takeSnapshot(t, root)
					left := map[string]bool{}
					for _, l := range real.Left {
						left[l.Path] = true
					}
					for p, e := range got {
						if filepath.Base(p) == "u.o" {
							delete(got, p)
						} else if left[p] && e.Type == ckpt.Dir {
							delete(got, p)
						}
					}
					want := snapshot{}
					for p, e := range snaps[j] {
						if !left[p] {
							want[p] = e
						}
					}
					for p := range want {
						if !sameEntry(want[p], got[p]) {
							t.Errorf("%s: %s = %v, want %v", what, p, got[p], want[p])
						}
					}
					for p := range got {
						if _, ok := want[p]; !ok {
							t.Errorf("%s: %s = %v, want absent", what, p, got[p])
						}
					}
					if w, g := groupsUnder(want, ""), groupsUnder(got, ""); w != g {
						t.Errorf("%s: links %s, want %s", what, g, w)
					}
				}
				if t.Failed() {
					if os.Getenv("REVIEW_DEBUG") != "" {
						t.Logf("events after the target:\n%s", evs)
						for _, p := range slices.Sorted(func(yield func(string) bool) {
							for p := range before {
								if !yield(p) {
									return
								}
							}
						}) {
							t.Logf("before %s: %v", p, before[p])
						}
						t.Logf("rewind turn events:\n%s", s.dumpEvents(real.Turn.FirstSeq, ""))
					}
					return
				}
				// drop the unversioned files (the sim would record them)
				filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
					if err == nil && d.Name() == "u.o" {
						os.Remove(p)
					}
					return nil
				})
				addTurn(4)
			}
		})
	}
}
