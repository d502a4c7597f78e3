package versionstore

import (
	"os"
	"reflect"
	"slices"
	"testing"
)

// a and b one inode at turn 0; since, one of them (copied) was made a
// copy of its own with the same bytes, the other (written) given other
// bytes in place. A restore of both lists what it does (the dry run plans
// the link pass over the tree as its other changes will leave it: which
// of the two the pass links to the other depends on them), gives them
// one inode again, and a second restore does nothing.
func TestRestoreListsTheLinksItMakesAmongOtherChanges(t *testing.T) {
	for _, tc := range []struct{ copied, written string }{{"a", "b"}, {"b", "a"}} {
		t.Run(tc.copied+" copied", func(t *testing.T) {
			s, tree, m := reviewFixture(t)
			writeFile(t, m.abs("a"), []byte("x\n"))
			if err := os.Link(m.abs("a"), m.abs("b")); err != nil {
				t.Fatal(err)
			}
			m.turn("a copy, other bytes", func() {
				m.captureAll(tc.copied, false)
				if err := os.Remove(m.abs(tc.copied)); err != nil {
					t.Fatal(err)
				}
				writeFile(t, m.abs(tc.copied), []byte("x\n"))
				m.captureAll(tc.written, false)
				writeFile(t, m.abs(tc.written), []byte("y\n"))
			})
			opts := RewindOptions{Paths: []string{"a", "b"}, DryRun: true}
			dry, err := s.Rewind(0, tree, opts)
			if err != nil {
				t.Fatal(err)
			}
			opts.DryRun = false
			res, err := s.Rewind(0, tree, opts)
			if err != nil {
				t.Fatal(err)
			}
			if d, r := changeList(dry.Changes), changeList(res.Changes); !slices.Equal(d, r) {
				t.Errorf("the dry run lists %q, the restore %q", d, r)
			}
			if !reflect.DeepEqual(dry.SplitLinks, res.SplitLinks) {
				t.Errorf("the dry run splits %+v, the restore %+v", dry.SplitLinks, res.SplitLinks)
			}
			if inoOf(t, m.abs("a")) != inoOf(t, m.abs("b")) {
				t.Errorf("a and b after the restore: two inodes, want one")
			}
			for _, p := range []string{"a", "b"} {
				if b, err := os.ReadFile(m.abs(p)); err != nil || string(b) != "x\n" {
					t.Errorf("%s after the restore: %q, %v", p, b, err)
				}
			}
			again, err := s.Rewind(0, tree, opts)
			if err != nil {
				t.Fatal(err)
			}
			if again.Turn.Num != 0 || len(again.Changes) > 0 {
				t.Errorf("the restore again: turn %d, changes %q", again.Turn.Num, changeList(again.Changes))
			}
		})
	}
}
