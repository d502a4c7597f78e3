package ckpt

import (
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestLabelOfAndPromptOf(t *testing.T) {
	long := strings.Repeat("é", 300)
	for _, c := range []struct{ text, label, prompt string }{
		{"fix it", "fix it", ""},
		{"  fix it \n", "fix it", ""},
		{"\n\n  two\tthree  \nmore", "two three", "\n\n  two\tthree  \nmore"},
		{"a\r\nb", "a", "a\r\nb"},
		{"", "", ""},
		{"red \x1b[31m", "red \x1b[31m", ""}, // escaped where printed
		{long, strings.Repeat("é", MaxLabel-3) + "...", long},
	} {
		if got := LabelOf(c.text); got != c.label {
			t.Errorf("LabelOf(%q) = %q, want %q", c.text, got, c.label)
		}
		if got := PromptOf(c.text); got != c.prompt {
			t.Errorf("PromptOf(%q) = %q, want %q", c.text, got, c.prompt)
		}
	}
}

func TestCutText(t *testing.T) {
	if s := strings.Repeat("x", MaxText); CutText(s) != s {
		t.Error("CutText changed a text of MaxText bytes")
	}
	s := strings.Repeat("é", MaxText) // 2 bytes each
	got := CutText(s)
	if len(got) > MaxText || !utf8.ValidString(got) || !strings.HasPrefix(got, "éé") {
		t.Fatalf("CutText: %d bytes, valid %v", len(got), utf8.ValidString(got))
	}
	kept := strings.Count(got, "é")
	if want := "\n[... " + strconv.Itoa(len(s)-2*kept) + " more bytes not kept]"; !strings.HasSuffix(got, want) {
		t.Errorf("CutText ends %q, want %q", got[len(got)-40:], want)
	}
}

func TestGitSummary(t *testing.T) {
	const h1, h2 = "1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d", "ec90ceb0123456789abcdef0123456789abcdef0"
	for _, c := range []struct {
		g    GitStats
		want string
	}{
		{GitStats{Files: 24, Branch: "main", Head: h2, PrevHead: h1, Commit: true}, "commit ec90ceb, 24 files in .git"},
		{GitStats{Files: 5, Branch: "main", Head: h1, PrevHead: h2}, "main at 1a2b3c4 (was ec90ceb), 5 files in .git"},
		{GitStats{Files: 2, Head: h1}, "HEAD at 1a2b3c4, 2 files in .git"},
		{GitStats{Files: 3, Branch: "feature", PrevBranch: "main"}, "on feature (was main), 3 files in .git"},
		{GitStats{Files: 1}, "1 file in .git"},
	} {
		if got := c.g.Summary(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.g, got, c.want)
		}
	}
}

func TestParent(t *testing.T) {
	u := func(n uint64) *uint64 { return &n }
	for _, c := range []struct {
		turn Turn
		want uint64
		ok   bool
	}{
		{Turn{Num: 0, Kind: KindInitial}, 0, false},
		{Turn{Num: 4, Kind: KindAgent}, 3, true},
		{Turn{Num: 8, Kind: KindRewind, Label: "rewind to 3", Target: u(3)}, 3, true},
		{Turn{Num: 9, Kind: KindRewind, Label: "undo turn 8", Target: u(7)}, 7, true},
		{Turn{Num: 9, Kind: KindRewind, Label: "restore a.txt from 2", Target: u(2)}, 8, true},
		{Turn{Num: 9, Kind: KindRevert, Label: "revert of turn 2", Target: u(2)}, 8, true},
	} {
		if got, ok := c.turn.Parent(); got != c.want || ok != c.ok {
			t.Errorf("Parent of %d %s %q = %d, %v; want %d, %v", c.turn.Num, c.turn.Kind, c.turn.Label, got, ok, c.want, c.ok)
		}
	}
}
