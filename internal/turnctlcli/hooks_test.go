package turnctlcli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"ckptfs/internal/turnctlcli/agenthooks"
)

func TestHooksInstallUninstallCLI(t *testing.T) {
	dir := t.TempDir()
	orig, err := os.ReadFile("agenthooks/testdata/settings/claude-settings.json")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, ".claude", "settings.json")
	os.MkdirAll(filepath.Dir(path), 0o755)
	os.WriteFile(path, orig, 0o644)

	state := t.TempDir()
	t.Setenv("XDG_STATE_HOME", state)
	out, errs, code := tc(t, "-C", dir, "hooks", "install", "claude-code", "--turnctl", "turnctl")
	backups := filepath.Join(state, "ckptfs", "backups")
	if code != 0 || !strings.Contains(out, "added to "+path) || !strings.Contains(out, "(backup: "+backups+"/") {
		t.Fatalf("install: %d %q %q", code, out, errs)
	}
	// Nothing is left in the project for git to pick up.
	if names, _ := os.ReadDir(filepath.Dir(path)); len(names) != 1 {
		t.Errorf("beside the settings file: %v", names)
	}
	if bak, _ := filepath.Glob(filepath.Join(backups, "*%.claude%settings.json.*.bak")); len(bak) != 1 {
		t.Errorf("backups: %q", bak)
	} else if data, _ := os.ReadFile(bak[0]); string(data) != string(orig) {
		t.Errorf("the backup differs from the original:\n%s", data)
	}
	got, _ := os.ReadFile(path)
	if !strings.Contains(string(got), `"command": "turnctl hook-event claude-code"`) {
		t.Errorf("installed file:\n%s", got)
	}
	out, _, _ = tc(t, "-C", dir, "hooks", "install", "claude-code")
	if !strings.Contains(out, "already in") {
		t.Errorf("second install: %q", out)
	}
	out, errs, code = tc(t, "-C", dir, "hooks", "uninstall", "claude")
	if code != 0 || !strings.Contains(out, "removed from "+path) {
		t.Fatalf("uninstall: %d %q %q", code, out, errs)
	}
	if back, _ := os.ReadFile(path); string(back) != string(orig) {
		t.Errorf("uninstall did not restore the file:\n%s", back)
	}

	// --user: under $HOME; a new file, removed again by uninstall.
	home := t.TempDir()
	t.Setenv("HOME", home)
	out, _, code = tc(t, "hooks", "install", "gemini", "--user", "--turnctl", "turnctl")
	upath := filepath.Join(home, ".gemini", "settings.json")
	if code != 0 || !strings.Contains(out, upath+" (new file)") {
		t.Fatalf("install --user: %d %q", code, out)
	}
	out, _, _ = tc(t, "hooks", "uninstall", "gemini", "--user")
	if _, err := os.Stat(upath); !os.IsNotExist(err) || !strings.Contains(out, "is gone") {
		t.Errorf("uninstall --user: %q %v", out, err)
	}

	out, errs, code = tc(t, "-C", dir, "hooks", "show", "codex", "--turnctl", "turnctl")
	if code != 0 || !strings.Contains(out, `"UserPromptSubmit"`) || !strings.Contains(errs, filepath.Join(dir, ".codex", "hooks.json")) {
		t.Errorf("show codex: %d %q %q", code, out, errs)
	}
	out, _, code = tc(t, "-C", dir, "hooks", "show", "aider", "--turnctl", "turnctl")
	if code != 0 || !strings.Contains(out, "notifications-command: 'turnctl hook-event aider'") {
		t.Errorf("show aider: %d %q", code, out)
	}
	for _, args := range [][]string{
		{"hooks"}, {"hooks", "install"}, {"hooks", "frob", "claude-code"}, {"hooks", "install", "cursor"},
		{"hooks", "install", "claude-code", "--user", "--project"},
	} {
		if _, _, code := tc(t, args...); code != 2 {
			t.Errorf("%q: exit %d, want 2", args, code)
		}
	}
}

