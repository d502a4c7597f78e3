package turnctlcli

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"ckptfs/internal/schematest"
)

// jsonSchemaOf names, for every command, the schema of what it prints with
// --json (doc/schema/NAME.json), or "" for a command that prints no JSON
// (--json has no effect on it). A command added without an entry here
// fails TestJSONSchemasCoverEveryCommand.
var jsonSchemaOf = map[string]string{
	"begin": "turnctl-begin", "end": "turnctl-end", "status": "turnctl-status",
	"log": "turnctl-log", "show": "turnctl-show", "diff": "turnctl-diff", "step": "turnctl-step",
	"rewind": "turnctl-rewind", "undo": "turnctl-rewind", "restore": "turnctl-rewind",
	"revert": "turnctl-rewind",
	"run":    "turnctl-run", "verify": "turnctl-verify", "forget": "turnctl-forget",
	"pin": "turnctl-pin", "unpin": "turnctl-unpin", "gc": "turnctl-gc",
	"policy": "turnctl-policy", "du": "turnctl-du",
	"cat": "", "hooks": "", "hook-event": "", "checkout": "", "export": "", "ui": "",
}

// checked records which commands' outputs the tests validated.
var checked = map[string]bool{}

// checkJSON validates the output of `turnctl --json NAME ...` against the
// command's schema, and decodes it into v (if not nil).
func checkJSON(t *testing.T, name, out string, v any) {
	t.Helper()
	schema := jsonSchemaOf[name]
	if schema == "" {
		t.Fatalf("%s has no JSON schema", name)
	}
	checked[name] = true
	schematest.Check(t, schema, "turnctl --json "+name, []byte(out))
	if v != nil {
		if err := json.Unmarshal([]byte(out), v); err != nil {
			t.Fatalf("%s --json: %v\n%s", name, err, out)
		}
	}
}

// tcJSON runs `turnctl -C dir --json args...` offline and validates what
// it prints.
func tcJSON(t *testing.T, dir string, v any, args ...string) string {
	t.Helper()
	out, errs, code := tc(t, append([]string{"-C", dir, "--json"}, args...)...)
	if code != 0 {
		t.Fatalf("turnctl --json %s: exit %d: %s", strings.Join(args, " "), code, errs)
	}
	checkJSON(t, args[0], out, v)
	return out
}

// TestJSONOffline runs every offline command with --json on a test history
// and validates each output against its schema.
func TestJSONOffline(t *testing.T) {
	dir := testProject(t)
	var lg struct {
		Turns []map[string]any
		Start any
		Pins  []any
	}
	tcJSON(t, dir, &lg, "log")
	if len(lg.Turns) != 4 || lg.Start != nil || lg.Pins == nil {
		t.Fatalf("log --json: %+v", lg)
	}
	for _, tr := range lg.Turns {
		// Turn 3 has no refs, no programs of note: the keys are there all
		// the same; a log reads no prompts.
		if tr["refs"] == nil || tr["programs"] == nil || tr["end"] == nil || tr["prompt"] != nil {
			t.Errorf("log --json turn: %v", tr)
		}
	}
	tcJSON(t, dir, nil, "log", "-n", "1", "--", "a.txt")
	var sh struct{ Turn map[string]any }
	tcJSON(t, dir, &sh, "show", "ref:m2", "--patch")
	if sh.Turn["prompt"] != "second" || sh.Turn["label"] != "second" {
		t.Errorf("show --json: prompt %v, label %v", sh.Turn["prompt"], sh.Turn["label"])
	}
	tcJSON(t, dir, nil, "show", "0")
	tcJSON(t, dir, nil, "show", "3", "--", "sub")
	tcJSON(t, dir, nil, "diff", "1", "2")
	tcJSON(t, dir, nil, "diff", "0")
	tcJSON(t, dir, nil, "rewind", "--dry-run", "1")
	var rw struct{ Turn map[string]any }
	tcJSON(t, dir, &rw, "rewind", "1")
	if rw.Turn == nil || rw.Turn["target"] != 1.0 || rw.Turn["kind"] != "rewind" {
		t.Errorf("rewind --json: turn %v", rw.Turn)
	}
	tcJSON(t, dir, nil, "undo")
	var rv struct {
		Reverted *float64
		Changes  []any
	}
	tcJSON(t, dir, &rv, "revert", "--dry-run", "5") // the undo's turn
	if rv.Reverted == nil || *rv.Reverted != 5 || len(rv.Changes) == 0 {
		t.Errorf("revert --json: %+v", rv)
	}
	tcJSON(t, dir, nil, "restore", "2", "--", "a.txt")
	tcJSON(t, dir, nil, "restore", "--dry-run", "1", "--", "sub")
	tcJSON(t, dir, nil, "verify")
	tcJSON(t, dir, nil, "pin", "2", "--note", "keep")
	tcJSON(t, dir, nil, "policy")
	tcJSON(t, dir, nil, "policy", "--keep-age", "2d", "--keep-size", "1GiB")
	tcJSON(t, dir, nil, "du")
	tcJSON(t, dir, nil, "gc", "--dry-run")
	tcJSON(t, dir, nil, "forget", "--dry-run", "--before", "2")
	tcJSON(t, dir, nil, "forget", "--before", "2")
	tcJSON(t, dir, &lg, "log")
	if lg.Start == nil || len(lg.Pins) != 1 {
		t.Errorf("log --json after forget and pin: start %v, pins %v", lg.Start, lg.Pins)
	}
	tcJSON(t, dir, nil, "du")
	tcJSON(t, dir, nil, "unpin", "2")
	tcJSON(t, dir, nil, "gc")
}

