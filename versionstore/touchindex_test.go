package versionstore

import (
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"ckptfs/internal/ckpt"
)

// TestSearchAnswersAsTurnChanges: on random histories (writes, renames of
// files and directories, links, deletes, modes), a Search's TurnChanges
// of every turn equals the store's, also for turns recorded after the
// Search was made (events its index does not cover).
func TestSearchAnswersAsTurnChanges(t *testing.T) {
	for seed := int64(1); seed <= 6; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			s, root := atticStore(t)
			tree := openTree(t, root)
			rng := rand.New(rand.NewSource(seed))
			m := &sim{t: t, rng: rand.New(rand.NewSource(seed + 50)), root: root, tree: tree, store: s, link: true, moves: seed%2 == 0}
			turns := func(k int) {
				for i := 0; i < k; i++ {
					s.Begin(ckpt.KindAgent, "", "")
					for j := 0; j < 1+rng.Intn(8); j++ {
						m.step()
					}
					if _, err := s.End(""); err != nil {
						t.Fatal(err)
					}
				}
			}
			turns(25)
			q, err := s.NewSearch()
			if err != nil {
				t.Fatal(err)
			}
			turns(5) // after the index
			compared := 0
			for n := s.Latest(); n >= 1; n-- {
				want, err := s.TurnChanges(n, tree)
				if err != nil {
					t.Fatal(err)
				}
				got, err := q.TurnChanges(n, tree)
				if err != nil {
					t.Fatal(err)
				}
				if len(want) != len(got) {
					t.Fatalf("seed %d turn %d: %d changes through the search, %d", seed, n, len(got), len(want))
				}
				for i := range want {
					w, g := want[i], got[i]
					if w.Path != g.Path || w.From != g.From || w.Kind != g.Kind || !reflect.DeepEqual(w.Before, g.Before) || !reflect.DeepEqual(w.After, g.After) {
						t.Fatalf("seed %d turn %d: %+v through the search, want %+v", seed, n, g, w)
					}
				}
				compared += len(want)
			}
			if compared == 0 {
				t.Fatal("no changes compared")
			}
		})
	}
}

// TestSearchFollowsADirectoryRenamedLater: a file written in turn 1 whose
// directory is renamed in turn 3 and that no event names after turn 1:
// its state at the end of turn 1 is the live file under the new name,
// which only the rename (an event naming a directory above it) tells.
func TestSearchFollowsADirectoryRenamedLater(t *testing.T) {
	s := NewTestStore(t)
	root := t.TempDir()
	tree := openTree(t, root)
	if err := os.Mkdir(filepath.Join(root, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(root, "d", "f"), []byte("0"))
	s.Begin(ckpt.KindAgent, "", "")
	captureFile(t, s, tree, "d/f")
	writeFile(t, filepath.Join(root, "d", "f"), []byte("1"))
	s.End("")
	s.Begin(ckpt.KindAgent, "", "")
	// turn 2 records nothing
	s.End("")
	s.Begin(ckpt.KindAgent, "", "")
	commit, err := s.RecordRename("d", "e", false, ckpt.Program{Comm: "mv"})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(root, "d"), filepath.Join(root, "e")); err != nil {
		t.Fatal(err)
	}
	commit(true)
	s.End("")
	q, err := s.NewSearch()
	if err != nil {
		t.Fatal(err)
	}
	got, err := q.TurnChanges(1, tree)
	if err != nil || len(got) != 1 || got[0].Path != "d/f" || got[0].Kind != ckpt.Modified {
		t.Fatalf("turn 1's changes through a search: %+v, %v; want d/f modified", got, err)
	}
}