// An unknown subcommand is named as one, even without an AGENT after it.
func TestHooksUnknownSubcommand(t *testing.T) {
	for _, args := range [][]string{{"hooks", "list"}, {"hooks", "list", "claude-code"}} {
		out, errs, code := tc(t, args...)
		want := "turnctl hooks: unknown subcommand \"list\" (valid: install, uninstall, show) (see turnctl hooks --help)\n"
		if code != 2 || out != "" || errs != want {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit 2, stderr %q", args, code, out, errs, want)
		}
	}
}

// --user for aider edits ~/.aider.conf.yml, not $HOME itself.
func TestHooksAiderUser(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	state := t.TempDir()
	t.Setenv("XDG_STATE_HOME", state)
	conf := filepath.Join(home, ".aider.conf.yml")
	orig := "model: sonnet\n"
	os.WriteFile(conf, []byte(orig), 0o640)

	out, errs, code := tc(t, "hooks", "show", "aider", "--user", "--turnctl", "turnctl")
	if want := "# Aider: add to " + conf + " (or run: turnctl hooks install aider --user)\n"; code != 0 || !strings.HasPrefix(errs, want) {
		t.Errorf("show: %d %q, want stderr to start with %q", code, errs, want)
	}
	out, errs, code = tc(t, "hooks", "install", "aider", "--user", "--turnctl", "turnctl")
	bak, _ := filepath.Glob(filepath.Join(state, "ckptfs", "backups", "*%.aider.conf.yml.*.bak"))
	if code != 0 || len(bak) != 1 || out != "Aider notifications command added to "+conf+" (backup: "+bak[0]+")\n" {
		t.Fatalf("install: %d %q %q %q", code, out, errs, bak)
	}
	want := orig +
		"# >>> turnctl hooks (ckptfs): each aider answer ends a turn >>>\n" +
		"notifications: true\n" +
		"notifications-command: 'turnctl hook-event aider'\n" +
		"# <<< turnctl hooks (ckptfs) <<<\n"
	if got, _ := os.ReadFile(conf); string(got) != want {
		t.Errorf("%s after install:\n%s\nwant:\n%s", conf, got, want)
	}
	out, errs, code = tc(t, "hooks", "uninstall", "aider", "--user")
	if code != 0 || !strings.HasPrefix(out, "Aider notifications command removed from "+conf+" (backup: ") {
		t.Fatalf("uninstall: %d %q %q", code, out, errs)
	}
	if got, _ := os.ReadFile(conf); string(got) != orig {
		t.Errorf("%s after uninstall: %q, want %q", conf, got, orig)
	}
	if fi, _ := os.Stat(conf); fi.Mode().Perm() != 0o640 {
		t.Errorf("mode %v, want 0640", fi.Mode().Perm())
	}
}

// claudeFile is the settings file install writes for Claude Code when
// there was none, with hooks that run cmd (JSON-escaped already).
func claudeFile(cmd string) string {
	var b strings.Builder
	b.WriteString("{\n  \"hooks\": {\n")
	for i, ev := range []string{"UserPromptSubmit", "Stop", "PostToolUse"} {
		if i > 0 {
			b.WriteString(",\n")
		}
		b.WriteString(`    "` + ev + `": [
      {
        "hooks": [
          {
            "type": "command",
            "command": "` + cmd + `"
          }
        ]
      }
    ]`)
	}
	b.WriteString("\n  }\n}\n")
	return b.String()
}

