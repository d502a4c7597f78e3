package agenthooks

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fixture reads testdata/name with its placeholders filled in.
func fixture(t *testing.T, name, project string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	td, _ := filepath.Abs("testdata")
	data = bytes.ReplaceAll(data, []byte("TESTDATA"), []byte(td))
	return bytes.ReplaceAll(data, []byte("PROJECT"), []byte(project))
}

func agent(t *testing.T, name string) *Agent {
	t.Helper()
	a, err := Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestParseFixtures(t *testing.T) {
	claudeRef := "9f1c6a52-3d4e-4b8a-9a0f-2c7d1e5b6a11:"
	cases := []struct {
		agent, file string
		args        []string
		action      Action
		prompt, ref string // ref ending in ":" is a prefix
	}{
		{"claude-code", "claude-code/user-prompt-submit.json", nil, Begin, "Fix the failing test in parser.go\n\nIt panics on empty input; add a regression test.", claudeRef},
		{"claude-code", "claude-code/user-prompt-submit-2.json", nil, Begin, "  \n  Also update the README", claudeRef},
		{"claude-code", "claude-code/stop.json", nil, End, "", "a2b7c4e0-0000-4000-8000-cccccccccccc"},
		{"claude-code", "claude-code/pre-tool-use.json", nil, Ignore, "", ""},
		{"codex", "codex/user-prompt-submit.json", nil, Begin, "add a --dry-run flag to the deploy script", "019d036d-c7fa-72d2-b6fd-78878bfe34e4"},
		{"codex", "codex/stop.json", nil, End, "", "019d036d-c7fa-72d2-b6fd-78878bfe34e4"},
		{"codex", "", []string{"codex/notify.json"}, End, "", "019d036e-3164-72c3-a170-98925564c4fc"},
		{"gemini", "gemini/before-agent.json", nil, Begin, "Write unit tests for utils.ts", "3c2b1a09-8f7e-4d6c-b5a4-392817161514:"},
		{"gemini", "gemini/after-agent.json", nil, End, "", ""},
		{"aider", "", nil, End, "", ""},
	}
	for _, c := range cases {
		var input []byte
		if c.file != "" {
			input = fixture(t, c.file, "/p")
		}
		var args []string
		for _, a := range c.args {
			args = append(args, string(fixture(t, a, "/p")))
		}
		ev, err := Parse(agent(t, c.agent), input, args)
		if err != nil {
			t.Errorf("%s %s: %v", c.agent, c.file, err)
			continue
		}
		refOK := ev.Ref == c.ref || strings.HasSuffix(c.ref, ":") && strings.HasPrefix(ev.Ref, c.ref) && len(ev.Ref) == len(c.ref)+8
		if ev.Action != c.action || ev.Prompt != c.prompt || !refOK {
			t.Errorf("%s %s%v: got %v %q ref %q; want %v %q ref %q", c.agent, c.file, c.args, ev.Action, ev.Prompt, ev.Ref, c.action, c.prompt, c.ref)
		}
		if c.agent != "aider" && ev.Cwd != "/p" {
			t.Errorf("%s %s: cwd %q", c.agent, c.file, ev.Cwd)
		}
	}
	// The same prompt gives the same ref (a repeated event is recognised);
	// another prompt another.
	a := agent(t, "claude-code")
	e1, _ := Parse(a, fixture(t, "claude-code/user-prompt-submit.json", "/p"), nil)
	e2, _ := Parse(a, fixture(t, "claude-code/user-prompt-submit.json", "/p"), nil)
	e3, _ := Parse(a, fixture(t, "claude-code/user-prompt-submit-2.json", "/p"), nil)
	if e1.Ref != e2.Ref || e1.Ref == e3.Ref {
		t.Errorf("prompt refs: %q %q %q", e1.Ref, e2.Ref, e3.Ref)
	}
	for _, bad := range []string{"", "   ", "not json", `{"hook_event_name": 3}`} {
		if _, err := Parse(a, []byte(bad), nil); err == nil {
			t.Errorf("Parse(%q): no error", bad)
		}
	}
}

func TestLastAssistantID(t *testing.T) {
	id, err := LastAssistantID("testdata/claude-code/transcript.jsonl")
	if err != nil || id != "a2b7c4e0-0000-4000-8000-cccccccccccc" {
		t.Errorf("fixture: %q %v", id, err)
	}
	// A long session: only the tail is read; an assistant entry followed
	// by a tool result larger than the first tail, and a half-written
	// last line.
	dir := t.TempDir()
	p := filepath.Join(dir, "t.jsonl")
	var b bytes.Buffer
	for i := range 2000 {
		b.WriteString(`{"type":"assistant","uuid":"old-` + string(rune('a'+i%26)) + `","message":{}}` + "\n")
	}
	b.WriteString(`{"type":"assistant","uuid":"the-last","message":{"content":[{"type":"text","text":"done"}]}}` + "\n")
	b.WriteString(`{"type":"user","uuid":"u","message":{"content":"` + strings.Repeat("x", 200<<10) + `"}}` + "\n")
	b.WriteString(`{"type":"assistant","uuid":"partial`)
	if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if id, err := LastAssistantID(p); err != nil || id != "the-last" {
		t.Errorf("long transcript: %q %v", id, err)
	}
	os.WriteFile(p, []byte(`{"type":"user","uuid":"u"}`+"\n"), 0o644)
	if _, err := LastAssistantID(p); err == nil {
		t.Error("no assistant entry: no error")
	}
	if _, err := LastAssistantID(filepath.Join(dir, "missing")); err == nil {
		t.Error("missing transcript: no error")
	}
	// A FIFO is refused at once: its open would wait for a writer.
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := LastAssistantID(fifo); done <- err }()
	select {
	case err := <-done:
		if err == nil {
			t.Error("a FIFO for a transcript: no error")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("LastAssistantID waits on a FIFO")
	}
}

// topLevel decodes a settings file (comments stripped by the editor's own
// parser: re-encode what it sees) into its members.
func topLevel(t *testing.T, doc []byte) map[string]string {
	t.Helper()
	root, err := parseDoc(doc)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, mem := range root.members {
		m[mem.key] = string(doc[mem.val.start:mem.val.end])
	}
	return m
}

func TestInstallUninstall(t *testing.T) {
	cases := []struct{ agent, file string }{
		{"claude-code", "claude-settings.json"},
		{"codex", "codex-hooks.json"},
		{"gemini", "gemini-settings.json"},
		{"claude-code", "oneline.json"},
		{"gemini", "claude-settings.json"},
	}
	for _, c := range cases {
		t.Run(c.agent+"/"+c.file, func(t *testing.T) {
			a := agent(t, c.agent)
			orig, err := os.ReadFile(filepath.Join("testdata/settings", c.file))
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), "settings.json")
			os.WriteFile(path, orig, 0o600)
			res, err := a.Install(path, "turnctl", false)
			if err != nil || !res.Changed || res.Created {
				t.Fatalf("install: %+v %v", res, err)
			}
			got, _ := os.ReadFile(path)
			if bak, _ := os.ReadFile(res.Backup); !bytes.Equal(bak, orig) {
				t.Errorf("backup %s differs from the original:\n%s", res.Backup, bak)
			}
			checkBackupPlace(t, path, res.Backup)
			if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
				t.Errorf("mode %v, want 0600", fi.Mode())
			}
			// Every other top-level setting keeps its bytes; the user's
			// hooks are all still there.
			before, after := topLevel(t, orig), topLevel(t, got)
			for k, v := range before {
				if k != "hooks" && after[k] != v {
					t.Errorf("%s changed: %s -> %s", k, v, after[k])
				}
			}
			for _, h := range []string{"prettier", "notify-send", "session_start.py", "scan_secrets.py", "block-secrets.sh"} {
				if bytes.Contains(orig, []byte(h)) && !bytes.Contains(got, []byte(h)) {
					t.Errorf("hook %s lost", h)
				}
			}
			if !bytes.Contains(orig, []byte("//")) && !json.Valid(got) {
				t.Errorf("not JSON after install:\n%s", got)
			}
			var cfg struct {
				Hooks map[string][]struct {
					Hooks []struct{ Type, Command string }
				}
			}
			if !bytes.Contains(orig, []byte("//")) {
				json.Unmarshal(got, &cfg)
				for _, ev := range []string{a.BeginEvent, a.EndEvent} {
					g := cfg.Hooks[ev]
					if len(g) == 0 || g[len(g)-1].Hooks[0].Command != "turnctl hook-event "+a.Name {
						t.Errorf("%s: %+v", ev, g)
					}
				}
			}
			if ok, _ := a.Installed(path); !ok {
				t.Error("Installed: false after install")
			}
			// A second install changes nothing.
			if res, err := a.Install(path, "turnctl", false); err != nil || res.Changed {
				t.Errorf("second install: %+v %v", res, err)
			}
			res, err = a.Uninstall(path)
			if err != nil || !res.Changed || res.Removed {
				t.Fatalf("uninstall: %+v %v", res, err)
			}
			if back, _ := os.ReadFile(path); !bytes.Equal(back, orig) {
				t.Errorf("uninstall did not give the original back:\n%s\n---- want\n%s", back, orig)
			}
			if res, err := a.Uninstall(path); err != nil || res.Changed {
				t.Errorf("second uninstall: %+v %v", res, err)
			}
		})
	}
}

