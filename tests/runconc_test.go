package tests

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// bgRun starts `turnctl run ARGS...` in the background; wait returns its
// exit code and combined output.
func bgRun(t *testing.T, m *Mount, args ...string) (wait func() (int, string)) {
	t.Helper()
	needTurnctl(t)
	cmd := m.turnctlCmd(append([]string{"run"}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// A group of its own, so that a test that fails half-way kills the
	// command turnctl runs too, which would hold the output pipe open.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); <-done })
	return func() (int, string) {
		t.Helper()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatalf("turnctl run %v did not end", args)
		}
		return cmd.ProcessState.ExitCode(), out.String()
	}
}

// checkRunsInStatus checks that turnctl status lists the turnctl runs
// running in the open turn, oldest first, each as "running: LABEL" or
// "running as a step: LABEL" with its pid, and --json alike.
func checkRunsInStatus(t *testing.T, m *Mount, want ...string) {
	t.Helper()
	var got []string
	for _, l := range strings.Split(m.turnctl(t, "status"), "\n") {
		if strings.HasPrefix(l, "  running") {
			got = append(got, regexp.MustCompile(`, pid [1-9][0-9]*\)$`).ReplaceAllString(strings.TrimPrefix(l, "  "), ")"))
		}
	}
	var wantText []string
	for _, w := range want {
		what, label, _ := strings.Cut(w, ": ")
		wantText = append(wantText, fmt.Sprintf("%s: %q (turnctl run)", what, label))
	}
	if strings.Join(got, "\n") != strings.Join(wantText, "\n") {
		t.Errorf("runs in turnctl status:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(wantText, "\n"))
	}
	runs, _ := m.jsonOut(t, "turnctl-status", "status")["runs"].([]any)
	if len(runs) != len(want) {
		t.Fatalf("status --json runs: %v, want %d", runs, len(want))
	}
	for i, r := range runs {
		r := r.(map[string]any)
		label, isStep := strings.CutPrefix(want[i], "running as a step: ")
		if !isStep {
			label = strings.TrimPrefix(want[i], "running: ")
		}
		if pid, _ := r["pid"].(float64); r["label"] != label || r["step"] != isStep || pid <= 0 {
			t.Errorf("status --json run %d: %v, want %s", i, r, want[i])
		}
	}
}

// waitFile waits until path exists.
func waitFile(t *testing.T, path string) {
	t.Helper()
	for i := 0; i < 1500; i++ {
		if _, err := os.Stat(path); err == nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s never appeared", path)
}

// untilFile is shell that waits until path exists.
func untilFile(path string) string {
	return "while [ ! -e " + path + " ]; do sleep 0.02; done"
}

// Two `turnctl run` at the same time in one project (two terminals, an
// agent's two parallel tools): A starts, B starts while A runs, A ends
// first, B ends last. They share one turn that names both and closes when
// the last ends: no change of B's is left in a manual turn, A does not
// close the turn under B, B's changes are not a "step" of A's, each exits
// with its own command's status, and a rewind to before them takes every
// change of both back.
func TestConcurrentRunsShareOneTurn(t *testing.T) {
	proj := t.TempDir()
	runIn(t, proj, "git init -q . && echo base > base.txt")
	m := mountProject(t, proj)
	sync := t.TempDir()
	waitA := bgRun(t, m, "--label", "A", "--", "sh", "-c",
		"echo a1 > a1; touch "+sync+"/a1; "+untilFile(sync+"/goA")+"; echo a2 > a2; exit 3")
	waitFile(t, filepath.Join(sync, "a1"))
	waitB := bgRun(t, m, "--label", "B", "--", "sh", "-c",
		"echo b1 > b1; touch "+sync+"/b1; "+untilFile(sync+"/goB")+"; echo b2 > b2; exit 5")
	waitFile(t, filepath.Join(sync, "b1"))
	checkRunsInStatus(t, m, "running: A", "running: B")
	os.WriteFile(filepath.Join(sync, "goA"), nil, 0o644)
	codeA, outA := waitA()
	checkRunsInStatus(t, m, "running: B")
	os.WriteFile(filepath.Join(sync, "goB"), nil, 0o644)
	codeB, outB := waitB()
	if codeA != 3 || outA != "turnctl run: turn 1 stays open: 1 other turnctl run is still running in it (the last to end closes it)\n" {
		t.Errorf("A: exit %d, output %q", codeA, outA)
	}
	if codeB != 5 || outB != "turnctl run: joined turn 1 of another turnctl run still running (now \"A & B\")\nturn 1 closed: 4 files (+4 -0) by sh\n" {
		t.Errorf("B: exit %d, output %q", codeB, outB)
	}
	got := logLines(t, m)
	want := "" +
		"1  TIME  agent    A & B  4 files  +4 -0  sh\n" +
		"0  TIME  initial\n"
	if got != want {
		t.Errorf("log:\n%s\nwant:\n%s", got, want)
	}
	if st := m.turnctl(t, "status"); !strings.HasPrefix(st, "no turn open") {
		t.Errorf("status after both runs:\n%s", st)
	}
	m.turnctl(t, "rewind", "--quiet", "0")
	for _, f := range []string{"a1", "a2", "b1", "b2"} {
		if _, err := os.Lstat(filepath.Join(proj, f)); !os.IsNotExist(err) {
			t.Errorf("after rewind 0: %s: %v", f, err)
		}
	}
	m.turnctl(t, "rewind", "--quiet", "1")
	for _, f := range []string{"a1", "a2", "b1", "b2"} {
		if b, err := os.ReadFile(filepath.Join(proj, f)); err != nil || string(b) != f+"\n" {
			t.Errorf("after rewind 1: %s: %q %v", f, b, err)
		}
	}
}

// An agent's prompt opens its turn while a `turnctl run` of its own turn
// runs (a build in another terminal): the run's end leaves the agent's
// turn open, says where its later changes went, and the agent's Stop
// closes its own turn with everything the agent did in it.
func TestRunEndLeavesAnotherBeginsTurnOpen(t *testing.T) {
	proj := t.TempDir()
	runIn(t, proj, "git init -q .")
	m := mountProject(t, proj)
	sync := t.TempDir()
	wait := bgRun(t, m, "--label", "build", "--", "sh", "-c",
		"echo o1 > o1; touch "+sync+"/o1; "+untilFile(sync+"/go")+"; echo o2 > o2")
	waitFile(t, filepath.Join(sync, "o1"))
	const sess = "ffffffff-5555-4000-8000-000000000005"
	hookIn(t, m, proj, nil, "claude-code", map[string]any{"session_id": sess, "cwd": proj, "hook_event_name": "UserPromptSubmit", "prompt": "agent task"})
	runIn(t, proj, "echo g1 > g1")
	os.WriteFile(filepath.Join(sync, "go"), nil, 0o644)
	code, out := wait()
	if code != 0 || out != "turnctl run: turn 1 was closed while the command ran; what it changed after that is in turn 2, left open\n" {
		t.Errorf("run: exit %d, output %q", code, out)
	}
	runIn(t, proj, "echo g2 > g2")
	if o, errs := hookIn(t, m, proj, nil, "claude-code", map[string]any{"session_id": sess, "cwd": proj, "hook_event_name": "Stop"}); o != "" || errs != "" {
		t.Fatalf("Stop printed %q %q", o, errs)
	}
	got := logLines(t, m)
	want := "" +
		"2  TIME  agent    agent task ref:" + sess + ":DIGEST  3 files  +3 -0  bash, sh\n" +
		"1  TIME  agent    build                                                          1 file  +1 -0  sh\n" +
		"0  TIME  initial\n"
	if !regexp.MustCompile("^" + strings.ReplaceAll(regexp.QuoteMeta(want), "DIGEST", "[0-9a-f]{8}") + "$").MatchString(got) {
		t.Errorf("log:\n%s\nwant (DIGEST: 8 hex digits):\n%s", got, want)
	}
}

// turnctl run inside an agent's turn that closes while the command runs
// (the agent answered; its next prompt opened turn 2): run's step would
// cut a step "run" in turn 2 holding the agent's new edits. It records no
// step there, says so, and exits with the command's status.
func TestRunStepNotInTheNextTurn(t *testing.T) {
	proj := t.TempDir()
	runIn(t, proj, "git init -q .")
	m := mountProject(t, proj)
	sync := t.TempDir()
	const sess = "99999999-6666-4000-8000-000000000006"
	prompt := func(text string) {
		hookIn(t, m, proj, nil, "claude-code", map[string]any{"session_id": sess, "cwd": proj, "hook_event_name": "UserPromptSubmit", "prompt": text})
	}
	prompt("first")
	wait := bgRun(t, m, "--label", "slow", "--", "sh", "-c",
		"echo x > x; touch "+sync+"/x; "+untilFile(sync+"/go")+"; echo y > y; exit 4")
	waitFile(t, filepath.Join(sync, "x"))
	hookIn(t, m, proj, nil, "claude-code", map[string]any{"session_id": sess, "cwd": proj, "hook_event_name": "Stop"})
	prompt("second")
	runIn(t, proj, "echo z > z")
	os.WriteFile(filepath.Join(sync, "go"), nil, 0o644)
	code, out := wait()
	if code != 4 || out != "turnctl run: ran inside turn 1, but turn 1 was closed; the open turn is 2: no step\n" {
		t.Errorf("run: exit %d, output %q", code, out)
	}
	if show := m.turnctl(t, "show", "2"); strings.Contains(show, "step") {
		t.Errorf("turn 2 has a step:\n%s", show)
	}
}

// Two `turnctl run` at the same time inside an agent's turn (its two
// parallel Bash tools): what both changed is one step named after both,
// ended by the last to end, rather than an unlabelled step of A's first
// changes (cut by B's start) and a step "A" holding B's changes.
func TestConcurrentRunsInsideAnAgentTurn(t *testing.T) {
	proj := t.TempDir()
	runIn(t, proj, "git init -q .")
	m := mountProject(t, proj)
	sync := t.TempDir()
	const sess = "12121212-9999-4000-8000-000000000009"
	hookIn(t, m, proj, nil, "claude-code", map[string]any{"session_id": sess, "cwd": proj, "hook_event_name": "UserPromptSubmit", "prompt": "two tools"})
	runIn(t, proj, "echo e > e.txt")
	waitA := bgRun(t, m, "--label", "A", "--", "sh", "-c",
		"echo a1 > a1; touch "+sync+"/a1; "+untilFile(sync+"/goA")+"; echo a2 > a2")
	waitFile(t, filepath.Join(sync, "a1"))
	waitB := bgRun(t, m, "--label", "B", "--", "sh", "-c",
		"echo b1 > b1; touch "+sync+"/b1; "+untilFile(sync+"/goB")+"; echo b2 > b2; exit 2")
	waitFile(t, filepath.Join(sync, "b1"))
	checkRunsInStatus(t, m, "running as a step: A", "running as a step: B")
	os.WriteFile(filepath.Join(sync, "goA"), nil, 0o644)
	codeA, outA := waitA()
	os.WriteFile(filepath.Join(sync, "goB"), nil, 0o644)
	codeB, outB := waitB()
	if codeA != 0 || outA != "turnctl run: inside the open turn 1: 1 other turnctl run is still running in it; the last to end records the step\n" {
		t.Errorf("A: exit %d, output %q", codeA, outA)
	}
	if codeB != 2 || outB != "turnctl run: inside the open turn 1: recorded step 1.2 (the turn stays open)\n" {
		t.Errorf("B: exit %d, output %q", codeB, outB)
	}
	show := regexp.MustCompile(`\d\d:\d\d:\d\d`).ReplaceAllString(m.turnctl(t, "show", "1"), "TIME")
	if !strings.Contains(show, "2 steps:\n  1.1  TIME\n  1.2  TIME  run  A & B\n") {
		t.Errorf("show 1:\n%s", show)
	}
	if s := m.turnctl(t, "show", "1.2"); strings.Count(s, "added") != 4 || strings.Contains(s, "e.txt") {
		t.Errorf("show 1.2:\n%s", s)
	}
}

// turnctl run inside a command that turnctl run runs (an agent wrapped in
// `turnctl run -- AGENT`, whose Bash tool runs `turnctl run -- make
// test`): the inner run is part of the outer's command, so it records a
// step of the outer's turn, as inside an agent's turn, and does not join
// it as a run at the same time would. Inside an agent's turn likewise.
func TestNestedRunIsAStep(t *testing.T) {
	proj := t.TempDir()
	runIn(t, proj, "git init -q .")
	m := mountProject(t, proj)
	inner := turnctlBin + " -C " + proj + " run --label tests -- sh -c 'echo t > t'"
	cmd := m.turnctlCmd("run", "--label", "agent", "--", "sh", "-c", "echo o1 > o1; "+inner+"; echo o2 > o2")
	out, err := cmd.CombinedOutput()
	if err != nil || string(out) != "turnctl run: inside the open turn 1: recorded step 1.2 (the turn stays open)\nturn 1 closed: 3 files (+3 -0) by sh\n" {
		t.Fatalf("nested run: %v %q", err, out)
	}
	show := regexp.MustCompile(`\d\d:\d\d:\d\d`).ReplaceAllString(m.turnctl(t, "show", "1"), "TIME")
	if !strings.HasPrefix(show, "turn 1  agent  \"agent\"") || !strings.Contains(show, "3 steps:\n  1.1  TIME\n  1.2  TIME  run  tests\n  1.3  TIME\n") {
		t.Errorf("show 1:\n%s", show)
	}

	m.turnctl(t, "begin", "--label", "script")
	out, err = m.turnctlCmd("run", "--label", "outer", "--", "sh", "-c", "echo p1 > p1; "+inner+"; echo p2 > p2").CombinedOutput()
	if err != nil || string(out) != "turnctl run: inside the open turn 2: recorded step 2.2 (the turn stays open)\nturnctl run: inside the open turn 2: recorded step 2.3 (the turn stays open)\n" {
		t.Fatalf("nested run inside turn 2: %v %q", err, out)
	}
	show = regexp.MustCompile(`\d\d:\d\d:\d\d`).ReplaceAllString(m.turnctl(t, "show", "2"), "TIME")
	if !strings.Contains(show, "3 steps:\n  2.1  TIME\n  2.2  TIME  run  tests\n  2.3  TIME  run  outer\n") {
		t.Errorf("show 2:\n%s", show)
	}
}

// A run killed (SIGKILL) before its end holds its turn no longer: the
// next run does not join it but closes it, as a begin does, and opens a
// turn of its own.
func TestKilledRunHoldsNoTurn(t *testing.T) {
	proj := t.TempDir()
	runIn(t, proj, "git init -q .")
	m := mountProject(t, proj)
	sync := t.TempDir()
	cmd := m.turnctlCmd("run", "--label", "A", "--", "sh", "-c", "echo a > a; touch "+sync+"/a; "+untilFile(sync+"/go"))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFile(t, filepath.Join(sync, "a"))
	checkRunsInStatus(t, m, "running: A")
	cmd.Process.Kill()
	cmd.Wait()
	checkRunsInStatus(t, m) // its process is gone: it holds nothing
	os.WriteFile(filepath.Join(sync, "go"), nil, 0o644)
	out, err := m.turnctlCmd("run", "--label", "B", "--", "sh", "-c", "echo b > b").CombinedOutput()
	if err != nil || string(out) != "turnctl run: turn 1 was still open (no turnctl end); closed it\nturn 2 closed: 1 file (+1 -0) by sh\n" {
		t.Fatalf("run B: %v %q", err, out)
	}
	got := logLines(t, m)
	want := "" +
		"2  TIME  agent    B  1 file  +1 -0  sh\n" +
		"1  TIME  agent    A  1 file  +1 -0  sh\n" +
		"0  TIME  initial\n"
	if got != want {
		t.Errorf("log:\n%s\nwant:\n%s", got, want)
	}
}
