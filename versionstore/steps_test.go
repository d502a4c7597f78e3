package versionstore

import (
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"ckptfs/internal/ckpt"
)

// TestStepsResolveAndRewindExactly: random turns of random steps (the
// model's operations: writes, renames, links, deletes, modes), a step
// boundary after each; the state at the end of every step and every turn
// resolves exactly (bytes, modes, which paths share an inode), and
// rewinds to random steps give the tree as it was then.
func TestStepsResolveAndRewindExactly(t *testing.T) {
	for seed := int64(1); seed <= 4; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			s, root := atticStore(t)
			tree := openTree(t, root)
			rng := rand.New(rand.NewSource(seed))
			m := &sim{t: t, rng: rand.New(rand.NewSource(seed + 100)), root: root, tree: tree, store: s, link: true}
			h := &keptHistory{}
			h.add(0, takeSnapshot(t, root))
			for turn := 0; turn < 6; turn++ {
				tn, err := s.Begin(ckpt.KindAgent, "", "")
				if err != nil {
					t.Fatal(err)
				}
				steps := 1 + rng.Intn(4)
				for k := 1; k <= steps; k++ {
					for i := 0; i < 3+rng.Intn(8); i++ {
						m.step()
					}
					st, ok, err := s.Step("Edit", fmt.Sprint("step ", k))
					if err != nil {
						t.Fatal(err)
					}
					if !ok {
						continue // changed nothing: no step kept
					}
					h.add(StepPoint(tn.Num, st.Num), takeSnapshot(t, root))
					if _, ok, _ := s.Step("Read", ""); ok {
						t.Fatal("a step that changed nothing was kept")
					}
				}
				for i := 0; i < rng.Intn(3); i++ {
					m.step() // a last step with no boundary
				}
				if _, err := s.End(""); err != nil {
					t.Fatal(err)
				}
				h.add(tn.Num, takeSnapshot(t, root))
			}
			checkHistory(t, s, tree, h.snaps, h.turns)
			for i := 0; i < 6; i++ {
				j := rng.Intn(len(h.turns))
				if _, err := s.Rewind(h.turns[j], tree, RewindOptions{}); err != nil {
					t.Fatalf("seed %d: rewind to %s: %v", seed, PointName(h.turns[j]), err)
				}
				if d := diffSnap(h.snaps[j], takeSnapshot(t, root)); d != "" {
					t.Fatalf("seed %d: rewind to %s: the tree differs:\n%s", seed, PointName(h.turns[j]), d)
				}
			}
		})
	}
}

// TestStepNames: "N.K" resolves to a step's point (the last step too:
// only a turn's only step is the turn itself); steps that do not exist are refused; a step's
// changes are its own; a merge drops the steps of the turn merged into.
func TestStepNames(t *testing.T) {
	s := NewTestStore(t)
	root := t.TempDir()
	tree := openTree(t, root)
	for _, f := range []string{"a", "b", "c"} {
		writeFile(t, root+"/"+f, []byte("0"))
	}
	for n := 1; n <= 2; n++ {
		s.Begin(ckpt.KindAgent, "", "")
		for _, f := range []string{"a", "b", "c"} {
			captureFile(t, s, tree, f)
			writeFile(t, root+"/"+f, []byte(fmt.Sprint(n)))
			if _, _, err := s.Step("Write", f); err != nil {
				t.Fatal(err)
			}
		}
		s.End("")
	}
	steps, err := s.Steps(1)
	if err != nil || len(steps) != 3 || steps[1].Tool != "Write" || steps[1].Label != "b" {
		t.Fatalf("steps of turn 1: %+v, %v", steps, err)
	}
	for spec, want := range map[string]uint64{"1.1": StepPoint(1, 1), "1.2": StepPoint(1, 2), "1.3": StepPoint(1, 3), "2.3": StepPoint(2, 3)} {
		if got, err := s.Resolve(spec); err != nil || got != want {
			t.Fatalf("resolve %s: %s, %v; want %s", spec, PointName(got), err, PointName(want))
		}
	}
	for _, spec := range []string{"1.0", "1.4", "1.x", "1.+1", "3.1", "1."} {
		if _, err := s.Resolve(spec); !errors.Is(err, ErrBadTurn) {
			t.Fatalf("resolve %s: %v, want a bad-turn error", spec, err)
		}
	}
	cs, err := s.TurnChanges(StepPoint(2, 2), tree)
	if err != nil || len(cs) != 1 || cs[0].Path != "b" {
		t.Fatalf("changes of step 2.2: %+v, %v", cs, err)
	}
	if got := catAt(t, s, StepPoint(2, 2), "c", tree); got != "1" {
		t.Fatalf("c at the end of step 2.2: %q", got)
	}
	// Merging 1 into 2 drops records a step of 2 needed: 2 has one
	// step left, itself.
	if _, err := s.Forget([]uint64{1}, ckpt.ReasonForget); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Resolve("2.2"); !errors.Is(err, ErrBadTurn) {
		t.Fatalf("a step of a turn others were merged into resolves: %v", err)
	}
	if n, err := s.Resolve("2.1"); err != nil || n != 2 {
		t.Fatalf("resolve 2.1 after the merge: %s, %v", PointName(n), err)
	}
}

