package control

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"

	"ckptfs/fusefs/fusefstest"
	"ckptfs/internal/ckpt"
	"ckptfs/turnctl"
	"ckptfs/versionstore"
)

// fakeGate counts calls.
type fakeGate struct {
	mu          sync.Mutex
	exclusive   int
	invalidated []string
}

func (g *fakeGate) Exclusive(fn func() error) error {
	g.mu.Lock()
	g.exclusive++
	g.mu.Unlock()
	return fn()
}

func (g *fakeGate) Invalidate(p string) {
	g.mu.Lock()
	g.invalidated = append(g.invalidated, p)
	g.mu.Unlock()
}

func (g *fakeGate) Moved(from, to string, exchange bool) {}
func (g *fakeGate) NoteLink(ino uint64, p string)        {}
func (g *fakeGate) WritesPast(p string) bool             { return false }
func (g *fakeGate) LinkNames(ino uint64) []string        { return nil }

type fixture struct {
	t    *testing.T
	ov   *fusefstest.Overlay
	gate *fakeGate
	svc  *Service
	ctx  context.Context
}

func newFixture(t *testing.T) *fixture {
	store := versionstore.NewTestStore(t)
	ov := fusefstest.New(t, t.TempDir(), store)
	g := &fakeGate{}
	return &fixture{t: t, ov: ov, gate: g, svc: NewService(store, ov.Tree, g), ctx: context.Background()}
}

func (f *fixture) begin(label string) uint64 {
	f.t.Helper()
	rep, err := f.svc.Begin(f.ctx, turnctl.BeginRequest{Label: label})
	if err != nil {
		f.t.Fatal(err)
	}
	return rep.Turn.Num
}

func (f *fixture) end() *turnctl.EndReply {
	f.t.Helper()
	rep, err := f.svc.End(f.ctx, turnctl.EndRequest{})
	if err != nil {
		f.t.Fatal(err)
	}
	return rep
}

// history builds turns 1-3:
//
//	1: a.txt "one\ntwo\n", dir d/, d/b.txt
//	2: a.txt "one\n2\nthree\n", rename d/b.txt -> d/c.txt
//	3: delete a.txt
func (f *fixture) history() {
	f.begin("first")
	f.ov.Write("a.txt", "one\ntwo\n")
	f.ov.Mkdir("d")
	f.ov.Write("d/b.txt", "bee\n")
	f.end()
	f.begin("second")
	f.ov.Write("a.txt", "one\n2\nthree\n")
	f.ov.Rename("d/b.txt", "d/c.txt")
	f.end()
	f.begin("third")
	f.ov.Remove("a.txt")
	f.end()
}

// end's summary counts what log and show count: the files under .git
// apart, summed up after "git:".
func TestEndSummaryPutsGitApart(t *testing.T) {
	f := newFixture(t)
	f.ov.Mkdir(".git")
	f.begin("first")
	f.ov.Write("a.txt", "one\n")
	f.ov.Write(".git/index", "i\n")
	f.ov.Write(".git/ORIG_HEAD", "h\n")
	if rep, want := f.end(), "turn 2 closed: 1 file (+1 -0) by test; git: 2 files in .git"; rep.Summary != want {
		t.Errorf("summary %q, want %q", rep.Summary, want)
	}
	f.begin("second")
	f.ov.Write(".git/index", "j\n")
	if rep, want := f.end(), "turn 3 closed: no files changed outside .git by test; git: 1 file in .git"; rep.Summary != want {
		t.Errorf("summary %q, want %q", rep.Summary, want)
	}
}

