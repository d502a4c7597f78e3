package tests

import (
	"strings"
	"testing"
)

// graphColumns is log --graph's output cut to the graph and turn number
// of each line (the lines between rows whole), blanks squeezed: what the
// drawing says, without times.
func graphColumns(out string) string {
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		var keep []string
		for _, w := range strings.Fields(l) {
			if strings.Count(w, ":") == 2 { // the time: the rest is the row's
				break
			}
			keep = append(keep, w)
		}
		b.WriteString(strings.Join(keep, " ") + "\n")
	}
	return b.String()
}

// TestTimelineOnMount: real rewinds, an undo and a restore on a mount make
// the forks log --graph draws (the same offline), --json gives each turn
// its parent by the schema, and -S, --grep and --program find the turns
// they should, on the mount and offline.
func TestTimelineOnMount(t *testing.T) {
	proj := t.TempDir()
	m := mountProject(t, proj)
	turn := func(label, script string) {
		t.Helper()
		m.turnctl(t, "begin", "--label", label)
		runIn(t, proj, script)
		m.turnctl(t, "end")
	}
	turn("add a", `echo alpha > a.txt`)                                        // 1
	turn("add needle\nin the Haystack", `sed -i '$a needle' a.txt`)            // 2
	turn("add b", `echo b > b.txt`)                                            // 3
	m.turnctl(t, "rewind", "1")                                                // 4
	turn("add c", `echo needle | tee c.txt >/dev/null`)                        // 5
	m.turnctl(t, "rewind", "2")                                                // 6
	turn("add d", `echo d > d.txt`)                                            // 7
	if out := m.turnctl(t, "undo"); !strings.Contains(out, "done as turn 8") { // a rewind to 6
		t.Fatalf("undo: %s", out)
	}
	m.turnctl(t, "restore", "1", "--", "a.txt") // 9

	const graph = `@ 9
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
	searches := []struct {
		args []string
		want string
	}{
		{[]string{"-S", "needle"}, "9 6 5 4 2"},
		{[]string{"-S", "needle", "-n", "2", "--", "c.txt"}, "6 5"},
		{[]string{"--grep", "Hay"}, "2"},
		{[]string{"--grep", "^add [a-c]$", "-n", "2"}, "5 3"},
		{[]string{"--program", "tee"}, "5"},
		{[]string{"--program", "sed", "--program", "tee"}, "5 2"},
	}
	check := func(where string) {
		t.Helper()
		out := m.turnctl(t, "log", "--graph")
		if got := graphColumns(out); got != graph {
			t.Errorf("%s: log --graph:\n%s\nwant:\n%s", where, out, graph)
		}
		lg := m.jsonOut(t, "turnctl-log", "log", "--graph")
		want := map[float64]any{9: 8.0, 8: 6.0, 7: 6.0, 6: 2.0, 5: 4.0, 4: 1.0, 3: 2.0, 2: 1.0, 1: 0.0, 0: nil}
		turns := lg["turns"].([]any)
		if len(turns) != len(want) {
			t.Errorf("%s: log --json lists %d turns", where, len(turns))
		}
		for _, tr := range turns {
			tr := tr.(map[string]any)
			if p := tr["parent"]; p != want[tr["num"].(float64)] {
				t.Errorf("%s: turn %v has parent %v, want %v", where, tr["num"], p, want[tr["num"].(float64)])
			}
		}
		for _, s := range searches {
			out := m.turnctl(t, append([]string{"log"}, s.args...)...)
			if got := firstFields(out); got != s.want {
				t.Errorf("%s: log %q: turns %q, want %q\n%s", where, s.args, got, s.want, out)
			}
		}
		m.jsonOut(t, "turnctl-log", "log", "-S", "needle", "--grep", "add", "--program", "sed")
		for _, bad := range [][]string{{"-S", ""}, {"--grep", "("}} {
			stderr, code := m.turnctlFail(t, append([]string{"log"}, bad...)...)
			if code != 2 || strings.Count(stderr, "\n") != 1 {
				t.Errorf("%s: log %q: exit %d, %q", where, bad, code, stderr)
			}
		}
	}
	check("mounted")
	m.Unmount(t)
	check("offline")
}
