package tests

import (
	"os/exec"
	"strings"
	"testing"
)

// TestGitRewindPastARealGC: real git. Turn 1 commits A, turn 2 commits B,
// turn 3 runs git gc (which packs every reachable object, B too, and the
// refs). A rewind to turn 1 brings A's loose object back and moves main
// to it: no commit was made.
func TestGitRewindPastARealGC(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	for _, gc := range []string{"git gc -q", "git repack -a -d -q && git prune-packed"} {
		t.Run(strings.Fields(gc)[1], func(t *testing.T) {
			dir := t.TempDir()
			m := mountProject(t, dir)
			m.turnctl(t, "begin", "--label", "A")
			runIn(t, dir, "git init -q -b main && echo a > a && git add a && git commit -qm A")
			m.turnctl(t, "end")
			a := strings.TrimSpace(runIn(t, dir, "git rev-parse HEAD"))
			m.turnctl(t, "begin", "--label", "B")
			runIn(t, dir, "echo b > b && git add b && git commit -qm B")
			m.turnctl(t, "end")
			b := strings.TrimSpace(runIn(t, dir, "git rev-parse HEAD"))
			m.turnctl(t, "begin", "--label", "gc")
			runIn(t, dir, gc)
			m.turnctl(t, "end")
			t.Logf("loose objects after %s: %q", gc, runIn(t, dir, "find .git/objects -type f -path '*/objects/??/*' | wc -l"))
			out := m.turnctl(t, "rewind", "1")
			t.Logf("rewind 1:\n%s", out)
			if strings.Contains(out, "commit "+a[:7]) {
				t.Errorf("a rewind past %q reads as a new commit %s (was %s):\n%s", gc, a[:7], b[:7], out)
			}
		})
	}
}
