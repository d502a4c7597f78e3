package versionstore

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"ckptfs/internal/backing"
	"ckptfs/internal/ckpt"
)

// TestKillBetweenExchangeRecordAndExchange: an exchange recorded before a
// kill -9 and never made was kept by Recover (both names exist either
// way), so history said a and y had swapped: a later capture of y stood
// for a's state, and a rewind to 0 gave a the bytes of y. The record's
// mark now holds the two inode numbers, and Recover drops an exchange
// whose names still have their own; one that was made is kept.
func TestKillBetweenExchangeRecordAndExchange(t *testing.T) {
	for _, done := range []bool{false, true} {
		t.Run(map[bool]string{false: "not exchanged", true: "exchanged"}[done], func(t *testing.T) {
			mem := vfs.NewCrashableMem()
			s := openOn(t, mem)
			root := t.TempDir()
			os.WriteFile(filepath.Join(root, "a"), []byte("a0"), 0o644)
			os.WriteFile(filepath.Join(root, "y"), []byte("y0"), 0o644)
			tree, _ := backing.Open(root)
			defer tree.Close()
			m := &sim{t: t, root: root, tree: tree, store: s}
			s.Begin(ckpt.KindAgent, "", "")
			ia, _ := tree.Ident("a")
			iy, _ := tree.Ident("y")
			if _, err := s.RecordExchange("a", "y", ia, iy, ckpt.Program{Comm: "mv"}); err != nil {
				t.Fatal(err)
			}
			if done {
				if err := tree.Exchange("a", "y"); err != nil {
					t.Fatal(err)
				}
			}
			killed, _ := killClone(t, mem)
			defer killed.Close()
			if _, err := killed.Recover(tree); err != nil {
				t.Fatal(err)
			}
			// The open turn goes on after the remount: y, then a, are
			// written.
			m.store = killed
			for _, p := range []string{"y", "a"} {
				if killed.NeedsCapture(p, false) {
					m.capture(p, true)
				}
				os.WriteFile(filepath.Join(root, p), []byte(p+"1"), 0o644)
			}
			if _, err := killed.Rewind(0, tree, RewindOptions{}); err != nil {
				t.Fatal(err)
			}
			for p, want := range map[string]string{"a": "a0", "y": "y0"} {
				if b, _ := os.ReadFile(filepath.Join(root, p)); string(b) != want {
					t.Errorf("%s after the rewind to 0: %q, want %q", p, b, want)
				}
			}
		})
	}
}

// exchangeCase is a tree whose turn 1 exchanged a file with a directory,
// and a rewind to 0 killed at point: after the recovery the tree is turn
// 0's, and the rewind turn's events are returned.
func exchangeCase(t *testing.T, point string) []string {
	mem := vfs.NewCrashableMem()
	s := openOn(t, mem)
	root := t.TempDir()
	writeFiles(t, root, map[string]string{"a": "a0", "d/x": "x0", "d/y": "y0"})
	tree, _ := backing.Open(root)
	defer tree.Close()
	before := takeSnapshot(t, root)
	s.Begin(ckpt.KindAgent, "", "")
	ia, _ := tree.Ident("a")
	id, _ := tree.Ident("d")
	commit, err := s.RecordExchange("a", "d", ia, id, ckpt.Program{Comm: "mv"})
	if err != nil {
		t.Fatal(err)
	}
	commit(tree.Exchange("a", "d") == nil)
	s.End("")
	p, err := untilCrash(t, point, func() error { _, err := s.Rewind(0, tree, RewindOptions{}); return err })
	if p != point {
		t.Fatalf("crashed at %q (%v), want %s", p, err, point)
	}
	s2, _ := killClone(t, mem)
	s.Close()
	defer s2.Close()
	if _, err := s2.Recover(tree); err != nil {
		t.Fatal(err)
	}
	if d := diffSnap(before, takeSnapshot(t, root)); d != "" {
		t.Fatalf("after the recovery of a rewind killed at %s:\n%s", point, d)
	}
	rt, _ := s2.Turn(s2.Latest())
	var evs []string
	s2.scanEvents(rt.FirstSeq, rt.LastSeq+1, func(r *record) (bool, error) {
		evs = append(evs, r.Op+" "+r.Path+" "+r.To)
		return true, nil
	})
	return evs
}

