package turnctlcli

import (
	"fmt"
	"strings"

	"github.com/spf13/pflag"

	"ckptfs/turnctl"
)

var showCmd = &command{
	name:  "show",
	args:  "TURN [--patch]",
	short: "what one turn changed, per file",
	long: `Per file: added, modified, deleted, renamed (old -> new), mode (only mode or
owner changed) or type (e.g. a file became a symlink), with lines +/- (binary
files and files over 8 MiB count no lines). A directory renamed shows as
itself and each path below it renamed. --patch adds the patch diff prints.`,
	opts: func() options { return &showOptions{} },
}

type showOptions struct {
	patch bool
}

func (o *showOptions) addFlags(fs *pflag.FlagSet) {
	fs.BoolVarP(&o.patch, "patch", "p", false, "also print unified diffs")
}

func (o *showOptions) run(e *env, args []string) error {
	if err := wantArgs(args, 1, 1); err != nil {
		return err
	}
	rep, err := e.h.Show(e.ctx, turnctl.ShowRequest{Turn: args[0], Patch: o.patch})
	if err != nil {
		return err
	}
	if e.json {
		return e.printJSON(rep)
	}
	t := rep.Turn
	line := e.turnTitle(t) + "  " + when(t.End)
	if t.Open {
		line = e.turnTitle(t) + "  since " + when(t.Start)
	}
	if t.Target != nil {
		line += fmt.Sprintf("  (to turn %d)", *t.Target)
	}
	if len(t.Programs) > 0 {
		line += "  by " + strings.Join(t.Programs, ", ")
	}
	fmt.Fprintln(e.stdout, line)
	e.printTable(e.changeRows(rep.Changes), "  ")
	fmt.Fprintln(e.stdout, statsLine(rep.Stats))
	if o.patch && len(rep.Changes) > 0 {
		fmt.Fprintln(e.stdout)
		e.printPatches(rep.Changes)
	}
	return nil
}