func TestInstallNewFileAndUserEdits(t *testing.T) {
	a := agent(t, "claude-code")
	path := filepath.Join(t.TempDir(), ".claude", "settings.json")
	res, err := a.Install(path, "/opt/bin/turnctl", false)
	if err != nil || !res.Created || res.Backup != "" {
		t.Fatalf("install into a new file: %+v %v", res, err)
	}
	snip, _ := a.Snippet("/opt/bin/turnctl")
	if got, _ := os.ReadFile(path); string(got) != snip || !json.Valid(got) {
		t.Errorf("new file:\n%s\nsnippet:\n%s", got, snip)
	}
	// The user adds a hook of their own next to ours: uninstall keeps it.
	got, _ := os.ReadFile(path)
	edited := bytes.Replace(got, []byte(`"Stop": [`), []byte(`"Stop": [{"hooks": [{"type": "command", "command": "say done"}]},`), 1)
	os.WriteFile(path, edited, 0o644)
	if res, err := a.Uninstall(path); err != nil || res.Removed {
		t.Fatalf("uninstall: %+v %v", res, err)
	}
	left, _ := os.ReadFile(path)
	var cfg map[string]map[string][]any
	if err := json.Unmarshal(left, &cfg); err != nil || len(cfg["hooks"]) != 1 || len(cfg["hooks"]["Stop"]) != 1 || bytes.Contains(left, []byte("hook-event")) {
		t.Errorf("after uninstall:\n%s", left)
	}
	// Without the user's hook, the file goes away entirely.
	os.Remove(path)
	a.Install(path, "turnctl", false)
	if res, err := a.Uninstall(path); err != nil || !res.Removed {
		t.Errorf("uninstall of a file install created: %+v %v", res, err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("file still there: %v", err)
	}
}

func TestInstallRefusesOddFiles(t *testing.T) {
	a := agent(t, "claude-code")
	for _, doc := range []string{`[1]`, `{"hooks": []}`, `{"hooks": {"Stop": {}}}`, `{"a": }`, `{"a": 1} x`, `{"a": "b` + "\n" + `"}`, `/* open`} {
		path := filepath.Join(t.TempDir(), "s.json")
		os.WriteFile(path, []byte(doc), 0o644)
		if _, err := a.Install(path, "turnctl", false); err == nil {
			t.Errorf("install into %q: no error", doc)
		}
		if got, _ := os.ReadFile(path); string(got) != doc {
			t.Errorf("%q changed to %q", doc, got)
		}
		if bak, _ := filepath.Glob(filepath.Join(os.Getenv("XDG_STATE_HOME"), "ckptfs", "backups", "*%s.json.*")); len(bak) > 0 {
			t.Errorf("%q: backup written though nothing changed: %q", doc, bak)
		}
	}
}

func TestAiderBlock(t *testing.T) {
	orig, _ := os.ReadFile("testdata/settings/aider.conf.yml")
	path := filepath.Join(t.TempDir(), ".aider.conf.yml")
	os.WriteFile(path, orig, 0o644)
	res, err := InstallAider(path, "turnctl", false)
	if err != nil || !res.Changed {
		t.Fatal(res, err)
	}
	got, _ := os.ReadFile(path)
	if !bytes.HasPrefix(got, orig) || !bytes.Contains(got, []byte("notifications-command: 'turnctl hook-event aider'\n")) {
		t.Errorf("after install:\n%s", got)
	}
	if bak, _ := os.ReadFile(res.Backup); !bytes.Equal(bak, orig) {
		t.Error("no backup")
	}
	checkBackupPlace(t, path, res.Backup)
	if res, _ := InstallAider(path, "turnctl", false); res.Changed {
		t.Error("second install changed the file")
	}
	if _, err := UninstallAider(path); err != nil {
		t.Fatal(err)
	}
	if back, _ := os.ReadFile(path); !bytes.Equal(back, orig) {
		t.Errorf("after uninstall:\n%s", back)
	}
	os.WriteFile(path, []byte("notifications-command: say hi\n"), 0o644)
	if _, err := InstallAider(path, "turnctl", false); err == nil {
		t.Error("install over the user's own notifications-command: no error")
	}
	os.Remove(path)
	InstallAider(path, "turnctl", false)
	if res, _ := UninstallAider(path); !res.Removed {
		t.Error("a file install created is not removed")
	}
}

// checkBackupPlace: the backup is in the user's state directory, and
// nothing but the settings file is left beside it for git to pick up.
func checkBackupPlace(t *testing.T, path, bak string) {
	t.Helper()
	if want := filepath.Join(os.Getenv("XDG_STATE_HOME"), "ckptfs", "backups") + "/"; !strings.HasPrefix(bak, want) {
		t.Errorf("backup at %s, want it under %s", bak, want)
	}
	if names, _ := os.ReadDir(filepath.Dir(path)); len(names) != 1 {
		t.Errorf("left beside %s: %v", path, names)
	}
}

func TestMain(m *testing.M) {
	// Backups go to the user's state directory: the tests' own.
	d, err := os.MkdirTemp("", "agenthooks-state-")
	if err != nil {
		panic(err)
	}
	os.Setenv("XDG_STATE_HOME", d)
	code := m.Run()
	os.RemoveAll(d)
	os.Exit(code)
}

func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{
		"turnctl":                  "turnctl",
		"/usr/local/bin/turnctl":   "/usr/local/bin/turnctl",
		"/opt/v1.2_x-y+z/turnctl":  "/opt/v1.2_x-y+z/turnctl",
		"/tmp/ag/my tools/turnctl": "'/tmp/ag/my tools/turnctl'",
		"/opt/it's/turnctl":        `'/opt/it'\''s/turnctl'`,
		`/a"b$c` + "`d\\e;f&g|h*i?j[k]~l(m)n{o}p<q>r#s!t\nu": `'/a"b$c` + "`d\\e;f&g|h*i?j[k]~l(m)n{o}p<q>r#s!t\nu'",
		"PATH=/x/turnctl": "'PATH=/x/turnctl'",
		"":                "''",
	} {
		got := ShellQuote(in)
		if got != want {
			t.Errorf("ShellQuote(%q) = %q, want %q", in, got, want)
			continue
		}
		// The shell reads it back as the one word it was.
		out, err := exec.Command("sh", "-c", "printf %s "+got).Output()
		if err != nil || string(out) != in {
			t.Errorf("sh reads %s as %q (%v), want %q", got, out, err, in)
		}
	}
}

