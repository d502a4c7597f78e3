package turnctlcli

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/mattn/go-runewidth"
	"golang.org/x/sys/unix"

	"ckptfs/internal/bytejson"
	"ckptfs/internal/ckpt"
	"ckptfs/internal/units"
	"ckptfs/turnctl"
)

// useColor: only on a terminal, never with NO_COLOR or TERM=dumb.
func useColor(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok || os.Getenv("NO_COLOR") != "" || os.Getenv("TERM") == "dumb" {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

const (
	cReset  = "\x1b[0m"
	cBold   = "\x1b[1m"
	cDim    = "\x1b[2m"
	cRed    = "\x1b[31m"
	cGreen  = "\x1b[32m"
	cYellow = "\x1b[33m"
	cBlue   = "\x1b[34m"
	cCyan   = "\x1b[36m"
)

// paint wraps s in a colour when e prints colour.
func (e *env) paint(color, s string) string {
	if !e.color || s == "" {
		return s
	}
	return color + s + cReset
}

func (e *env) printJSON(v any) error {
	data, err := bytejson.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = e.stdout.Write(append(data, '\n'))
	return err
}

// cell is one table cell: its text and colour.
type cell struct {
	text  string
	color string
	right bool // right-aligned
}

// textWidth is how many terminal columns s takes: 2 for a wide character
// (CJK, most emoji), 0 for a combining mark.
func textWidth(s string) int { return runewidth.StringWidth(s) }

// printTable prints rows with columns aligned by their visible width (in
// terminal columns: textWidth), two spaces apart; the last column is not
// padded.
func (e *env) printTable(rows [][]cell, indent string) {
	var widths []int
	for _, r := range rows {
		for i := range r {
			r[i].text = visible(r[i].text)
		}
	}
	for _, r := range rows {
		for i, c := range r {
			if i >= len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], textWidth(c.text))
		}
	}
	for _, r := range rows {
		var b strings.Builder
		b.WriteString(indent)
		// Trailing empty cells are dropped so lines do not end in blanks.
		n := len(r)
		for n > 0 && r[n-1].text == "" {
			n--
		}
		for i, c := range r[:n] {
			pad := strings.Repeat(" ", widths[i]-textWidth(c.text))
			if i > 0 {
				b.WriteString("  ")
			}
			if c.right {
				b.WriteString(pad)
			}
			b.WriteString(e.paint(c.color, c.text))
			if !c.right && i < n-1 {
				b.WriteString(pad)
			}
		}
		fmt.Fprintln(e.stdout, b.String())
	}
}

// inGitDir reports whether p (root-relative) is at or below the project's
// .git directory.
func inGitDir(p string) bool {
	_, ok := ckpt.Under(p, ckpt.GitDir)
	return ok
}

// anyInGitDir reports whether one of paths (root-relative) lies in .git:
// asked for by name, its changes are listed one by one.
func anyInGitDir(paths []string) bool {
	return slices.ContainsFunc(paths, inGitDir)
}

// printChanges prints the table of changes, those under .git as one
// summary line after it unless e.all.
func (e *env) printChanges(cs []turnctl.FileChange, st ckpt.Stats) {
	e.printChangesCut(cs, st, "")
}

// listCut is how many changes a rewind, undo or restore lists without
// --all: a rewind of 20,000 files prints them and a line that says how
// many more there are. A list at most listSlack longer is printed whole
// ("and 3 more" would save nothing).
const (
	listCut   = 50
	listSlack = 10
)

// printChangesCut is printChanges with the list cut after listCut rows
// unless e.all, when more is not "": the line that says how many more
// there are ends with more (where to see them).
func (e *env) printChangesCut(cs []turnctl.FileChange, st ckpt.Stats, more string) {
	rows := e.changeRows(cs)
	cut := 0
	if more != "" && !e.all && len(rows) > listCut+listSlack {
		cut = len(rows) - listCut
		rows = rows[:listCut]
	}
	e.printTable(rows, "  ")
	if cut > 0 {
		fmt.Fprintf(e.stdout, "  %s\n", e.paint(cDim, fmt.Sprintf("... and %d more (%s)", cut, more)))
	}
	if g := e.gitSummary(cs, st); g != nil {
		fmt.Fprintln(e.stdout, "  "+e.paint(cCyan, "git:")+" "+g.Summary())
	}
}

