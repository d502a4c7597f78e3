package turnctlcli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"ckptfs/internal/ckpt"
	"ckptfs/internal/control"
	"ckptfs/turnctl"
)

// payload reads a hook payload from internal/turnctlcli/agenthooks/testdata with its
// placeholders filled in.
func payload(t *testing.T, name, project string) string {
	t.Helper()
	td, _ := filepath.Abs("agenthooks/testdata")
	data, err := os.ReadFile(filepath.Join(td, name))
	if err != nil {
		t.Fatal(err)
	}
	s := strings.ReplaceAll(string(data), "TESTDATA", td)
	return strings.ReplaceAll(s, "PROJECT", project)
}

// hook runs hook-event AGENT with input on stdin against e's daemon and
// returns stdout and stderr.
func hook(t *testing.T, e *env, input string, args ...string) (string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	he := *e
	he.stdin, he.stdout, he.stderr = strings.NewReader(input), &out, &errb
	if err := (&hookEventOptions{}).run(&he, args); err != nil {
		t.Fatalf("hook-event returned %v", err)
	}
	return out.String(), errb.String()
}

// turns returns the log, oldest first, without turn 0.
func turns(t *testing.T, e *env) []ckpt.Turn {
	t.Helper()
	rep, err := e.h.Log(context.Background(), turnctl.LogRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var ts []ckpt.Turn
	for _, tu := range slices.Backward(rep.Turns) {
		if tu.Num != 0 {
			ts = append(ts, tu)
		}
	}
	return ts
}

func TestHookEventClaudeCode(t *testing.T) {
	e, _, _, ov := onlineEnv(t)
	dir := e.proj.root
	ups := payload(t, "claude-code/user-prompt-submit.json", dir)
	ups2 := payload(t, "claude-code/user-prompt-submit-2.json", dir)
	stop := payload(t, "claude-code/stop.json", dir)
	const lastMsg = "a2b7c4e0-0000-4000-8000-cccccccccccc"

	// A prompt, an edit, the answer: one turn, labelled with the prompt's
	// first line, with the prompt's ref and the answer's message id.
	if out, errs := hook(t, e, ups, "claude-code"); out != "" || errs != "" {
		t.Fatalf("UserPromptSubmit printed %q %q", out, errs)
	}
	ov.Write("parser.go", "package parser\n")
	if out, errs := hook(t, e, stop, "claude-code"); out != "" || errs != "" {
		t.Fatalf("Stop printed %q %q", out, errs)
	}
	ts := turns(t, e)
	if len(ts) != 1 || ts[0].Open || ts[0].Kind != ckpt.KindAgent || ts[0].Label != "Fix the failing test in parser.go" ||
		len(ts[0].Refs) != 2 || !strings.HasPrefix(ts[0].Refs[0], "9f1c6a52-3d4e-4b8a-9a0f-2c7d1e5b6a11:") || ts[0].Refs[1] != lastMsg {
		t.Fatalf("after prompt and stop: %+v", ts)
	}
	// The turn is reachable by the answer's id.
	if rep, err := e.h.Show(e.ctx, turnctl.ShowRequest{Turn: "ref:" + lastMsg}); err != nil || rep.Turn.Num != 1 || len(rep.Changes) != 1 {
		t.Errorf("show ref:%s: %+v %v", lastMsg, rep, err)
	}

	// The same Stop again: nothing open, nothing happens.
	hook(t, e, stop, "claude-code")
	if ts := turns(t, e); len(ts) != 1 {
		t.Fatalf("repeated Stop made turns: %+v", ts)
	}

	// Stop without a prompt (the hook was installed mid-turn, a person
	// edited after the answer): the manual turn is not the session's, it
	// stays open without the answer's id, and one line says so.
	ov.Write("README", "hi\n")
	if out, errs := hook(t, e, stop, "claude-code"); out != "" || errs != "turnctl hook-event: end (Stop): the open turn 2 is a manual turn (changes made while no agent's turn was open), not 9f1c6a52-3d4e-4b8a-9a0f-2c7d1e5b6a11's; left open\n" {
		t.Errorf("Stop in a manual turn printed %q %q", out, errs)
	}
	ts = turns(t, e)
	if len(ts) != 2 || !ts[1].Open || ts[1].Kind != ckpt.KindManual || len(ts[1].Refs) != 0 {
		t.Fatalf("Stop without a prompt: %+v", ts[1:])
	}
	if err := (&endOptions{}).run(e, nil); err != nil {
		t.Fatal(err)
	}

	// The same prompt event delivered twice opens one turn.
	hook(t, e, ups2, "claude-code")
	hook(t, e, ups2, "claude-code")
	ts = turns(t, e)
	if len(ts) != 3 || !ts[2].Open || ts[2].Label != "Also update the README" {
		t.Fatalf("repeated prompt: %+v", ts[2:])
	}
	// Two prompts in a row: the second closes the first.
	ov.Write("README", "hi there\n")
	hook(t, e, ups, "claude-code")
	ts = turns(t, e)
	if len(ts) != 4 || ts[2].Open || !ts[3].Open || ts[3].Label != "Fix the failing test in parser.go" {
		t.Fatalf("two prompts in a row: %+v", ts[2:])
	}
	// The same text as turn 1's prompt: a ref of its own.
	if ts[3].Refs[0] == ts[0].Refs[0] || !strings.HasPrefix(ts[3].Refs[0], ts[0].Refs[0]+".") {
		t.Errorf("refs of a repeated prompt text: %q, %q", ts[0].Refs, ts[3].Refs)
	}
	if ts[2].Stats == nil || ts[2].Stats.Files != 1 {
		t.Errorf("turn 3 should hold the README edit: %+v", ts[2].Stats)
	}

	// Events that mark no boundary change nothing.
	hook(t, e, payload(t, "claude-code/pre-tool-use.json", dir), "claude-code")
	if ts := turns(t, e); len(ts) != 4 || !ts[3].Open {
		t.Errorf("PreToolUse changed the turns: %+v", ts[3:])
	}
}

// TestHookEventEndClosesOnlyItsSession: two sessions of one agent in one
// project, and a person's edits. A second session's prompt closes the
// first's turn (begin does); the first's Stop then leaves the second's
// turn open, and its answer's id is not stamped on it; the second's Stop
// closes its own turn. A Stop while a manual turn is open leaves it too.
func TestHookEventEndClosesOnlyItsSession(t *testing.T) {
	e, _, _, ov := onlineEnv(t)
	dir := e.proj.root
	const sessA, sessB = "aaaaaaaa-0000-4000-8000-000000000001", "bbbbbbbb-0000-4000-8000-000000000002"
	const uuidA, uuidB = "a0000000-0000-4000-8000-00000000000a", "b0000000-0000-4000-8000-00000000000b"
	event := func(session, name, extra string) string {
		tr := filepath.Join(t.TempDir(), "transcript.jsonl")
		uuid := map[string]string{sessA: uuidA, sessB: uuidB}[session]
		os.WriteFile(tr, []byte(`{"type":"assistant","uuid":"`+uuid+`"}`+"\n"), 0o644)
		return fmt.Sprintf(`{"session_id":%q,"transcript_path":%q,"cwd":%q,"hook_event_name":%q%s}`, session, tr, dir, name, extra)
	}
	hook(t, e, event(sessA, "UserPromptSubmit", `,"prompt":"task A"`), "claude-code")
	ov.Write("a.txt", "A\n")
	hook(t, e, event(sessB, "UserPromptSubmit", `,"prompt":"task B"`), "claude-code")
	ov.Write("b.txt", "B\n")
	out, errs := hook(t, e, event(sessA, "Stop", ""), "claude-code")
	if want := "turnctl hook-event: end (Stop): the open turn 2 is another session's (ref " + sessB + ":"; out != "" || !strings.HasPrefix(errs, want) ||
		!strings.HasSuffix(errs, "), not "+sessA+"'s; left open\n") || strings.Count(errs, "\n") != 1 {
		t.Errorf("A's Stop in B's turn printed %q %q", out, errs)
	}
	ov.Write("b2.txt", "B\n")
	if out, errs := hook(t, e, event(sessB, "Stop", ""), "claude-code"); out != "" || errs != "" {
		t.Errorf("B's Stop printed %q %q", out, errs)
	}
	ts := turns(t, e)
	if len(ts) != 2 || ts[0].Open || ts[0].Label != "task A" || len(ts[0].Refs) != 1 || !strings.HasPrefix(ts[0].Refs[0], sessA+":") ||
		ts[1].Open || ts[1].Label != "task B" || len(ts[1].Refs) != 2 || !strings.HasPrefix(ts[1].Refs[0], sessB+":") || ts[1].Refs[1] != uuidB ||
		ts[1].Stats == nil || ts[1].Stats.Files != 2 {
		t.Fatalf("turns: %+v", ts)
	}
	if _, err := e.h.Show(e.ctx, turnctl.ShowRequest{Turn: "ref:" + uuidA}); err == nil {
		t.Errorf("A's answer id names a turn")
	}

	// A person's edits, then a late Stop: the manual turn stays open.
	ov.Write("notes", "mine\n")
	out, errs = hook(t, e, event(sessA, "Stop", ""), "claude-code")
	if out != "" || errs != "turnctl hook-event: end (Stop): the open turn 3 is a manual turn (changes made while no agent's turn was open), not "+sessA+"'s; left open\n" {
		t.Errorf("Stop in a manual turn printed %q %q", out, errs)
	}
	if ts := turns(t, e); len(ts) != 3 || !ts[2].Open || ts[2].Kind != ckpt.KindManual || len(ts[2].Refs) != 0 {
		t.Fatalf("after a Stop in a manual turn: %+v", ts[2:])
	}

	// Gemini CLI's AfterAgent and Codex's Stop follow the same rule.
	hook(t, e, `{"session_id":"g1","cwd":"`+dir+`","hook_event_name":"BeforeAgent","prompt":"gemini task"}`, "gemini")
	out, errs = hook(t, e, `{"session_id":"g2","cwd":"`+dir+`","hook_event_name":"AfterAgent"}`, "gemini")
	if out != "{}\n" || !strings.Contains(errs, "the open turn 4 is another session's (ref g1:") {
		t.Errorf("gemini AfterAgent of another session printed %q %q", out, errs)
	}
	hook(t, e, `{"session_id":"c1","turn_id":"t1","cwd":"`+dir+`","hook_event_name":"UserPromptSubmit","prompt":"codex task"}`, "codex")
	_, errs = hook(t, e, `{"session_id":"c1","turn_id":"t0","cwd":"`+dir+`","hook_event_name":"Stop"}`, "codex")
	if !strings.Contains(errs, "the open turn 5 is another session's (ref t1), not t0's; left open") {
		t.Errorf("codex Stop of another turn_id printed %q", errs)
	}
	if _, errs := hook(t, e, `{"session_id":"c1","turn_id":"t1","cwd":"`+dir+`","hook_event_name":"Stop"}`, "codex"); errs != "" {
		t.Errorf("codex Stop of its turn printed %q", errs)
	}
	ts = turns(t, e)
	if len(ts) != 5 || ts[3].Open || ts[3].Label != "gemini task" || ts[4].Open || !slices.Equal(ts[4].Refs, []string{"t1"}) {
		t.Fatalf("gemini and codex turns: %+v", ts[3:])
	}
}

func TestHookEventCodexGeminiAider(t *testing.T) {
	e, _, _, ov := onlineEnv(t)
	dir := e.proj.root
	const codexTurn = "019d036d-c7fa-72d2-b6fd-78878bfe34e4"
	hook(t, e, payload(t, "codex/user-prompt-submit.json", dir), "codex")
	ov.Write("deploy", "#!/bin/sh\n")
	hook(t, e, payload(t, "codex/stop.json", dir), "codex")
	// Older Codex: notify passes its JSON as the last argument, stdin unused.
	ov.Write("deploy.sh", "#!/bin/sh\n")
	hook(t, e, "", "codex", payload(t, "codex/notify.json", dir))

	out, errs := hook(t, e, payload(t, "gemini/before-agent.json", dir), "gemini")
	if out != "{}\n" || errs != "" {
		t.Errorf("gemini BeforeAgent printed %q %q; want {} on stdout only", out, errs)
	}
	ov.Write("utils.test.ts", "test\n")
	hook(t, e, payload(t, "gemini/after-agent.json", dir), "gemini")

	// Aider: the notifications command ends the turn with its edits; it
	// must not read standard input (aider's terminal).
	ov.Write("app.py", "print()\n")
	if _, errs := hook(t, e, "this would be the user's typing", "aider"); errs != "" {
		t.Errorf("aider: %q", errs)
	}

	ts := turns(t, e)
	want := []struct {
		kind  ckpt.Kind
		label string
		refs  []string
	}{
		{ckpt.KindAgent, "add a --dry-run flag to the deploy script", []string{codexTurn}},
		{ckpt.KindManual, "", []string{"019d036e-3164-72c3-a170-98925564c4fc"}},
		{ckpt.KindAgent, "Write unit tests for utils.ts", nil},
		{ckpt.KindManual, "", nil},
	}
	if len(ts) != len(want) {
		t.Fatalf("turns: %+v", ts)
	}
	for i, w := range want {
		got := ts[i]
		if got.Open || got.Kind != w.kind || got.Label != w.label || (w.refs != nil && !slices.Equal(got.Refs, w.refs)) || got.Stats == nil || got.Stats.Files != 1 {
			t.Errorf("turn %d: %+v %+v; want %+v", i+1, got, got.Stats, w)
		}
	}
	if len(ts[2].Refs) != 1 || !strings.HasPrefix(ts[2].Refs[0], "3c2b1a09-8f7e-4d6c-b5a4-392817161514:") {
		t.Errorf("gemini turn refs %q", ts[2].Refs)
	}
}

// TestHookEventNeverFails: whatever goes wrong, exit 0, one line on stderr,
// nothing on stdout (Gemini CLI: {}).
func TestHookEventNeverFails(t *testing.T) {
	dir := testProject(t) // a store, not mounted
	ups := payload(t, "claude-code/user-prompt-submit.json", dir)
	cases := []struct {
		name  string
		stdin string
		args  []string
		want  string
	}{
		{"unmounted", ups, []string{"hook-event", "claude-code"}, "is not inside a ckptfs mount; begin not recorded"},
		{"unmounted -C", ups, []string{"-C", dir, "hook-event", "codex"}, "not inside a ckptfs mount"},
		{"missing cwd", strings.ReplaceAll(ups, dir, "/nonexistent/dir"), []string{"hook-event", "claude-code"}, "/nonexistent/dir"},
		{"garbage", "{not json", []string{"hook-event", "claude-code"}, "not JSON"},
		{"empty", "", []string{"hook-event", "gemini"}, "no hook input"},
		{"garbage gemini", "{not json", []string{"hook-event", "gemini"}, "not JSON"},
		{"unmounted gemini", payload(t, "gemini/before-agent.json", dir), []string{"hook-event", "gemini"}, "not inside a ckptfs mount; begin not recorded"},
		{"unknown agent", ups, []string{"hook-event", "cursor"}, "unknown agent"},
		{"no agent", ups, []string{"hook-event"}, "missing AGENT"},
		{"bad flag", ups, []string{"hook-event", "--frobnicate", "claude-code"}, "unknown flag"},
	}
	t.Chdir(t.TempDir()) // nor is the current directory (go test in a mounted checkout)
	for _, c := range cases {
		var out, errb bytes.Buffer
		code := runWith(context.Background(), control.OpenOffline, c.args, strings.NewReader(c.stdin), &out, &errb)
		if code != 0 || strings.Count(errb.String(), "\n") != 1 || !strings.Contains(errb.String(), c.want) {
			t.Errorf("%s: exit %d, stderr %q; want 0 and one line with %q", c.name, code, errb.String(), c.want)
		}
		// Gemini CLI reads the hook's stdout as JSON: {} whatever happened.
		want := ""
		if slices.Contains(c.args, "gemini") {
			want = "{}\n"
		}
		if out.String() != want {
			t.Errorf("%s: stdout %q, want %q", c.name, out.String(), want)
		}
	}
}

// TestHookEventPinsOnRequest: a prompt with the word #pin pins the turn it
// opens; one that only mentions it in a word (#pinned) does not.
func TestHookEventPinsOnRequest(t *testing.T) {
	e, _, _, ov := onlineEnv(t)
	dir := e.proj.root
	ups := payload(t, "claude-code/user-prompt-submit.json", dir)
	stop := payload(t, "claude-code/stop.json", dir)
	for i, c := range []struct {
		prompt string
		pinned bool
	}{
		{"Fix the parser #pin", true},
		{"#PIN\nmigrate the schema", true},
		{"keep the #pinned tests green", false},
		{"Fix the failing test in parser.go", false},
	} {
		in := strings.Replace(ups, "Fix the failing test in parser.go", strings.ReplaceAll(c.prompt, "\n", `\n`), 1)
		if in == ups && c.prompt != "Fix the failing test in parser.go" {
			t.Fatal("the payload's prompt was not replaced")
		}
		hook(t, e, in, "claude-code")
		ov.Write("parser.go", fmt.Sprintf("package parser // %d\n", i))
		hook(t, e, stop, "claude-code")
		ts := turns(t, e)
		n := ts[len(ts)-1].Num
		rep, err := e.h.Log(e.ctx, turnctl.LogRequest{})
		if err != nil {
			t.Fatal(err)
		}
		pinned := false
		for _, p := range rep.Pins {
			if p.Turn == n {
				pinned = p.Note == pinNote
			}
		}
		if pinned != c.pinned {
			t.Errorf("prompt %q: turn %d pinned %v, want %v (pins %+v)", c.prompt, n, pinned, c.pinned, rep.Pins)
		}
	}
}

// TestHookEventHugeInput: a payload over 16 MiB is streamed: a huge prompt
// still opens its turn, cut as a 128 KiB prompt is (the note counts the
// bytes of the whole prompt, escapes decoded), a huge tool_response does
// not stop a step; only an input that stays huge with its strings cut,
// or one over 256 MiB (here 32 MiB), is refused, and the message says so.
func TestHookEventHugeInput(t *testing.T) {
	e, _, _, ov := onlineEnv(t)
	dir := e.proj.root
	const sess = "ffffffff-5555-4000-8000-000000000005"
	for i, c := range []struct{ raw, text string }{
		{"big prompt\\n" + strings.Repeat("x", 20<<20), "big prompt\n" + strings.Repeat("x", 20<<20)},
		{"grand \\u00e9t\\u00e9\\n" + strings.Repeat("\\u00e9\\ud83d\\ude00", 2<<20), "grand été\n" + strings.Repeat("é😀", 2<<20)},
	} {
		in := `{"session_id":"` + sess + `","cwd":"` + dir + `","hook_event_name":"UserPromptSubmit","prompt":"` + c.raw + `"}`
		if out, errs := hook(t, e, in, "claude-code"); out != "" || errs != "" {
			t.Fatalf("prompt %d printed %q %q", i, out, errs)
		}
		rep, err := e.h.Show(e.ctx, turnctl.ShowRequest{Turn: fmt.Sprint(i + 1)})
		if err != nil {
			t.Fatal(err)
		}
		if want := ckpt.CutText(c.text); !rep.Turn.Open || rep.Turn.Label != strings.SplitN(c.text, "\n", 2)[0] || rep.Turn.Prompt != want {
			t.Errorf("turn %d: open %v, label %q, prompt ends %q, want %q", i+1, rep.Turn.Open, rep.Turn.Label,
				rep.Turn.Prompt[max(0, len(rep.Turn.Prompt)-40):], want[len(want)-40:])
		}
	}
	ov.Write("a.go", "package a\n")
	in := `{"session_id":"` + sess + `","cwd":"` + dir + `","hook_event_name":"PostToolUse","tool_name":"Write","tool_input":{"file_path":"a.go"},"tool_response":"` + strings.Repeat("y", 20<<20) + `"}`
	if out, errs := hook(t, e, in, "claude-code"); out != "" || errs != "" {
		t.Fatalf("huge PostToolUse printed %q %q", out, errs)
	}
	if rep, err := e.h.Show(e.ctx, turnctl.ShowRequest{Turn: "2.1"}); err != nil || rep.Step == nil || rep.Step.Tool != "Write" || rep.Step.Label != "a.go" {
		t.Errorf("step after a huge PostToolUse: %+v %v", rep, err)
	}
	in = `{"session_id":"` + sess + `","cwd":"` + dir + `","hook_event_name":"Stop","n":[` + strings.Repeat("1,", 9<<20) + `1]}`
	if _, errs := hook(t, e, in, "claude-code"); errs != "turnctl hook-event: Claude Code: hook input is too large: over 16 MiB even with its long strings cut; nothing recorded\n" {
		t.Errorf("huge Stop: %q", errs)
	}
	defer func(n int64) { maxHookInput = n }(maxHookInput)
	maxHookInput = 32 << 20 // 256 MiB, but not in a test
	if _, errs := hook(t, e, `{"prompt":"`+strings.Repeat("z", 32<<20)+`"}`, "gemini"); errs != "turnctl hook-event: Gemini CLI: hook input is too large: over 32 MiB; nothing recorded\n" {
		t.Errorf("input over 256 MiB: %q", errs)
	}
}

func TestShrinkJSON(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"a":"abcdefgh","b":[1,"xy"]}`, `{"a":"abcd","b":[1,"xy"]}`},
		{`{"a":"ab\u00e9cdef"}`, `{"a":"ab"}`}, // not inside the escape
		{`{"a":"ééééé"}`, `{"a":"éé"}`},        // not inside a character
		{`{"a":"a\"bcdef"}`, `{"a":"a\"b"}`},   // an escaped quote is not the end
		{`{"k":{"a":"abcdefg"}}`, `{"k":{"a":"abcd"}}`},
		{`{not json`, `{notjson`}, // for the decoder to refuse
	} {
		got, err := shrinkJSON(strings.NewReader(c.in), 4, 1<<20, 1<<20)
		if err != nil || string(got.data) != c.want {
			t.Errorf("shrinkJSON(%s) = %s %v, want %s", c.in, got.data, err, c.want)
		}
	}
	got, _ := shrinkJSON(strings.NewReader(`{"prompt":"ab\u00e9\ud83d\ude00\n","x":"yyyyyyyyyy","k":{"prompt":"zzzzzzzz"}}`), 6, 1<<20, 1<<20)
	if len(got.cut) != 2 || got.cut["prompt"] != 2+2+4+1 || got.cut["x"] != 10 {
		t.Errorf("cut lengths: %v", got.cut)
	}
}

// A tool event ends a step only of its own session's turn, with a
// daemon that checks (StepRequest.IfOpenedBy) and with one too old to
// know the field (then hook-event checks the open turn first).
func TestHookEventStepOnlyInItsSessionsTurn(t *testing.T) {
	for _, old := range []bool{false, true} {
		e, _, _, ov := onlineEnv(t)
		if old {
			e.h = oldDaemon{e.h}
		}
		dir := e.proj.root
		ev := func(sess, name, extra string) string {
			return fmt.Sprintf(`{"session_id":%q,"cwd":%q,"hook_event_name":%q%s}`, sess, dir, name, extra)
		}
		hook(t, e, ev("A", "UserPromptSubmit", `,"prompt":"task A"`), "claude-code")
		ov.Write("b.txt", "B\n")
		if out, errs := hook(t, e, ev("B", "PostToolUse", `,"tool_name":"Bash"`), "claude-code"); out != "" || errs != "" {
			t.Errorf("old %v: B's step in A's turn printed %q %q", old, out, errs)
		}
		ov.Write("a.txt", "A\n")
		hook(t, e, ev("A", "PostToolUse", `,"tool_name":"Write"`), "claude-code")
		steps, err := e.h.Show(e.ctx, turnctl.ShowRequest{Turn: "1"})
		if err != nil || len(steps.Steps) != 1 || steps.Steps[0].Tool != "Write" {
			t.Errorf("old %v: steps of turn 1: %+v %v", old, steps, err)
		}
		// Gemini CLI's AfterTool, another session's: no step either.
		ov.Write("g.txt", "G\n")
		hook(t, e, `{"session_id":"g","cwd":"`+dir+`","hook_event_name":"AfterTool","tool_name":"x"}`, "gemini")
		if steps, _ := e.h.Show(e.ctx, turnctl.ShowRequest{Turn: "1"}); len(steps.Steps) != 2 || steps.Steps[1].Tool != "" {
			t.Errorf("old %v: a gemini step of another session: %+v", old, steps.Steps)
		}
	}
}

// oldDaemon is a daemon from before StepRequest.IfOpenedBy and Turn and
// the runs of BeginRequest.Run: it rejects those fields as unknown.
type oldDaemon struct{ turnctl.Handler }

func unknown(f string) error {
	return &turnctl.Error{Code: turnctl.CodeBadRequest, Message: `malformed request: json: unknown field "` + f + `"`}
}

func (d oldDaemon) Step(ctx context.Context, req turnctl.StepRequest) (*turnctl.StepReply, error) {
	if req.IfOpenedBy != "" {
		return nil, unknown("if_opened_by")
	}
	if req.Turn != 0 {
		return nil, unknown("turn")
	}
	return d.Handler.Step(ctx, req)
}

func (d oldDaemon) Begin(ctx context.Context, req turnctl.BeginRequest) (*turnctl.BeginReply, error) {
	if req.Run != "" {
		return nil, unknown("run")
	}
	return d.Handler.Begin(ctx, req)
}

func (d oldDaemon) End(ctx context.Context, req turnctl.EndRequest) (*turnctl.EndReply, error) {
	if req.Run != "" {
		return nil, unknown("run")
	}
	return d.Handler.End(ctx, req)
}
