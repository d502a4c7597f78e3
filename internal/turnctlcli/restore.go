package turnctlcli

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/pflag"

	"ckptfs/turnctl"
)

var restoreCmd = &command{
	name:  "restore",
	args:  "TURN [--dry-run] -- PATH...",
	short: "rewind only these paths (files or whole directories)",
	long: `Each PATH (relative to the current directory) becomes what it was at the end
of TURN, with everything below it; the rest of the tree is left alone. A path
that existed neither then nor now is an error. A parent outside the PATHs that
is not a directory now becomes the directory it was then. A file renamed
across the PATHs' edge is restored on their side only (added or deleted
there). Recorded as a rewind turn. A path that shares its inode with names not
restored (hard links) gets its bytes then on an inode of its own, and the
report names each such split: the other names keep their bytes (restore all
the names of a file together to keep them linked as they were, or rewind).
--dry-run lists what would change: the list the restore then reports, the
splits too. The changes under .git are listed as one line unless --all, and a
long list is cut after its first 50 paths, as rewind does; so are the progress
bar, --quiet, and the refusal of a change the daemon may not make.`,
	changes: true,
	quiet:   true,
	opts:    func() options { return &restoreOptions{} },
}

type restoreOptions struct {
	dryRun bool
}

func (o *restoreOptions) addFlags(fs *pflag.FlagSet) {
	fs.BoolVarP(&o.dryRun, "dry-run", "n", false, "list what would change; change nothing")
}

func (o *restoreOptions) run(e *env, args []string) error {
	turns, paths, _ := splitDash(e, args)
	if e.dash < 0 && len(args) > 1 {
		// "restore 3 a b" without "--" is clear enough.
		turns, paths = args[:1], args[1:]
	}
	if err := wantArgs(turns, 1, 1); err != nil {
		return err
	}
	if len(paths) == 0 {
		return usagef("missing PATH (to restore everything, use rewind)")
	}
	rel, err := e.relPaths(paths)
	if err != nil {
		return err
	}
	var rep *turnctl.RewindReply
	err = e.watchChange(o.dryRun, "restore", func(ctx context.Context) (err error) {
		rep, err = e.h.Restore(ctx, turnctl.RestoreRequest{Turn: turns[0], Paths: rel, DryRun: o.dryRun})
		return err
	})
	if err != nil {
		return err
	}
	shown := make([]string, len(rel))
	for i, r := range rel {
		shown[i] = printable(r)
		if r == "" {
			shown[i] = "."
		}
	}
	return e.printRewind(rep, fmt.Sprintf("restore of %s from %s", strings.Join(shown, " "), pointWord(rep.Target, rep.TargetStep)))
}
