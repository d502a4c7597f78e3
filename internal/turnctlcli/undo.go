package turnctlcli

import (
	"fmt"

	"github.com/spf13/pflag"

	"ckptfs/turnctl"
)

var undoCmd = &command{
	name:  "undo",
	args:  "[--dry-run]",
	short: "rewind to the state before the last turn that changed something",
	long: `Finds the most recent turn that changed the tree (the open turn included;
turns that changed nothing are passed over) and rewinds to the turn before
it. The undo is recorded as a rewind turn, which is itself a turn that changed
something: undo twice is a redo.`,
	changes: true,
	opts:    func() options { return &undoOptions{} },
}

type undoOptions struct {
	dryRun bool
}

func (o *undoOptions) addFlags(fs *pflag.FlagSet) {
	fs.BoolVarP(&o.dryRun, "dry-run", "n", false, "list what would change; change nothing")
}

func (o *undoOptions) run(e *env, args []string) error {
	if err := wantArgs(args, 0, 0); err != nil {
		return err
	}
	rep, err := e.h.Undo(e.ctx, turnctl.UndoRequest{DryRun: o.dryRun})
	if err != nil {
		return err
	}
	what := fmt.Sprintf("undo of turn %d (rewind to %d)", derefOr(rep.Undone), rep.Target)
	return e.printRewind(rep, what)
}

func derefOr(p *uint64) uint64 {
	if p == nil {
		return 0
	}
	return *p
}