// gitSummary is what e folds into one line of the changes under .git:
// nil with --all or when there are none. st.Git says what happened to
// HEAD; a reply whose Stats lack it (an older daemon) still gets its
// changes under .git counted from cs.
func (e *env) gitSummary(cs []turnctl.FileChange, st ckpt.Stats) *ckpt.GitStats {
	if e.all {
		return nil
	}
	if st.Git != nil {
		return st.Git
	}
	var g ckpt.GitStats
	for _, c := range cs {
		if c.InGitDir() && !(isDirState(c.Before) && (c.After == nil || isDirState(c.After)) || c.Before == nil && isDirState(c.After)) {
			g.Files++
		}
	}
	if g.Files == 0 {
		return nil
	}
	return &g
}

func isDirState(s *turnctl.FileState) bool { return s != nil && s.Type == ckpt.Dir }

// changeRows renders file changes as table rows: kind, path, details.
// Unless e.all, the changes under .git are left out (printChanges sums
// them up).
func (e *env) changeRows(cs []turnctl.FileChange) [][]cell {
	rows := make([][]cell, 0, len(cs))
	for _, c := range cs {
		if !e.all && c.InGitDir() {
			continue
		}
		path := printable(c.Path)
		if (c.After != nil && c.After.Type == ckpt.Dir) || (c.After == nil && c.Before != nil && c.Before.Type == ckpt.Dir) {
			path += "/"
		}
		if c.Kind == ckpt.Renamed {
			path = printable(c.From) + " -> " + path
		}
		rows = append(rows, []cell{
			{text: kindLabel(c), color: kindColor(c.Kind)},
			{text: path},
			{text: lines(c), color: ""},
			{text: details(c), color: cDim},
		})
	}
	return rows
}

// printable returns a path as is if it is valid UTF-8 without control
// characters, else quoted with Go escapes ("new\nline", "bad\xff"), so
// that one path is always one line of output.
func printable(p string) string {
	if !utf8.ValidString(p) || strings.ContainsFunc(p, unicode.IsControl) || strings.ContainsFunc(p, bidi) {
		return strconv.Quote(p)
	}
	return p
}

// bidi reports whether r is a Unicode bidirectional control, which makes
// a terminal show the text around it in another order than it is
// (U+202E turns "txt.exe" into what reads "exe.txt").
func bidi(r rune) bool {
	return r == 0x200e || r == 0x200f || r == 0x061c || r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069
}

// kindLabel is the kind of change as the change lists print it: a change
// of owner alone is "owner" (its kind, in JSON too, is "mode": only mode
// or owner changed).
func kindLabel(c turnctl.FileChange) string {
	if b, a := c.Before, c.After; c.Kind == ckpt.ModeOnly && b != nil && a != nil && b.Mode == a.Mode && (b.UID != a.UID || b.GID != a.GID) {
		return "owner"
	}
	return string(c.Kind)
}

func kindColor(k ckpt.ChangeKind) string {
	switch k {
	case ckpt.Added:
		return cGreen
	case ckpt.Deleted:
		return cRed
	case ckpt.Renamed:
		return cCyan
	}
	return cYellow
}

// lines renders the +/- count of a change ("" when there is none).
func lines(c turnctl.FileChange) string {
	switch {
	case c.NotCaptured:
		return "bytes never captured"
	case c.Binary && c.Before != nil && c.After != nil:
		return "binary, " + units.Bytes(c.Before.Size) + " -> " + units.Bytes(c.After.Size)
	case c.Binary && c.After != nil:
		return "binary, " + units.Bytes(c.After.Size)
	case c.Binary && c.Before != nil:
		return "binary, " + units.Bytes(c.Before.Size)
	case c.Binary:
		return "binary"
	case c.LinesAdded == 0 && c.LinesDeleted == 0:
		return ""
	}
	return fmt.Sprintf("+%d -%d", c.LinesAdded, c.LinesDeleted)
}

// details: what else changed (mode, type, symlink target).
func details(c turnctl.FileChange) string {
	var parts []string
	b, a := c.Before, c.After
	if b != nil && a != nil {
		if b.Type != a.Type {
			parts = append(parts, b.Type.String()+" -> "+a.Type.String())
		} else if b.Mode != a.Mode {
			parts = append(parts, b.Mode+" -> "+a.Mode)
		}
		if b.UID != a.UID || b.GID != a.GID {
			parts = append(parts, fmt.Sprintf("owner %d:%d -> %d:%d", b.UID, b.GID, a.UID, a.GID))
		}
		if a.Type == ckpt.Symlink && b.Target != a.Target {
			parts = append(parts, "-> "+a.Target)
		}
	} else if a != nil && a.Type == ckpt.Symlink {
		parts = append(parts, "-> "+a.Target)
	}
	return strings.Join(parts, ", ")
}