// A --turnctl path with a space (or a quote) is quoted for the shell the
// agents run the hooks with; installing again with another --turnctl
// changes the command of turnctl's own hooks.
func TestHooksTurnctlPathQuoted(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	state := t.TempDir()
	t.Setenv("XDG_STATE_HOME", state)
	tools := filepath.Join(t.TempDir(), "my tools")
	os.MkdirAll(tools, 0o755)
	spaced := filepath.Join(tools, "turnctl")
	os.WriteFile(spaced, []byte("#!/bin/sh\necho \"ran $0 $*\"\n"), 0o755)
	path := filepath.Join(home, ".claude", "settings.json")

	out, errs, code := tc(t, "hooks", "install", "claude-code", "--user", "--turnctl", spaced)
	if want := "Claude Code hooks written to " + path + " (new file)\n"; code != 0 || out != want {
		t.Fatalf("install: %d %q %q, want %q", code, out, errs, want)
	}
	quoted := "'" + spaced + "' hook-event claude-code"
	if got, _ := os.ReadFile(path); string(got) != claudeFile(quoted) {
		t.Errorf("installed file:\n%s\nwant:\n%s", got, claudeFile(quoted))
	}
	// The shell runs that command as the script at the spaced path.
	if got, err := exec.Command("sh", "-c", quoted).Output(); err != nil || string(got) != "ran "+spaced+" hook-event claude-code\n" {
		t.Errorf("sh -c %q: %q %v", quoted, got, err)
	}

	// Installing again without --turnctl keeps the command.
	out, _, _ = tc(t, "hooks", "install", "claude-code", "--user")
	if want := "Claude Code hooks already in " + path + "\n"; out != want {
		t.Errorf("install again: %q, want %q", out, want)
	}
	// With another --turnctl it changes it, and says so.
	odd := "/opt/it's/turnctl"
	out, errs, code = tc(t, "hooks", "install", "claude-code", "--user", "--turnctl", odd)
	bak, _ := filepath.Glob(filepath.Join(state, "ckptfs", "backups", "*%.claude%settings.json.*.bak"))
	if len(bak) != 1 {
		t.Fatalf("backups: %q", bak)
	}
	if want := "Claude Code hooks in " + path + ` now run '/opt/it'\''s/turnctl' hook-event claude-code (backup: ` + bak[0] + ")\n"; code != 0 || out != want {
		t.Errorf("install with another --turnctl: %d %q %q, want %q", code, out, errs, want)
	}
	if got, _ := os.ReadFile(path); string(got) != claudeFile(`'/opt/it'\\''s/turnctl' hook-event claude-code`) {
		t.Errorf("updated file:\n%s", got)
	}
	if b, _ := os.ReadFile(bak[0]); string(b) != claudeFile(quoted) {
		t.Errorf("backup:\n%s", b)
	}
	// The usual command is written as it always was.
	tc(t, "hooks", "install", "claude-code", "--user", "--turnctl", "turnctl")
	if got, _ := os.ReadFile(path); string(got) != claudeFile("turnctl hook-event claude-code") {
		t.Errorf("file with --turnctl turnctl:\n%s", got)
	}

	for _, c := range []struct {
		agent, file string
		n           int
	}{{"codex", ".codex/hooks.json", 2}, {"gemini", ".gemini/settings.json", 3}} {
		if _, errs, code := tc(t, "hooks", "install", c.agent, "--user", "--turnctl", spaced); code != 0 {
			t.Fatalf("install %s: %q", c.agent, errs)
		}
		got, _ := os.ReadFile(filepath.Join(home, c.file))
		if n := strings.Count(string(got), `"command": "'`+spaced+`' hook-event `+c.agent+`"`); n != c.n || strings.Count(string(got), spaced) != c.n {
			t.Errorf("%s: %d quoted commands, want %d:\n%s", c.agent, n, c.n, got)
		}
	}
	_, errs, _ = tc(t, "hooks", "show", "codex", "--user", "--turnctl", spaced)
	if want := `notify = ["` + spaced + `", "hook-event", "codex"]`; !strings.Contains(errs, want) {
		t.Errorf("show codex: %q lacks %q", errs, want)
	}

	conf := filepath.Join(home, ".aider.conf.yml")
	tc(t, "hooks", "install", "aider", "--user", "--turnctl", spaced)
	aiderFile := func(cmd string) string {
		return "# >>> turnctl hooks (ckptfs): each aider answer ends a turn >>>\n" +
			"notifications: true\n" +
			"notifications-command: " + cmd + "\n" +
			"# <<< turnctl hooks (ckptfs) <<<\n"
	}
	if got, _ := os.ReadFile(conf); string(got) != aiderFile(`'''`+spaced+`'' hook-event aider'`) {
		t.Errorf("%s:\n%s", conf, got)
	}
	out, _, code = tc(t, "hooks", "install", "aider", "--user", "--turnctl", "/usr/bin/turnctl")
	bak, _ = filepath.Glob(filepath.Join(state, "ckptfs", "backups", "*%.aider.conf.yml.*.bak"))
	if len(bak) != 1 || code != 0 || out != "Aider notifications command in "+conf+" now runs /usr/bin/turnctl hook-event aider (backup: "+bak[0]+")\n" {
		t.Errorf("aider install with another --turnctl: %d %q %q", code, out, bak)
	}
	if got, _ := os.ReadFile(conf); string(got) != aiderFile(`'/usr/bin/turnctl hook-event aider'`) {
		t.Errorf("%s:\n%s", conf, got)
	}
}