func TestBeginEndStats(t *testing.T) {
	f := newFixture(t)
	f.begin("first")
	f.ov.Write("a.txt", "one\ntwo\n")
	f.ov.Write("bin", "x\x00y")
	rep := f.end()
	if rep.Turn.Num != 1 || rep.Turn.Stats == nil {
		t.Fatalf("end: %+v", rep)
	}
	st := rep.Turn.Stats
	if st.Files != 2 || st.Added != 2 || st.LinesAdded != 2 || st.LinesDeleted != 0 {
		t.Errorf("stats: %+v", st)
	}
	if want := "turn 1 closed: 2 files (+2 -0) by test"; rep.Summary != want {
		t.Errorf("summary %q, want %q", rep.Summary, want)
	}
	if f.gate.exclusive != 2 {
		t.Errorf("gate.Exclusive called %d times, want 2", f.gate.exclusive)
	}
	if _, err := f.svc.End(f.ctx, turnctl.EndRequest{}); !isCode(err, turnctl.CodeConflict) {
		t.Errorf("end with no open turn: %v", err)
	}
}

// TestEndIfOpenedBy: an end with IfOpenedBy closes only a turn opened
// for it (its first ref is the key, or the key and ":" or "."); any
// other open turn, a manual one too, stays open and unchanged.
func TestEndIfOpenedBy(t *testing.T) {
	f := newFixture(t)
	if _, err := f.svc.Begin(f.ctx, turnctl.BeginRequest{Label: "B", Ref: "sessB:1234abcd"}); err != nil {
		t.Fatal(err)
	}
	f.ov.Write("b.txt", "b\n")
	_, err := f.svc.End(f.ctx, turnctl.EndRequest{Ref: "answerA", IfOpenedBy: "sessA"})
	if !isCode(err, turnctl.CodeConflict) || err.Error() != "the open turn 1 is another session's (ref sessB:1234abcd), not sessA's; left open" {
		t.Fatalf("end of another session: %v", err)
	}
	if cur, ok := f.svc.store.Current(); !ok || cur.Num != 1 || len(cur.Refs) != 1 {
		t.Fatalf("the turn changed: %+v %v", cur, ok)
	}
	rep, err := f.svc.End(f.ctx, turnctl.EndRequest{Ref: "answerB", IfOpenedBy: "sessB"})
	if err != nil || rep.Turn.Num != 1 || len(rep.Turn.Refs) != 2 || rep.Turn.Refs[1] != "answerB" {
		t.Fatalf("end of its session: %+v %v", rep, err)
	}
	_, err = f.svc.End(f.ctx, turnctl.EndRequest{IfOpenedBy: "sessB"})
	if !isCode(err, turnctl.CodeConflict) || err.Error() != "no turn is open (turnctl begin opens one)" {
		t.Fatalf("end with none open: %v", err)
	}
	f.ov.Write("c.txt", "c\n") // a manual turn
	_, err = f.svc.End(f.ctx, turnctl.EndRequest{IfOpenedBy: "sessB"})
	if !isCode(err, turnctl.CodeConflict) || !strings.HasPrefix(err.Error(), "the open turn 2 is a manual turn") {
		t.Fatalf("end of a manual turn: %v", err)
	}
	if cur, ok := f.svc.store.Current(); !ok || cur.Num != 2 || cur.Kind != ckpt.KindManual {
		t.Fatalf("the manual turn changed: %+v %v", cur, ok)
	}
	for _, c := range []struct {
		ref, key string
		want     bool
	}{
		{"t1", "t1", true}, {"t1.lq3x", "t1", true}, {"s:1234", "s", true},
		{"s1:1234", "s", false}, {"s", "s1", false}, {"x", "", false},
	} {
		if got := turnctl.OpenedBy(ckpt.Turn{Kind: ckpt.KindAgent, Refs: []string{c.ref}}, c.key); got != c.want {
			t.Errorf("OpenedBy(ref %q, %q) = %v", c.ref, c.key, got)
		}
	}
}

func isCode(err error, code string) bool {
	var e *turnctl.Error
	return errors.As(err, &e) && e.Code == code
}