// TestJSONOnline validates the outputs of the commands that need the
// daemon (begin, end, status, run), through the protocol as when mounted.
func TestJSONOnline(t *testing.T) {
	e, out, _, ov := onlineEnv(t)
	e.json = true
	run := func(name string, o options, args ...string) map[string]any {
		t.Helper()
		out.Reset()
		if err := o.run(e, args); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var v map[string]any
		checkJSON(t, name, out.String(), &v)
		return v
	}
	st := run("status", &statusOptions{})
	if st["turn"] != nil || st["open"] != false {
		t.Errorf("status --json with no open turn: %v", st)
	}
	ov.Write("manual.txt", "m\n") // an automatic manual turn, closed by begin
	b := run("begin", &beginOptions{label: "fix it\n\nall of it", ref: "m1"})
	turn := b["turn"].(map[string]any)
	if turn["end"] != nil || turn["open"] != true || turn["prompt"] != "fix it\n\nall of it" || turn["label"] != "fix it" || b["closed"] == nil {
		t.Errorf("begin --json: %v", b)
	}
	ov.Write("a.go", "package a\n")
	sp := run("step", &stepOptions{tool: "Write", label: "a.go"})
	if s, _ := sp["step"].(map[string]any); s == nil || s["num"] != 1.0 || s["tool"] != "Write" || s["name"] != fmt.Sprintf("%v.1", turn["num"]) {
		t.Errorf("step --json: %v", sp)
	}
	if sp := run("step", &stepOptions{tool: "Read"}); sp["step"] != nil {
		t.Errorf("step --json after a step that changed nothing: %v", sp)
	}
	ov.Write("b.go", "package a\n")
	st = run("status", &statusOptions{})
	if tr, _ := st["turn"].(map[string]any); tr == nil || tr["end"] != nil || len(st["changes"].([]any)) != 2 {
		t.Errorf("status --json with an open turn: %v", st)
	}
	// run inside the open turn: in_turn, no step (true changes nothing).
	if ri := run("run", &runOptions{label: "inner"}, "true"); ri["in_turn"] != b["turn"].(map[string]any)["num"] || ri["begin"] != nil || ri["step"] != nil || ri["exit_code"] != 0.0 {
		t.Errorf("run --json inside a turn: %v", ri)
	}
	en := run("end", &endOptions{ref: "m1-end"})
	if tr := en["turn"].(map[string]any); tr["end"] == nil || tr["stats"] == nil {
		t.Errorf("end --json: %v", en)
	}
	r := run("run", &runOptions{label: "touch"}, "sh", "-c", "echo x > run.txt")
	if r["exit_code"] != 0.0 || r["begin"] == nil || r["in_turn"] != nil {
		t.Errorf("run --json: %v", r)
	}
	run("status", &statusOptions{})
}

