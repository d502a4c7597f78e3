package control

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"ckptfs/internal/ckpt"
	"ckptfs/turnctl"
)

// TestUndoKeepsBackgroundChanges: after a rewind, a background writer
// (git status refreshing .git/index) makes a manual turn; undo must undo
// the rewind, not that turn, keep .git/index, and say so; a second undo
// redoes the rewind, still keeping it.
func TestUndoKeepsBackgroundChanges(t *testing.T) {
	f := newFixture(t)
	f.ov.Mkdir(".git")
	f.ov.Write(".git/index", "v1") // manual turn 1
	f.history()                    // turns 2-4
	rw, err := f.svc.Rewind(f.ctx, turnctl.RewindRequest{Turn: "2"})
	if err != nil {
		t.Fatal(err)
	}
	f.ov.Write(".git/index", "v2") // no turn open: a manual turn
	undo, err := f.svc.Undo(f.ctx, turnctl.UndoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if *undo.Undone != rw.Turn.Num || undo.Turn.Kind != ckpt.KindRevert || !slices.Contains(undo.Kept, ".git/index") || len(undo.KeptTurns) != 1 {
		t.Fatalf("undo: undone %d kept %v %v turn %+v; want the rewind %d undone", *undo.Undone, undo.KeptTurns, undo.Kept, undo.Turn, rw.Turn.Num)
	}
	if st, _ := f.ov.Tree.Lstat("a.txt"); st.Exists() || f.ov.Read(".git/index") != "v2" || f.ov.Read("d/c.txt") != "bee\n" {
		t.Fatalf("after undo: a.txt %v, index %q", st, f.ov.Read(".git/index"))
	}
	redo, err := f.svc.Undo(f.ctx, turnctl.UndoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if *redo.Undone != undo.Turn.Num || f.ov.Read("a.txt") != "one\ntwo\n" || f.ov.Read(".git/index") != "v2" {
		t.Fatalf("second undo: %+v, a.txt %q", redo, f.ov.Read("a.txt"))
	}
}

// TestRevertService: revert of turn 2 keeps turn 3's deletion, undoes the
// rename and refuses a conflict, naming it, with nothing changed.
func TestRevertService(t *testing.T) {
	f := newFixture(t)
	f.begin("1")
	f.ov.Write("a.txt", "1\n2\n3\n")
	f.ov.Mkdir("d")
	f.ov.Write("d/b.txt", "bee\n")
	f.end()
	f.begin("2")
	f.ov.Rename("d/b.txt", "d/c.txt")
	f.ov.Write("a.txt", "1\nX\n3\n")
	f.end()
	f.begin("3")
	f.ov.Write("x.txt", "x\n")
	f.end()
	dry, err := f.svc.Revert(f.ctx, turnctl.RevertRequest{Turn: "2", DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := f.svc.Revert(f.ctx, turnctl.RevertRequest{Turn: "2"})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Turn == nil || rep.Turn.Kind != ckpt.KindRevert || rep.Turn.Label != "revert of turn 2" || *rep.Reverted != 2 {
		t.Fatalf("revert: %+v", rep)
	}
	if len(dry.Changes) != 2 || len(rep.Changes) != 2 || rep.Changes[1].Kind != ckpt.Renamed || rep.Changes[1].Path != "d/b.txt" {
		t.Fatalf("changes: dry %+v, run %+v", dry.Changes, rep.Changes)
	}
	if f.ov.Read("d/b.txt") != "bee\n" || f.ov.Read("a.txt") != "1\n2\n3\n" || f.ov.Read("x.txt") != "x\n" {
		t.Fatal("not reverted")
	}
	f.begin("5")
	f.ov.Write("a.txt", "1\n2\nZ\n")
	f.end()
	f.begin("6")
	f.ov.Write("a.txt", "A\n2\nZ\n")
	f.end()
	if _, err := f.svc.Revert(f.ctx, turnctl.RevertRequest{Turn: "5", Conflicts: "both"}); !isCode(err, turnctl.CodeBadRequest) {
		t.Errorf("bad --conflicts: %v", err)
	}
	rep, err = f.svc.Revert(f.ctx, turnctl.RevertRequest{Turn: "5"})
	if err != nil || f.ov.Read("a.txt") != "A\n2\n3\n" || len(rep.Merged) != 1 {
		t.Fatalf("merge of a.txt: %v %q %+v", err, f.ov.Read("a.txt"), rep)
	}
	f.begin("8")
	f.ov.Write("a.txt", "A\n2\nW\n")
	f.end()
	latest := f.svc.store.Latest()
	_, err = f.svc.Revert(f.ctx, turnctl.RevertRequest{Turn: "5"})
	if !isCode(err, turnctl.CodeConflict) || !strings.Contains(err.Error(), "a.txt") || f.ov.Read("a.txt") != "A\n2\nW\n" || f.svc.store.Latest() != latest {
		t.Fatalf("conflicting revert: %v, a.txt %q", err, f.ov.Read("a.txt"))
	}
	if !strings.Contains(err.Error(), "--conflicts=markers") {
		t.Errorf("a text conflict's refusal does not name --conflicts=markers: %v", err)
	}
	// A file turn 5's revert cannot merge (binary): no hint of markers,
	// which would refuse again.
	f.begin("9")
	f.ov.Write("bin", "\x00one")
	f.end()
	f.begin("10")
	f.ov.Write("bin", "\x00two")
	f.end()
	f.begin("11")
	f.ov.Write("bin", "\x00three")
	f.end()
	_, err = f.svc.Revert(f.ctx, turnctl.RevertRequest{Turn: "10"})
	if !isCode(err, turnctl.CodeConflict) || !strings.Contains(err.Error(), "bin") || strings.Contains(err.Error(), "--conflicts=markers") {
		t.Errorf("a binary conflict's refusal: %v; want it without the markers hint", err)
	}
	rep, err = f.svc.Revert(f.ctx, turnctl.RevertRequest{Turn: "5", Conflicts: "markers"})
	if want := "A\n2\n<<<<<<< now\nW\n=======\n3\n>>>>>>> before turn 5\n"; err != nil || len(rep.Conflicts) != 1 || f.ov.Read("a.txt") != want {
		t.Fatalf("markers: %v %+v %q", err, rep, f.ov.Read("a.txt"))
	}
}

// The later changes an undo says it kept are those of the later turns:
// not the paths of a rename the undo itself made (both its names).
func TestUndoKeptListsOnlyLaterChanges(t *testing.T) {
	f := newFixture(t)
	f.ov.Mkdir(".git")
	f.ov.Write(".git/description", "d1")
	f.ov.Write("notes.txt", "n\n")
	f.begin("1")
	f.ov.Rename("notes.txt", "NOTES.md")
	f.end()
	if _, err := f.svc.Rewind(f.ctx, turnctl.RewindRequest{Turn: "1"}); err != nil {
		t.Fatal(err)
	}
	f.ov.Write(".git/description", "d2") // no turn open: a manual turn
	undo, err := f.svc.Undo(f.ctx, turnctl.UndoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(undo.Kept, []string{".git/description"}) {
		t.Fatalf("undo kept %q, want only .git/description (the later turn's change)", undo.Kept)
	}
	if f.ov.Read("NOTES.md") != "n\n" || f.ov.Read(".git/description") != "d2" {
		t.Fatalf("after undo: NOTES.md %q, .git/description %q", f.ov.Read("NOTES.md"), f.ov.Read(".git/description"))
	}
}

// Once the turns before it are forgotten, the first kept turn's own
// changes are gone: log counts none for it, as show lists none, even
// where it had counted them before.
func TestLogCountsNothingForTheFirstKeptTurn(t *testing.T) {
	f := newFixture(t)
	f.begin("1")
	f.ov.Write("a.txt", "a\n")
	f.end()
	f.begin("2")
	f.ov.Write("b.txt", "b\n")
	f.end()
	if _, err := f.svc.Log(f.ctx, turnctl.LogRequest{}); err != nil { // counts and caches
		t.Fatal(err)
	}
	if _, err := f.svc.Forget(f.ctx, turnctl.ForgetRequest{Turns: []string{"0"}}); err != nil {
		t.Fatal(err)
	}
	// A count made before the forget and cached after it (a log racing
	// the forget) is not kept.
	f.svc.store.SetStats(1, ckpt.Stats{Files: 1}, f.svc.store.Merges())
	log, err := f.svc.Log(f.ctx, turnctl.LogRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tn := range log.Turns {
		show, err := f.svc.Show(f.ctx, turnctl.ShowRequest{Turn: fmt.Sprint(tn.Num)})
		if err != nil {
			t.Fatal(err)
		}
		if tn.Stats == nil || tn.Stats.Files != len(show.Changes) {
			t.Errorf("turn %d: log counts %+v, show lists %d changes", tn.Num, tn.Stats, len(show.Changes))
		}
		if st := show.Turn.Stats; st != nil && st.Files != len(show.Changes) {
			t.Errorf("turn %d: show's turn counts %+v, it lists %d changes", tn.Num, st, len(show.Changes))
		}
	}
}

// TestUndoRefusalNamesTheRewindBack: an undo refused because a later
// change conflicts (git status rewrote the .git/index the rewind put
// back) names the rewind that goes back to just before the undone turn,
// and that rewind does.
func TestUndoRefusalNamesTheRewindBack(t *testing.T) {
	f := newFixture(t)
	f.ov.Mkdir(".git")
	f.ov.Write(".git/index", "v1") // manual turn 1
	f.history()                    // turns 2-4
	f.begin("index")
	f.ov.Write(".git/index", "v3")
	f.end()
	rw, err := f.svc.Rewind(f.ctx, turnctl.RewindRequest{Turn: "2"})
	if err != nil || f.ov.Read(".git/index") != "v1" {
		t.Fatalf("rewind: %v, index %q", err, f.ov.Read(".git/index"))
	}
	f.ov.Write(".git/index", "v2") // no turn open: a manual turn
	_, err = f.svc.Undo(f.ctx, turnctl.UndoRequest{})
	back := rw.Turn.Num - 1
	want := fmt.Sprintf("; turnctl rewind %d goes back to just before turn %d, dropping the later changes", back, rw.Turn.Num)
	if !isCode(err, turnctl.CodeConflict) || !strings.HasSuffix(err.Error(), want) {
		t.Fatalf("undo over a conflicting .git/index: %v; want it to end in %q", err, want)
	}
	if _, err := f.svc.Rewind(f.ctx, turnctl.RewindRequest{Turn: fmt.Sprint(back)}); err != nil {
		t.Fatal(err)
	}
	if f.ov.Read(".git/index") != "v3" {
		t.Errorf("after the rewind the refusal named: index %q", f.ov.Read(".git/index"))
	}
}
