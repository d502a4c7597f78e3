package turnctlcli

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/pflag"

	"ckptfs/internal/ckpt"
	"ckptfs/turnctl"
)

var logCmd = &command{
	name:  "log",
	args:  "[-n N] [-- PATH...]",
	short: "turns, newest first, with what they changed and which programs wrote",
	long: `The time is when the turn ended (an open turn: when it began). Kinds: agent
(begin/end), manual (changes made while no turn was open), rewind (rewind,
undo, restore), revert (revert, or an undo that kept later changes), initial
(turn 0: the tree when history began). A * marks a pinned turn. When the
oldest turns were forgotten (turnctl forget, or the retention policy), the
last line says where history starts now. The files
and lines under .git (git's objects, index, refs) are summed up in one cell,
"git: commit ec90ceb, 24 files in .git", unless --all.

With PATHs (relative to the current directory; "--" before them is
optional), only the turns that changed one of them, or for a directory
anything below it, are listed (a rename counts for both its names), and
their files and lines count those changes only; -n N then shows the N
newest such turns.`,
	changes: true,
	opts:    func() options { return &logOptions{} },
}

type logOptions struct {
	n int
}

func (o *logOptions) addFlags(fs *pflag.FlagSet) {
	fs.IntVarP(&o.n, "max-count", "n", 0, "show at most `N` turns (0: all)")
}

func (o *logOptions) run(e *env, args []string) error {
	if o.n < 0 {
		return usagef("-n must not be negative")
	}
	// Every argument is a PATH, with or without "--".
	req := turnctl.LogRequest{N: o.n}
	if len(args) > 0 {
		var err error
		if req.Paths, err = e.relPaths(args); err != nil {
			return err
		}
		e.all = e.all || anyInGitDir(req.Paths)
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
			row[0].text += "*"
			row[3].text = strings.TrimSpace(row[3].text + " [" + note + "]")
		}
		rows = append(rows, row)
	}
	e.printTable(dropEmptyColumn(rows, logGitColumn), "")
	if h := rep.Start; h != nil {
		why := "by forget"
		if h.Reason == ckpt.ReasonPolicy {
			why = "by the retention policy"
		}
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

// truncate shortens s to at most n runes, marking the cut with "...".
func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-3]) + "..."
}
