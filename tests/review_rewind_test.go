package tests

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// review: a tool builds a directory under a temporary name and renames
// it into place (out.tmp -> out); a build writes out/build/ (--exclude
// build/) later. A rewind to before it leaves out/build where it is,
// in the directory its dry run names as left, lists no excluded path,
// and moves nothing to out.tmp; show of the turn lists no build/ path.
func TestReviewRewindOfADirectoryRenamedIntoPlaceLeavesExcludedPaths(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"a.txt": "a\n"})
	m := mountProject(t, dir, "--exclude", "build/")
	m.turnctl(t, "begin", "--label", "make out")
	runIn(t, dir, "mkdir out.tmp && echo c > out.tmp/src.c && mv out.tmp out")
	m.turnctl(t, "end")
	runIn(t, dir, "mkdir -p out/build && echo o > out/build/obj.o")

	if show := m.turnctl(t, "show", "1"); strings.Contains(show, "build") {
		t.Errorf("show 1 lists an excluded path:\n%s", show)
	}
	dry := m.jsonOut(t, "turnctl-rewind", "rewind", "0", "--dry-run")
	dchanges, dleft := rewindJSONLists(t, dry)
	rep := m.jsonOut(t, "turnctl-rewind", "rewind", "0")
	changes, left := rewindJSONLists(t, rep)
	if !reflect.DeepEqual(changes, dchanges) || !reflect.DeepEqual(left, dleft) {
		t.Errorf("rewind 0: changes %q, left %q; its dry run: %q, %q", changes, left, dchanges, dleft)
	}
	for _, c := range append(dchanges, changes...) {
		if strings.Contains(c, "build") {
			t.Errorf("rewind 0 (or its dry run) lists an excluded path: %s", c)
		}
	}
	if want := []string{"out (absent): out/build"}; !reflect.DeepEqual(left, want) {
		t.Errorf("rewind 0 left %q, want %q", left, want)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "out/build/obj.o")); err != nil || string(b) != "o\n" {
		t.Errorf("out/build/obj.o after the rewind: %q, %v; want it where it was", b, err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "out.tmp")); !os.IsNotExist(err) {
		t.Errorf("out.tmp after the rewind: %v; want it absent, as at turn 0", err)
	}
	if out := m.turnctl(t, "rewind", "0"); !strings.Contains(out, "nothing to change") {
		t.Errorf("rewind 0 again:\n%s", out)
	}
}
