package tests

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"

	"ckptfs/internal/schematest"
)

// jsonOut runs the built turnctl (or ckptfs, when args[0] is "ckptfs")
// with --json, wants exit status 0, and validates its standard output
// against doc/schema/SCHEMA.json; it returns the output decoded.
func (m *Mount) jsonOut(t *testing.T, schema string, args ...string) map[string]any {
	t.Helper()
	var cmd *exec.Cmd
	if args[0] == "ckptfs" {
		cmd = exec.Command(ckptfsBin, append(args[1:2:2], append([]string{"--json"}, args[2:]...)...)...)
	} else {
		needTurnctl(t)
		cmd = exec.Command(turnctlBin, append([]string{"-C", m.Dir, "--json"}, args...)...)
	}
	cmd.Env = append(os.Environ(), "CKPTFS_RUNTIME_DIR="+m.Runtime, "CKPTFS_DIR=", "NO_COLOR=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	what := strings.Join(cmd.Args[1:], " ")
	if err != nil {
		t.Fatalf("%s: %v\n%s%s", what, err, out, stderr.Bytes())
	}
	schematest.Check(t, schema, what, out)
	var v map[string]any
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("%s: %v\n%s", what, err, out)
	}
	return v
}

// TestJSONOutputsMatchSchemas runs every command that prints JSON, on a
// real mount and then offline, over a history with a git commit, a
// symlink, a FIFO, a mode change, a rename and an open turn, and validates
// each output against its schema in doc/schema: a key missing or added,
// a zero or non-UTC time fails.
func TestJSONOutputsMatchSchemas(t *testing.T) {
	proj := t.TempDir()
	runIn(t, proj, `git init -q -b main && echo a > a.txt && git add a.txt && git commit -qm one`)
	m := mountProject(t, proj)

	st := m.jsonOut(t, "ckptfs-status", "ckptfs", "status", proj)
	if st["mounted"] != true || st["pid"] == nil || st["started"] == nil || st["open_turn"] != nil {
		t.Errorf("ckptfs status --json, mounted: %v", st)
	}
	b := m.jsonOut(t, "turnctl-begin", "begin", "--label", "add things\n\nand commit them", "--ref", "r1")
	if tr := b["turn"].(map[string]any); tr["end"] != nil || tr["prompt"] != "add things\n\nand commit them" {
		t.Errorf("begin --json: %v", b)
	}
	runIn(t, proj, `echo b > b.txt && ln -s b.txt link && mkfifo fifo && chmod 600 a.txt && mkdir d && echo c > d/c.txt &&
		git add b.txt && git commit -qm two`)
	s := m.jsonOut(t, "turnctl-status", "status")
	if tr, _ := s["turn"].(map[string]any); tr == nil || tr["end"] != nil || tr["stats"] != nil {
		t.Errorf("status --json with an open turn: %v", s["turn"])
	}
	st = m.jsonOut(t, "ckptfs-status", "ckptfs", "status", proj)
	if ot, _ := st["open_turn"].(map[string]any); ot == nil || ot["end"] != nil {
		t.Errorf("ckptfs status --json, a turn open: %v", st["open_turn"])
	}
	e := m.jsonOut(t, "turnctl-end", "end", "--ref", "r1-end")
	if stats := e["turn"].(map[string]any)["stats"].(map[string]any); stats["git"] == nil {
		t.Errorf("end --json: no git stats: %v", stats)
	}
	m.jsonOut(t, "turnctl-begin", "begin", "--label", "rename")
	runIn(t, proj, `mv d e && rm link`)
	m.jsonOut(t, "turnctl-end", "end")
	m.jsonOut(t, "turnctl-run", "run", "--label", "touch", "--", "touch", "e/new")

	// all runs the read-only commands; first is the oldest turn kept.
	all := func(first string) {
		lg := m.jsonOut(t, "turnctl-log", "log")
		if n := len(lg["turns"].([]any)); n < 4 {
			t.Errorf("log --json: %d turns", n)
		}
		m.jsonOut(t, "turnctl-log", "log", "-n", "2", "--", "e")
		m.jsonOut(t, "turnctl-show", "show", "1", "--patch")
		m.jsonOut(t, "turnctl-show", "show", "ref:r1", "--", "a.txt")
		m.jsonOut(t, "turnctl-show", "show", first)
		m.jsonOut(t, "turnctl-diff", "diff", first, "3")
		m.jsonOut(t, "turnctl-diff", "diff", "1")
		m.jsonOut(t, "turnctl-rewind", "rewind", "--dry-run", first)
		m.jsonOut(t, "turnctl-verify", "verify")
		m.jsonOut(t, "turnctl-policy", "policy")
		m.jsonOut(t, "turnctl-du", "du")
		m.jsonOut(t, "turnctl-gc", "gc", "--dry-run")
	}
	all("0")
	rw := m.jsonOut(t, "turnctl-rewind", "rewind", "1")
	if rw["turn"] == nil || rw["undone"] != nil {
		t.Errorf("rewind --json: %v", rw)
	}
	if u := m.jsonOut(t, "turnctl-rewind", "undo"); u["undone"] == nil {
		t.Errorf("undo --json: %v", u)
	}
	m.jsonOut(t, "turnctl-rewind", "restore", "1", "--", "b.txt")
	if f := m.jsonOut(t, "turnctl-forget", "forget", "--dry-run", "2"); f["start"] != nil {
		t.Errorf("forget --json of a turn in the middle: start %v, want null (history still starts at 0)", f["start"])
	}
	m.jsonOut(t, "turnctl-pin", "pin", "2", "--note", "keep")
	m.jsonOut(t, "turnctl-policy", "policy", "--keep-turns", "50")
	m.jsonOut(t, "turnctl-forget", "forget", "--before", "1")
	m.jsonOut(t, "turnctl-unpin", "unpin", "2")
	m.jsonOut(t, "turnctl-gc", "gc")
	m.jsonOut(t, "turnctl-log", "log")

	m.Unmount(t)
	st = m.jsonOut(t, "ckptfs-status", "ckptfs", "status", proj)
	if st["mounted"] != false || st["open_turn"] != nil || st["latest_turn"] != nil {
		t.Errorf("ckptfs status --json, unmounted: %v", st)
	}
	// Offline, the store opened directly (ckptfs turnctl-offline).
	all("1")
	m.jsonOut(t, "turnctl-rewind", "rewind", "--dry-run", "2")
}