// installUninstall installs a's hooks into a file holding orig, checks
// the installed file with check, uninstalls, and wants orig back.
func installUninstall(t *testing.T, a *Agent, orig string, check func(got string)) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "settings.json")
	os.WriteFile(path, []byte(orig), 0o640)
	if res, err := a.Install(path, "turnctl", false); err != nil || !res.Changed || res.Created {
		t.Fatalf("install into %q: %+v %v", orig, res, err)
	}
	got, _ := os.ReadFile(path)
	if check != nil {
		check(string(got))
	}
	if res, err := a.Uninstall(path); err != nil || !res.Changed || res.Removed {
		t.Fatalf("uninstall from %q: %+v %v", got, res, err)
	}
	if back, err := os.ReadFile(path); err != nil || string(back) != orig {
		t.Errorf("uninstall gave %q (%v), want the original %q back", back, err, orig)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o640 {
		t.Errorf("mode %v, want 0640", fi.Mode().Perm())
	}
}

// Uninstall takes away the "hooks" object and event lists install added,
// but not empty ones the user had before.
func TestUninstallKeepsUsersEmptyHooks(t *testing.T) {
	a := agent(t, "claude-code")
	for _, orig := range []string{
		"{\"hooks\": {}}\n",
		"{\n  \"model\": \"sonnet\",\n  \"hooks\": {}\n}\n",
		"{\n  \"hooks\": {\n    \"Stop\": []\n  }\n}\n",
		"{\n  \"hooks\": {\n    \"Stop\": [],\n    \"PostToolUse\": []\n  },\n  \"model\": \"sonnet\"\n}\n",
		"{}\n",
		"{\"model\": \"sonnet\"}",
	} {
		installUninstall(t, a, orig, nil)
	}

	// Without the record of what install added (a settings file from
	// elsewhere), uninstall cannot tell: it keeps "hooks", and the file.
	for orig, want := range map[string]string{
		"{\"model\": \"sonnet\"}\n": "{\"model\": \"sonnet\", \"hooks\": {}}\n",
		"{}\n":                      "{\n  \"hooks\": {}\n}\n",
	} {
		path := filepath.Join(t.TempDir(), "settings.json")
		os.WriteFile(path, []byte(orig), 0o644)
		a.Install(path, "turnctl", false)
		recs, _ := filepath.Glob(filepath.Join(os.Getenv("XDG_STATE_HOME"), "ckptfs", "hooks", "*%settings.json.claude-code.json"))
		if len(recs) != 1 {
			t.Fatalf("records: %q", recs)
		}
		os.Remove(recs[0])
		if res, err := a.Uninstall(path); err != nil || !res.Changed || res.Removed {
			t.Fatalf("uninstall: %+v %v", res, err)
		}
		if got, _ := os.ReadFile(path); string(got) != want {
			t.Errorf("uninstall without a record from %q: %q, want %q", orig, got, want)
		}
	}
}

