package control

import (
	"slices"
	"strings"
	"testing"
	"time"

	"ckptfs/internal/ckpt"
	"ckptfs/turnctl"
	"ckptfs/versionstore"
)

// overBudgetGC sets a policy that keeps as little as it may (a budget of
// one byte, one turn, no thinning) and runs the store's gc.
func overBudgetGC(t *testing.T, f *fixture, st *versionstore.Store) {
	t.Helper()
	if err := st.SetPolicy(ckpt.Policy{KeepSize: 1, KeepTurns: 1, KeepAge: time.Nanosecond, KeepHourly: -1, KeepDaily: -1}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.GC(versionstore.GCOptions{}); err != nil {
		t.Fatal(err)
	}
}

// The policy keeps "the undo of the newest turn" over its budget; what
// `turnctl undo` undoes is the newest agent turn (or rewind, revert),
// passing over the manual turns background writers make after it (git
// refreshing .git/index). After a gc over budget, undo must still undo
// the agent's turn, not the .git/index refresh made after it.
func TestPolicyKeepsWhatUndoUndoes(t *testing.T) {
	f := newFixture(t)
	st := f.svc.store
	f.ov.Mkdir(".git")
	f.begin("create")
	f.ov.Write("a.txt", "one\n")
	f.end()
	agent := f.begin("edit")
	f.ov.Write("a.txt", "two\n")
	f.end()
	f.ov.Write(".git/index", "refreshed") // a manual turn: git status
	f.begin("next")                       // closes it; stays empty
	f.end()
	overBudgetGC(t, f, st)
	rep, err := f.svc.Undo(f.ctx, turnctl.UndoRequest{})
	if err != nil {
		t.Fatalf("undo after the gc: %v (history starts at %d)", err, st.HistoryStart().Turn)
	}
	if rep.Undone == nil || *rep.Undone != agent {
		t.Errorf("undo after the gc undid turn %v, not the agent's turn %d (history starts at %d)", deref(rep.Undone), agent, st.HistoryStart().Turn)
	}
	if got := f.ov.Read("a.txt"); got != "one\n" {
		t.Errorf("a.txt after the undo: %q, want the state before the agent's turn", got)
	}
}

// A turn that recorded changes but changed nothing in the end (an
// editor's swap file made and removed) is not one undo undoes: the
// policy must keep the undo of the turn undo does undo.
func TestPolicyKeepsUndoPastATurnThatChangedNothing(t *testing.T) {
	f := newFixture(t)
	st := f.svc.store
	f.begin("create")
	f.ov.Write("a.txt", "one\n")
	f.end()
	agent := f.begin("edit")
	f.ov.Write("a.txt", "two\n")
	f.end()
	f.begin("swap")
	f.ov.Write(".a.txt.swp", "x")
	f.ov.Remove(".a.txt.swp")
	f.end()
	overBudgetGC(t, f, st)
	rep, err := f.svc.Undo(f.ctx, turnctl.UndoRequest{})
	if err != nil {
		t.Fatalf("undo after the gc: %v (history starts at %d)", err, st.HistoryStart().Turn)
	}
	if rep.Undone == nil || *rep.Undone != agent {
		t.Errorf("undo after the gc undid turn %v, not %d", deref(rep.Undone), agent)
	}
	if got := f.ov.Read("a.txt"); got != "one\n" {
		t.Errorf("a.txt after the undo: %q", got)
	}
}

func deref(p *uint64) any {
	if p == nil {
		return nil
	}
	return *p
}

// The background gc asks for the turn undo undoes at every 32 MiB a turn
// keeps; the answer is found anew only when the closed turns or history
// changed, once each time, and stays right through all of them.
func TestUndoneNowIsFoundAnewOnlyWhenClosedTurnsChange(t *testing.T) {
	f := newFixture(t)
	st := f.svc.store
	f.begin("create")
	f.ov.Write("a.txt", "one\n")
	f.end()
	edit := f.begin("edit")
	f.ov.Write("a.txt", "two\n")
	f.end()
	want := func(n uint64, computed int) {
		t.Helper()
		got, ok := f.svc.undoneNow()
		if !ok || got != n {
			t.Fatalf("undoneNow = %d, %v; want %d", got, ok, n)
		}
		if c := f.svc.undone.computed; c != computed {
			t.Fatalf("undoneNow was found anew %d times, want %d", c, computed)
		}
	}
	want(edit, 1)
	want(edit, 1)
	mkdir := f.begin("mkdir")
	f.ov.Mkdir("d") // no file changed, but undo undoes it
	f.end()
	want(mkdir, 2)
	more := f.begin("more") // open: undo passes over it
	f.ov.Write("b.txt", "b\n")
	want(mkdir, 2)
	f.end()
	want(more, 3)
	f.ov.Write("c.txt", "c\n") // a manual turn, closed by the next begin
	f.begin("next")
	want(more, 4)
	want(more, 4)
	if _, err := st.Forget([]uint64{edit}, "test"); err != nil { // merged into the turn after it
		t.Fatal(err)
	}
	want(more, 5)
}

// Over its budget, a store whose last gc found nothing the policy lets it
// forget (what is left is the newest turn and its undo) says so in
// status, until history changes; before such a gc it does not.
func TestStatusSaysWhenTheGCMayForgetNothingMore(t *testing.T) {
	f := newFixture(t)
	st := f.svc.store
	for i := range 3 {
		f.begin("edit")
		f.ov.Write("a.txt", strings.Repeat("x", 1000*(i+1)))
		f.end()
	}
	if err := st.SetPolicy(ckpt.Policy{KeepSize: 1}); err != nil {
		t.Fatal(err)
	}
	allKept := func() bool {
		t.Helper()
		rep, err := f.svc.Status(f.ctx, turnctl.StatusRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Store.StoreBytes <= rep.Store.Budget {
			t.Fatalf("store of %d bytes within its budget of %d", rep.Store.StoreBytes, rep.Store.Budget)
		}
		return rep.Store.AllKept
	}
	if allKept() {
		t.Error("all kept before any gc looked")
	}
	rep, err := st.GC(versionstore.GCOptions{})
	if err != nil || len(rep.Forgot) == 0 {
		t.Fatalf("first gc: %+v %v", rep, err)
	}
	if allKept() {
		t.Error("all kept after a gc that forgot turns")
	}
	rep, err = st.GC(versionstore.GCOptions{})
	if err != nil || len(rep.Forgot) > 0 {
		t.Fatalf("second gc: %+v %v", rep, err)
	}
	if !allKept() {
		t.Error("not all kept after a gc that found nothing to forget")
	}
	f.begin("more")
	f.ov.Write("b.txt", "b")
	f.end()
	if allKept() {
		t.Error("all kept after another turn, before a gc looked again")
	}
}

// A turn's end counts its stats with the mount open again; a write that
// lands meanwhile can make a turn whose changes cancel out read as one
// that changed a file (the live file holds the later bytes). Kept,
// undoneNow would find that wrong answer from them until a turn closed:
// they are kept only when nothing was recorded since the turn closed.
func TestUndoneNotNotedFromStatsAWriteOvertook(t *testing.T) {
	f := newFixture(t)
	st := f.svc.store
	create := f.begin("create")
	f.ov.Write("a.txt", "one\n")
	f.end()
	f.begin("cancel")
	f.ov.Write("a.txt", "two\n")
	f.ov.Write("a.txt", "one\n") // back as it was: the turn changed nothing
	cancel, err := st.End("")
	if err != nil {
		t.Fatal(err)
	}
	m := f.svc.mark()
	f.ov.Write("a.txt", "three\n") // lands while the stats are computed
	// The stats as a read of the live a.txt ("three") counted them.
	f.svc.cacheStats(cancel.Num, ckpt.Stats{Files: 1, Modified: 1}, m)
	if n, ok := f.svc.undoneNow(); !ok || n != create {
		t.Errorf("undoneNow = %d, %v; want %d (turn %d changed nothing)", n, ok, create, cancel.Num)
	}
}

// A forget that lands while a turn's end computes its stats can move the
// start of history to that turn: its changes are forgotten, and undo has
// nothing to undo. The stats counted before must not say it undoes that
// turn.
func TestUndoneNotNotedForATurnHistoryStartsAt(t *testing.T) {
	f := newFixture(t)
	st := f.svc.store
	f.begin("create")
	f.ov.Write("a.txt", "one\n")
	f.end()
	f.begin("edit")
	f.ov.Write("a.txt", "two\n")
	edit, err := st.End("")
	if err != nil {
		t.Fatal(err)
	}
	m := f.svc.mark()
	if _, err := st.Forget([]uint64{0, edit.Num - 1}, "test"); err != nil { // the oldest: the start moves
		t.Fatal(err)
	}
	if start := st.HistoryStart().Turn; start != edit.Num {
		t.Fatalf("history starts at %d, want %d", start, edit.Num)
	}
	f.svc.cacheStats(edit.Num, ckpt.Stats{Files: 1, Modified: 1}, m)
	if n, ok := f.svc.undoneNow(); ok {
		t.Errorf("undoneNow = %d, true; want nothing to undo (history starts at turn %d)", n, edit.Num)
	}
}

// An answer undoneNow found while captures were recorded may have read a
// live file a write changed meanwhile: it is found anew once undoRecheck
// has passed, while one found in quiet is kept until the closed turns
// change.
func TestUndoneNowRechecksAnAnswerFoundWhileWritten(t *testing.T) {
	f := newFixture(t)
	f.begin("edit")
	f.ov.Write("a.txt", "one\n")
	f.end()
	f.ov.Write("b.txt", "b\n") // a manual turn: no stats counted at its end
	f.begin("next")
	if n, ok := f.svc.undoneNow(); !ok || n != 1 || f.svc.undone.computed != 1 || !f.svc.undone.sure {
		t.Fatalf("undoneNow = %d, %v; found %d times, sure %v", n, ok, f.svc.undone.computed, f.svc.undone.sure)
	}
	f.svc.undone.at = time.Now().Add(-time.Hour)
	f.svc.undoneNow()
	if c := f.svc.undone.computed; c != 1 {
		t.Errorf("an answer found in quiet was found anew (%d times)", c)
	}
	// Found again (as after a change of the closed turns), with a
	// capture recorded while the changes are read.
	f.svc.undone.known = false
	testHookTurnChanges = func(uint64) {
		testHookTurnChanges = nil
		f.ov.Write("c.txt", "c\n")
	}
	defer func() { testHookTurnChanges = nil }()
	if n, ok := f.svc.undoneNow(); !ok || n != 1 || f.svc.undone.computed != 2 || f.svc.undone.sure {
		t.Fatalf("found while written: undoneNow = %d, %v; found %d times, sure %v (want not sure)", n, ok, f.svc.undone.computed, f.svc.undone.sure)
	}
	f.svc.undoneNow()
	if c := f.svc.undone.computed; c != 2 {
		t.Errorf("an answer found while written was found anew before undoRecheck (%d times)", c)
	}
	f.svc.undone.at = time.Now().Add(-undoRecheck)
	if n, ok := f.svc.undoneNow(); !ok || n != 1 || f.svc.undone.computed != 3 || !f.svc.undone.sure {
		t.Errorf("after undoRecheck: undoneNow = %d, %v; found %d times, sure %v", n, ok, f.svc.undone.computed, f.svc.undone.sure)
	}
}

// What undo undoes is found from the stats a turn's end counted when they
// name files, without reading the turn's changes again; a turn without
// them (a manual turn whose end counted none) is read.
func TestUndoUsesTheStatsAnEndCounted(t *testing.T) {
	f := newFixture(t)
	f.begin("edit")
	f.ov.Write("a.txt", "one\n")
	f.end()
	f.ov.Write("b.txt", "b\n") // a manual turn, closed by the next begin: no stats
	f.begin("next")
	var read []uint64
	testHookTurnChanges = func(n uint64) { read = append(read, n) }
	defer func() { testHookTurnChanges = nil }()
	n, _, err := f.svc.lastAction()
	if err != nil || n != 1 {
		t.Fatalf("lastActionOf = %d, %v; want 1", n, err)
	}
	if !slices.Equal(read, []uint64{2}) {
		t.Errorf("read the changes of turns %v, want only the manual turn 2's", read)
	}
}

// Stats counted before a merge into their turn are not stored after it,
// even when the merge comes between cacheStats' check and its write: the
// merged turn's changes may cancel out (a file made in the turn merged
// into it and deleted in it), and undo, which trusts stats that name
// files, would undo a turn that changed nothing.
func TestStatsCountedBeforeAMergeAreNotStored(t *testing.T) {
	f := newFixture(t)
	f.begin("edit")
	f.ov.Write("a.txt", "one\n")
	f.end()
	f.ov.Write("x", "made by hand\n") // manual turn 2
	rm := f.begin("rm x")
	f.ov.Remove("x")
	testHookCacheStats = func() {
		testHookCacheStats = nil
		if _, err := f.svc.store.Forget([]uint64{rm - 1}, "test"); err != nil {
			t.Errorf("forget turn %d: %v", rm-1, err)
		}
	}
	defer func() { testHookCacheStats = nil }()
	f.end()
	if f.svc.store.Merges() == 0 {
		t.Fatal("no merge")
	}
	if tn, err := f.svc.store.Turn(rm); err != nil || tn.Stats != nil && tn.Stats.Files > 0 {
		t.Errorf("turn %d, into which turn %d was merged, keeps stats counted before: %+v (%v)", rm, rm-1, tn.Stats, err)
	}
	if n, ok := f.svc.undoneNow(); !ok || n != 1 {
		t.Errorf("undoneNow = %d, %v; want 1 (turn %d changed nothing once merged)", n, ok, rm)
	}
}
