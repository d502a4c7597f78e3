package turnctlcli

import (
	"fmt"
	"strings"

	"github.com/spf13/pflag"

	"ckptfs/turnctl"
)

var statusCmd = &command{
	name:    "status",
	args:    "",
	short:   "the open turn and what it has changed so far",
	mount:   true,
	changes: true,
	opts:    func() options { return &statusOptions{} },
}

type statusOptions struct{}

func (o *statusOptions) addFlags(fs *pflag.FlagSet) {}

func (o *statusOptions) run(e *env, args []string) error {
	if err := wantArgs(args, 0, 0); err != nil {
		return err
	}
	rep, err := e.h.Status(e.ctx, turnctl.StatusRequest{})
	if err != nil {
		return err
	}
	if e.json {
		return e.printJSON(jStatus(rep))
	}
	if rep.Store.Full {
		fmt.Fprintf(e.stdout, "store full: writes whose earlier bytes must be kept fail with ENOSPC until space is freed (deletes, renames and chmod still work)\n")
	} else if rep.Store.LastError != "" {
		fmt.Fprintf(e.stdout, "last store error (%s): %s\n", when(rep.Store.LastErrorAt), rep.Store.LastError)
	}
	if !rep.Open {
		fmt.Fprintf(e.stdout, "no turn open (latest turn: %d)\n", rep.Latest)
		return nil
	}
	t := rep.Turn
	line := e.turnTitle(*t) + "  since " + when(t.Start)
	if len(t.Programs) > 0 {
		line += "  by " + strings.Join(t.Programs, ", ")
	}
	fmt.Fprintln(e.stdout, line)
	for _, r := range rep.Runs {
		what := "running"
		if r.Step {
			what = "running as a step"
		}
		pid := ""
		if r.PID > 0 {
			pid = fmt.Sprintf(", pid %d", r.PID)
		}
		fmt.Fprintf(e.stdout, "  %s: %q (turnctl run%s)\n", what, r.Label, pid)
	}
	if rep.ChangesError != "" {
		fmt.Fprintf(e.stdout, "  changes cannot be listed: %s (turnctl verify checks the store)\n", rep.ChangesError)
		return nil
	}
	e.printChangesCut(rep.Changes, rep.Stats, fmt.Sprintf("--all lists them all, as does turnctl show %d", t.Num))
	fmt.Fprintln(e.stdout, e.statsLine(rep.Stats))
	return nil
}