// Lines install adds end as the file's lines do.
func TestInstallCRLF(t *testing.T) {
	for _, orig := range []string{
		"{\r\n  \"model\": \"sonnet\"\r\n}\r\n",
		"{\r\n  \"hooks\": {}\r\n}\r\n",
		"{\r\n  \"hooks\": {\r\n    \"Stop\": [\r\n      {\"hooks\": [{\"type\": \"command\", \"command\": \"say hi\"}]}\r\n    ]\r\n  }\r\n}\r\n",
	} {
		for _, name := range []string{"claude-code", "gemini"} {
			installUninstall(t, agent(t, name), orig, func(got string) {
				if strings.Count(got, "\n") != strings.Count(got, "\r\n") || !strings.Contains(got, "hook-event") || !json.Valid([]byte(got)) {
					t.Errorf("install into %q: a line ends in a bare LF:\n%q", orig, got)
				}
			})
		}
	}
	block := strings.ReplaceAll(AiderBlock("turnctl"), "\n", "\r\n")
	for orig, want := range map[string]string{
		"model: sonnet\r\n":                 "model: sonnet\r\n" + block,
		"model: sonnet\r\nmap-tokens: 1024": "model: sonnet\r\nmap-tokens: 1024\r\n" + block,
	} {
		path := filepath.Join(t.TempDir(), ".aider.conf.yml")
		os.WriteFile(path, []byte(orig), 0o644)
		InstallAider(path, "turnctl", false)
		if got, _ := os.ReadFile(path); string(got) != want {
			t.Errorf("aider install into %q: %q, want %q", orig, got, want)
		}
		UninstallAider(path)
		if back, _ := os.ReadFile(path); string(back) != orig {
			t.Errorf("aider uninstall: %q, want %q", back, orig)
		}
	}
}