// install gemini says that hooks may need "hooksConfig" only when the
// file does not enable them already.
func TestHooksGeminiEnabledNote(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	const note = `note: Gemini CLI releases where hooks are experimental also need "hooksConfig": {"enabled": true}` + "\n"
	for doc, wantNote := range map[string]bool{
		"":                                    true,
		`{"hooksConfig": {"enabled": false}}`: true,
		`{"hooksConfig": {}}`:                 true,
		`{"enabled": true}`:                   true,
		`{"hooksConfig": {"enabled": true}}`:  false,
		"{\n  // on\n  \"hooksConfig\": {\"enabled\": true},\n  \"model\": {\"name\": \"gemini-2.5-pro\"}\n}\n": false,
	} {
		dir := t.TempDir()
		path := filepath.Join(dir, ".gemini", "settings.json")
		if doc != "" {
			os.MkdirAll(filepath.Dir(path), 0o755)
			os.WriteFile(path, []byte(doc), 0o644)
		}
		out, errs, code := tc(t, "-C", dir, "hooks", "install", "gemini", "--turnctl", "turnctl")
		lines := strings.SplitAfter(out, "\n")
		if code != 0 || len(lines) < 2 {
			t.Fatalf("install into %q: %d %q %q", doc, code, out, errs)
		}
		want := ""
		if wantNote {
			want = note
		}
		if got := strings.Join(lines[1:], ""); got != want {
			t.Errorf("install into %q: %q after the first line, want %q", doc, got, want)
		}
	}
}

// A turnctl under another name (--turnctl /opt/bin/tc) is still known as
// turnctl's: installing again leaves its hooks as they are, uninstall
// removes them, and install --turnctl changes them.
func TestHooksTurnctlOfAnotherName(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	path := filepath.Join(home, ".claude", "settings.json")
	for _, tool := range []string{"/opt/bin/tc", "/opt/my bin/tc"} {
		tc(t, "hooks", "install", "claude-code", "--user", "--turnctl", tool)
		out, errs, code := tc(t, "hooks", "install", "claude-code", "--user", "--turnctl", tool)
		if want := "Claude Code hooks already in " + path + "\n"; code != 0 || out != want {
			t.Errorf("install --turnctl %s again: %d %q %q, want %q", tool, code, out, errs, want)
		}
		if got, _ := os.ReadFile(path); string(got) != claudeFile(agenthooks.ShellQuote(tool)+" hook-event claude-code") {
			t.Errorf("installed twice with --turnctl %s:\n%s", tool, got)
		}
		out, errs, code = tc(t, "hooks", "uninstall", "claude-code", "--user")
		if want := "Claude Code hooks removed; " + path + " held nothing else and is gone"; code != 0 || !strings.HasPrefix(out, want) {
			t.Errorf("uninstall of --turnctl %s: %d %q %q, want %q", tool, code, out, errs, want)
		}
		if _, err := os.Stat(path); err == nil {
			got, _ := os.ReadFile(path)
			t.Errorf("uninstall left:\n%s", got)
			os.Remove(path)
		}
	}
	tc(t, "hooks", "install", "claude-code", "--user", "--turnctl", "/opt/bin/tc")
	tc(t, "hooks", "install", "claude-code", "--user", "--turnctl", "/usr/bin/turnctl")
	if got, _ := os.ReadFile(path); string(got) != claudeFile("/usr/bin/turnctl hook-event claude-code") {
		t.Errorf("after install --turnctl /usr/bin/turnctl:\n%s", got)
	}
}
