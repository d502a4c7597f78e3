package turnctlcli

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"ckptfs/fusefs/fusefstest"
	"ckptfs/internal/ckpt"
	"ckptfs/internal/control"
	"ckptfs/turnctl"
	"ckptfs/versionstore"
)

// onlineEnv serves a Service on a socket, as the daemon does, and returns
// an env whose Handler is a Client on it (the mounted case without a
// mount).
func onlineEnv(t *testing.T) (*env, *bytes.Buffer, *bytes.Buffer, *fusefstest.Overlay) {
	t.Helper()
	dir := t.TempDir()
	store := versionstore.NewTestStore(t)
	ov := fusefstest.New(t, dir, store)
	sock := filepath.Join(t.TempDir(), "s")
	ln, err := control.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	go control.Serve(ln, control.NewService(store, ov.Tree, nil))
	t.Cleanup(func() { ln.Close() })
	c := turnctl.NewClient(sock)
	t.Cleanup(func() { c.Close() })
	var out, errb bytes.Buffer
	e := &env{ctx: context.Background(), stdin: strings.NewReader(""), stdout: &out, stderr: &errb,
		dash: -1, proj: &project{root: dir, base: dir, mounted: true}, h: c}
	return e, &out, &errb, ov
}

func TestBeginEndStatusOnline(t *testing.T) {
	e, out, _, ov := onlineEnv(t)
	if err := (&beginOptions{label: "fix", ref: "m1"}).run(e, nil); err != nil || out.String() != "1\n" {
		t.Fatalf("begin: %v %q", err, out)
	}
	ov.Write("a.go", "package a\n")
	out.Reset()
	if err := (&statusOptions{}).run(e, nil); err != nil || !strings.Contains(out.String(), "added  a.go  +1 -0") {
		t.Fatalf("status: %v %q", err, out)
	}
	out.Reset()
	if err := (&endOptions{}).run(e, nil); err != nil || out.String() != "turn 1 closed: 1 file (+1 -0) by test\n" {
		t.Fatalf("end: %v %q", err, out)
	}
	out.Reset()
	if err := (&statusOptions{}).run(e, nil); err != nil || out.String() != "no turn open (latest turn: 1)\n" {
		t.Fatalf("status after end: %v %q", err, out)
	}
	err := (&endOptions{}).run(e, nil)
	if code := report(e.stderr, "end", err); code != 1 {
		t.Errorf("end without an open turn: exit %d", code)
	}
}

// TestBeginSaysItClosedAnOpenTurn: a begin whose turn's end never came
// says on stderr that it closed it; its stdout stays the bare number. A
// begin after changes made between turns says nothing.
func TestBeginSaysItClosedAnOpenTurn(t *testing.T) {
	e, out, errb, ov := onlineEnv(t)
	ov.Write("between.go", "package a\n")
	if err := (&beginOptions{}).run(e, nil); err != nil || out.String() != "2\n" || errb.Len() != 0 {
		t.Fatalf("begin after changes between turns: %v %q %q", err, out, errb)
	}
	out.Reset()
	if err := (&beginOptions{}).run(e, nil); err != nil || out.String() != "3\n" {
		t.Fatalf("begin: %v %q", err, out)
	}
	if want := "turnctl begin: turn 2 was still open (no turnctl end); closed it\n"; errb.String() != want {
		t.Errorf("begin over an open turn said %q on stderr, want %q", errb, want)
	}
}

func TestRunOnline(t *testing.T) {
	e, out, errb, _ := onlineEnv(t)
	err := (&runOptions{}).run(e, []string{"sh", "-c", "pwd\n exit 3"})
	if code := report(e.stderr, "run", err); code != 3 {
		t.Fatalf("run: exit %d, %v", code, err)
	}
	if strings.TrimSpace(out.String()) != e.proj.base {
		t.Errorf("run: command ran in %q, want %q", out, e.proj.base)
	}
	if !strings.Contains(errb.String(), "turn 1 closed") {
		t.Errorf("run: summary %q", errb)
	}
	rep, _ := e.h.Log(e.ctx, turnctl.LogRequest{})
	if len(rep.Turns) != 2 || rep.Turns[0].Open || rep.Turns[0].Label != "sh -c pwd exit 3" {
		t.Errorf("run: turns %+v", rep.Turns)
	}
	// A command that cannot be started runs nothing: exit 127, one line,
	// and no turn.
	for _, missing := range []string{"/nonexistent/cmd", "no-such-cmd-ckptfs", "./not-here"} {
		errb.Reset()
		err = (&runOptions{}).run(e, []string{missing})
		if code := report(e.stderr, "run", err); code != 127 || !strings.Contains(errb.String(), "cannot run "+missing) || strings.Count(errb.String(), "\n") != 1 {
			t.Errorf("run of a missing command: %d %q", code, errb)
		}
	}
	if rep, _ := e.h.Log(e.ctx, turnctl.LogRequest{}); len(rep.Turns) != 2 {
		t.Errorf("a command that did not start made a turn: %+v", rep.Turns)
	}
}

