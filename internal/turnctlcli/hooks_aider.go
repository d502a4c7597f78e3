package turnctlcli

import (
	"fmt"

	"ckptfs/internal/turnctlcli/agenthooks"
)

// aiderHooks: aider has no hook configuration, only a command it runs when
// it has answered; install puts that into .aider.conf.yml as a marked block.
func aiderHooks(e *env, verb, path, self, scope string, update bool) error {
	switch verb {
	case "show":
		fmt.Fprintf(e.stderr, "# Aider: add to %s (or run: turnctl hooks install aider%s)\n", path, scope)
		fmt.Fprint(e.stdout, agenthooks.AiderBlock(self))
		fmt.Fprintf(e.stderr, "# Aider has no prompt hook: each answer closes the turn that collected its edits.\n"+
			"# To make one aider run one labelled turn instead:\n"+
			"#   turnctl run --label \"fix the tests\" -- aider --yes --message \"fix the tests\"\n")
		return nil
	case "install":
		res, err := agenthooks.InstallAider(path, self, update)
		if err != nil {
			return err
		}
		switch {
		case !res.Changed:
			fmt.Fprintf(e.stdout, "Aider notifications command already in %s\n", path)
		case res.Updated:
			fmt.Fprintf(e.stdout, "Aider notifications command in %s now runs %s (backup: %s)\n", path, agenthooks.AiderCommand(self), res.Backup)
		case res.Created:
			fmt.Fprintf(e.stdout, "Aider notifications command written to %s (new file)\n", path)
		default:
			fmt.Fprintf(e.stdout, "Aider notifications command added to %s (backup: %s)\n", path, res.Backup)
		}
		return nil
	}
	res, err := agenthooks.UninstallAider(path)
	if err != nil {
		return err
	}
	switch {
	case !res.Changed:
		fmt.Fprintf(e.stdout, "no turnctl block in %s\n", path)
	case res.Removed:
		fmt.Fprintf(e.stdout, "Aider notifications command removed; %s held nothing else and is gone (backup: %s)\n", path, res.Backup)
	default:
		fmt.Fprintf(e.stdout, "Aider notifications command removed from %s (backup: %s)\n", path, res.Backup)
	}
	return nil
}
