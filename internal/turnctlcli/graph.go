package turnctlcli

import (
	"slices"
	"strings"

	"ckptfs/internal/ckpt"
)

// graph.go: log --graph, the timeline drawn as git log --graph draws
// commits: one row per turn, newest first, each turn's node on a column
// that goes down to its parent (ckpt.Turn.Parent). A rewind makes a fork:
// the turns after it continue from the turn it went back to, and the
// turns it went back over are drawn on a branch of their own that joins
// the line at that turn.

// graphLine is one line of the drawing: a turn's row (turn set) or a line
// that joins or shifts columns between two rows (turn nil).
type graphLine struct {
	text string
	turn *ckpt.Turn
}

// drawGraph draws turns (newest first, as log lists them, each at most
// once) with the lines between them. The node of the turn numbered
// current is "@" (the state the tree is in), every other node "*";
// columns are "|", "/" where one moves left, "_" where one crosses others
// to the left. A column whose parent is not listed (forgotten, or cut by
// -n) goes on down to the last row, where the drawing stops: the branch
// joins the line further back. It costs O(rows × columns).
func drawGraph(turns []ckpt.Turn, current uint64) []graphLine {
	var cols []uint64 // the turn each column waits for
	var out []graphLine
	for i := range turns {
		t := &turns[i]
		c := slices.Index(cols, t.Num)
		if c < 0 {
			cols = append(cols, t.Num) // a branch's newest turn: a new column
			c = len(cols) - 1
		}
		node := byte('*')
		if t.Num == current {
			node = '@'
		}
		out = append(out, graphLine{text: rowText(len(cols), c, node), turn: t})
		if i == len(turns)-1 {
			break
		}
		// Only turn 0 has no parent, and it is the oldest: the last row.
		p, _ := t.Parent()
		cols[c] = p
		// Columns that now wait for the same turn join, the rightmost
		// first, each into the leftmost column waiting for that turn.
		for {
			i, j := joinable(cols)
			if j < 0 {
				break
			}
			for _, l := range joinText(len(cols), i, j) {
				out = append(out, graphLine{text: l})
			}
			cols = slices.Delete(cols, j, j+1)
		}
	}
	return out
}

// joinable returns the rightmost column j that waits for the same turn as
// a column left of it, and the leftmost such column i; j is -1 if none.
func joinable(cols []uint64) (i, j int) {
	for j := len(cols) - 1; j > 0; j-- {
		if i := slices.Index(cols[:j], cols[j]); i >= 0 {
			return i, j
		}
	}
	return -1, -1
}

// canvas is one line of the drawing: column k at byte 2k, the gaps
// between them at the odd bytes.
type canvas []byte

func newCanvas(n int) canvas { return canvas(strings.Repeat(" ", max(2*n-1, 0))) }

func (c canvas) String() string { return strings.TrimRight(string(c), " ") }

// rowText is a turn's row: node at column c of n, "|" at the others.
func rowText(n, c int, node byte) string {
	l := newCanvas(n)
	for k := range n {
		l[2*k] = '|'
	}
	l[2*c] = node
	return l.String()
}

// joinText is the lines that join column j of n into column i < j, the
// columns right of j moving one to the left: "|/" when they are next to
// each other, else j crosses the columns between on a first line ("_")
// and lands on i on a second ("|/| |").
func joinText(n, i, j int) []string {
	l := newCanvas(n)
	for k := range n {
		switch {
		case k < j:
			l[2*k] = '|'
		case k > j:
			l[2*k-1] = '/'
		}
	}
	l[2*j-1] = '/'
	if j == i+1 {
		return []string{l.String()}
	}
	for k := i + 1; k < j-1; k++ {
		l[2*k+1] = '_'
	}
	l2 := newCanvas(n - 1)
	for k := range n - 1 {
		l2[2*k] = '|'
	}
	l2[2*i+1] = '/'
	return []string{l.String(), l2.String()}
}
