package turnctlcli

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/mattn/go-runewidth"
	"github.com/spf13/pflag"

	"ckptfs/internal/ckpt"
	"ckptfs/turnctl"
)

var logCmd = &command{
	name:  "log",
	args:  "[-n N] [--graph] [-S TEXT] [--grep PATTERN] [--program NAME]... [--follow] [-- PATH...]",
	short: "turns, newest first, with what they changed and which programs wrote",
	long: `The time is when the turn ended (an open turn: when it began). Kinds: agent
(begin/end), manual (changes made while no turn was open), rewind (rewind,
undo, restore), revert (revert, or an undo that kept later changes), initial
(turn 0: the tree when history began). A pinned turn says [pinned] (with
its note: [pinned: NOTE]). When the
oldest turns were forgotten (turnctl forget, or the retention policy), the
last line says where history starts now. The files
and lines under .git (git's objects, index, refs) are summed up in one cell,
"git: commit ec90ceb, 24 files in .git", unless --all.

With PATHs (relative to the current directory; "--" before them is
optional), only the turns that changed one of them, or for a directory
anything below it, are listed (a rename counts for both its names), and
their files and lines count those changes only; -n N then shows the N
newest such turns. --follow, with one PATH, follows it back through
renames (git log --follow): past the turn that renamed it, or a directory
above it, to its name, the older turns listed are those that changed it
under the name it had before.

--graph draws the timeline to the left of the turns, as git log --graph
draws commits: a * per turn (@ for the newest, the state the tree is in),
each on a line that goes down to its parent. A turn's parent is the turn
before it, except for a rewind to T (or an undo done as one), whose
parent is T: the turns after it continue from T's state, and the turns it
went back over stay on a branch of their own, joined to the line at T
("|/"). A restore or revert is a turn on the line like any other. --json
gives every turn its "parent" (null for turn 0), with or without --graph.

Search (combine freely with each other, PATHs and -n, which then counts
the turns found; a turn is listed when it passes every one):
  -S TEXT          turns that changed how many times TEXT occurs in the
                   bytes of some regular file they changed (git's pickaxe:
                   TEXT added or removed, not merely moved within a file);
                   only the files each turn changed are read
  --grep PATTERN   turns whose label or whole prompt matches PATTERN, a Go
                   regular expression (https://pkg.go.dev/regexp/syntax);
                   ^ and $ match at each line's start and end, as in git
                   log --grep (\A and \z: the prompt's)
  --program NAME   turns in which the program NAME wrote, as the last
                   column shows it (repeat: any of them)
--graph draws the whole timeline and takes none of them, nor PATHs.`,
	changes: true,
	opts:    func() options { return &logOptions{} },
}

type logOptions struct {
	n        int
	graph    bool
	follow   bool
	pickaxe  flagString
	grep     string
	programs []string
}

// flagString is a string flag that knows whether it was given (-S "").
type flagString struct {
	v   string
	set bool
}

func (f *flagString) String() string     { return f.v }
func (f *flagString) Set(v string) error { f.v, f.set = v, true; return nil }
func (f *flagString) Type() string       { return "string" }

func (o *logOptions) addFlags(fs *pflag.FlagSet) {
	fs.IntVarP(&o.n, "max-count", "n", 0, "show at most `N` turns (0: all)")
	fs.BoolVar(&o.graph, "graph", false, "draw the timeline: forks where a rewind went back")
	fs.VarP(&o.pickaxe, "pickaxe", "S", "only turns that added or removed `TEXT` in a file")
	fs.StringVar(&o.grep, "grep", "", "only turns whose label or prompt matches `PATTERN` (Go regexp)")
	fs.StringArrayVar(&o.programs, "program", nil, "only turns in which program `NAME` wrote (repeatable)")
	fs.BoolVar(&o.follow, "follow", false, "with one PATH: follow it back through renames")
}

