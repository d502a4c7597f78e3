package turnctlcli

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"ckptfs/fusefs/fusefstest"
	"ckptfs/internal/ckpt"
	"ckptfs/versionstore"
)

// timelineProject makes a history with forks, closed for offline use:
//
//	1 agent "add a": a.txt "alpha\n"
//	2 agent "add needle" (prompt "add needle\nin the Haystack"), by npm: a.txt += "needle\n"
//	3 agent "add b": b.txt
//	4 rewind to 1
//	5 agent "add c": c.txt "needle\n"
//	6 rewind to 2
//	7 agent "add d": d.txt
//	8 undo turn 7 (a rewind to 6)
//	9 restore a.txt from 1
func timelineProject(t *testing.T) string {
	t.Helper()
	dir, store, ov := offlineProject(t)
	turn := func(text, comm string, fn func()) {
		if _, err := store.Begin(ckpt.KindAgent, text, ""); err != nil {
			t.Fatal(err)
		}
		ov.Comm = comm
		fn()
		if _, err := store.End(""); err != nil {
			t.Fatal(err)
		}
	}
	rewind := func(target uint64, opts versionstore.RewindOptions) {
		opts.Who = ckpt.Program{Comm: "turnctl"}
		if _, err := store.Rewind(target, ov.Tree, opts); err != nil {
			t.Fatal(err)
		}
	}
	turn("add a", "sed", func() { ov.Write("a.txt", "alpha\n") })
	turn("add needle\nin the Haystack", "npm", func() { ov.Write("a.txt", "alpha\nneedle\n") })
	turn("add b", "sed", func() { ov.Write("b.txt", "b\n") })
	rewind(1, versionstore.RewindOptions{})
	turn("add c", "sed", func() { ov.Write("c.txt", "needle\n") })
	rewind(2, versionstore.RewindOptions{})
	turn("add d", "sed", func() { ov.Write("d.txt", "d\n") })
	rewind(6, versionstore.RewindOptions{Undo: true})
	rewind(1, versionstore.RewindOptions{Paths: []string{"a.txt"}})
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// graphOf is the graph and turn columns of log output: each line's text
// up to the turn's time (or all of a line between rows), blanks squeezed.
func graphOf(out string) string {
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		f := strings.Fields(l)
		var keep []string
		for _, w := range f {
			if strings.Count(w, ":") == 2 { // the time: what follows is the row's
				break
			}
			keep = append(keep, w)
		}
		fmt.Fprintln(&b, strings.Join(keep, " "))
	}
	return b.String()
}

func TestLogGraph(t *testing.T) {
	dir := timelineProject(t)
	out, errs, code := tc(t, "-C", dir, "log", "--graph")
	if code != 0 {
		t.Fatalf("log --graph: %d %s", code, errs)
	}
	t.Logf("log --graph:\n%s", out)
	want := `@ 9
* 8
| * 7
|/
* 6
| * 5
| * 4
| | * 3
| |/
|/|
* | 2
|/
* 1
* 0
`
	if got := graphOf(out); got != want {
		t.Errorf("log --graph:\n%s\ngraph:\n%s\nwant:\n%s", out, got, want)
	}
	// The columns after the graph stay aligned: every turn's time starts
	// at the same place.
	var at []int
	for _, l := range strings.Split(out, "\n") {
		if i := strings.Index(l, ":"); i > 0 {
			at = append(at, i)
		}
	}
	for _, i := range at {
		if i != at[0] {
			t.Errorf("columns not aligned:\n%s", out)
			break
		}
	}
	if !strings.Contains(out, "rewind to 2") || !strings.Contains(out, "undo turn 7") {
		t.Errorf("log --graph lost the labels:\n%s", out)
	}
	out, _, _ = tc(t, "-C", dir, "log", "--graph", "-n", "4")
	if got := graphOf(out); got != "@ 9\n* 8\n| * 7\n|/\n* 6\n" {
		t.Errorf("log --graph -n 4:\n%s", out)
	}

	var lg struct {
		Turns []struct{ Num, Parent *uint64 }
	}
	tcJSON(t, dir, &lg, "log", "--graph")
	wantParent := map[uint64]uint64{9: 8, 8: 6, 7: 6, 6: 2, 5: 4, 4: 1, 3: 2, 2: 1, 1: 0}
	for _, tr := range lg.Turns {
		switch p, ok := wantParent[*tr.Num]; {
		case !ok && tr.Parent != nil:
			t.Errorf("turn %d: parent %d, want null", *tr.Num, *tr.Parent)
		case ok && (tr.Parent == nil || *tr.Parent != p):
			t.Errorf("turn %d: parent %v, want %d", *tr.Num, tr.Parent, p)
		}
	}
	if len(lg.Turns) != 10 {
		t.Errorf("log --json: %d turns", len(lg.Turns))
	}
	var sh struct{ Turn struct{ Parent *uint64 } }
	tcJSON(t, dir, &sh, "show", "6")
	if sh.Turn.Parent == nil || *sh.Turn.Parent != 2 {
		t.Errorf("show 6 --json: parent %v", sh.Turn.Parent)
	}
}

