package tests

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"ckptfs/turnctl"
)

// turnctlIn runs turnctl with dir (inside the mount) as its current
// directory and no -C, as a person in a subdirectory would.
func (m *Mount) turnctlIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	needTurnctl(t)
	cmd := exec.Command(turnctlBin, args...)
	cmd.Dir = dir
	cmd.Env = append(cmd.Environ(), "CKPTFS_RUNTIME_DIR="+m.Runtime, "CKPTFS_DIR=", "NO_COLOR=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("turnctl %s in %s: %v\n%s", strings.Join(args, " "), dir, err, out)
	}
	return string(out)
}

// firstFields returns the first field of each line of out.
func firstFields(out string) string {
	var f []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if w := strings.Fields(l); len(w) > 0 {
			f = append(f, w[0])
		}
	}
	return strings.Join(f, " ")
}

// log -- PATH and show N -- PATH, with paths relative to the current
// directory inside the mount, list only what concerns those paths.
func TestPerFileHistory(t *testing.T) {
	proj := t.TempDir()
	runIn(t, proj, `mkdir src docs && echo 'package a' > src/a.go && echo intro > docs/README`)
	m := mountProject(t, proj)
	turn := func(label, script string) {
		m.turnctl(t, "begin", "--label", label)
		runIn(t, proj, script)
		m.turnctl(t, "end")
	}
	turn("edit a", `echo '// one' >> src/a.go`)                         // 1
	turn("docs", `echo more >> docs/README`)                            // 2
	turn("both", `echo '// two' >> src/a.go; echo last >> docs/README`) // 3
	turn("new b", `echo 'package b' > src/b.go`)                        // 4

	src := filepath.Join(proj, "src")
	if got := firstFields(m.turnctlIn(t, src, "log", "--", "a.go")); got != "3 1" {
		t.Errorf("log -- a.go in src lists turns %q, want \"3 1\"", got)
	}
	if got := firstFields(m.turnctlIn(t, proj, "log", "--", "src")); got != "4 3 1" {
		t.Errorf("log -- src lists turns %q, want \"4 3 1\"", got)
	}
	if got := firstFields(m.turnctlIn(t, src, "log", "-n", "1", "--", "../docs")); got != "3" {
		t.Errorf("log -n 1 -- ../docs lists turns %q, want \"3\"", got)
	}
	out := m.turnctlIn(t, src, "show", "3", "--patch", "--", "a.go")
	if !strings.Contains(out, "modified  src/a.go  +1 -0") || !strings.Contains(out, "+// two\n") || strings.Contains(out, "README") {
		t.Errorf("show 3 --patch -- a.go:\n%s", out)
	}
	var lrep turnctl.LogReply
	if err := json.Unmarshal([]byte(m.turnctlIn(t, src, "--json", "log", "--", "a.go")), &lrep); err != nil ||
		len(lrep.Turns) != 2 || lrep.Turns[0].Num != 3 || lrep.Turns[0].Stats.Files != 1 {
		t.Errorf("--json log -- a.go: %v %+v", err, lrep)
	}
	var srep turnctl.ShowReply
	if err := json.Unmarshal([]byte(m.turnctlIn(t, src, "--json", "show", "3", "--", "../docs")), &srep); err != nil ||
		len(srep.Changes) != 1 || srep.Changes[0].Path != "docs/README" {
		t.Errorf("--json show 3 -- ../docs: %v %+v", err, srep)
	}
}

// An agent's whole prompt, passed by its hook, and a label of several
// lines are kept: log shows their first line, show all of them, also
// after the unmount.
func TestWholePromptIsKept(t *testing.T) {
	proj := t.TempDir()
	m := mountProject(t, proj)
	prompt := "Fix the failing test\n\nIt panics on empty input;\nadd a regression test."
	in, _ := json.Marshal(map[string]string{"hook_event_name": "UserPromptSubmit", "session_id": "s1", "cwd": proj, "prompt": prompt})
	cmd := m.turnctlCmd("hook-event", "claude-code")
	cmd.Stdin = strings.NewReader(string(in))
	if out, err := cmd.CombinedOutput(); err != nil || len(out) != 0 {
		t.Fatalf("hook-event: %v %q", err, out)
	}
	runIn(t, proj, `echo x > f`)
	m.turnctl(t, "end")
	m.turnctl(t, "begin", "--label", "Second\nwith \x1b[2Jdetails")
	runIn(t, proj, `echo y > f`)
	m.turnctl(t, "end")

	check := func(when string, log, show1, show2 string) {
		t.Helper()
		if strings.Count(log, "\n") != 3 || !strings.Contains(log, " Fix the failing test ") || !strings.Contains(log, " Second ") ||
			strings.Contains(log, "regression") || strings.Contains(log, "details") {
			t.Errorf("%s: log:\n%s", when, log)
		}
		if !strings.Contains(show1, "\n\n    Fix the failing test\n\n    It panics on empty input;\n    add a regression test.\n\n  added  f  +1 -0\n") {
			t.Errorf("%s: show 1:\n%s", when, show1)
		}
		if !strings.Contains(show2, "\n\n    Second\n    with \\x1b[2Jdetails\n\n") {
			t.Errorf("%s: show 2:\n%s", when, show2)
		}
	}
	check("mounted", m.turnctlIn(t, proj, "log"), m.turnctlIn(t, proj, "show", "1"), m.turnctlIn(t, proj, "show", "2"))
	m.Unmount(t)
	log, _ := runTurnctl(t, proj, "log")
	show1, _ := runTurnctl(t, proj, "show", "1")
	show2, _ := runTurnctl(t, proj, "show", "2")
	check("offline", log, show1, show2)
}

