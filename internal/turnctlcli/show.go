package turnctlcli

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"ckptfs/internal/ckpt"
	"ckptfs/turnctl"
)

var showCmd = &command{
	name:  "show",
	args:  "TURN [--patch] [-- PATH...]",
	short: "what one turn changed, per file",
	long: `Per file: added, modified, deleted, renamed (old -> new), mode (only mode or
owner changed) or type (e.g. a file became a symlink), with lines +/- (binary
files and files over 8 MiB count no lines). A directory renamed shows as
itself and each path below it renamed. --patch adds the patch diff prints.
A turn opened with more than its label (an agent's whole prompt, a label of
several lines) shows all of it, indented, under its first line. A turn in
which step boundaries were marked (turnctl step, an agent's hook after each
tool call) lists its steps, also a single one; TURN N.K shows step K alone:
its first line names the step, the next its turn. The changes
under .git (git's objects, index, refs, logs) are one line, "git: commit
ec90ceb, 24 files in .git" (what HEAD's branch did, read from the recorded
.git/HEAD and ref, then how many files), and are not in the count of files
and lines; --all lists them, PATHs under .git too.

With PATHs (relative to the current directory), only the changes to them,
or for a directory to anything below it, are shown and counted; a rename
to or from one of them is shown whole (a file a directory rename moved:
"renamed sub/b.txt -> lib/b.txt").`,
	changes: true,
	opts:    func() options { return &showOptions{} },
}

type showOptions struct {
	patch bool
}

func (o *showOptions) addFlags(fs *pflag.FlagSet) {
	fs.BoolVarP(&o.patch, "patch", "p", false, "also print unified diffs")
}

func (o *showOptions) run(e *env, args []string) error {
	turns, paths, _ := splitDash(e, args)
	if e.dash < 0 && len(args) > 1 && !slices.ContainsFunc(args[1:], looksLikeTurn) {
		// "show 3 a.go" without "--" is clear enough; "show 3 4" is
		// not a path's history.
		turns, paths = args[:1], args[1:]
	}
	if err := wantArgs(turns, 1, 1); err != nil {
		return err
	}
	req := turnctl.ShowRequest{Turn: turns[0], Patch: o.patch}
	var err error
	if req.Paths, err = e.relPaths(paths); err != nil {
		return err
	}
	e.all = e.all || anyInGitDir(req.Paths)
	rep, err := e.h.Show(e.ctx, req)
	if err != nil {
		return err
	}
	if e.json {
		return e.printJSON(jShow(rep))
	}
	t := rep.Turn
	if st := rep.Step; st != nil {
		// show N.K: the step first, then the turn it belongs to.
		tm := when(st.End)
		if st.End.IsZero() {
			tm = "open"
		}
		fmt.Fprintf(e.stdout, "step %d.%d%s  %s  (its changes only)\n", st.Turn, st.Num, stepText(*st), tm)
	}
	line := e.turnTitle(t) + "  " + when(t.End)
	if t.Open {
		line = e.turnTitle(t) + "  since " + when(t.Start)
	}
	if t.Target != nil {
		line += fmt.Sprintf("  (to %s)", pointWord(*t.Target, t.TargetStep))
	}
	if len(t.Programs) > 0 {
		line += "  by " + strings.Join(t.Programs, ", ")
	}
	if rep.Step != nil {
		line = "of " + line
	}
	fmt.Fprintln(e.stdout, line)
	if t.MergedFrom > 0 {
		fmt.Fprintf(e.stdout, "(%s, forgotten: the changes since turn %d)\n", mergedText(t), t.Prev())
	}
	if t.Num > 0 && len(rep.Changes) == 0 {
		// The first kept turn lists nothing: say why, not only that.
		if start, err := e.startsHistory(t.Num); err == nil && start {
			fmt.Fprintf(e.stdout, "(history starts here: this turn's own changes were forgotten with the turns before it)\n")
		}
	}
	e.printPrompt(t.Prompt)
	if rep.Step == nil && hasMarkedSteps(t, rep.Steps) {
		fmt.Fprintf(e.stdout, "%s:\n", plural(len(rep.Steps), "step"))
		var rows [][]cell
		for _, st := range rep.Steps {
			tm := when(st.End)
			if st.End.IsZero() {
				tm = "open"
			}
			rows = append(rows, []cell{{text: fmt.Sprintf("%d.%d", st.Turn, st.Num), color: cYellow}, {text: tm, color: cDim},
				{text: st.Tool}, {text: truncate(st.Label, 60)}})
		}
		e.printTable(rows, "  ")
	}
	e.printChanges(rep.Changes, rep.Stats)
	fmt.Fprintln(e.stdout, e.statsLine(rep.Stats))
	if o.patch && len(rep.Changes) > 0 {
		fmt.Fprintln(e.stdout)
		e.printPatches(rep.Changes)
	}
	return nil
}

// hasMarkedSteps reports whether a step boundary was marked in turn t,
// whose steps the daemon listed: then show lists them, also a single one.
// A turn without any has one step, the turn itself, which ends when the
// turn does (open: no end); a marked step ends when its boundary was
// marked, before the turn's end.
func hasMarkedSteps(t ckpt.Turn, steps []ckpt.Step) bool {
	return len(steps) > 1 || len(steps) == 1 && !steps[0].End.Equal(t.End)
}

// stepText is " (TOOL: LABEL)" for a step, or "" when neither is known.
func stepText(st ckpt.Step) string {
	switch {
	case st.Tool != "" && st.Label != "":
		return fmt.Sprintf(" (%s: %s)", st.Tool, visible(st.Label))
	case st.Tool != "":
		return " (" + st.Tool + ")"
	case st.Label != "":
		return " (" + visible(st.Label) + ")"
	}
	return ""
}

// printPrompt prints a turn's whole prompt, if it has one, between blank
// lines, each line indented by four spaces and escaped as labels are
// (tabs kept), leading and trailing blank lines left out.
func (e *env) printPrompt(prompt string) {
	prompt = strings.Trim(prompt, "\r\n")
	if strings.TrimSpace(prompt) == "" {
		return
	}
	fmt.Fprintln(e.stdout)
	for line := range strings.SplitSeq(prompt, "\n") {
		line = strings.TrimRight(line, "\r")
		parts := strings.Split(line, "\t")
		for i, p := range parts {
			parts[i] = visible(p)
		}
		fmt.Fprintln(e.stdout, strings.TrimRight("    "+strings.Join(parts, "\t"), " \t"))
	}
	fmt.Fprintln(e.stdout)
}

// startsHistory reports whether turn n is where history starts now: its
// own changes were forgotten with the turns before it.
func (e *env) startsHistory(n uint64) (bool, error) {
	lg, err := e.h.Log(e.ctx, turnctl.LogRequest{N: 1})
	if err != nil {
		return false, err
	}
	return lg.Start != nil && n <= lg.Start.Turn, nil
}