// turnsOf is the turn numbers log printed, in order.
func turnsOf(out string) string {
	var nums []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			nums = append(nums, strings.TrimSuffix(f[0], "*"))
		}
	}
	return strings.Join(nums, " ")
}

func TestLogSearch(t *testing.T) {
	dir := timelineProject(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-S", "needle"}, "9 6 5 4 2"},
		{[]string{"-S", "needle", "-n", "2"}, "9 6"},
		{[]string{"-S", "needle", "--", "c.txt"}, "6 5"},
		{[]string{"-S", "alpha\nneedle"}, "9 6 4 2"},
		{[]string{"-S", "nothing like it"}, ""},
		{[]string{"--pickaxe", "b\n"}, "4 3"},
		{[]string{"--grep", "Hay"}, "2"},
		{[]string{"--grep", "^add [bc]$"}, "5 3"},
		{[]string{"--grep", "^(rewind|undo)"}, "8 6 4"},
		// ^ and $ match at each line of a prompt, as in git log --grep.
		{[]string{"--grep", "^in the Hay"}, "2"},
		{[]string{"--grep", "needle$\n^in the"}, "2"},
		{[]string{"--grep", "\\Ain the"}, ""},
		{[]string{"--program", "npm"}, "2"},
		{[]string{"--program", "npm", "--program", "turnctl"}, "9 8 6 4 2"},
		{[]string{"--program", "turnctl", "-S", "needle", "-n", "3"}, "9 6 4"},
		{[]string{"--program", "sed", "--grep", "add", "--", "d.txt"}, "7"},
	} {
		out, errs, code := tc(t, append([]string{"-C", dir, "log"}, c.args...)...)
		if code != 0 || turnsOf(out) != c.want {
			t.Errorf("log %q: %d %q, want turns %q\n%s", c.args, code, errs, c.want, out)
		}
	}
	var lg struct{ Turns []map[string]any }
	tcJSON(t, dir, &lg, "log", "-S", "needle", "--", "a.txt")
	if len(lg.Turns) != 4 {
		t.Errorf("log --json -S needle -- a.txt: %d turns", len(lg.Turns))
	}
	for _, c := range []struct {
		args []string
		err  string
	}{
		{[]string{"-S", ""}, "turnctl log: -S needs a non-empty TEXT to search for (see turnctl log --help)\n"},
		{[]string{"--grep", "a("}, "turnctl log: bad --grep pattern: error parsing regexp: missing closing ): `a(` (see turnctl log --help)\n"},
		{[]string{"--program", ""}, "turnctl log: --program needs a program name (see turnctl log --help)\n"},
		{[]string{"--graph", "-S", "x"}, "turnctl log: --graph draws the whole timeline: it takes no -S, --grep, --program or PATHs (see turnctl log --help)\n"},
	} {
		out, errs, code := tc(t, append([]string{"-C", dir, "log"}, c.args...)...)
		if code != 2 || errs != c.err || out != "" {
			t.Errorf("log %q: %d %q %q, want exit 2 and %q", c.args, code, out, errs, c.err)
		}
	}
}

