package tests

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// hookEvent runs `turnctl hook-event claude-code` with payload on stdin,
// as Claude Code's hooks do, and wants it silent.
func hookEvent(t *testing.T, m *Mount, payload map[string]any) {
	t.Helper()
	in, _ := json.Marshal(payload)
	cmd := m.turnctlCmd("hook-event", "claude-code")
	cmd.Stdin = strings.NewReader(string(in))
	if out, err := cmd.CombinedOutput(); err != nil || len(out) != 0 {
		t.Fatalf("hook-event %v: %v %q", payload["hook_event_name"], err, out)
	}
}

// Steps through Claude Code's hooks: each PostToolUse ends a step of the
// open turn (a Read changes nothing and makes none). show lists the steps
// with their tools, diff and show compare steps, a rewind to a step gives
// the tree as it was then (bytes and modes), also for a file a process
// kept open for writing across the boundaries, and a revert of one step
// keeps the others.
func TestStepsFromHooksRewindExactly(t *testing.T) {
	proj := t.TempDir()
	writeTree(t, proj, map[string]string{"main.go": "package main\n", "log.txt": ""})
	m := mountProject(t, proj)
	skip := []string{".ckptfs"}
	hookEvent(t, m, map[string]any{"hook_event_name": "UserPromptSubmit", "session_id": "s1", "cwd": proj, "prompt": "add a feature"})
	post := func(tool string, input map[string]any) {
		hookEvent(t, m, map[string]any{"hook_event_name": "PostToolUse", "session_id": "s1", "cwd": proj, "tool_name": tool, "tool_input": input})
	}
	// A writer that stays open across the steps (passthrough once open).
	w, err := os.OpenFile(filepath.Join(proj, "log.txt"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var snaps []map[string]entry
	w.WriteString("one\n")
	runIn(t, proj, `printf 'package main\n\nfunc f() {}\n' > main.go`)
	post("Edit", map[string]any{"file_path": filepath.Join(proj, "main.go")})
	snaps = append(snaps, snapshot(t, proj, skip, nil)) // 1.1
	post("Read", map[string]any{"file_path": filepath.Join(proj, "main.go")})
	w.WriteString("two\n")
	runIn(t, proj, `echo 'package main' > util.go && chmod 600 main.go`)
	post("Bash", map[string]any{"command": "echo 'package main' > util.go && chmod 600 main.go"})
	snaps = append(snaps, snapshot(t, proj, skip, nil)) // 1.2
	runIn(t, proj, `rm util.go && printf 'package main\n\nfunc f() { g() }\n' > main.go`)
	hookEvent(t, m, map[string]any{"hook_event_name": "Stop", "session_id": "s1", "cwd": proj})
	w.Close()
	end := snapshot(t, proj, skip, nil)

	out := m.turnctl(t, "show", "1")
	for _, want := range []string{"3 steps:", "1.1", "Edit", "main.go", "1.2", "Bash", "echo 'package main' > util.go", "1.3"} {
		if !strings.Contains(out, want) {
			t.Fatalf("show 1 lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "Read") {
		t.Fatalf("show 1 lists a step that changed nothing:\n%s", out)
	}
	if out := m.turnctl(t, "show", "1.2"); !strings.Contains(out, "step 1.2 (Bash") || !strings.Contains(out, "util.go") || strings.Contains(out, "modified  main.go  +") {
		t.Fatalf("show 1.2:\n%s", out)
	}
	if out := m.turnctl(t, "diff", "1.1", "1.2"); !strings.Contains(out, "+++ b/util.go") || !strings.Contains(out, "+two") {
		t.Fatalf("diff 1.1 1.2:\n%s", out)
	}
	// A step that does not exist: one clear line, exit 2, and nothing
	// changed: no turn, the tree as it was, no checkout directory.
	before, log := snapshot(t, proj, skip, nil), m.turnctl(t, "log")
	co := filepath.Join(t.TempDir(), "co")
	for _, c := range []struct {
		want string
		args []string
	}{
		{"no step 4", []string{"rewind", "1.4"}},
		{"no step 4", []string{"revert", "1.4"}},
		{"no step 4", []string{"revert", "1.4", "--dry-run"}},
		{"no step 4", []string{"restore", "1.4", "--", "main.go"}},
		{"no step 4", []string{"checkout", "1.4", co}},
		{"no step 4", []string{"export", "patch", "1.4"}},
		{"no step 4", []string{"diff", "1.1", "1.4"}},
		{"no step 4", []string{"forget", "1.4"}},
		{"not a step", []string{"revert", "1.0"}},
	} {
		turnctlFails(t, proj, 2, c.want, c.args...)
	}
	diffTrees(t, before, snapshot(t, proj, skip, nil))
	if m.turnctl(t, "log") != log {
		t.Fatal("a step that does not exist made or changed a turn")
	}
	if _, err := os.Lstat(co); !os.IsNotExist(err) {
		t.Fatalf("checkout of a step that does not exist made %s: %v", co, err)
	}
	turnctlFails(t, proj, 2, "whole turn", "pin", "1.2")

	m.turnctl(t, "rewind", "1.1")
	diffTrees(t, snaps[0], snapshot(t, proj, skip, nil))
	m.turnctl(t, "rewind", "1.2")
	diffTrees(t, snaps[1], snapshot(t, proj, skip, nil))
	if out := m.turnctl(t, "show", "3"); !strings.Contains(out, "rewind to 1.2") || !strings.Contains(out, "(to step 1.2)") {
		t.Fatalf("show of the rewind to a step:\n%s", out)
	}
	m.turnctl(t, "rewind", "1")
	diffTrees(t, end, snapshot(t, proj, skip, nil))

	// Revert step 1.2 alone: its line of log.txt and main.go's mode go;
	// step 1.3's bytes of main.go stay (merged), util.go, which 1.3
	// removed, stays away.
	m.turnctl(t, "revert", "1.2", "--conflicts=refuse")
	got := snapshot(t, proj, skip, nil)
	if got["main.go"].Mode != end["main.go"].Mode&^0o777|0o644 || got["main.go"].Sum != end["main.go"].Sum {
		t.Fatalf("after revert 1.2 main.go is %+v, want the end's bytes with its mode before the step", got["main.go"])
	}
	if _, ok := got["util.go"]; ok {
		t.Fatal("after revert 1.2 util.go is back")
	}
	if b, _ := os.ReadFile(filepath.Join(proj, "log.txt")); string(b) != "one\n" {
		t.Fatalf("after revert 1.2 log.txt holds %q, want the step's line out", b)
	}
}

// twoStepTurn mounts a project whose turn 1 has three steps: one.txt
// (1.1, Edit), two.txt (1.2, Bash), three.txt (1.3).
func twoStepTurn(t *testing.T) (string, *Mount) {
	proj := t.TempDir()
	writeTree(t, proj, map[string]string{"main.go": "package main\n"})
	m := mountProject(t, proj)
	runIn(t, proj, `
T=`+turnctlBin+`
$T begin --label "two steps" >/dev/null
echo one > one.txt
$T step --tool Edit --label one.txt >/dev/null
echo two > two.txt
$T step --tool Bash --label "write two" >/dev/null
echo three > three.txt
$T end >/dev/null
`)
	return proj, m
}

// TestStepsCheckout: checkout N.K names the step in its report, not the
// number a step is encoded as on the wire.
func TestStepsCheckout(t *testing.T) {
	_, m := twoStepTurn(t)
	co := filepath.Join(t.TempDir(), "co")
	if out := m.turnctl(t, "checkout", "1.1", co); !strings.HasPrefix(out, "step 1.1 checked out into "+co+": ") {
		t.Errorf("checkout 1.1 said %q", out)
	}
	if _, err := os.Stat(filepath.Join(co, "two.txt")); !os.IsNotExist(err) {
		t.Errorf("checkout 1.1 wrote two.txt: %v", err)
	}
	co = filepath.Join(t.TempDir(), "co")
	if out := m.turnctl(t, "checkout", "1", co); !strings.HasPrefix(out, "turn 1 checked out into "+co+": ") {
		t.Errorf("checkout 1 said %q", out)
	}
}

// TestStepsExportPatch: export patch N.K is the step's own changes, on
// the tree at the end of the step before it, not the whole turn's.
func TestStepsExportPatch(t *testing.T) {
	_, m := twoStepTurn(t)
	out := m.turnctl(t, "export", "patch", "1.2")
	for _, want := range []string{"Subject: [PATCH] two steps, step 1.2 (Bash: write two)", "Ckptfs-Step: 1.2\n", "+++ b/two.txt"} {
		if !strings.Contains(out, want) {
			t.Errorf("export patch 1.2 lacks %q:\n%s", want, out)
		}
	}
	for _, not := range []string{"one.txt", "three.txt"} {
		if strings.Contains(out, not) {
			t.Errorf("export patch 1.2 holds %s, of another step:\n%s", not, out)
		}
	}
	if out := m.turnctl(t, "export", "patch", "1"); !strings.Contains(out, "+++ b/one.txt") || !strings.Contains(out, "+++ b/three.txt") || strings.Contains(out, "Ckptfs-Step") {
		t.Errorf("export patch 1:\n%s", out)
	}
}