// An empty (or white-space-only) file is an empty object, and stays what
// it was after uninstall; a UTF-8 byte order mark is kept.
func TestInstallBlankAndBOM(t *testing.T) {
	a := agent(t, "claude-code")
	snip, _ := a.Snippet("turnctl")
	for _, orig := range []string{"", " \n\t\n", "\n"} {
		installUninstall(t, a, orig, func(got string) {
			if got != snip {
				t.Errorf("install into %q:\n%s\nwant:\n%s", orig, got, snip)
			}
		})
	}
	const bom = "\uFEFF"
	for _, orig := range []string{bom + "{\n  \"model\": \"sonnet\"\n}\n", bom, bom + "{}"} {
		installUninstall(t, a, orig, func(got string) {
			if !strings.HasPrefix(got, bom) || !json.Valid([]byte(got[len(bom):])) || !strings.Contains(got, "hook-event") {
				t.Errorf("install into %q: %q", orig, got)
			}
		})
	}
	// Installed reads them too.
	path := filepath.Join(t.TempDir(), "settings.json")
	for _, doc := range []string{"", bom + snip} {
		os.WriteFile(path, []byte(doc), 0o644)
		if ok, err := a.Installed(path); err != nil || ok != (doc != "") {
			t.Errorf("Installed(%q) = %v, %v", doc, ok, err)
		}
	}
}

