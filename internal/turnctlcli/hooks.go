package turnctlcli

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/spf13/pflag"

	"ckptfs/internal/rundir"
	"ckptfs/internal/turnctlcli/agenthooks"
)

var hooksCmd = &command{
	name:  "hooks",
	args:  "install|uninstall|show AGENT [--project|--user]",
	short: "wire an agent's hooks to hook-event (claude-code, codex, gemini, aider)",
	long: `install merges into the agent's settings file the hooks that run
"turnctl hook-event AGENT" when the user submits a prompt and when the agent
has answered, so each prompt becomes one turn, and where the agent has one,
after each tool call, so each tool call that changed something becomes one
step of the turn (turnctl step). Everything else in the file
keeps its bytes (a byte order mark too; added lines end as the file's do;
an empty file counts as {}); a file that is a symbolic link is edited
where it leads. The file as it was is kept in $XDG_STATE_HOME/ckptfs/backups
(default ~/.local/state), not beside it where git would pick it up; the
output names the copy.
Hooks of turnctl's already there are left as they are; install with
--turnctl PATH changes them to run that turnctl, and says so.
uninstall removes exactly what install added: what it created (the "hooks"
object, the file, its directory) install records in
$XDG_STATE_HOME/ckptfs/hooks, and uninstall removes it once nothing else is
in it; without that record, it keeps an empty "hooks" object and the file.
show prints the configuration instead of writing it.

  claude-code   .claude/settings.json     UserPromptSubmit, Stop; steps:
                                          PostToolUse
  codex         .codex/hooks.json         UserPromptSubmit, Stop (older
                                          releases: [features] codex_hooks
                                          = true; or notify, see show)
  gemini        .gemini/settings.json     BeforeAgent, AfterAgent; steps:
                                          AfterTool
  aider         .aider.conf.yml           notifications-command (aider has
                                          no prompt hook: each answer ends
                                          a turn; see show)

--project (the default) edits the file under the project (-C DIR, else the
ckptfs mount containing the current directory, else the current directory);
--user the one under your home directory. Install before you mount, or with
--user: a project file written through the mount is itself history, and a
rewind to before it would take the hooks away again (install warns then).
--json has no effect: show prints the agent's own format.`,
	self: true,
	opts: func() options { return &hooksOptions{} },
}

type hooksOptions struct {
	project, user bool
	command       string
}

func (o *hooksOptions) addFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.project, "project", false, "the project's settings file (default)")
	fs.BoolVar(&o.user, "user", false, "your settings file under $HOME, for every project")
	fs.StringVar(&o.command, "turnctl", "", "the `PATH` of the turnctl the hooks run, quoted for the shell where needed (default: turnctl if $PATH finds this binary, else its absolute path); install changes turnctl's hooks already there to run it")
}

func (o *hooksOptions) run(e *env, args []string) error {
	if len(args) > 0 && args[0] != "install" && args[0] != "uninstall" && args[0] != "show" {
		return usagef("unknown subcommand %q (valid: install, uninstall, show)", args[0])
	}
	if err := wantArgs(args, 2, 2); err != nil {
		return err
	}
	verb := args[0]
	if o.project && o.user {
		return usagef("--project and --user exclude each other")
	}
	agent, err := agenthooks.Lookup(args[1])
	if err != nil {
		return usagef("%v", err)
	}
	path, err := o.settingsPath(e, agent)
	if err != nil {
		return err
	}
	self := o.turnctlCommand()
	if !agent.HasHooks() {
		return aiderHooks(e, verb, path, self, o.scopeFlag(), o.command != "")
	}
	switch verb {
	case "show":
		snip, err := agent.Snippet(self)
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stderr, "# %s: merge into %s (or run: turnctl hooks install %s%s)\n", agent.Title, path, agent.Name, o.scopeFlag())
		if agent.Name == "codex" {
			fmt.Fprintf(e.stderr, "# Codex releases without hooks: notify = [%q, \"hook-event\", \"codex\"] in ~/.codex/config.toml ends a turn per answer\n", self)
		}
		fmt.Fprint(e.stdout, snip)
		return nil
	case "install":
		res, err := agent.Install(path, self, o.command != "")
		if err != nil {
			return err
		}
		switch {
		case !res.Changed:
			fmt.Fprintf(e.stdout, "%s hooks already in %s\n", agent.Title, path)
		case res.Created:
			fmt.Fprintf(e.stdout, "%s hooks written to %s (new file)\n", agent.Title, path)
		case res.Updated && res.Added:
			fmt.Fprintf(e.stdout, "%s hooks added to %s, and those already there now run %s (backup: %s)\n", agent.Title, path, agent.HookCommand(self), res.Backup)
		case res.Updated:
			fmt.Fprintf(e.stdout, "%s hooks in %s now run %s (backup: %s)\n", agent.Title, path, agent.HookCommand(self), res.Backup)
		default:
			fmt.Fprintf(e.stdout, "%s hooks added to %s (backup: %s)\n", agent.Title, path, res.Backup)
		}
		if agent.Name == "gemini" && res.Changed && !agenthooks.HooksEnabled(path) {
			fmt.Fprintln(e.stdout, `note: Gemini CLI releases where hooks are experimental also need "hooksConfig": {"enabled": true}`)
		}
		if mnt, err := rundir.FindMount(filepath.Dir(path)); err == nil && res.Changed {
			fmt.Fprintf(e.stderr, "turnctl: warning: %s lies in the mounted project %s: the edit is history, and a rewind to before it takes the hooks away again (install before mounting, or with --user)\n", path, mnt)
		}
		return nil
	}
	res, err := agent.Uninstall(path)
	if err != nil {
		return err
	}
	switch {
	case !res.Changed:
		fmt.Fprintf(e.stdout, "no turnctl hooks in %s\n", path)
	case res.Removed:
		fmt.Fprintf(e.stdout, "%s hooks removed; %s held nothing else and is gone (backup: %s)\n", agent.Title, path, res.Backup)
	default:
		fmt.Fprintf(e.stdout, "%s hooks removed from %s (backup: %s)\n", agent.Title, path, res.Backup)
	}
	return nil
}

func (o *hooksOptions) scopeFlag() string {
	if o.user {
		return " --user"
	}
	return ""
}

// settingsPath is the file the command edits.
func (o *hooksOptions) settingsPath(e *env, a *agenthooks.Agent) (string, error) {
	if o.user {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", err
		}
		return a.SettingsPath("", home, true), nil
	}
	root, err := os.Getwd()
	if err != nil {
		return "", err
	}
	if e.g.dir != "" {
		root = absIn(root, e.g.dir)
	} else if m, err := rundir.FindMount(realPath(root)); err == nil {
		root = m
	}
	return a.SettingsPath(root, "", false), nil
}

// turnctlCommand is the turnctl the hooks should run: a path, or a name
// PATH finds; HookCommand quotes it for the shell where needed.
func (o *hooksOptions) turnctlCommand() string {
	if o.command != "" {
		return o.command
	}
	self, err := os.Executable()
	if err != nil {
		return "turnctl"
	}
	self, _ = filepath.EvalSymlinks(self)
	if p, err := exec.LookPath("turnctl"); err == nil {
		if rp, _ := filepath.EvalSymlinks(p); rp == self {
			return "turnctl"
		}
	}
	return self
}
