package tests

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// hookIn runs `turnctl hook-event AGENT` as an agent does: the payload on
// stdin, in directory dir, with env added to the environment (no -C, no
// $CKPTFS_DIR); it returns stdout and stderr and wants exit 0.
func hookIn(t *testing.T, m *Mount, dir string, env []string, agent string, payload map[string]any) (string, string) {
	t.Helper()
	return hookWith(t, m, dir, env, nil, agent, payload)
}

// hookWith is hookIn with turnctl's options before hook-event (-C DIR).
func hookWith(t *testing.T, m *Mount, dir string, env, opts []string, agent string, payload map[string]any) (string, string) {
	t.Helper()
	needTurnctl(t)
	in, _ := json.Marshal(payload)
	cmd := exec.Command(turnctlBin, append(opts, "hook-event", agent)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CKPTFS_RUNTIME_DIR="+m.Runtime, "CKPTFS_DIR=", "CLAUDE_PROJECT_DIR=", "GEMINI_PROJECT_DIR=")
	cmd.Env = append(cmd.Env, env...)
	cmd.Stdin = bytes.NewReader(in)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("hook-event %s %v: %v %q", agent, payload["hook_event_name"], err, errb.String())
	}
	return out.String(), errb.String()
}

// transcript writes a Claude Code transcript whose last assistant message
// is uuid, and returns its path.
func transcript(t *testing.T, uuid string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "transcript.jsonl")
	line := `{"type":"assistant","uuid":"` + uuid + `","message":{"role":"assistant"}}` + "\n"
	if err := os.WriteFile(p, []byte(line), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// logLines is `turnctl log` with its times taken out, one string per
// line.
func logLines(t *testing.T, m *Mount) string {
	t.Helper()
	out := m.turnctl(t, "log")
	return regexp.MustCompile(`\d\d:\d\d:\d\d`).ReplaceAllString(out, "TIME")
}

// Two Claude Code sessions in one project, and a person's edits. The
// second session's prompt closes the first's turn; the first's Stop then
// leaves the second's turn open (one line on stderr) and its answer's id
// names no turn; the second's edits stay in its turn, and its Stop closes
// it with its answer's id. A late Stop while a manual turn is open leaves
// it open too.
func TestHookEndClosesOnlyItsSessionsTurn(t *testing.T) {
	proj := t.TempDir()
	runIn(t, proj, "git init -q . && echo base > base.txt")
	m := mountProject(t, proj)
	const sessA, sessB = "aaaaaaaa-1111-4000-8000-000000000001", "bbbbbbbb-2222-4000-8000-000000000002"
	const uuidA, uuidB = "a0000000-0000-4000-8000-00000000000a", "b0000000-0000-4000-8000-00000000000b"
	trA, trB := transcript(t, uuidA), transcript(t, uuidB)
	ev := func(sess, tr, name string, kv ...string) map[string]any {
		p := map[string]any{"session_id": sess, "transcript_path": tr, "cwd": proj, "hook_event_name": name}
		for i := 0; i+1 < len(kv); i += 2 {
			p[kv[i]] = kv[i+1]
		}
		return p
	}
	quiet := func(sess, tr, name string, kv ...string) {
		t.Helper()
		if out, errs := hookIn(t, m, proj, nil, "claude-code", ev(sess, tr, name, kv...)); out != "" || errs != "" {
			t.Fatalf("%s of %s printed %q %q", name, sess, out, errs)
		}
	}
	quiet(sessA, trA, "UserPromptSubmit", "prompt", "task A")
	runIn(t, proj, "echo a > a.txt")
	quiet(sessB, trB, "UserPromptSubmit", "prompt", "task B")
	runIn(t, proj, "echo b > b.txt")
	out, errs := hookIn(t, m, proj, nil, "claude-code", ev(sessA, trA, "Stop"))
	if want := regexp.MustCompile(`^turnctl hook-event: end \(Stop\): the open turn 2 is another session's \(ref ` + sessB + `:[0-9a-f]{8}\), not ` + sessA + `'s; left open\n$`); out != "" || !want.MatchString(errs) {
		t.Fatalf("A's Stop in B's turn printed %q %q", out, errs)
	}
	runIn(t, proj, "echo b2 > b2.txt")
	quiet(sessB, trB, "Stop")
	// A person's edits, then a late Stop of A.
	runIn(t, proj, "echo mine > notes")
	out, errs = hookIn(t, m, proj, nil, "claude-code", ev(sessA, trA, "Stop"))
	if out != "" || errs != "turnctl hook-event: end (Stop): the open turn 3 is a manual turn (changes made while no agent's turn was open), not "+sessA+"'s; left open\n" {
		t.Fatalf("A's Stop in a manual turn printed %q %q", out, errs)
	}
	got := logLines(t, m)
	want := "" +
		"3  open      manual                                                                  1 file  +1 -0  bash\n" +
		"2  TIME  agent    task B ref:" + sessB + ":DIGEST ...  2 files  +2 -0  bash\n" +
		"1  TIME  agent    task A ref:" + sessA + ":DIGEST       1 file  +1 -0  bash\n" +
		"0  TIME  initial\n"
	if !regexp.MustCompile("^" + strings.ReplaceAll(regexp.QuoteMeta(want), "DIGEST", "[0-9a-f]{8}") + "$").MatchString(got) {
		t.Errorf("log:\n%s\nwant (DIGEST: 8 hex digits):\n%s", got, want)
	}
	show := m.turnctl(t, "show", "ref:"+uuidB)
	if !strings.HasPrefix(show, "turn 2  agent  \"task B\"  ref:"+sessB+":") || !strings.Contains(show, " ref:"+uuidB+" ") {
		t.Errorf("show ref:%s:\n%s", uuidB, show)
	}
	if _, code := m.turnctlFail(t, "show", "ref:"+uuidA); code == 0 {
		t.Errorf("A's answer id names a turn")
	}
}

// A Stop whose payload cwd is outside the mount (the session cd'ed into
// /tmp or an --add-dir directory) still closes its turn: hook-event falls
// back to $CLAUDE_PROJECT_DIR, then to its own current directory.
func TestHookEndFindsTheProjectWhenCwdLeftIt(t *testing.T) {
	proj := t.TempDir()
	runIn(t, proj, "git init -q . && mkdir sub")
	m := mountProject(t, proj)
	outside := t.TempDir()
	const sess = "cccccccc-3333-4000-8000-000000000003"
	for i, c := range []struct {
		dir string
		env []string
	}{
		{outside, []string{"CLAUDE_PROJECT_DIR=" + proj}}, // the hook runs outside too
		{filepath.Join(proj, "sub"), nil},                 // no $CLAUDE_PROJECT_DIR: the current directory
	} {
		uuid := "d0000000-0000-4000-8000-00000000000" + string(rune('0'+i))
		tr := transcript(t, uuid)
		hookIn(t, m, proj, nil, "claude-code", map[string]any{"session_id": sess, "transcript_path": tr, "cwd": proj,
			"hook_event_name": "UserPromptSubmit", "prompt": "task " + string(rune('A'+i))})
		runIn(t, proj, "echo x >> f.txt")
		out, errs := hookIn(t, m, c.dir, c.env, "claude-code", map[string]any{"session_id": sess, "transcript_path": tr, "cwd": outside,
			"hook_event_name": "Stop"})
		if out != "" || errs != "" {
			t.Fatalf("Stop %d from %s printed %q %q", i, outside, out, errs)
		}
		if st := m.turnctl(t, "status"); !strings.HasPrefix(st, "no turn open") {
			t.Fatalf("Stop %d left the turn open:\n%s", i, st)
		}
		if show := m.turnctl(t, "show", "ref:"+uuid); !strings.HasPrefix(show, "turn "+string(rune('1'+i))+"  agent  \"task "+string(rune('A'+i))+"\"") {
			t.Fatalf("show ref:%s:\n%s", uuid, show)
		}
	}
	// Nowhere mounted: one line that names every place looked at.
	hookIn(t, m, proj, nil, "claude-code", map[string]any{"session_id": sess, "cwd": proj, "hook_event_name": "UserPromptSubmit", "prompt": "task C"})
	out, errs := hookIn(t, m, outside, []string{"CLAUDE_PROJECT_DIR=/"}, "claude-code", map[string]any{"session_id": sess, "cwd": outside, "hook_event_name": "Stop"})
	want := outside + " (the payload's cwd) is not inside a ckptfs mount; / ($CLAUDE_PROJECT_DIR) is not inside a ckptfs mount; end not recorded\n"
	if out != "" || errs != "turnctl hook-event: "+want {
		t.Errorf("Stop with nothing mounted printed %q %q, want %q", out, errs, want)
	}
}

// turnctl run inside an open agent turn does not close it: what the
// command changed becomes a step of the turn, and the agent's later edits
// and its Stop still belong to its turn. --new-turn opens a turn of its
// own, and says which open turn it closed.
func TestRunInsideAnAgentTurnIsAStep(t *testing.T) {
	proj := t.TempDir()
	runIn(t, proj, "git init -q .")
	m := mountProject(t, proj)
	const sess = "eeeeeeee-4444-4000-8000-000000000004"
	hookIn(t, m, proj, nil, "claude-code", map[string]any{"session_id": sess, "cwd": proj, "hook_event_name": "UserPromptSubmit", "prompt": "build it"})
	runIn(t, proj, "echo a > a.txt")
	cmd := m.turnctlCmd("run", "--label", "inner", "--", "sh", "-c", "echo x > inner.txt")
	out, err := cmd.CombinedOutput()
	if err != nil || string(out) != "turnctl run: inside the open turn 1: recorded step 1.2 (the turn stays open)\n" {
		t.Fatalf("run inside turn 1: %v %q", err, out)
	}
	runIn(t, proj, "echo c > c.txt")
	if out, errs := hookIn(t, m, proj, nil, "claude-code", map[string]any{"session_id": sess, "cwd": proj, "hook_event_name": "Stop"}); out != "" || errs != "" {
		t.Fatalf("Stop after run printed %q %q", out, errs)
	}
	got := logLines(t, m)
	want := "" +
		"1  TIME  agent    build it ref:" + sess + ":DIGEST  3 files  +3 -0  bash, sh\n" +
		"0  TIME  initial\n"
	if !regexp.MustCompile("^" + strings.ReplaceAll(regexp.QuoteMeta(want), "DIGEST", "[0-9a-f]{8}") + "$").MatchString(got) {
		t.Errorf("log:\n%s\nwant (DIGEST: 8 hex digits):\n%s", got, want)
	}
	show := regexp.MustCompile(`\d\d:\d\d:\d\d`).ReplaceAllString(m.turnctl(t, "show", "1"), "TIME")
	if !strings.Contains(show, "3 steps:\n  1.1  TIME\n  1.2  TIME  run  inner\n  1.3  TIME\n") {
		t.Errorf("show 1:\n%s", show)
	}
	if s := m.turnctl(t, "show", "1.2"); !strings.Contains(s, "inner.txt") || strings.Contains(s, "a.txt") || strings.Contains(s, "c.txt") {
		t.Errorf("show 1.2:\n%s", s)
	}

	// --new-turn: a turn of its own, closing the agent's, with a note.
	hookIn(t, m, proj, nil, "claude-code", map[string]any{"session_id": sess, "cwd": proj, "hook_event_name": "UserPromptSubmit", "prompt": "again"})
	out, err = m.turnctlCmd("run", "--new-turn", "--label", "own", "--", "sh", "-c", "echo y > own.txt").CombinedOutput()
	if err != nil || string(out) != "turnctl run: turn 2 was still open (no turnctl end); closed it\nturn 3 closed: 1 file (+1 -0) by sh\n" {
		t.Fatalf("run --new-turn: %v %q", err, out)
	}
}

// turnctl run --label of several lines inside an open agent turn: the
// command's changes are its step, labelled with the first line, and run
// exits with the command's status (the step used to be refused after the
// command ran: "label must be one line", exit 2).
func TestRunStepLabel(t *testing.T) {
	proj := t.TempDir()
	runIn(t, proj, "git init -q .")
	m := mountProject(t, proj)
	m.turnctl(t, "begin", "--label", "a script's turn")
	cmd := m.turnctlCmd("run", "--label", "run the tests\n\nand write the report", "--", "sh", "-c", "echo r > report.txt; exit 3")
	out, err := cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); code != 3 || string(out) != "turnctl run: inside the open turn 1: recorded step 1.1 (the turn stays open)\n" {
		t.Fatalf("run inside turn 1: exit %d (%v) %q", code, err, out)
	}
	m.turnctl(t, "end")
	show := regexp.MustCompile(`\d\d:\d\d:\d\d`).ReplaceAllString(m.turnctl(t, "show", "1"), "TIME")
	if !strings.Contains(show, "1 step:\n  1.1  TIME  run  run the tests\n") {
		t.Errorf("show 1:\n%s", show)
	}
}