// TestLogSearchScale: -S, --grep and log --graph over 1000 turns; the
// times are logged (go test -v), not asserted.
func TestLogSearchScale(t *testing.T) {
	if testing.Short() {
		t.Skip("1000 turns")
	}
	dir := t.TempDir()
	t.Setenv("CKPTFS_DIR", "")
	store, err := versionstore.Open(filepath.Join(dir, ".ckptfs"), versionstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ov := fusefstest.New(t, dir, store)
	body := strings.Repeat("some line of code that is not it\n", 200)
	for i := 1; i <= 1000; i++ {
		if _, err := store.Begin(ckpt.KindAgent, fmt.Sprintf("turn %d", i), ""); err != nil {
			t.Fatal(err)
		}
		text := body + fmt.Sprintf("v%d\n", i)
		if i%100 == 0 {
			text += "needle\n"
		}
		ov.Write(fmt.Sprintf("f%d.txt", i%20), text)
		if _, err := store.End(""); err != nil {
			t.Fatal(err)
		}
		if i%250 == 0 {
			if _, err := store.Rewind(uint64(i-5), ov.Tree, versionstore.RewindOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	tc(t, "-C", dir, "log") // counts and caches every turn's Stats first
	for _, args := range [][]string{{"--graph"}, {"-S", "needle"}, {"--grep", "^turn 99"}} {
		began := time.Now()
		out, errs, code := tc(t, append([]string{"-C", dir, "log"}, args...)...)
		if code != 0 {
			t.Fatalf("log %q: %d %s", args, code, errs)
		}
		t.Logf("log %s over 1004 turns: %v (%d lines)", strings.Join(args, " "), time.Since(began).Round(time.Millisecond), strings.Count(out, "\n"))
		if args[0] == "-S" && turnsOf(out) == "" {
			t.Errorf("log -S needle found nothing")
		}
	}
}

// TestDrawGraph: forks from one turn, a join across other columns, and a
// parent that is not listed (forgotten) whose column runs on to the end.
func TestDrawGraph(t *testing.T) {
	u := func(n uint64) *uint64 { return &n }
	agent := func(n uint64) ckpt.Turn { return ckpt.Turn{Num: n, Kind: ckpt.KindAgent} }
	rewind := func(n, to uint64) ckpt.Turn {
		return ckpt.Turn{Num: n, Kind: ckpt.KindRewind, Label: fmt.Sprintf("rewind to %d", to), Target: u(to)}
	}
	draw := func(turns ...ckpt.Turn) string {
		var b strings.Builder
		for _, l := range drawGraph(turns, turns[0].Num) {
			fmt.Fprintf(&b, "%s", l.text)
			if l.turn != nil {
				fmt.Fprintf(&b, " %d", l.turn.Num)
			}
			b.WriteString("\n")
		}
		return b.String()
	}
	for _, c := range []struct {
		turns []ckpt.Turn
		want  string
	}{
		// Rewound to 1 twice: two branches leave 1.
		{[]ckpt.Turn{agent(6), rewind(5, 1), rewind(4, 1), agent(3), agent(2), agent(1), {Num: 0}},
			"@ 6\n* 5\n| * 4\n|/\n| * 3\n| * 2\n|/\n* 1\n* 0\n"},
		// 7 went back to 2 while the branches of 10 and 9 wait for 4
		// and 5: its column crosses theirs to join column 0.
		{[]ckpt.Turn{agent(12), rewind(11, 2), rewind(10, 4), rewind(9, 5), agent(8), rewind(7, 2),
			agent(6), agent(5), agent(4), agent(3), agent(2), agent(1)},
			"@ 12\n* 11\n| * 10\n| | * 9\n| | | * 8\n| | | * 7\n| |_|/\n|/| |\n| | | * 6\n| | |/\n" +
				"| | * 5\n| |/\n| * 4\n| * 3\n|/\n* 2\n* 1\n"},
		// History starts at 5: 7 went back to the forgotten 2.
		{[]ckpt.Turn{agent(8), rewind(7, 2), agent(6), agent(5)},
			"@ 8\n* 7\n| * 6\n| * 5\n"},
	} {
		if got := draw(c.turns...); got != c.want {
			t.Errorf("drawGraph:\n%s\nwant:\n%s", got, c.want)
		}
	}
}
