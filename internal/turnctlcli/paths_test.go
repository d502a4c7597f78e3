package turnctlcli

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"ckptfs/fusefs/fusefstest"
	"ckptfs/turnctl"
)

// pathsProject holds five turns, each touching a different set of paths:
//
//	1 "one":   a.txt, sub/b.txt, other.txt added
//	2 "two":   other.txt modified
//	3 "three": a.txt and sub/b.txt modified
//	4 "four":  sub renamed to lib (sub/b.txt goes along)
//	5 "five":  x.txt and an empty sub/ added
func pathsProject(t *testing.T) string {
	t.Helper()
	return historyOf(t, func(turn func(label, ref string, fn func()), ov *fusefstest.Overlay) {
		turn("one", "", func() {
			ov.Write("a.txt", "a\n")
			ov.Mkdir("sub")
			ov.Write("sub/b.txt", "b\n")
			ov.Write("other.txt", "o\n")
		})
		turn("two", "", func() { ov.Write("other.txt", "o\no2\n") })
		turn("three", "", func() {
			ov.Write("a.txt", "a2\n")
			ov.Write("sub/b.txt", "b\nb2\nb3\n")
		})
		turn("four", "", func() { ov.Rename("sub", "lib") })
		turn("five", "", func() {
			ov.Write("x.txt", "x\n")
			ov.Mkdir("sub")
		})
	})
}

// logNums returns the turn numbers a text log lists, in order.
func logNums(out string) []string {
	var nums []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			nums = append(nums, f[0])
		}
	}
	return nums
}

func TestLogOfPaths(t *testing.T) {
	dir := pathsProject(t)
	for _, c := range []struct {
		base string
		args []string
		want string
	}{
		{dir, []string{"log", "--", "a.txt"}, "3 1"},
		{dir, []string{"log", "a.txt"}, "3 1"}, // "--" is optional
		{dir, []string{"log", "-n", "1", "--", "a.txt"}, "3"},
		{dir, []string{"log", "--", "other.txt", "x.txt"}, "5 2 1"},
		// Paths are relative to the current directory; a directory's
		// history is that of everything below it, and a rename of the
		// directory above a file is part of the file's history.
		{filepath.Join(dir, "sub"), []string{"log", "--", "b.txt"}, "4 3 1"},
		{dir, []string{"log", "--", "sub"}, "5 4 3 1"},
		{dir, []string{"log", "--", "lib/b.txt"}, "4"},
		{dir, []string{"log", "--", "nothing.txt"}, ""},
	} {
		out, errs, code := tc(t, append([]string{"-C", c.base}, c.args...)...)
		if code != 0 {
			t.Fatalf("%v: %d %s", c.args, code, errs)
		}
		if got := strings.Join(logNums(out), " "); got != c.want {
			t.Errorf("%v in %s lists turns %q, want %q:\n%s", c.args, c.base, got, c.want, out)
		}
	}
	// The counts are those of the paths' changes, not of the whole turn.
	out, _, _ := tc(t, "-C", dir, "log", "--", "sub/b.txt")
	if line := strings.Split(out, "\n")[1]; !strings.Contains(line, "three") || !strings.Contains(line, "1 file  +2 -0") {
		t.Errorf("log -- sub/b.txt counts turn 3 as %q", line)
	}
	out, errs, code := tc(t, "-C", dir, "--json", "log", "--", "a.txt")
	var rep turnctl.LogReply
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil {
		t.Fatalf("--json log -- a.txt: %d %s %s", code, out, errs)
	}
	if len(rep.Turns) != 2 || rep.Turns[0].Num != 3 || rep.Turns[0].Stats == nil || rep.Turns[0].Stats.Files != 1 ||
		rep.Turns[0].Stats.LinesAdded != 1 || rep.Turns[0].Stats.LinesDeleted != 1 || rep.Turns[1].Num != 1 {
		t.Errorf("--json log -- a.txt: %s", out)
	}
	_, errs, code = tc(t, "-C", dir, "log", "--", "/etc")
	if code != 1 || !strings.Contains(errs, "outside the project") {
		t.Errorf("log -- /etc: %d %q", code, errs)
	}
}

func TestShowOfPaths(t *testing.T) {
	dir := pathsProject(t)
	out, errs, code := tc(t, "-C", dir, "show", "3", "--patch", "--", "a.txt")
	if code != 0 {
		t.Fatalf("show 3 -- a.txt: %d %s", code, errs)
	}
	if !strings.Contains(out, "modified  a.txt  +1 -1") || !strings.Contains(out, "-a\n+a2\n") ||
		strings.Contains(out, "b.txt") || !strings.Contains(out, "\n1 file (+1 -1)\n") {
		t.Errorf("show 3 --patch -- a.txt:\n%s", out)
	}
	// From a subdirectory, without "--".
	out, _, code = tc(t, "-C", filepath.Join(dir, "sub"), "show", "3", "b.txt")
	if code != 0 || !strings.Contains(out, "modified  sub/b.txt  +2 -0") || strings.Contains(out, "a.txt") {
		t.Errorf("show 3 b.txt in sub: %d\n%s", code, out)
	}
	// The rename of the directory above moved the file: that is its
	// change, under either of its names; the directory's own rename is
	// not the file's.
	for _, p := range []string{"sub/b.txt", "lib/b.txt"} {
		out, _, _ = tc(t, "-C", dir, "show", "4", "--", p)
		if !strings.Contains(out, "\n  renamed  sub/b.txt -> lib/b.txt\n1 file (+0 -0)\n") || strings.Contains(out, "sub -> lib/") {
			t.Errorf("show 4 -- %s:\n%s", p, out)
		}
	}
	out, _, _ = tc(t, "-C", dir, "show", "4", "--", "sub")
	if !regexp.MustCompile(`(?m)^  renamed +sub -> lib/ *$`).MatchString(out) || !regexp.MustCompile(`(?m)^  renamed +sub/b\.txt -> lib/b\.txt *$`).MatchString(out) {
		t.Errorf("show 4 -- sub:\n%s", out)
	}
	out, _, _ = tc(t, "-C", dir, "show", "4", "--", "x.txt")
	if !strings.HasSuffix(out, "\nno files changed\n") || strings.Contains(out, "renamed") {
		t.Errorf("show 4 -- x.txt:\n%s", out)
	}
	out, errs, code = tc(t, "-C", dir, "--json", "show", "3", "--", "sub")
	var rep turnctl.ShowReply
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil {
		t.Fatalf("--json show 3 -- sub: %d %s %s", code, out, errs)
	}
	if len(rep.Changes) != 1 || rep.Changes[0].Path != "sub/b.txt" || rep.Stats.Files != 1 || rep.Stats.LinesAdded != 2 {
		t.Errorf("--json show 3 -- sub: %s", out)
	}
}