func (o *logOptions) run(e *env, args []string) error {
	if o.n < 0 {
		return usagef("-n must not be negative")
	}
	if o.pickaxe.set && o.pickaxe.v == "" {
		return usagef("-S needs a non-empty TEXT to search for")
	}
	if _, err := regexp.Compile(o.grep); err != nil {
		return usagef("bad --grep pattern: %v", err)
	}
	for _, p := range o.programs {
		if p == "" {
			return usagef("--program needs a program name")
		}
	}
	// Every argument is a PATH, with or without "--".
	if o.follow && len(args) != 1 {
		return usagef("--follow takes exactly one PATH")
	}
	req := turnctl.LogRequest{N: o.n, Pickaxe: o.pickaxe.v, Grep: o.grep, Programs: o.programs, Follow: o.follow}
	if len(args) > 0 {
		var err error
		if req.Paths, err = e.relPaths(args); err != nil {
			return err
		}
		e.all = e.all || anyInGitDir(req.Paths)
	}
	if o.graph && req.Filtered() {
		return usagef("--graph draws the whole timeline: it takes no -S, --grep, --program or PATHs")
	}
	var rep *turnctl.LogReply
	err := e.watch("log", func(ctx context.Context) (err error) {
		rep, err = e.h.Log(ctx, req)
		return err
	})
	if err != nil {
		return err
	}
	if e.json {
		return e.printJSON(jLog(rep))
	}
	pins := map[uint64]string{}
	for _, p := range rep.Pins {
		pins[p.Turn] = "pinned"
		if p.Note != "" {
			pins[p.Turn] = "pinned: " + p.Note
		}
	}
	rows := make([][]cell, 0, len(rep.Turns))
	for _, t := range rep.Turns {
		row := e.logRow(t)
		if note, ok := pins[t.Num]; ok {
			row[3].text = strings.TrimSpace(row[3].text + " [" + note + "]")
		}
		if h := rep.Start; h != nil && t.Num == h.Turn {
			// Its own changes went with the turns before it: no counts.
			row[3].text = strings.TrimSpace("[history starts here] " + row[3].text)
			row[4].text, row[5].text, row[6].text = "", "", ""
		}
		rows = append(rows, row)
	}
	rows = dropEmptyColumn(rows, logGitColumn)
	if o.graph && len(rep.Turns) > 0 {
		rows = withGraph(rows, rep)
	}
	e.printTable(rows, "")
	if h := rep.Start; h != nil {
		why := h.By()
		fmt.Fprintf(e.stdout, "history starts at turn %d (older turns forgotten %s, %s)\n", h.Turn, why, when(h.At))
	}
	return nil
}

// logRow is one turn's line: number, time, kind, label and refs, files
// and lines changed (unless e.all, those under .git summed up in a cell
// of their own), programs.
func (e *env) logRow(t ckpt.Turn) []cell {
	tm := when(t.End)
	if t.Open {
		tm = "open"
	}
	var label []string
	if t.Label != "" {
		label = append(label, t.Label)
	}
	for _, r := range t.Refs {
		label = append(label, "ref:"+r)
	}
	if t.MergedFrom > 0 {
		// Said before the label: a long one is truncated.
		label = append([]string{"[" + mergedText(t) + "]"}, label...)
	}
	files, lines, git := "", "", ""
	if st := t.Stats; st != nil && (st.Files > 0 || !t.Empty()) {
		n, added, deleted := st.Files, st.LinesAdded, st.LinesDeleted
		if g := st.Git; g != nil && !e.all {
			n, added, deleted = n-g.Files, added-g.LinesAdded, deleted-g.LinesDeleted
			git = "git: " + g.Summary()
		}
		if n > 0 || git == "" {
			files = plural(n, "file")
			lines = fmt.Sprintf("+%d -%d", added, deleted)
			if st.LinesSkipped {
				lines = "lines not counted"
			}
		}
	}
	kindColor := ""
	switch t.Kind {
	case ckpt.KindAgent:
		kindColor = cBlue
	case ckpt.KindRewind, ckpt.KindRevert:
		kindColor = cRed
	case ckpt.KindManual, ckpt.KindOffline:
		kindColor = cCyan
	}
	return []cell{
		{text: fmt.Sprint(t.Num), color: cYellow, right: true},
		{text: tm, color: cDim},
		{text: string(t.Kind), color: kindColor},
		{text: truncate(strings.Join(label, " "), 60)},
		{text: files, right: true},
		{text: lines},
		{text: git, color: cCyan},
		{text: strings.Join(t.Programs, ", "), color: cDim},
	}
}

// mergedText says which forgotten turns t holds the changes of.
func mergedText(t ckpt.Turn) string {
	if t.MergedFrom == t.Num-1 {
		return fmt.Sprintf("with turn %d", t.MergedFrom)
	}
	return fmt.Sprintf("with turns %d-%d", t.MergedFrom, t.Num-1)
}

// logGitColumn is the index of logRow's git cell.
const logGitColumn = 6

// dropEmptyColumn removes column i from rows when it is empty in all of
// them, so that it adds no blank gap.
func dropEmptyColumn(rows [][]cell, i int) [][]cell {
	for _, r := range rows {
		if i < len(r) && r[i].text != "" {
			return rows
		}
	}
	for j, r := range rows {
		if i < len(r) {
			rows[j] = append(r[:i:i], r[i+1:]...)
		}
	}
	return rows
}

// truncate shortens s to at most n terminal columns (textWidth), marking
// the cut with "...". A wide character is not split.
func truncate(s string, n int) string {
	return runewidth.Truncate(s, n, "...")
}

// withGraph puts the timeline (drawGraph) before rows, one per turn of
// rep (unfiltered, newest first), with the lines between rows that join
// or shift its columns.
func withGraph(rows [][]cell, rep *turnctl.LogReply) [][]cell {
	// The newest turn is the state the tree is in: log lists it first.
	lines := drawGraph(rep.Turns, rep.Turns[0].Num)
	out := make([][]cell, 0, len(lines))
	next := 0
	for _, l := range lines {
		if l.turn == nil {
			out = append(out, []cell{{text: l.text}})
			continue
		}
		out = append(out, append([]cell{{text: l.text}}, rows[next]...))
		next++
	}
	return out
}
