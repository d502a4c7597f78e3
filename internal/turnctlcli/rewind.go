package turnctlcli

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/pflag"

	"ckptfs/internal/ckpt"
	"ckptfs/turnctl"
)

var rewindCmd = &command{
	name:  "rewind",
	args:  "TURN [--dry-run]",
	short: "make the tree equal its state at the end of TURN",
	long: `Every versioned path becomes exactly what it was when TURN ended: bytes, mode,
type, symlink target, existence of files and directories. The rewind is
recorded as a new turn of kind rewind (closing the open turn), so it can
itself be rewound or undone. --dry-run lists what would change: the list the
rewind then reports, path by path. The changes under .git are listed as one
line ("git: main at 1a2b3c4 (was ec90ceb), 24 files in .git") unless --all,
and so is a long list: its first 50 paths and how many more there are
(--all lists every one; turnctl show TURN of the rewind turn too). What is
unversioned (--exclude, the store of a project inside this one) stays as it
is, and so does a directory that holds such paths, though at TURN it was not
there or not a directory: the report names each one ("left 1 directory in
place"), and a rewind with nothing else to do makes no turn. On a terminal,
a progress bar on stderr shows how far a long rewind has got; --quiet prints
nothing but errors. A rewind that would change what the daemon may not (a
directory of root's in the mount of an ordinary user, whose daemon runs as
that user) refuses before it changes anything, naming it; --dry-run too.`,
	changes: true,
	quiet:   true,
	opts:    func() options { return &rewindOptions{} },
}

type rewindOptions struct {
	dryRun bool
}

func (o *rewindOptions) addFlags(fs *pflag.FlagSet) {
	fs.BoolVarP(&o.dryRun, "dry-run", "n", false, "list what would change; change nothing")
}

func (o *rewindOptions) run(e *env, args []string) error {
	if err := wantArgs(args, 1, 1); err != nil {
		return err
	}
	var rep *turnctl.RewindReply
	err := e.watchChange(o.dryRun, "rewind", func(ctx context.Context) (err error) {
		rep, err = e.h.Rewind(ctx, turnctl.RewindRequest{Turn: args[0], DryRun: o.dryRun})
		return err
	})
	if err != nil {
		return err
	}
	return e.printRewind(rep, fmt.Sprintf("rewind to %s", pointWord(rep.Target, rep.TargetStep)))
}

// printRewind reports a rewind, undo, restore or revert.
func (e *env) printRewind(rep *turnctl.RewindReply, what string) error {
	if rep.Warning != "" {
		// Done, but its record may not survive a power loss: said
		// even with --quiet or --json, as an error would be.
		fmt.Fprintf(e.stderr, "turnctl: warning: %s is done, but %s\n", what, rep.Warning)
	}
	if e.json {
		return e.printJSON(jRewind(rep))
	}
	if e.quiet {
		return nil
	}
	switch {
	case len(rep.Changes) == 0:
		fmt.Fprintf(e.stdout, "%s: nothing to change\n", what)
	case rep.DryRun:
		line := e.statsLine(rep.Stats)
		if line == "no files changed outside .git" {
			// "no files changed outside .git": the changes listed are in it.
			line = "only files in .git"
		}
		fmt.Fprintf(e.stdout, "%s would change %s:\n", what, line)
	case rep.Turn != nil:
		fmt.Fprintf(e.stdout, "%s done as turn %d: %s\n", what, rep.Turn.Num, e.statsLine(rep.Stats))
	}
	more := "--all lists them all"
	if rep.Turn != nil {
		more = fmt.Sprintf("--all lists them all, as does turnctl show %d", rep.Turn.Num)
	}
	e.printChangesCut(rep.Changes, rep.Stats, more)
	if len(rep.Merged) > 0 {
		fmt.Fprintf(e.stdout, "merged with later changes, kept:\n")
		for _, p := range rep.Merged {
			fmt.Fprintf(e.stdout, "  %s\n", printable(p))
		}
	}
	if len(rep.Conflicts) > 0 {
		fmt.Fprintf(e.stdout, "conflicts written between markers (<<<<<<< now, >>>>>>> before %s):\n", pointWord(derefOr(rep.Reverted), rep.RevertedStep))
		for _, c := range rep.Conflicts {
			fmt.Fprintf(e.stdout, "  %s: %s\n", printable(c.Path), c.Reason)
		}
	}
	if len(rep.KeptTurns) > 0 {
		turns := make([]string, len(rep.KeptTurns))
		for i, n := range rep.KeptTurns {
			turns[i] = fmt.Sprint(n)
		}
		fmt.Fprintf(e.stdout, "kept the later changes of turn %s: %s\n", strings.Join(turns, ", "), e.keptLine(rep.Kept))
	}
	if len(rep.SplitLinks) > 0 {
		// A restore splits a hard link rather than write into names
		// it was not given (versionstore.LinkSplit), and so may a
		// revert, which changes only the paths the turn changed: say
		// so.
		verb := "split"
		if rep.DryRun {
			verb = "it would split"
		}
		if rep.Reverted != nil {
			// Neither a restore nor a rewind to Target links them
			// again: at Target (before the turn) they may not have
			// shared an inode either.
			fmt.Fprintf(e.stdout, "hard links %s (the names not reverted keep their bytes):\n", verb)
		} else {
			fmt.Fprintf(e.stdout, "hard links %s (the names not restored keep their bytes; restore them too, or rewind, to link them as at %s):\n",
				verb, pointWord(rep.Target, rep.TargetStep))
		}
		for _, l := range rep.SplitLinks {
			names := make([]string, len(l.Names))
			for i, n := range l.Names {
				names[i] = printable(n)
			}
			fmt.Fprintf(e.stdout, "  %s from %s\n", printable(l.Path), strings.Join(names, ", "))
		}
	}
	if len(rep.NotRestored) > 0 {
		fmt.Fprintf(e.stdout, "not restored, left as they are (their bytes then were never captured: they changed while the project was not mounted):\n")
		inGit := 0
		for _, p := range rep.NotRestored {
			fmt.Fprintf(e.stdout, "  %s\n", printable(p))
			if inGitDir(p) {
				inGit++
			}
		}
		if inGit > 0 {
			// git's refs, index and packs are read together: one left at
			// its later bytes among the rest put back may name objects
			// that are gone.
			kept := "kept"
			if rep.DryRun {
				kept = "would keep"
			}
			fmt.Fprintf(e.stdout, "warning: %s under %s above %s later bytes beside the earlier ones put back: git may find the repository inconsistent (git fsck tells)\n",
				plural(inGit, "path"), ckpt.GitDir, kept)
		}
	}
	e.printLeft(rep)
	return nil
}