// TestStatusCutsALongList: status of a turn that changed many files lists
// the first listCut and how many more; --all lists them all.
func TestStatusCutsALongList(t *testing.T) {
	e, out, _, ov := onlineEnv(t)
	if err := (&beginOptions{}).run(e, nil); err != nil {
		t.Fatal(err)
	}
	n := listCut + listSlack + 5
	for i := 0; i < n; i++ {
		ov.Write(fmt.Sprintf("f%03d", i), "x\n")
	}
	out.Reset()
	if err := (&statusOptions{}).run(e, nil); err != nil {
		t.Fatal(err)
	}
	more := fmt.Sprintf("  ... and %d more (--all lists them all, as does turnctl show 1)\n", n-listCut)
	if got := strings.Count(out.String(), "  added  "); got != listCut || !strings.Contains(out.String(), more) {
		t.Errorf("status of %d changes: %d listed\n%s\nwant %d and %q", n, got, out, listCut, more)
	}
	out.Reset()
	e.all = true
	if err := (&statusOptions{}).run(e, nil); err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(out.String(), "  added  "); got != n {
		t.Errorf("status --all of %d changes: %d listed", n, got)
	}
}

// TestRewindDoneWithAWarningSaysSo: a rewind done whose store then could
// not sync its log (RewindReply.Warning) reports what it did on stdout
// and the warning on stderr, also with --quiet and --json (where it is
// "warning" too).
func TestRewindDoneWithAWarningSaysSo(t *testing.T) {
	w := "the store's log could not be synced to disk: input/output error; a power loss may lose the record of turn 5"
	rep := &turnctl.RewindReply{Target: 3, Turn: &ckpt.Turn{Num: 5}, Changes: []turnctl.FileChange{}, Warning: w}
	want := "turnctl: warning: rewind to turn 3 is done, but " + w + "\n"
	for _, mode := range []string{"text", "quiet", "json"} {
		var out, errb bytes.Buffer
		e := &env{ctx: context.Background(), stdout: &out, stderr: &errb, dash: -1, quiet: mode == "quiet", json: mode == "json"}
		if err := e.printRewind(rep, "rewind to turn 3"); err != nil {
			t.Fatal(err)
		}
		if errb.String() != want {
			t.Errorf("%s: stderr %q, want %q", mode, errb.String(), want)
		}
		if mode == "json" && !strings.Contains(out.String(), `"warning": "`+w+`"`) {
			t.Errorf("json: %s, want its warning", out.String())
		}
	}
}

// run inside an open agent turn records its step with the label's first
// line, as a turn's label is: a --label of several lines (or a long one)
// is fine for a turn of its own, and must not make the step fail after
// the command ran, nor lose its exit status. (The command's writes do not
// reach this test's overlay: it changes nothing; TestRunStepLabel in
// tests/ sees the step.)
func TestRunInsideATurnWithALongLabel(t *testing.T) {
	e, _, errb, _ := onlineEnv(t)
	if _, err := e.h.Begin(e.ctx, turnctl.BeginRequest{Label: "the agent's prompt", Ref: "s1:abcd"}); err != nil {
		t.Fatal(err)
	}
	for _, label := range []string{"fix the tests\n\nthen run them again", "a\rb", strings.Repeat("x", 5000)} {
		errb.Reset()
		err := (&runOptions{label: label}).run(e, []string{"sh", "-c", "exit 3"})
		if code := report(e.stderr, "run", err); code != 3 {
			t.Errorf("run --label %.20q inside turn 1: exit %d, %q", label, code, errb)
		}
		if want := "turnctl run: inside the open turn 1: changed nothing, no step (the turn stays open)\n"; errb.String() != want {
			t.Errorf("run --label %.20q inside turn 1 said %q, want %q", label, errb, want)
		}
	}
}

// With a daemon from before runs (BeginRequest.Run), run does what it
// did: a turn of its own, or a step of an open agent turn.
func TestRunWithAnOldDaemon(t *testing.T) {
	e, _, errb, ov := onlineEnv(t)
	e.h = oldDaemon{e.h}
	if err := (&runOptions{label: "own"}).run(e, []string{"sh", "-c", "exit 0"}); err != nil || !strings.HasPrefix(errb.String(), "turn 1 closed") {
		t.Fatalf("run: %v %q", err, errb)
	}
	errb.Reset()
	if _, err := e.h.Begin(e.ctx, turnctl.BeginRequest{Label: "agent"}); err != nil {
		t.Fatal(err)
	}
	ov.Write("a.txt", "a\n")
	// (sh writes the backing directory, unseen: its step is empty.)
	err := (&runOptions{label: "inner"}).run(e, []string{"true"})
	if err != nil || errb.String() != "turnctl run: inside the open turn 2: changed nothing, no step (the turn stays open)\n" {
		t.Fatalf("run inside turn 2: %v %q", err, errb)
	}
	if rep, err := e.h.Show(e.ctx, turnctl.ShowRequest{Turn: "2"}); err != nil || len(rep.Steps) != 1 || rep.Steps[0].Num != 1 || !rep.Turn.Open {
		t.Fatalf("turn 2: the agent's edits are no step of their own, or the turn closed: %+v %v", rep, err)
	}
}
