package exclude

import "testing"

// Another project's store below the root is excluded by every Matcher,
// a nil one and one without patterns too; the root's own .ckptfs, a file
// so named, and names that only start or end like it are not.
func TestNestedStore(t *testing.T) {
	none, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	some, err := New([]string{"build/"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		p     string
		isDir bool
		want  bool
	}{
		{"child/.ckptfs", true, true},
		{"child/.ckptfs/db/000005.sst", false, true},
		{"a/b/child/.ckptfs/attic", true, true},
		{"child/.ckptfs", false, false}, // a file: no store
		{".ckptfs", true, false},        // the root's own: the store itself
		{".ckptfs/db", true, false},
		{"child/.ckptfs2", true, false},
		{"child/x.ckptfs", true, false},
		{"child/.ckptfsx/y", false, false},
		{"child/c.txt", false, false},
		{"", true, false},
	} {
		if got := Nested(c.p, c.isDir); got != c.want {
			t.Errorf("Nested(%q, %v) = %v, want %v", c.p, c.isDir, got, c.want)
		}
		for _, m := range []*Matcher{nil, none, some} {
			if got := m.Match(c.p, c.isDir); got != c.want {
				t.Errorf("%v.Match(%q, %v) = %v, want %v", m, c.p, c.isDir, got, c.want)
			}
		}
	}
	if !some.Match("build", true) || some.Match("src/a", false) {
		t.Errorf("the patterns no longer match as they did")
	}
}

// A Matcher without patterns, asked on every request, allocates nothing.
func TestMatchWithoutPatternsAllocatesNothing(t *testing.T) {
	none, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() { none.Match("src/pkg/file.go", false) }); n != 0 {
		t.Errorf("Match without patterns: %v allocations", n)
	}
}
