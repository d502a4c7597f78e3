package versionstore

import (
	"testing"
)

// TestMoveLogStaysBounded: a name renamed back and forth n times must not
// make planning a restore cost O(n²). candidates follows every event back
// through the moves so far (moveLog.back); if each rename added a move,
// the n-th event would cost n. The log must hold at most one move per name
// that is currently somewhere else than it was, whatever the number of
// renames, and still answer where each name came from.
func TestMoveLogStaysBounded(t *testing.T) {
	var ml moveLog
	names := []string{"a", "b", "d/c"}
	where := map[string]string{"a": "a"} // current name -> name at the start
	for i := 0; i < 3000; i++ {
		from, to := names[i%3], names[(i+1)%3]
		ml.note(&record{Op: opRename, Path: from, To: to})
		where[to] = where[from]
		delete(where, from)
		if len(ml.moves) > len(names) {
			t.Fatalf("after %d renames the move log holds %d moves", i+1, len(ml.moves))
		}
		for cur, orig := range where {
			if got := ml.back(cur); got != orig {
				t.Fatalf("after %d renames back(%q) = %q, want %q", i+1, cur, got, orig)
			}
		}
	}
}