// Uninstall removes the file and the directory install created, and
// leaves the directory once it holds something else.
func TestUninstallRemovesCreatedDir(t *testing.T) {
	for _, name := range []string{"claude-code", "aider"} {
		a := agent(t, name)
		install, uninstall := func(p string) { a.Install(p, "turnctl", false) }, func(p string) (Result, error) { return a.Uninstall(p) }
		if name == "aider" {
			install = func(p string) { InstallAider(p, "turnctl", false) }
			uninstall = UninstallAider
		}
		root := t.TempDir()
		path := filepath.Join(root, "a", "b", "settings")
		install(path)
		if res, err := uninstall(path); err != nil || !res.Removed {
			t.Fatalf("%s: uninstall: %+v %v", name, res, err)
		}
		if names, _ := os.ReadDir(root); len(names) != 0 {
			t.Errorf("%s: left in %s: %v", name, root, names)
		}
		install(path)
		os.WriteFile(filepath.Join(root, "a", "mine"), nil, 0o644)
		uninstall(path)
		if names, _ := os.ReadDir(filepath.Join(root, "a")); len(names) != 1 || names[0].Name() != "mine" {
			t.Errorf("%s: left in a/: %v", name, names)
		}
	}
}

// A settings file that is a symbolic link is edited where the link leads;
// the link stays, and so does the mode of its target.
func TestInstallThroughSymlink(t *testing.T) {
	for _, name := range []string{"claude-code", "aider"} {
		a := agent(t, name)
		install, uninstall := func(p string) (Result, error) { return a.Install(p, "turnctl", false) }, func(p string) (Result, error) { return a.Uninstall(p) }
		if name == "aider" {
			install = func(p string) (Result, error) { return InstallAider(p, "turnctl", false) }
			uninstall = UninstallAider
		}
		home := t.TempDir()
		os.MkdirAll(filepath.Join(home, "dotfiles"), 0o755)
		os.MkdirAll(filepath.Join(home, ".claude"), 0o755)
		target := filepath.Join(home, "dotfiles", "settings")
		orig := "{\"model\": \"sonnet\"}\n"
		os.WriteFile(target, []byte(orig), 0o640)
		link := filepath.Join(home, ".claude", "settings.json")
		os.Symlink("../dotfiles/settings", link)
		check := func(what string) {
			t.Helper()
			if l, err := os.Readlink(link); err != nil || l != "../dotfiles/settings" {
				t.Errorf("%s %s: link now %q %v", name, what, l, err)
			}
			if fi, err := os.Stat(target); err != nil || fi.Mode().Perm() != 0o640 {
				t.Errorf("%s %s: target %v %v", name, what, fi, err)
			}
		}
		if res, err := install(link); err != nil || !res.Changed || res.Created {
			t.Fatalf("%s install: %+v %v", name, res, err)
		}
		check("install")
		if got, _ := os.ReadFile(target); !strings.Contains(string(got), "hook-event") {
			t.Errorf("%s: target after install: %q", name, got)
		}
		if res, err := uninstall(link); err != nil || !res.Changed {
			t.Fatalf("%s uninstall: %+v %v", name, res, err)
		}
		check("uninstall")
		if got, _ := os.ReadFile(target); string(got) != orig {
			t.Errorf("%s: target after uninstall: %q, want %q", name, got, orig)
		}

		// A link to a file not there yet: install creates the file, and
		// uninstall removes it again; the link stays as it was.
		os.Remove(target)
		if res, err := install(link); err != nil || !res.Created {
			t.Fatalf("%s install through a dangling link: %+v %v", name, res, err)
		}
		if fi, err := os.Lstat(link); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			t.Errorf("%s: link replaced: %v %v", name, fi, err)
		}
		if res, err := uninstall(link); err != nil || !res.Removed {
			t.Fatalf("%s uninstall: %+v %v", name, res, err)
		}
		if _, err := os.Stat(target); !os.IsNotExist(err) {
			t.Errorf("%s: target still there: %v", name, err)
		}
		if l, err := os.Readlink(link); err != nil || l != "../dotfiles/settings" {
			t.Errorf("%s: link now %q %v", name, l, err)
		}
	}
}