// A tool event of session B while session A's turn is open (A's prompt
// closed B's turn while B was still working) ends no step of A's turn:
// steps, like ends, belong to the session that opened the turn. A's own
// next tool event ends a step holding what happened since. B's tool
// event while a manual turn is open ends none either. Nothing is printed
// (the hook's changes stay in the open turn; nothing is lost).
func TestHookStepOnlyInItsSessionsTurn(t *testing.T) {
	proj := t.TempDir()
	runIn(t, proj, "git init -q .")
	m := mountProject(t, proj)
	const sessA, sessB = "aaaaaaaa-7777-4000-8000-000000000007", "bbbbbbbb-8888-4000-8000-000000000008"
	quiet := func(sess, name string, kv ...any) {
		t.Helper()
		p := map[string]any{"session_id": sess, "cwd": proj, "hook_event_name": name}
		for i := 0; i+1 < len(kv); i += 2 {
			p[kv[i].(string)] = kv[i+1]
		}
		if out, errs := hookIn(t, m, proj, nil, "claude-code", p); out != "" || errs != "" {
			t.Fatalf("%s of %s printed %q %q", name, sess, out, errs)
		}
	}
	quiet(sessB, "UserPromptSubmit", "prompt", "task B")
	quiet(sessA, "UserPromptSubmit", "prompt", "task A")
	runIn(t, proj, "echo b > b.txt")
	quiet(sessB, "PostToolUse", "tool_name", "Bash", "tool_input", map[string]any{"command": "echo b > b.txt"})
	runIn(t, proj, "echo a > a.txt")
	quiet(sessA, "PostToolUse", "tool_name", "Write", "tool_input", map[string]any{"file_path": filepath.Join(proj, "a.txt")})
	runIn(t, proj, "echo a2 > a2.txt")
	quiet(sessA, "Stop")
	runIn(t, proj, "echo m > m.txt")
	quiet(sessB, "PostToolUse", "tool_name", "Bash", "tool_input", map[string]any{"command": "echo m > m.txt"})
	show := regexp.MustCompile(`\d\d:\d\d:\d\d`).ReplaceAllString(m.turnctl(t, "show", "2"), "TIME")
	if !strings.Contains(show, "2 steps:\n  2.1  TIME  Write  "+filepath.Join(proj, "a.txt")+"\n  2.2  TIME\n") {
		t.Errorf("show 2:\n%s", show)
	}
	if s := m.turnctl(t, "show", "2.1"); !strings.Contains(s, "b.txt") || !strings.Contains(s, "a.txt") {
		t.Errorf("show 2.1:\n%s", s)
	}
	if show := m.turnctl(t, "show", "3"); strings.Contains(show, "step") {
		t.Errorf("the manual turn has a step:\n%s", show)
	}
}

// TestHookEventDashCIsTheProject: -C names the project, as for every other
// command: a -C directory that is not mounted records nothing, though the
// hook runs in a mounted project (it opened an agent turn there, with
// the other project's prompt).
func TestHookEventDashCIsTheProject(t *testing.T) {
	proj := t.TempDir()
	m := mountProject(t, proj)
	other := t.TempDir()
	_, errs := hookWith(t, m, proj, nil, []string{"-C", other}, "claude-code",
		map[string]any{"session_id": "s1", "cwd": other, "hook_event_name": "UserPromptSubmit", "prompt": "work on the other project"})
	if want := "turnctl hook-event: " + other + " (-C) is not inside a ckptfs mount; begin not recorded\n"; errs != want {
		t.Errorf("hook-event said %q, want %q", errs, want)
	}
	if st := m.turnctl(t, "status"); !strings.HasPrefix(st, "no turn open") {
		t.Errorf("the mounted project got a turn:\n%s", st)
	}
}
