package control

import (
	"bytes"
	"strings"
	"testing"
	"testing/iotest"
)

// TestCountIn: occurrences across the reads of a block count once, and
// as bytes.Count counts them (left to right, without overlaps).
func TestCountIn(t *testing.T) {
	big := strings.Repeat("x", 256<<10-2) + "needle" + strings.Repeat("aaa", 100000) + "needle"
	for _, c := range []struct{ data, text string }{
		{"", "a"}, {"aaaa", "aa"}, {"abababa", "aba"}, {"needle", "needle"},
		{big, "needle"}, {big, "aa"}, {big, "xn"}, {big, "ea"},
	} {
		want := bytes.Count([]byte(c.data), []byte(c.text))
		if got, err := countIn(strings.NewReader(c.data), []byte(c.text)); err != nil || got != want {
			t.Errorf("countIn(%d bytes, %q) = %d, %v; want %d", len(c.data), c.text, got, err, want)
		}
		if got, err := countIn(iotest.HalfReader(strings.NewReader(c.data)), []byte(c.text)); err != nil || got != want {
			t.Errorf("countIn(half reads of %d bytes, %q) = %d, %v; want %d", len(c.data), c.text, got, err, want)
		}
	}
}