func writeFiles(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for p, c := range files {
		os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755)
		if err := os.WriteFile(filepath.Join(root, p), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestKillBetweenRewindsExchangeRecordAndExchange: a rewind killed after
// recording its exchange back and before making it left that record in
// the rewind turn (Recover kept every exchange); the redo exchanged and
// recorded again, and the fix-up pass, reading history as two exchanges,
// gave a the directory and d the file.
func TestKillBetweenRewindsExchangeRecordAndExchange(t *testing.T) {
	evs := exchangeCase(t, "rewind.exchange.recorded")
	if fmt.Sprint(evs) != "[x d a]" {
		t.Errorf("rewind turn's events %q, want one exchange", evs)
	}
}

// TestRedoOfRewindsExchangeExchangesOnce: a rewind killed after its
// exchange back and before saving its progress redid the step and
// exchanged again; the fix-up pass then had to copy both sides back.
// The redo now finds its own earlier exchange (the journal's Mark).
func TestRedoOfRewindsExchangeExchangesOnce(t *testing.T) {
	before := fixups.Load()
	evs := exchangeCase(t, "rewind.exchange.done")
	if fmt.Sprint(evs) != "[x d a]" {
		t.Errorf("rewind turn's events %q, want one exchange", evs)
	}
	if n := fixups.Load() - before; n != 0 {
		t.Errorf("the fix-up pass took %d actions, want none", n)
	}
}

// TestKillAfterExchangeAndAnUnrecordedChange: an exchange of two
// directories is made and confirmed, then one of its names is removed,
// which needs no record (it holds what the turn created), and the process
// is killed before anything else is committed. The confirmation must have
// survived: Recover judging the exchange by the names it finds now would
// take the missing name for an exchange never made and drop its record,
// and a rewind would then leave b/b (the old d, with b/b/d) and not bring
// d back.
func TestKillAfterExchangeAndAnUnrecordedChange(t *testing.T) {
	mem := vfs.NewCrashableMem()
	s := openOn(t, mem)
	root := t.TempDir()
	writeFiles(t, root, map[string]string{"b/a": "ba0", "d/d": "dd0"})
	tree, _ := backing.Open(root)
	defer tree.Close()
	m := &sim{t: t, root: root, tree: tree, store: s}
	before := takeSnapshot(t, root)
	s.Begin(ckpt.KindAgent, "", "")
	// mkdir b/b; exchange b/b d; rmdir d (the empty directory made as b/b).
	m.capture("b/b", false)
	if err := os.Mkdir(filepath.Join(root, "b/b"), 0o755); err != nil {
		t.Fatal(err)
	}
	ib, _ := tree.Ident("b/b")
	id, _ := tree.Ident("d")
	commit, err := s.RecordExchange("b/b", "d", ib, id, ckpt.Program{Comm: "mv"})
	if err != nil {
		t.Fatal(err)
	}
	if err := tree.Exchange("b/b", "d"); err != nil {
		t.Fatal(err)
	}
	commit(true)
	if s.NeedsCapture("d", false) {
		t.Fatal("d needs a capture: the test wants a change that records nothing")
	}
	if err := os.Remove(filepath.Join(root, "d")); err != nil {
		t.Fatal(err)
	}
	killed, _ := killClone(t, mem)
	s.Close()
	defer killed.Close()
	if _, err := killed.Recover(tree); err != nil {
		t.Fatal(err)
	}
	if _, err := killed.Rewind(0, tree, RewindOptions{}); err != nil {
		t.Fatal(err)
	}
	if d := diffSnap(before, takeSnapshot(t, root)); d != "" {
		t.Errorf("after the rewind to 0:\n%s", d)
	}
}
