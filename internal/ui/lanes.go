package ui

import "ckptfs/internal/ckpt"

// lanes.go: the timeline laid out for drawing, as `turnctl log --graph`
// lays it out in text. Rows go newest first; each turn's node sits in a
// lane (a column) that goes down to its parent (ckpt.Turn.Parent). A
// rewind to T makes a fork: the turns after it continue from T, so the
// lane of the newest turn reaches T past the turns the rewind went back
// over, which keep a lane of their own that joins at T. Lanes keep their
// column (a freed one is reused further down), so a row is drawn from its
// own record alone, which is what lets the page load the timeline a page
// of rows at a time.

// lane is how to draw one row.
type lane struct {
	Col int `json:"col"` // the node's column
	// Up are the columns whose lines come down into the node: the lanes
	// of the turns that continued from it (its children).
	Up []int `json:"up"`
	// Through are the columns of other lanes, passing by.
	Through []int `json:"through"`
	// Down: a line goes on below the node, to its parent (listed
	// further down; not for turn 0, nor when the parent was forgotten).
	Down bool `json:"down"`
}

// layout returns each turn's lane (turns newest first, as Log lists
// them) and how many columns the drawing needs. It costs O(rows ×
// columns).
func layout(turns []ckpt.Turn) ([]lane, int) {
	listed := make(map[uint64]bool, len(turns))
	for _, t := range turns {
		listed[t.Num] = true
	}
	const free = ^uint64(0)
	var cols []uint64 // the turn each column waits for; free if none
	width := 0
	out := make([]lane, len(turns))
	for i, t := range turns {
		l := lane{Col: -1, Up: []int{}, Through: []int{}}
		for c, w := range cols {
			switch {
			case w == t.Num:
				if l.Col < 0 {
					l.Col = c
				}
				l.Up = append(l.Up, c)
				cols[c] = free
			case w != free:
				l.Through = append(l.Through, c)
			}
		}
		if l.Col < 0 { // nothing continued from it: a branch's newest turn
			for c, w := range cols {
				if w == free {
					l.Col = c
					break
				}
			}
			if l.Col < 0 {
				cols = append(cols, free)
				l.Col = len(cols) - 1
			}
		}
		if p, ok := t.Parent(); ok && listed[p] && p < t.Num {
			cols[l.Col] = p
			l.Down = true
		}
		width = max(width, len(cols))
		out[i] = l
	}
	return out, width
}