// TestStepBoundarySurvivesAKill: after a kill -9 inside a turn with a
// step boundary, the reopened store rebuilds the open turn's touched set
// from the last step on: a path captured in an earlier step is captured
// again in the current one, so the end of the earlier step still resolves
// exactly.
func TestStepBoundarySurvivesAKill(t *testing.T) {
	mem := vfs.NewCrashableMem()
	s := openOn(t, mem)
	defer s.Close()
	root := t.TempDir()
	tree := openTree(t, root)
	f := filepath.Join(root, "f")
	writeFile(t, f, []byte("0"))
	s.Begin(ckpt.KindAgent, "", "")
	captureFile(t, s, tree, "f")
	writeFile(t, f, []byte("1"))
	if _, ok, err := s.Step("Edit", ""); err != nil || !ok {
		t.Fatalf("step: %v %v", ok, err)
	}
	r, _ := killClone(t, mem)
	defer r.Close()
	if !r.NeedsCapture("f", false) {
		t.Fatal("after a kill, f counts as captured in the step that follows the boundary")
	}
	captureFile(t, r, tree, "f")
	writeFile(t, f, []byte("2"))
	if _, err := r.End(""); err != nil {
		t.Fatal(err)
	}
	if got := catAt(t, r, StepPoint(1, 1), "f", tree); got != "1" {
		t.Fatalf("f at the end of step 1.1 after a kill: %q, want %q", got, "1")
	}
}

// TestLastStepIsItsOwnPoint: "1.2", the last step of a turn of two steps,
// names what step 2 did: its changes are b's alone, and reverting it
// keeps step 1's change of a (Resolve gave the whole turn: show listed
// a too, and revert undid a).
func TestLastStepIsItsOwnPoint(t *testing.T) {
	s := NewTestStore(t)
	root := t.TempDir()
	tree := openTree(t, root)
	for _, f := range []string{"a", "b"} {
		writeFile(t, filepath.Join(root, f), []byte("0"))
	}
	s.Begin(ckpt.KindAgent, "", "")
	captureFile(t, s, tree, "a")
	writeFile(t, filepath.Join(root, "a"), []byte("1"))
	if _, ok, err := s.Step("Write", "a"); err != nil || !ok {
		t.Fatal(ok, err)
	}
	captureFile(t, s, tree, "b")
	writeFile(t, filepath.Join(root, "b"), []byte("1"))
	if _, err := s.End(""); err != nil {
		t.Fatal(err)
	}
	p, err := s.Resolve("1.2")
	if err != nil {
		t.Fatal(err)
	}
	cs, err := s.TurnChanges(p, tree)
	if err != nil || len(cs) != 1 || cs[0].Path != "b" {
		t.Fatalf("changes of step 1.2 (resolved to %s): %+v, %v", PointName(p), cs, err)
	}
	if got := catAt(t, s, p, "a", tree); got != "1" {
		t.Fatalf("a at the end of 1.2: %q", got)
	}
	if _, err := s.Revert(p, tree, RevertOptions{}); err != nil {
		t.Fatal(err)
	}
	for f, want := range map[string]string{"a": "1", "b": "0"} {
		if b, _ := os.ReadFile(filepath.Join(root, f)); string(b) != want {
			t.Fatalf("after reverting step 1.2, %s holds %q, want %q", f, b, want)
		}
	}
}

// A step past a turn's last says which steps there are, and a turn with
// no step boundary is one step.
func TestNoSuchStepSaysWhichThereAre(t *testing.T) {
	s := NewTestStore(t)
	s.Begin(ckpt.KindAgent, "", "")
	recordBytes(t, s, "a", []byte("0"))
	s.End("")
	_, err := s.Resolve("1.9")
	if err == nil || !strings.Contains(err.Error(), "turn 1 has no step 9 (it is one step, 1.1: no step boundary was marked in it)") {
		t.Errorf("1.9: %v", err)
	}
}