// TestJSONSchemasCoverEveryCommand: every command has an entry in
// jsonSchemaOf, every schema belongs to a command, and the tests above
// validated an output of each command that prints JSON.
func TestJSONSchemasCoverEveryCommand(t *testing.T) {
	t.Run("offline", TestJSONOffline)
	t.Run("online", TestJSONOnline)
	used := map[string]bool{}
	for _, c := range commands {
		schema, ok := jsonSchemaOf[c.name]
		if !ok {
			t.Errorf("command %s: no entry in jsonSchemaOf (its --json output needs a schema in doc/schema)", c.name)
			continue
		}
		if schema == "" {
			continue
		}
		used[schema] = true
		if !checked[c.name] {
			t.Errorf("command %s: no test validates its --json output against %s.json", c.name, schema)
		}
	}
	for _, n := range schematest.Names(t) {
		if strings.HasPrefix(n, "turnctl-") && !used[n] {
			t.Errorf("doc/schema/%s.json belongs to no command", n)
		}
	}
	for name := range maps.Keys(jsonSchemaOf) {
		if lookup(name) == nil {
			t.Errorf("jsonSchemaOf names %s, which is no command", name)
		}
	}
}

// TestJSONSchemasStrict: in every schema, every object lists all its keys
// as required and allows no other, so that a key missing from an output,
// or one added to it without its schema, fails the tests above.
func TestJSONSchemasStrict(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(schematest.Dir(), "*.json"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var doc any
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if m, _ := doc.(map[string]any); m["$schema"] != "https://json-schema.org/draft/2020-12/schema" {
			t.Errorf("%s: $schema is not draft 2020-12", filepath.Base(f))
		}
		walkSchema(doc, filepath.Base(f), func(where string, o map[string]any) {
			props, ok := o["properties"].(map[string]any)
			if !ok {
				if o["type"] == "object" {
					t.Errorf("%s: an object without properties", where)
				}
				return
			}
			if o["additionalProperties"] != false {
				t.Errorf("%s: additionalProperties is not false", where)
			}
			var req []string
			for _, r := range o["required"].([]any) {
				req = append(req, r.(string))
			}
			slices.Sort(req)
			if keys := slices.Sorted(maps.Keys(props)); !slices.Equal(keys, req) {
				t.Errorf("%s: required %v, properties %v", where, req, keys)
			}
		})
		if strings.TrimSuffix(filepath.Base(f), ".json") == "common" {
			continue
		}
		if _, err := schematest.Schema(strings.TrimSuffix(filepath.Base(f), ".json")); err != nil {
			t.Errorf("%s does not compile: %v", filepath.Base(f), err)
		}
	}
	// And the validator does refuse a key too few or too many.
	good := `{"turn": 3}`
	if err := schematest.Validate("turnctl-unpin", []byte(good)); err != nil {
		t.Errorf("unpin %s: %v", good, err)
	}
	for _, bad := range []string{`{}`, `{"turn": 3, "extra": 1}`, `{"turn": -1}`} {
		if schematest.Validate("turnctl-unpin", []byte(bad)) == nil {
			t.Errorf("unpin %s: accepted", bad)
		}
	}
	pin := `{"pin": {"turn": 1, "note": "", "at": "%s"}}`
	for at, ok := range map[string]bool{"2026-11-26T11:06:42.5Z": true, "2026-11-26T11:06:42+01:00": false, "0001-01-01 00:00:00": false} {
		if err := schematest.Validate("turnctl-pin", []byte(strings.Replace(pin, "%s", at, 1))); (err == nil) != ok {
			t.Errorf("pin at %q: %v", at, err)
		}
	}
}

// walkSchema calls fn on every object schema in v.
func walkSchema(v any, where string, fn func(string, map[string]any)) {
	switch v := v.(type) {
	case map[string]any:
		if _, ok := v["properties"]; ok || v["type"] == "object" {
			fn(where, v)
		}
		for k, x := range v {
			walkSchema(x, where+"/"+k, fn)
		}
	case []any:
		for _, x := range v {
			walkSchema(x, where+"/[]", fn)
		}
	}
}