// printLeft names the directories a rewind left because they hold
// unversioned paths, one line each ("  sub/ (not there at turn 0): holds
// sub/.ckptfs"), the list cut as the changes are unless --all.
func (e *env) printLeft(rep *turnctl.RewindReply) {
	if len(rep.Left) == 0 {
		return
	}
	verb, dirs := "left", "1 directory"
	if rep.DryRun {
		verb = "would leave"
	}
	if len(rep.Left) > 1 {
		dirs = fmt.Sprintf("%d directories", len(rep.Left))
	}
	fmt.Fprintf(e.stdout, "%s %s in place: they hold unversioned paths (--exclude, the store of a project inside this one), which a rewind leaves as they are:\n", verb, dirs)
	rows := rep.Left
	cut := 0
	if !e.all && len(rows) > listCut+listSlack {
		cut, rows = len(rows)-listCut, rows[:listCut]
	}
	at := pointWord(rep.Target, rep.TargetStep)
	for _, l := range rows {
		then := "not there"
		if l.Then != ckpt.Absent.String() {
			then = "a " + l.Then
		}
		names := l.Unversioned
		more := l.More
		if !e.all && len(names) > leftNamed {
			more += len(names) - leftNamed
			names = names[:leftNamed]
		}
		out := make([]string, len(names))
		for i, p := range names {
			out[i] = printable(p)
		}
		holds := strings.Join(out, ", ")
		if more > 0 {
			holds += fmt.Sprintf(" and %d more", more)
		}
		fmt.Fprintf(e.stdout, "  %s/ (%s at %s): holds %s\n", printable(l.Path), then, at, holds)
	}
	if cut > 0 {
		fmt.Fprintf(e.stdout, "  %s\n", e.paint(cDim, fmt.Sprintf("... and %d more (--all lists them all)", cut)))
	}
}

// leftNamed is how many of the unversioned paths a directory holds its
// line in printLeft names, unless --all.
const leftNamed = 3

// keptLine names the paths an undo kept, those in .git as one count
// (unless --all), at most 10 others.
func (e *env) keptLine(paths []string) string {
	var out []string
	git := 0
	for _, p := range paths {
		if !e.all && (p == ckpt.GitDir || strings.HasPrefix(p, ckpt.GitDir+"/")) {
			git++
			continue
		}
		out = append(out, printable(p))
	}
	more := 0
	if len(out) > 10 && !e.all {
		more, out = len(out)-10, out[:10]
	}
	if more > 0 {
		out = append(out, fmt.Sprintf("and %d more", more))
	}
	if git > 0 {
		out = append(out, plural(git, "file")+" in .git")
	}
	if len(out) == 0 {
		return "nothing left as it was"
	}
	return strings.Join(out, ", ")
}
