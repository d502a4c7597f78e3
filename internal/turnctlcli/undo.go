package turnctlcli

import (
	"context"
	"fmt"

	"github.com/spf13/pflag"

	"ckptfs/turnctl"
)

var undoCmd = &command{
	name:  "undo",
	args:  "[--dry-run]",
	short: "undo the last agent turn, rewind or revert; keeps background changes",
	long: `Undoes the last action: the newest turn that changed the tree and is an agent
turn, a rewind, a restore or a revert (the open turn included; turns that
changed nothing are passed over). Manual turns after it — what background
writers such as git status refreshing .git/index, an editor or a language
server changed while no turn was open — are not the action undone: when such
turns follow it, the undo reverts the action's turn (see revert) and keeps
their changes, naming the turns and paths it kept; where they conflict with
the undo it refuses and changes nothing. With no changes after the action it
rewinds to the turn before it. With no agent turn, rewind or revert at all,
the newest turn that changed anything is undone. The undo is recorded as a
turn (kind rewind, or revert when it kept later changes) and is itself an
action: undo twice is a redo. As with rewind, a long list is cut after its
first 50 paths (--all lists every one, and every path kept), a progress bar
on stderr shows how far a long undo has got, and --quiet prints nothing but
errors.`,
	changes: true,
	quiet:   true,
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
	var rep *turnctl.RewindReply
	err := e.watchChange(o.dryRun, "undo", func(ctx context.Context) (err error) {
		rep, err = e.h.Undo(ctx, turnctl.UndoRequest{DryRun: o.dryRun})
		return err
	})
	if err != nil {
		return err
	}
	what := fmt.Sprintf("undo of turn %d (rewind to %d)", derefOr(rep.Undone), rep.Target)
	if rep.Reverted != nil {
		what = fmt.Sprintf("undo of turn %d (revert, later changes kept)", derefOr(rep.Undone))
	}
	return e.printRewind(rep, what)
}

func derefOr(p *uint64) uint64 {
	if p == nil {
		return 0
	}
	return *p
}