func TestShowDiffCat(t *testing.T) {
	f := newFixture(t)
	f.history()
	show, err := f.svc.Show(f.ctx, turnctl.ShowRequest{Turn: "2", Patch: true})
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]string{}
	for _, c := range show.Changes {
		kinds[c.Path] = string(c.Kind)
	}
	if kinds["a.txt"] != "modified" || kinds["d/c.txt"] != "renamed" || len(kinds) != 2 {
		t.Fatalf("show 2: %+v", show.Changes)
	}
	if show.Stats.LinesAdded != 2 || show.Stats.LinesDeleted != 1 {
		t.Errorf("show 2 stats: %+v", show.Stats)
	}
	var patch string
	for _, c := range show.Changes {
		patch += c.Patch
	}
	for _, want := range []string{"--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,3 @@\n one\n-two\n+2\n+three\n", "rename from d/b.txt\nrename to d/c.txt\n"} {
		if !strings.Contains(patch, want) {
			t.Errorf("patch lacks %q:\n%s", want, patch)
		}
	}
	diff, err := f.svc.Diff(f.ctx, turnctl.DiffRequest{From: "1", Paths: []string{"a.txt"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(diff.Changes) != 1 || diff.Changes[0].Kind != ckpt.Deleted || !strings.Contains(diff.Changes[0].Patch, "+++ /dev/null") {
		t.Fatalf("diff 1 now a.txt: %+v", diff.Changes)
	}
	cat, err := f.svc.Cat(f.ctx, turnctl.CatRequest{Turn: "1", Path: "a.txt"})
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(cat.Body)
	cat.Body.Close()
	if string(data) != "one\ntwo\n" {
		t.Errorf("cat 1 a.txt = %q", data)
	}
	if _, err := f.svc.Cat(f.ctx, turnctl.CatRequest{Turn: "3", Path: "a.txt"}); !isCode(err, turnctl.CodeNotFound) {
		t.Errorf("cat of an absent file: %v", err)
	}
	if _, err := f.svc.Cat(f.ctx, turnctl.CatRequest{Turn: "1", Path: "d"}); !isCode(err, turnctl.CodeNotFound) { // no file there, as cat(1) says of a directory
		t.Errorf("cat of a directory: %v", err)
	}
	_, err = f.svc.Show(f.ctx, turnctl.ShowRequest{Turn: "9"})
	if !isCode(err, turnctl.CodeBadRequest) || err.Error() != "no turn 9 (turns are 0-3)" {
		t.Errorf("show 9: %v", err)
	}
}

func TestLogComputesStats(t *testing.T) {
	f := newFixture(t)
	f.history()
	f.ov.Write("manual.txt", "m\n") // opens a manual turn 4
	rep, err := f.svc.Log(f.ctx, turnctl.LogRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Turns) != 5 || rep.Turns[0].Num != 4 || !rep.Turns[0].Open || rep.Turns[0].Kind != ckpt.KindManual {
		t.Fatalf("log: %+v", rep.Turns)
	}
	for _, tn := range rep.Turns {
		if tn.Stats == nil {
			t.Fatalf("turn %d without stats", tn.Num)
		}
	}
	if st := rep.Turns[1].Stats; st.Deleted != 1 || st.LinesDeleted != 3 {
		t.Errorf("turn 3 stats: %+v", st)
	}
	if rep, _ := f.svc.Log(f.ctx, turnctl.LogRequest{N: 2}); len(rep.Turns) != 2 {
		t.Errorf("log -n 2: %d turns", len(rep.Turns))
	}
}

func TestRewindUndoRestore(t *testing.T) {
	f := newFixture(t)
	f.history()
	dry, err := f.svc.Rewind(f.ctx, turnctl.RewindRequest{Turn: "1", DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(dry.Changes) != 2 || dry.Turn != nil {
		t.Fatalf("dry run: %+v", dry)
	}
	rep, err := f.svc.Rewind(f.ctx, turnctl.RewindRequest{Turn: "1"})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Turn == nil || rep.Turn.Kind != ckpt.KindRewind || rep.Target != 1 {
		t.Fatalf("rewind: %+v", rep)
	}
	if got := f.ov.Read("a.txt"); got != "one\ntwo\n" {
		t.Errorf("a.txt after rewind = %q", got)
	}
	if got := f.ov.Read("d/b.txt"); got != "bee\n" {
		t.Errorf("d/b.txt after rewind = %q", got)
	}
	if len(f.gate.invalidated) == 0 {
		t.Error("rewind invalidated nothing")
	}
	// Undo undoes the rewind (turn 4): back to the state of turn 3.
	undo, err := f.svc.Undo(f.ctx, turnctl.UndoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if *undo.Undone != 4 || undo.Target != 3 {
		t.Fatalf("undo: %+v", undo)
	}
	if st, _ := f.ov.Tree.Lstat("a.txt"); st.Exists() {
		t.Error("a.txt exists after undoing the rewind")
	}
	// Restore one file from turn 2.
	res, err := f.svc.Restore(f.ctx, turnctl.RestoreRequest{Turn: "2", Paths: []string{"a.txt"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Changes) != 1 || f.ov.Read("a.txt") != "one\n2\nthree\n" {
		t.Fatalf("restore: %+v", res.Changes)
	}
	if _, err := f.svc.Restore(f.ctx, turnctl.RestoreRequest{Turn: "2", Paths: []string{"nope"}}); !isCode(err, turnctl.CodeNotFound) {
		t.Errorf("restore of a path that never existed: %v", err)
	}
	if _, err := f.svc.Restore(f.ctx, turnctl.RestoreRequest{Turn: "2", Paths: []string{"../x"}}); !isCode(err, turnctl.CodeBadRequest) {
		t.Errorf("restore of a path outside: %v", err)
	}
}

func TestUndoNothing(t *testing.T) {
	f := newFixture(t)
	f.begin("empty")
	if _, err := f.svc.Undo(f.ctx, turnctl.UndoRequest{}); !isCode(err, turnctl.CodeConflict) {
		t.Errorf("undo with no changes: %v", err)
	}
}

func TestStatus(t *testing.T) {
	f := newFixture(t)
	rep, err := f.svc.Status(f.ctx, turnctl.StatusRequest{})
	if err != nil || rep.Open {
		t.Fatalf("status with no turn: %+v %v", rep, err)
	}
	f.begin("x")
	f.ov.Write("a", "1\n2\n")
	rep, err = f.svc.Status(f.ctx, turnctl.StatusRequest{})
	if err != nil || !rep.Open || len(rep.Changes) != 1 || rep.Stats.LinesAdded != 2 || rep.Store.StoreBytes == 0 || rep.Store.Budget == 0 {
		t.Fatalf("status: %+v %v", rep, err)
	}
	// Brief: the open turn and the latest number, not its changes nor
	// the store's size (a walk of its directory, twice a second).
	rep, err = f.svc.Status(f.ctx, turnctl.StatusRequest{Brief: true})
	if err != nil || !rep.Open || rep.Turn == nil || rep.Latest != rep.Turn.Num || len(rep.Changes) != 0 || rep.Stats.Files != 0 || rep.Store.StoreBytes != 0 {
		t.Fatalf("brief status: %+v %v", rep, err)
	}
}

func TestVerify(t *testing.T) {
	f := newFixture(t)
	f.history()
	rep, err := f.svc.Verify(f.ctx, turnctl.VerifyRequest{})
	if err != nil || !rep.OK || rep.Chunks == 0 {
		t.Fatalf("verify: %+v %v", rep, err)
	}
}

func TestEndOfHugeTurnCountsNoLines(t *testing.T) {
	f := newFixture(t)
	defer func(n int) { maxLineCountedFiles = n }(maxLineCountedFiles)
	maxLineCountedFiles = 1
	f.begin("npm install")
	f.ov.Write("a", "1\n")
	f.ov.Write("b", "2\n")
	rep := f.end()
	if !rep.LinesPending || rep.Turn.Stats.Files != 2 || !rep.Turn.Stats.LinesSkipped || rep.Summary != "turn 1 closed: 2 files (lines not counted: see turnctl show 1) by test" {
		t.Fatalf("end: %+v", rep)
	}
	// log does not count them either (it would read every file of the
	// turn), and says so; show counts them.
	log, err := f.svc.Log(f.ctx, turnctl.LogRequest{N: 1})
	if err != nil || log.Turns[0].Stats.Files != 2 || !log.Turns[0].Stats.LinesSkipped || log.Turns[0].Stats.LinesAdded != 0 {
		t.Fatalf("log: %+v %v", log, err)
	}
	show, err := f.svc.Show(f.ctx, turnctl.ShowRequest{Turn: "1"})
	if err != nil || show.Stats.LinesAdded != 2 || show.Stats.LinesSkipped {
		t.Fatalf("show counts the lines: %+v %v", show, err)
	}
}

func TestRewindOfHugeTurnCountsNoLines(t *testing.T) {
	f := newFixture(t)
	f.begin("npm install")
	f.ov.Write("a", "1\n")
	f.ov.Write("b", "2\n")
	f.end()
	defer func(n int) { maxLineCountedFiles = n }(maxLineCountedFiles)
	maxLineCountedFiles = 1
	rep, err := f.svc.Rewind(f.ctx, turnctl.RewindRequest{Turn: "0"})
	if err != nil || len(rep.Changes) != 2 || rep.Stats.Files != 2 || rep.Stats.Deleted != 2 || !rep.Stats.LinesSkipped || rep.Stats.LinesDeleted != 0 {
		t.Fatalf("rewind: %+v %v", rep, err)
	}
	if tn, _ := f.svc.store.Turn(rep.Turn.Num); tn.Stats == nil || !tn.Stats.LinesSkipped {
		t.Fatalf("the rewind turn's stats: %+v", tn.Stats)
	}
}

func TestStatusOfHugeTurnKeepsRenames(t *testing.T) {
	f := newFixture(t)
	f.ov.Write("a", "1\n")
	f.begin("mv")
	f.ov.Rename("a", "b")
	f.ov.Write("c", "2\n")
	defer func(n int) { maxLineCountedFiles = n }(maxLineCountedFiles)
	maxLineCountedFiles = 1
	rep, err := f.svc.Status(f.ctx, turnctl.StatusRequest{})
	if err != nil || !rep.Stats.LinesSkipped || rep.Stats.Renamed != 1 {
		t.Fatalf("status: %+v %v", rep, err)
	}
	for _, c := range rep.Changes {
		if c.Path == "b" && (c.Kind != ckpt.Renamed || c.From != "a") {
			t.Fatalf("b: %+v, want renamed from a", c)
		}
	}
}

func TestLogOfHugeUncountedTurnCountsNoLines(t *testing.T) {
	f := newFixture(t)
	f.begin("npm install")
	f.ov.Write("a", "1\n")
	f.ov.Write("b", "2\n")
	if _, err := f.svc.store.End(""); err != nil { // no stats cached
		t.Fatal(err)
	}
	defer func(n int) { maxLineCountedFiles = n }(maxLineCountedFiles)
	maxLineCountedFiles = 1
	log, err := f.svc.Log(f.ctx, turnctl.LogRequest{N: 1})
	if err != nil || log.Turns[0].Stats.Files != 2 || !log.Turns[0].Stats.LinesSkipped {
		t.Fatalf("log: %+v %v", log, err)
	}
	if tn, _ := f.svc.store.Turn(1); tn.Stats == nil || !tn.Stats.LinesSkipped {
		t.Fatalf("the files-only stats are not kept: %+v", tn.Stats)
	}
}

func TestStatsCachedOnlyWhenNothingWasRecorded(t *testing.T) {
	f := newFixture(t)
	f.begin("x")
	f.ov.Write("a", "1\n")
	if _, err := f.svc.store.End(""); err != nil {
		t.Fatal(err)
	}
	m := f.svc.mark()
	f.ov.Write("a", "2\n") // a capture lands while stats are computed
	f.svc.cacheStats(1, ckpt.Stats{Files: 1}, m)
	if tn, _ := f.svc.store.Turn(1); tn.Stats != nil {
		t.Errorf("stats cached although history moved: %+v", tn.Stats)
	}
	m = f.svc.mark()
	f.svc.cacheStats(1, ckpt.Stats{Files: 1}, m)
	if tn, _ := f.svc.store.Turn(1); tn.Stats == nil {
		t.Error("stats not cached")
	}
}

// An undo of the turn history starts at (the turns before it forgotten)
// is refused, changes nothing, and says why rather than that no turn
// changed anything.
func TestUndoAtTheStartOfHistory(t *testing.T) {
	f := newFixture(t)
	f.begin("1")
	f.ov.Write("a.txt", "a\n")
	f.end()
	f.begin("2")
	f.ov.Write("a.txt", "b\n")
	f.end()
	if _, err := f.svc.Forget(f.ctx, turnctl.ForgetRequest{Turns: []string{"0", "1"}}); err != nil {
		t.Fatal(err)
	}
	_, err := f.svc.Undo(f.ctx, turnctl.UndoRequest{})
	if !isCode(err, turnctl.CodeConflict) || !strings.Contains(err.Error(), "history starts at turn 2 (older turns forgotten by forget)") {
		t.Errorf("undo of the turn history starts at: %v", err)
	}
	if f.ov.Read("a.txt") != "b\n" {
		t.Errorf("a.txt after the refused undo: %q", f.ov.Read("a.txt"))
	}
}

// A log while the gc merges a turn it listed, before that turn's changes
// were counted, lists history as it is after the merge rather than fail
// ("turn 2 was forgotten").
func TestLogWhileATurnIsMerged(t *testing.T) {
	for _, c := range []struct {
		name string
		hook *func(uint64) // where the merge comes: stats counted, or changes read by a filter
		req  turnctl.LogRequest
		want string
	}{
		{"plain", &testHookTurnStats, turnctl.LogRequest{}, "3:2 1:0 0:0"},
		// A filtered log (a path, -S, --grep) too.
		{"filtered", &testHookStoreChanges, turnctl.LogRequest{Paths: []string{"a.txt"}}, "3:2 1:0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, mergeTurn2 := threeTurnsOfAFile(t)
			*c.hook = mergeTurn2
			defer func() { *c.hook = nil }()
			rep, err := f.svc.Log(f.ctx, c.req)
			if err != nil {
				t.Fatalf("log %v while turn 2 was merged: %v", c.req.Paths, err)
			}
			var got []string
			for _, tn := range rep.Turns {
				got = append(got, fmt.Sprintf("%d:%d", tn.Num, tn.MergedFrom))
			}
			if strings.Join(got, " ") != c.want {
				t.Errorf("log %v lists %v, want %s (turn:merged from)", c.req.Paths, got, c.want)
			}
		})
	}
}

// threeTurnsOfAFile is a fixture with turns 1, 2 and 3, each writing
// a.txt (no stats counted), and a hook that merges turn 2 into turn 3
// the first time it runs.
func threeTurnsOfAFile(t *testing.T) (*fixture, func(uint64)) {
	f := newFixture(t)
	for _, l := range []string{"1", "2", "3"} {
		if _, err := f.svc.store.Begin(ckpt.KindAgent, l, ""); err != nil {
			t.Fatal(err)
		}
		f.ov.Write("a.txt", l+"\n")
		if _, err := f.svc.store.End(""); err != nil {
			t.Fatal(err)
		}
	}
	merged := false
	return f, func(uint64) {
		if !merged {
			merged = true
			if _, err := f.svc.Forget(f.ctx, turnctl.ForgetRequest{Turns: []string{"2"}}); err != nil {
				t.Error(err)
			}
		}
	}
}
