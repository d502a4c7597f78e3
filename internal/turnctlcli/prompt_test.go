package turnctlcli

import (
	"encoding/json"
	"strings"
	"testing"

	"ckptfs/fusefs/fusefstest"
	"ckptfs/internal/ckpt"
	"ckptfs/turnctl"
)

// A turn keeps the whole text it was opened with: log shows its first
// line, show all of it, escaped as labels are.
func TestShowPrintsTheWholePrompt(t *testing.T) {
	const prompt = "\nRefactor the parser\n\nKeep the API;\tsplit lexer.go.\nNo \x1b[31mred\x1b[0m here.\n"
	dir := historyOf(t, func(turn func(label, ref string, fn func()), ov *fusefstest.Overlay) {
		turn(prompt, "", func() { ov.Write("a.txt", "a\n") })
		turn("one line", "", func() { ov.Write("a.txt", "b\n") })
	})
	out, errs, code := tc(t, "-C", dir, "log")
	if code != 0 || strings.Count(out, "\n") != 3 || !strings.Contains(out, "  Refactor the parser  ") || strings.Contains(out, "lexer") {
		t.Errorf("log: %d %s\n%s", code, errs, out)
	}
	out, errs, code = tc(t, "-C", dir, "show", "1")
	want := "\n\n    Refactor the parser\n\n    Keep the API;\tsplit lexer.go.\n    No \\x1b[31mred\\x1b[0m here.\n\n  added  a.txt  +1 -0\n"
	if code != 0 || !strings.HasPrefix(out, `turn 1  agent  "Refactor the parser"`) || !strings.Contains(out, want) {
		t.Errorf("show 1: %d %s\n%s\nwant it to contain:\n%s", code, errs, out, want)
	}
	// A label of one line has nothing more to show.
	out, _, _ = tc(t, "-C", dir, "show", "2")
	if strings.Count(out, "\n") != 3 {
		t.Errorf("show 2:\n%s", out)
	}
	out, _, _ = tc(t, "-C", dir, "--json", "show", "1")
	var rep turnctl.ShowReply
	if err := json.Unmarshal([]byte(out), &rep); err != nil || rep.Turn.Label != "Refactor the parser" || rep.Turn.Prompt != prompt {
		t.Errorf("show --json: %v %+v", err, rep.Turn)
	}
	out, _, _ = tc(t, "-C", dir, "--json", "log")
	if strings.Contains(out, "lexer") {
		t.Errorf("log --json carries the prompts:\n%s", out)
	}
}

// An agent's hook passes the whole prompt; begin --label of several
// lines does the same.
func TestHookAndBeginKeepTheWholePrompt(t *testing.T) {
	e, out, _, ov := onlineEnv(t)
	hook(t, e, payload(t, "claude-code/user-prompt-submit.json", e.proj.root), "claude-code")
	ov.Write("parser.go", "package parser\n")
	hook(t, e, payload(t, "claude-code/stop.json", e.proj.root), "claude-code")
	if err := (&beginOptions{label: "first\nsecond"}).run(e, nil); err != nil {
		t.Fatal(err)
	}
	for n, want := range map[string][2]string{
		"1": {"Fix the failing test in parser.go", "Fix the failing test in parser.go\n\nIt panics on empty input; add a regression test."},
		"2": {"first", "first\nsecond"},
	} {
		rep, err := e.h.Show(e.ctx, turnctl.ShowRequest{Turn: n})
		if err != nil || rep.Turn.Label != want[0] || rep.Turn.Prompt != want[1] {
			t.Errorf("turn %s: %v %q %q", n, err, rep.Turn.Label, rep.Turn.Prompt)
		}
	}
	out.Reset()
	if err := (&showOptions{}).run(e, []string{"1"}); err != nil || !strings.Contains(out.String(), "\n    It panics on empty input; add a regression test.\n") {
		t.Errorf("show 1: %v\n%s", err, out)
	}
	// A prompt too long for a turn is cut, and says so; the turn opens.
	big := strings.Repeat("long prompt line\n", ckpt.MaxText/8)
	in, _ := json.Marshal(map[string]string{"hook_event_name": "UserPromptSubmit", "session_id": "s", "cwd": e.proj.root, "prompt": big})
	if _, errs := hook(t, e, string(in), "claude-code"); errs != "" {
		t.Fatalf("hook of a long prompt: %s", errs)
	}
	st, err := e.h.Status(e.ctx, turnctl.StatusRequest{})
	if err != nil || st.Turn == nil || st.Turn.Num != 3 {
		t.Fatalf("long prompt: %v %+v", err, st)
	}
	rep, _ := e.h.Show(e.ctx, turnctl.ShowRequest{Turn: "3"})
	if len(rep.Turn.Prompt) > ckpt.MaxText || !strings.HasPrefix(rep.Turn.Prompt, "long prompt line\nlong") || !strings.Contains(rep.Turn.Prompt, "more bytes not kept]") {
		t.Errorf("long prompt kept as %d bytes ending %q", len(rep.Turn.Prompt), rep.Turn.Prompt[len(rep.Turn.Prompt)-40:])
	}
}

// Bidirectional controls, which reorder what a terminal shows, are
// escaped in text (labels, prompts) and in paths; other text is as it is.
func TestBidiControlsEscaped(t *testing.T) {
	for in, want := range map[string]string{
		"fix \u202eexe.txt": `fix \u202eexe.txt`,
		"a\u2066b\u2069c":   `a\u2066b\u2069c`,
		"café ünïcödé 日本":   "café ünïcödé 日本",
	} {
		if got := visible(in); got != want {
			t.Errorf("visible(%q) = %q, want %q", in, got, want)
		}
	}
	if got, want := printable("doc\u202etxt.exe"), `"doc\u202etxt.exe"`; got != want {
		t.Errorf("printable = %s, want %s", got, want)
	}
	if got := printable("café.txt"); got != "café.txt" {
		t.Errorf("printable(café.txt) = %s", got)
	}
}
