package turnctlcli

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// TestShowSteps: show N.K names the step in its first line and the turn
// after it; show N lists a turn's steps when a boundary was marked in
// it, also a single step, and none for a turn without any.
func TestShowSteps(t *testing.T) {
	e, out, _, ov := onlineEnv(t)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must((&beginOptions{label: "one step"}).run(e, nil))
	ov.Write("a.go", "package a\n")
	must((&stepOptions{tool: "Edit", label: "a.go"}).run(e, nil))
	must((&endOptions{}).run(e, nil))
	must((&beginOptions{label: "no step"}).run(e, nil))
	ov.Write("b.go", "package b\n")
	must((&endOptions{}).run(e, nil))
	times := regexp.MustCompile(`\d\d:\d\d:\d\d`)
	show := func(arg string) string {
		t.Helper()
		out.Reset()
		must((&showOptions{}).run(e, []string{arg}))
		return times.ReplaceAllString(out.String(), "TIME")
	}
	for _, c := range []struct{ arg, want string }{
		{"1", "turn 1  agent  \"one step\"  TIME  by test\n1 step:\n  1.1  TIME  Edit  a.go\n  added  a.go  +1 -0\n1 file (+1 -0)\n"},
		{"1.1", "step 1.1 (Edit: a.go)  TIME  (its changes only)\nof turn 1  agent  \"one step\"  TIME  by test\n  added  a.go  +1 -0\n1 file (+1 -0)\n"},
		{"2", "turn 2  agent  \"no step\"  TIME  by test\n  added  b.go  +1 -0\n1 file (+1 -0)\n"},
		{"2.1", "step 2.1  TIME  (its changes only)\nof turn 2  agent  \"no step\"  TIME  by test\n  added  b.go  +1 -0\n1 file (+1 -0)\n"},
	} {
		if got := show(c.arg); got != c.want {
			t.Errorf("show %s:\n%s\nwant:\n%s", c.arg, got, c.want)
		}
	}
}

// TestLogAlignsWideLabels: log pads its columns by terminal width, so a
// label of wide characters (CJK, emoji) does not push the next columns
// right; truncation counts columns too.
func TestLogAlignsWideLabels(t *testing.T) {
	e, out, _, ov := onlineEnv(t)
	for i, label := range []string{"修复解析器", "fix 🎉", "plain label", strings.Repeat("长", 40)} {
		if err := (&beginOptions{label: label}).run(e, nil); err != nil {
			t.Fatal(err)
		}
		ov.Write(fmt.Sprintf("f%d.go", i), "package f\n")
		if err := (&endOptions{}).run(e, nil); err != nil {
			t.Fatal(err)
		}
	}
	out.Reset()
	if err := (&logOptions{}).run(e, nil); err != nil {
		t.Fatal(err)
	}
	got := regexp.MustCompile(`\d\d:\d\d:\d\d`).ReplaceAllString(out.String(), "TIME")
	want := "" +
		"4  TIME  agent    " + strings.Repeat("长", 28) + "...  1 file  +1 -0  test\n" +
		"3  TIME  agent    plain label" + strings.Repeat(" ", 48) + "  1 file  +1 -0  test\n" +
		"2  TIME  agent    fix 🎉" + strings.Repeat(" ", 53) + "  1 file  +1 -0  test\n" +
		"1  TIME  agent    修复解析器" + strings.Repeat(" ", 49) + "  1 file  +1 -0  test\n" +
		"0  TIME  initial\n"
	if got != want {
		t.Errorf("log:\n%s\nwant:\n%s", got, want)
	}
}