// statsLine: "3 files (+12 -4)"; unless e.all, the files under .git
// are left out (their summary line says how many there are).
func (e *env) statsLine(st ckpt.Stats) string {
	if !e.all && st.Git != nil {
		st = st.OutsideGit()
		if st.Files == 0 {
			return "no files changed outside .git"
		}
	}
	if st.Files == 0 {
		return "no files changed"
	}
	if st.LinesSkipped {
		return plural(st.Files, "file") + " (lines not counted)"
	}
	return fmt.Sprintf("%s (+%d -%d)", plural(st.Files, "file"), st.LinesAdded, st.LinesDeleted)
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// when renders a time compactly: the clock today, else the date too.
func when(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	t = t.Local()
	now := time.Now()
	switch {
	case t.Year() == now.Year() && t.YearDay() == now.YearDay():
		return t.Format("15:04:05")
	case t.Year() == now.Year():
		return t.Format("Jan 02 15:04")
	}
	return t.Format("2006-01-02 15:04")
}

// turnTitle: `turn 4  agent  "fix tests"  ref:msg-3`.
func (e *env) turnTitle(t ckpt.Turn) string {
	parts := []string{e.paint(cBold+cYellow, fmt.Sprintf("turn %d", t.Num)), string(t.Kind)}
	if t.Open {
		parts = append(parts, e.paint(cGreen, "open"))
	}
	if t.Label != "" {
		parts = append(parts, fmt.Sprintf("%q", t.Label))
	}
	for _, r := range t.Refs {
		parts = append(parts, "ref:"+r)
	}
	return strings.Join(parts, "  ")
}

// printPatches prints the patches of changes, coloured on a terminal;
// unless e.all, not those of the changes inside .git, which the lists sum
// up in one line (and git apply refuses to write there).
func (e *env) printPatches(cs []turnctl.FileChange) {
	for _, c := range cs {
		if c.Patch == "" || !e.all && c.InGitDir() {
			continue
		}
		if !e.color {
			io.WriteString(e.stdout, c.Patch)
			continue
		}
		for _, l := range strings.SplitAfter(c.Patch, "\n") {
			switch {
			case l == "":
			case strings.HasPrefix(l, "diff --git"), strings.HasPrefix(l, "--- "), strings.HasPrefix(l, "+++ "):
				io.WriteString(e.stdout, e.paint(cBold, strings.TrimSuffix(l, "\n"))+"\n")
			case strings.HasPrefix(l, "@@"):
				io.WriteString(e.stdout, e.paint(cCyan, strings.TrimSuffix(l, "\n"))+"\n")
			case strings.HasPrefix(l, "+"):
				io.WriteString(e.stdout, e.paint(cGreen, strings.TrimSuffix(l, "\n"))+"\n")
			case strings.HasPrefix(l, "-"):
				io.WriteString(e.stdout, e.paint(cRed, strings.TrimSuffix(l, "\n"))+"\n")
			default:
				io.WriteString(e.stdout, l)
			}
		}
	}
}

// visible escapes what a terminal would act on instead of showing: control
// characters (ESC starts a sequence that recolours or moves the cursor, a
// carriage return overwrites the line), bidirectional controls (bidi)
// and bytes that are not UTF-8. A
// label, a ref or a path is text from anyone; it is printed as Go writes
// such characters in a quoted string (\x1b, \r, \u0085).
func visible(s string) string {
	control := func(r rune) bool { return r < 0x20 || r == 0x7f || r >= 0x80 && r <= 0x9f || bidi(r) }
	if utf8.ValidString(s) && !strings.ContainsFunc(s, control) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, "\\x%02x", s[i])
		case r == '\t':
			b.WriteString("\\t")
		case r == '\n':
			b.WriteString("\\n")
		case r == '\r':
			b.WriteString("\\r")
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, "\\x%02x", r)
		case control(r):
			fmt.Fprintf(&b, "\\u%04x", r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}