// A git commit made through the mount is one line in show, log and a
// rewind's report; --all lists every file, git's objects as binary.
func TestGitCommitIsOneLine(t *testing.T) {
	proj := t.TempDir()
	runIn(t, proj, `git init -q -b main && echo a > a.txt && git add a.txt && git commit -qm one`)
	m := mountProject(t, proj)
	at0 := copyProject(t, proj)
	m.turnctl(t, "begin", "--label", "commit b")
	runIn(t, proj, `echo b >> a.txt && git add a.txt && git commit -qm two`)
	m.turnctl(t, "end")
	head := strings.TrimSpace(runIn(t, proj, `git rev-parse --short=7 HEAD`))
	prev := strings.TrimSpace(runIn(t, proj, `git rev-parse --short=7 HEAD~1`))
	var srep turnctl.ShowReply
	if err := json.Unmarshal([]byte(m.turnctlIn(t, proj, "--json", "show", "1")), &srep); err != nil || srep.Stats.Git == nil {
		t.Fatalf("show --json 1: %v %+v", err, srep.Stats)
	}
	gitFiles := srep.Stats.Git.Files
	summary := fmt.Sprintf("git: commit %s, %d files in .git", head, gitFiles)
	if gitFiles < 4 || len(srep.Changes) < gitFiles+1 {
		t.Errorf("show --json 1: %d files in .git, %d changes", gitFiles, len(srep.Changes))
	}

	out := m.turnctlIn(t, proj, "show", "1")
	if !strings.HasSuffix(out, "  modified  a.txt  +1 -0\n  "+summary+"\n1 file (+1 -0)\n") || strings.Contains(out, ".git/") {
		t.Errorf("show 1:\n%s\nwant it to end in the line %q", out, summary)
	}
	if log := m.turnctlIn(t, proj, "log"); !strings.Contains(log, "+1 -0  "+summary+"  ") || strings.Contains(log, ".git/") {
		t.Errorf("log:\n%s", log)
	}
	all := m.turnctlIn(t, proj, "show", "1", "--all")
	objects := 0
	for _, l := range strings.Split(all, "\n") {
		if strings.Contains(l, ".git/objects/") && !strings.HasSuffix(l, "/") {
			objects++
			if !strings.Contains(l, "binary, ") || strings.Contains(l, " +") {
				t.Errorf("show --all: a git object with lines counted: %q", l)
			}
		}
	}
	if objects < 3 || strings.Contains(all, "git:") {
		t.Errorf("show 1 --all (%d objects):\n%s", objects, all)
	}
	// diff leaves .git out (git apply refuses it whole) and says so: its
	// patch applies to the checkout at 0.
	patch := m.turnctlIn(t, proj, "diff", "0", "1")
	if !strings.Contains(patch, "\n# ckptfs: left out the changes inside .git ("+summary+"): ") || strings.Contains(patch, " a/.git/") {
		t.Errorf("diff 0 1:\n%s", patch)
	}
	patchFile := filepath.Join(t.TempDir(), "0-1.patch")
	if err := os.WriteFile(patchFile, []byte(patch), 0o644); err != nil {
		t.Fatal(err)
	}
	runIn(t, at0, "git apply "+patchFile)
	if got := runIn(t, at0, `cat a.txt`); got != "a\nb\n" {
		t.Errorf("diff 0 1 | git apply: a.txt is %q", got)
	}
	out = m.turnctlIn(t, proj, "rewind", "0")
	if !strings.Contains(out, "\n  git: main at "+prev+" (was "+head+"), ") || strings.Contains(out, ".git/") {
		t.Errorf("rewind 0:\n%s", out)
	}
	if got := strings.TrimSpace(runIn(t, proj, `git rev-parse --short=7 HEAD`)); got != prev {
		t.Errorf("after rewind 0, HEAD is %s, want %s", got, prev)
	}
}
