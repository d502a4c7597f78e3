package turnctlcli

import (
	"context"
	"fmt"

	"github.com/spf13/pflag"

	"ckptfs/turnctl"
)

var revertCmd = &command{
	name:  "revert",
	args:  "TURN [--dry-run] [--conflicts=refuse|markers]",
	short: "undo what TURN changed, keeping what later turns changed",
	long: `Undoes the changes of one past turn and keeps everything that happened after
it. Each path TURN changed that no later turn changed again gets back its
state from before TURN (a rename TURN made is renamed back, a file it deleted
comes back, one it made goes, a mode it changed is changed back). A path that
later turns changed too is merged three ways (base: the end of TURN, ours:
now, theirs: before TURN): its mode, and a text file's lines as git
merge-file merges them. Where the two overlap, or a path cannot be merged (a
binary file, a file deleted later, a directory a later turn put files in),
the revert refuses, names each such path, and changes nothing; with
--conflicts=markers a text file's conflicting lines are written between
<<<<<<< now / ======= / >>>>>>> before turn TURN markers instead (the other
conflicts still refuse). A turn that a later rewind went back past (on a
branch beside the line "log --graph" draws) is not in the tree: the revert
refuses it, naming the rewind. A path it changes that shares its inode with names
it leaves as they are (hard links) gets its state on an inode of its own, and
the report names each such split, as restore's does. Recorded as a new turn
of kind revert ("revert of turn TURN"), so it can be undone or reverted in
turn. --dry-run lists what it would change, the list the revert then reports,
the splits too, or the conflicts it would refuse. As with rewind, a long list is cut after its first 50 paths (--all
lists every one), a progress bar on stderr shows how far a long revert has
got, --quiet prints nothing but errors, and a change the daemon may not make
(a directory of root's in a user's mount) refuses it before it changes
anything.`,
	changes: true,
	quiet:   true,
	opts:    func() options { return &revertOptions{} },
}

type revertOptions struct {
	dryRun    bool
	conflicts string
}

func (o *revertOptions) addFlags(fs *pflag.FlagSet) {
	fs.BoolVarP(&o.dryRun, "dry-run", "n", false, "list what would change; change nothing")
	fs.StringVar(&o.conflicts, "conflicts", turnctl.ConflictsRefuse, "what a conflict does (`MODE`): refuse: refuse the revert; markers: write text conflicts between markers")
}

func (o *revertOptions) run(e *env, args []string) error {
	if err := wantArgs(args, 1, 1); err != nil {
		return err
	}
	if o.conflicts != turnctl.ConflictsRefuse && o.conflicts != turnctl.ConflictsMarkers {
		return usagef("--conflicts must be refuse or markers, not %q", o.conflicts)
	}
	var rep *turnctl.RewindReply
	err := e.watchChange(o.dryRun, "revert", func(ctx context.Context) (err error) {
		rep, err = e.h.Revert(ctx, turnctl.RevertRequest{Turn: args[0], DryRun: o.dryRun, Conflicts: o.conflicts})
		return err
	})
	if err != nil {
		return err
	}
	return e.printRewind(rep, fmt.Sprintf("revert of %s", pointWord(derefOr(rep.Reverted), rep.RevertedStep)))
}
