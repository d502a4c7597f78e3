package turnctlcli

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"regexp"
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

// TestShowSteps: show N.K names the step in its first line and the turn
// after it; show N lists a turn's steps when a boundary was marked in
// it, also a single step, and none for a turn without any.
func TestShowSteps(t *testing.T) {
	e, out, _, ov := onlineEnv(t)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must((&beginOptions{label: "one step"}).run(e, nil))
	ov.Write("a.go", "package a\n")
	must((&stepOptions{tool: "Edit", label: "a.go"}).run(e, nil))
	must((&endOptions{}).run(e, nil))
	must((&beginOptions{label: "no step"}).run(e, nil))
	ov.Write("b.go", "package b\n")
	must((&endOptions{}).run(e, nil))
	times := regexp.MustCompile(`\d\d:\d\d:\d\d`)
	show := func(arg string) string {
		t.Helper()
		out.Reset()
		must((&showOptions{}).run(e, []string{arg}))
		return times.ReplaceAllString(out.String(), "TIME")
	}
	for _, c := range []struct{ arg, want string }{
		{"1", "turn 1  agent  \"one step\"  TIME  by test\n1 step:\n  1.1  TIME  Edit  a.go\n  added  a.go  +1 -0\n1 file (+1 -0)\n"},
		{"1.1", "step 1.1 (Edit: a.go)  TIME  (its changes only)\nof turn 1  agent  \"one step\"  TIME  by test\n  added  a.go  +1 -0\n1 file (+1 -0)\n"},
		{"2", "turn 2  agent  \"no step\"  TIME  by test\n  added  b.go  +1 -0\n1 file (+1 -0)\n"},
		{"2.1", "step 2.1  TIME  (its changes only)\nof turn 2  agent  \"no step\"  TIME  by test\n  added  b.go  +1 -0\n1 file (+1 -0)\n"},
	} {
		if got := show(c.arg); got != c.want {
			t.Errorf("show %s:\n%s\nwant:\n%s", c.arg, got, c.want)
		}
	}
}

// TestLogAlignsWideLabels: log pads its columns by terminal width, so a
// label of wide characters (CJK, emoji) does not push the next columns
// right; truncation counts columns too.
func TestLogAlignsWideLabels(t *testing.T) {
	e, out, _, ov := onlineEnv(t)
	for i, label := range []string{"修复解析器", "fix 🎉", "plain label", strings.Repeat("长", 40)} {
		if err := (&beginOptions{label: label}).run(e, nil); err != nil {
			t.Fatal(err)
		}
		ov.Write(fmt.Sprintf("f%d.go", i), "package f\n")
		if err := (&endOptions{}).run(e, nil); err != nil {
			t.Fatal(err)
		}
	}
	out.Reset()
	if err := (&logOptions{}).run(e, nil); err != nil {
		t.Fatal(err)
	}
	got := regexp.MustCompile(`\d\d:\d\d:\d\d`).ReplaceAllString(out.String(), "TIME")
	want := "" +
		"4  TIME  agent    " + strings.Repeat("长", 28) + "...  1 file  +1 -0  test\n" +
		"3  TIME  agent    plain label" + strings.Repeat(" ", 48) + "  1 file  +1 -0  test\n" +
		"2  TIME  agent    fix 🎉" + strings.Repeat(" ", 53) + "  1 file  +1 -0  test\n" +
		"1  TIME  agent    修复解析器" + strings.Repeat(" ", 49) + "  1 file  +1 -0  test\n" +
		"0  TIME  initial\n"
	if got != want {
		t.Errorf("log:\n%s\nwant:\n%s", got, want)
	}
}
