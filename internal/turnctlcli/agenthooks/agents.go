package agenthooks

import (
	"fmt"
	"path/filepath"
	"strings"
)

// Agent is a coding agent turnctl can wire.
type Agent struct {
	Name  string // as on the command line: claude-code, codex, gemini, aider
	Title string
	// BeginEvent and EndEvent are the agent's hook events that open and
	// close a turn; empty when the agent has no hook configuration file
	// (Aider).
	BeginEvent, EndEvent string
	// StepEvent, if set, is the event after each tool call: a step
	// boundary inside the open turn.
	StepEvent string
	// ProjectFile is the settings file relative to the project root,
	// UserFile relative to the home directory (Aider's: its
	// configuration file, where install puts the notifications command).
	ProjectFile, UserFile string
	// hookName, if set, is written as the hook's "name" (Gemini CLI shows
	// it in its logs).
	hookName string
}

// Agents lists the agents turnctl knows, in the order --help shows them.
//
// Sources for the configuration formats:
//
//   - Claude Code: https://docs.anthropic.com/en/docs/claude-code/hooks —
//     settings.json "hooks" → event → [{"matcher"?, "hooks": [{"type":
//     "command", "command"}]}]; UserPromptSubmit and Stop take no matcher;
//     PostToolUse (after each tool call) takes one, and none matches every
//     tool;
//     project file .claude/settings.json, user file ~/.claude/settings.json.
//   - Codex CLI: https://developers.openai.com/codex/hooks — the same shape
//     in hooks.json next to a config layer (<repo>/.codex/hooks.json,
//     ~/.codex/hooks.json); on by default in current releases, behind
//     [features] codex_hooks = true in older ones.
//   - Gemini CLI: https://geminicli.com/docs/hooks/reference (docs/hooks/
//     reference.md in google-gemini/gemini-cli) — settings.json "hooks" →
//     event → [{"matcher"?, "hooks": [{"type", "command", "name"?}]}];
//     BeforeAgent fires after the user submits a prompt, AfterAgent once
//     per turn after the final response, AfterTool after each tool call
//     (no matcher: every tool); .gemini/settings.json or
//     ~/.gemini/settings.json.
//   - Aider has no hooks; it runs --notifications-command when the LLM has
//     answered and it waits for input (aider/website/docs/usage/
//     notifications.md in Aider-AI/aider).
var Agents = []*Agent{
	{Name: "claude-code", Title: "Claude Code", BeginEvent: "UserPromptSubmit", EndEvent: "Stop", StepEvent: "PostToolUse",
		ProjectFile: ".claude/settings.json", UserFile: ".claude/settings.json"},
	{Name: "codex", Title: "Codex CLI", BeginEvent: "UserPromptSubmit", EndEvent: "Stop",
		ProjectFile: ".codex/hooks.json", UserFile: ".codex/hooks.json"},
	{Name: "gemini", Title: "Gemini CLI", BeginEvent: "BeforeAgent", EndEvent: "AfterAgent", StepEvent: "AfterTool",
		ProjectFile: ".gemini/settings.json", UserFile: ".gemini/settings.json", hookName: "ckptfs-turns"},
	{Name: "aider", Title: "Aider", ProjectFile: ".aider.conf.yml", UserFile: ".aider.conf.yml"},
}

// Lookup returns the agent called name (a few aliases accepted).
func Lookup(name string) (*Agent, error) {
	switch strings.ToLower(name) {
	case "claude", "claude-code", "claudecode":
		name = "claude-code"
	case "codex", "codex-cli":
		name = "codex"
	case "gemini", "gemini-cli":
		name = "gemini"
	case "aider":
	}
	for _, a := range Agents {
		if a.Name == name {
			return a, nil
		}
	}
	return nil, fmt.Errorf("unknown agent %q (known: %s)", name, Names())
}

// Names lists the agents' names, comma-separated.
func Names() string {
	var n []string
	for _, a := range Agents {
		n = append(n, a.Name)
	}
	return strings.Join(n, ", ")
}

// HasHooks says whether the agent has a hook configuration file turnctl
// can edit.
func (a *Agent) HasHooks() bool { return a.BeginEvent != "" }

// SettingsPath is the file install edits: under the project root, or under
// home with user.
func (a *Agent) SettingsPath(root, home string, user bool) string {
	if user {
		return filepath.Join(home, a.UserFile)
	}
	return filepath.Join(root, a.ProjectFile)
}