// A JSONC settings file (Gemini CLI's) whose object, "hooks" or event list
// is empty but for comments (a template of settings commented out) keeps
// them: install puts its hooks after them, uninstall gives the file back.
func TestInstallKeepsCommentsOfAnEmptyObject(t *testing.T) {
	a := agent(t, "gemini")
	orig := "{\n  // \"theme\": \"Default\",\n  /* \"hooks\": {} */\n}\n"
	installUninstall(t, a, orig, func(got string) {
		want := "{\n  // \"theme\": \"Default\",\n  /* \"hooks\": {} */\n  \"hooks\": {\n    \"BeforeAgent\": ["
		if !strings.HasPrefix(got, want) {
			t.Errorf("install into %q gave\n%s\nwant it to start %q", orig, got, want)
		}
		if _, err := parseDoc([]byte(got)); err != nil {
			t.Errorf("installed file does not parse: %v\n%s", err, got)
		}
	})
	for _, orig := range []string{
		"{\n  \"hooks\": {\n    // none yet\n  }\n}\n",
		"{\"hooks\": {\"AfterTool\": [ /* later */ ]}}\n",
		"{\n  \"hooks\": {\n    \"AfterTool\": [\n      // { \"hooks\": [] }\n    ]\n  }\n}\n",
	} {
		installUninstall(t, a, orig, func(got string) {
			if c := orig[strings.Index(orig, "/"):strings.LastIndex(orig, "/")]; !strings.Contains(got, c) {
				t.Errorf("install into %q lost the comment %q:\n%s", orig, c, got)
			}
			if _, err := parseDoc([]byte(got)); err != nil {
				t.Errorf("installed file does not parse: %v\n%s", err, got)
			}
		})
	}
}

// Run as root (sudo turnctl hooks install --user, root wiring a user's
// project), install and uninstall leave a user's settings file the user's:
// its owner stays, and a file and directory install creates belong to
// the owner of the directory they are made in.
func TestInstallAsRootKeepsTheOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	const uid, gid = 65534, 65533
	owner := func(p string) [2]uint32 {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		return [2]uint32{st.Uid, st.Gid}
	}
	want := [2]uint32{uid, gid}
	a := agent(t, "claude-code")
	proj := t.TempDir()
	os.Chown(proj, uid, gid)
	path := filepath.Join(proj, ".claude", "settings.json")
	if _, err := a.Install(path, "turnctl", false); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Dir(path), path} {
		if got := owner(p); got != want {
			t.Errorf("new %s: owner %v, want %v", p, got, want)
		}
	}
	a.Uninstall(path)

	os.Mkdir(filepath.Dir(path), 0o700)
	os.WriteFile(path, []byte("{\"model\": \"opus\"}\n"), 0o600)
	os.Chown(filepath.Dir(path), uid, gid)
	os.Chown(path, uid, gid)
	if _, err := a.Install(path, "turnctl", false); err != nil {
		t.Fatal(err)
	}
	if got := owner(path); got != want {
		t.Errorf("after install: owner %v, want %v", got, want)
	}
	if _, err := a.Uninstall(path); err != nil {
		t.Fatal(err)
	}
	if got := owner(path); got != want {
		t.Errorf("after uninstall: owner %v, want %v", got, want)
	}
	conf := filepath.Join(proj, ".aider.conf.yml")
	os.WriteFile(conf, []byte("model: x\n"), 0o600)
	os.Chown(conf, uid, gid)
	if _, err := InstallAider(conf, "turnctl", false); err != nil {
		t.Fatal(err)
	}
	if got := owner(conf); got != want {
		t.Errorf("aider after install: owner %v, want %v", got, want)
	}
}
