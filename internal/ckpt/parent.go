package ckpt

import "strings"

// parent.go: the timeline. Turns are numbered in the order they happened,
// but a rewind goes back: the turns after it continue from an earlier
// state, and the turns it went back over stay in history as a branch.

// RestoreLabelPrefix starts the label of every restore turn (kind rewind,
// some paths only: "restore PATH... from N"); the store writes it, and
// Parent tells a restore from a whole-tree rewind by it (stores written
// before turns said so otherwise have nothing else to tell them apart).
const RestoreLabelPrefix = "restore "

// Parent is the turn whose end state t continued from, the edge of the
// timeline `turnctl log --graph` draws; ok is false for turn 0 alone.
//
//   - A whole-tree rewind to T (turnctl rewind T, or an undo done as a
//     rewind to T) has parent T: it ends with the tree as at the end of T,
//     so it and every turn after it form a branch that forks at T, and the
//     turns between T and the rewind stay reachable on the branch left. A
//     rewind to a step of T (T.K) forks at T too: the branch starts inside
//     it.
//   - Every other turn (agent, manual, offline, a restore of some paths, a
//     revert, an undo done as a revert) has parent Prev(): it changed the
//     tree as the previous turn left it (the previous kept one, when the
//     turns before it were merged into it).
//
// The parent may be a turn history no longer holds (forgotten, before
// HistoryStart.Turn); it depends only on t's own record.
func (t Turn) Parent() (uint64, bool) {
	if t.Num == 0 {
		return 0, false
	}
	if t.Rewound() {
		return *t.Target, true
	}
	return t.Prev(), true
}

// Rewound reports whether t is a whole-tree rewind (kind rewind, not a
// restore), whose end state is that of its Target.
func (t Turn) Rewound() bool {
	return t.Kind == KindRewind && t.Target != nil && *t.Target < t.Num &&
		!strings.HasPrefix(t.Label, RestoreLabelPrefix)
}
