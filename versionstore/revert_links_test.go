package versionstore

import (
	"errors"
	"fmt"
	"maps"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"ckptfs/internal/ckpt"
)

// linkGroups describes names of the tree at root as stat sees them: each
// one's bytes and mode, then the groups of names that share an inode,
// with its link count.
func linkGroups(t *testing.T, root string, names ...string) string {
	t.Helper()
	byIno := map[uint64][]string{}
	nlink := map[uint64]uint64{}
	var out []string
	for _, p := range names {
		var st unix.Stat_t
		if err := unix.Lstat(filepath.Join(root, p), &st); err != nil {
			out = append(out, p+" absent")
			continue
		}
		b, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%s=%q %o", p, b, st.Mode&0o7777))
		byIno[st.Ino] = append(byIno[st.Ino], p)
		nlink[st.Ino] = uint64(st.Nlink)
	}
	var groups []string
	for ino, ns := range byIno {
		sort.Strings(ns)
		groups = append(groups, fmt.Sprintf("[%s nlink %d]", strings.Join(ns, " "), nlink[ino]))
	}
	sort.Strings(groups)
	return strings.Join(out, " ") + " " + strings.Join(groups, " ")
}

// A revert of a chmod made through one name of a hard-linked file gives
// every name its mode back and keeps them one inode, as they were before
// the turn and after it. The first name's mode change leaves the shared
// inode (a file with other names is not changed in place), so the other
// names must follow it: they were left on the old inode with the turn's
// mode, though the dry run and the report listed them changed.
func TestRevertOfAChmodThroughHardLinksKeepsThemLinked(t *testing.T) {
	s := NewTestStore(t)
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "a"), []byte("a\n"))
	os.Chmod(filepath.Join(root, "a"), 0o644)
	if err := os.Link(filepath.Join(root, "a"), filepath.Join(root, "b")); err != nil {
		t.Fatal(err)
	}
	m, turn := revertSim(t, s, root)
	before := linkGroups(t, root, "a", "b")
	n := turn(func() {
		m.captureAll("a", true)
		os.Chmod(m.abs("a"), 0o600)
	})
	turn(func() {
		m.capture("c", false)
		writeFile(t, m.abs("c"), []byte("c\n"))
	})
	dry, res := revertBoth(t, s, n, m.tree)
	if got := linkGroups(t, root, "a", "b"); got != before {
		t.Errorf("after the revert: %s\nwant, as before the turn: %s", got, before)
	}
	const want = "mode a<-, mode b<-"
	if d, r := changeKinds(dry.Changes), changeKinds(res.Changes); d != want || r != want {
		t.Errorf("the dry run listed %s, the revert %s; want %s", d, r, want)
	}
	done, err := s.TurnChanges(res.Turn.Num, m.tree)
	if err != nil {
		t.Fatal(err)
	}
	if got := changeKinds(done); got != want {
		t.Errorf("the revert turn lists %s, want %s", got, want)
	}
}

// A revert whose bytes are merged with a later turn's, of a file with two
// names that shared one inode before the turn and share it still, gives
// both names the merged bytes on one inode: each name's merge written
// apart left them two files.
func TestRevertMergedThroughHardLinksKeepsThemLinked(t *testing.T) {
	s := NewTestStore(t)
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "a"), []byte("1\n2\n3\n4\n5\n6\n7\n8\n9\n"))
	if err := os.Link(filepath.Join(root, "a"), filepath.Join(root, "b")); err != nil {
		t.Fatal(err)
	}
	m, turn := revertSim(t, s, root)
	inPlace := func(name, text string) {
		f, err := os.OpenFile(m.abs(name), os.O_WRONLY|os.O_TRUNC, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString(text)
		f.Close()
	}
	n := turn(func() {
		m.captureAll("a", false)
		inPlace("a", "1\ntwo\n3\n4\n5\n6\n7\n8\n9\n")
	})
	turn(func() {
		m.captureAll("b", false)
		inPlace("b", "1\ntwo\n3\n4\n5\n6\n7\neight\n9\n")
	})
	_, res := revertBoth(t, s, n, m.tree)
	const want = `a="1\n2\n3\n4\n5\n6\n7\neight\n9\n" 644 b="1\n2\n3\n4\n5\n6\n7\neight\n9\n" 644 [a b nlink 2]`
	if got := linkGroups(t, root, "a", "b"); got != want {
		t.Errorf("after the revert: %s\nwant: %s", got, want)
	}
	if len(res.SplitLinks) != 0 {
		t.Errorf("the revert says it split %s, want nothing", splitList(res.SplitLinks))
	}
}

// splitList is "PATH from NAME NAME, ..." for a result's SplitLinks.
func splitList(ls []LinkSplit) string {
	var out []string
	for _, l := range ls {
		out = append(out, l.Path+" from "+strings.Join(l.Names, " "))
	}
	return strings.Join(out, ", ")
}

// A revert that gives a path an inode of its own, parting it from names
// that shared its inode and that the revert leaves as they are, says so
// (SplitLinks), its dry run the same; one that keeps every name's link
// with the others, or sets every name it parts, splits nothing.
func TestRevertSaysWhichLinksItSplits(t *testing.T) {
	big := string(fill(64*rangeBlock, 'o'))
	for _, tc := range []struct {
		name   string
		before map[string]string // the tree before turn 1 (mode 0644)
		linked [][2]string       // ... and its hard links (ln P Q)
		turns  []func(m *sim)    // turn 1 is reverted
		names  []string          // the paths to check after
		want   string            // linkGroups after the revert
		splits string
	}{{
		// The brief's case: b made a link of a, a kept; the revert
		// gives b its old bytes on an inode of its own.
		name:   "a link the turn made",
		before: map[string]string{"a": "a\n", "b": "b\n"},
		turns: []func(m *sim){func(m *sim) {
			m.capture("b", true)
			os.Remove(m.abs("b"))
			m.capture("b", false)
			os.Link(m.abs("a"), m.abs("b"))
		}},
		names:  []string{"a", "b"},
		want:   `a="a\n" 644 b="b\n" 644 [a nlink 1] [b nlink 1]`,
		splits: "b from a",
	}, {
		// A mode change undone on a file a later turn linked: setFileMeta
		// gives a an inode of its own, k keeps the later mode.
		name:   "a mode, a link made later",
		before: map[string]string{"a": "a\n"},
		turns: []func(m *sim){func(m *sim) {
			m.captureAll("a", true)
			os.Chmod(m.abs("a"), 0o600)
		}, func(m *sim) {
			m.capture("k", false)
			os.Link(m.abs("a"), m.abs("k"))
		}},
		names:  []string{"a", "k"},
		want:   `a="a\n" 644 k="a\n" 600 [a nlink 1] [k nlink 1]`,
		splits: "a from k",
	}, {
		// Bytes written in place undone on a file a later turn linked:
		// patchTo does not patch a file with other names, it replaces
		// it.
		name:   "bytes patched, a link made later",
		before: map[string]string{"a": big},
		turns: []func(m *sim){func(m *sim) {
			writeAt(m.t.(*testing.T), m.store, m.tree, m.root, "a", []byte("xx"), 5)
		}, func(m *sim) {
			m.capture("k", false)
			os.Link(m.abs("a"), m.abs("k"))
		}},
		names:  []string{"a", "k"},
		want:   fmt.Sprintf(`a=%q 644 k=%q 644 [a nlink 1] [k nlink 1]`, big, big[:5]+"xx"+big[7:]),
		splits: "a from k",
	}, {
		// Both names of the inode reverted together: no split.
		name:   "a mode through both names",
		before: map[string]string{"a": "a\n"},
		linked: [][2]string{{"a", "b"}},
		turns: []func(m *sim){func(m *sim) {
			m.captureAll("a", true)
			os.Chmod(m.abs("a"), 0o600)
		}},
		names: []string{"a", "b"},
		want:  `a="a\n" 644 b="a\n" 644 [a b nlink 2]`,
	}, {
		// The names the turn linked both get their own bytes back:
		// the revert sets both, and parts them from no name it leaves.
		name:   "both names of a link the turn made, both changed",
		before: map[string]string{"a": "a\n", "b": "b\n"},
		turns: []func(m *sim){func(m *sim) {
			m.capture("b", true)
			os.Remove(m.abs("b"))
			m.capture("b", false)
			os.Link(m.abs("a"), m.abs("b"))
			m.captureAll("a", false)
			writeFile(m.t.(*testing.T), m.abs("a"), []byte("ab\n"))
		}},
		names: []string{"a", "b"},
		want:  `a="a\n" 644 b="b\n" 644 [a nlink 1] [b nlink 1]`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			s, tree, root := rangeFixture(t)
			for p, data := range tc.before {
				if err := os.WriteFile(filepath.Join(root, p), []byte(data), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			for _, l := range tc.linked {
				if err := os.Link(filepath.Join(root, l[0]), filepath.Join(root, l[1])); err != nil {
					t.Fatal(err)
				}
			}
			m := &sim{t: t, root: root, tree: tree, store: s}
			var turns []uint64
			for _, fn := range append(tc.turns, func(m *sim) {
				m.capture("later", false)
				writeFile(t, m.abs("later"), []byte("later\n"))
			}) {
				if _, err := s.Begin(ckpt.KindAgent, "", ""); err != nil {
					t.Fatal(err)
				}
				fn(m)
				tn, err := s.End("")
				if err != nil {
					t.Fatal(err)
				}
				turns = append(turns, tn.Num)
			}
			dry, err := s.Revert(turns[0], tree, RevertOptions{DryRun: true})
			if err != nil {
				t.Fatal(err)
			}
			res, err := s.Revert(turns[0], tree, RevertOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got := linkGroups(t, root, tc.names...); got != tc.want {
				t.Errorf("after the revert:\n%s\nwant\n%s", got, tc.want)
			}
			if d, r := splitList(dry.SplitLinks), splitList(res.SplitLinks); d != tc.splits || r != tc.splits {
				t.Errorf("the dry run says it splits %q, the revert %q; want %q", d, r, tc.splits)
			}
			if d, r := changeKinds(dry.Changes), changeKinds(res.Changes); d != r {
				t.Errorf("the dry run listed %s, the revert %s", d, r)
			}
		})
	}
}

// inodesNow maps every name in the tree at root but directories (and the
// store) to its inode number.
func inodesNow(t *testing.T, root string) map[string]uint64 {
	t.Helper()
	out := map[string]uint64{}
	err := filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if strings.HasPrefix(rel, ".store") {
			return filepath.SkipDir
		}
		if !fi.IsDir() {
			out[rel] = fi.Sys().(*syscall.Stat_t).Ino
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A revert's dry run names the links the revert then splits, and the
// revert names exactly those it split, over random histories made mostly
// of hard links, reverting random turns. The oracle looks only at the
// tree: a path the revert changes that shared its inode before with names
// it did not change, and no longer does after, is split from them.
func TestRevertSplitsAsItsDryRunSays(t *testing.T) {
	seeds := 60
	if raceEnabled {
		seeds = 20
	}
	splits := 0
	for seed := int64(1); seed <= int64(seeds); seed++ {
		rng := rand.New(rand.NewSource(seed))
		m, _ := newCrashSim(t, seed)
		m.linkOps, m.flat = 4, true
		turns, _ := m.buildHistory(rng, 6, 12)
		for k := 0; k < 6; k++ {
			n := turns[1+rng.Intn(len(turns)-1)]
			what := fmt.Sprintf("seed %d: revert %d", seed, n)
			dry, derr := m.store.Revert(n, m.tree, RevertOptions{DryRun: true, Markers: true})
			before := inodesNow(t, m.root)
			res, err := m.store.Revert(n, m.tree, RevertOptions{Markers: true})
			if errors.Is(err, ErrConflict) && errors.Is(derr, ErrConflict) {
				continue
			}
			if err != nil || derr != nil {
				t.Fatalf("%s: %v (dry run: %v)", what, err, derr)
			}
			if d, r := splitList(dry.SplitLinks), splitList(res.SplitLinks); d != r {
				t.Errorf("%s: the dry run says it splits %q, the revert split %q", what, d, r)
			}
			if d, r := changeKinds(dry.Changes), changeKinds(res.Changes); d != r {
				t.Errorf("%s: the dry run listed %s, the revert %s", what, d, r)
			}
			after := inodesNow(t, m.root)
			changed := map[string]bool{}
			for _, c := range dry.Changes {
				changed[c.Path], changed[c.From] = true, true
			}
			var want []LinkSplit
			for _, c := range dry.Changes {
				x, ok := before[c.Path]
				if _, now := after[c.Path]; !ok || !now || !c.After.Type.Linkable() {
					continue
				}
				l := LinkSplit{Path: c.Path}
				for _, q := range slices.Sorted(maps.Keys(before)) {
					if q != c.Path && before[q] == x && !changed[q] && after[q] != after[c.Path] {
						l.Names = append(l.Names, q)
					}
				}
				if len(l.Names) > 0 {
					want = append(want, l)
				}
			}
			if w, r := splitList(want), splitList(res.SplitLinks); w != r {
				t.Errorf("%s: the revert says it split %q; the tree says %q", what, r, w)
			}
			splits += len(want)
		}
		m.store.Close()
		m.tree.Close()
	}
	t.Logf("%d links split", splits)
	if splits == 0 {
		t.Error("no revert split a link: the test tests nothing")
	}
}

// Three names of one inode before the turn and now: the turn wrote b in
// place and replaced a (sed -i), a later turn made a a name of b again.
// The revert merges a's bytes and not b's and c's: b and c, given one
// target, stay one inode, whatever a's merge gives a.
func TestRevertMergedNameLeavesTheOthersLinked(t *testing.T) {
	s := NewTestStore(t)
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "a"), []byte("1\n2\n3\n4\n5\n6\n7\n8\n9\n"))
	os.Link(filepath.Join(root, "a"), filepath.Join(root, "b"))
	os.Link(filepath.Join(root, "a"), filepath.Join(root, "c"))
	m, turn := revertSim(t, s, root)
	n := turn(func() {
		m.captureAll("b", false)
		os.WriteFile(m.abs("b"), []byte("1\ntwo\n3\n4\n5\n6\n7\n8\n9\n"), 0)
		m.capture("tmp", false)
		os.WriteFile(m.abs("tmp"), []byte("1\ntwo\n3\n4\n5\n6\n7\n8\nnine\n"), 0o644)
		revertRename(t, m, "tmp", "a")
	})
	turn(func() {
		m.captureAll("a", false)
		os.Remove(m.abs("a"))
		os.Link(m.abs("b"), m.abs("a"))
	})
	if res, err := s.Revert(n, m.tree, RevertOptions{}); err != nil {
		t.Fatalf("%v %+v", err, res.Conflicts)
	}
	// (a, merged to the same bytes, may join them: nlink 2 or 3)
	got := linkGroups(t, root, "b", "c")
	if want := `b="1\n2\n3\n4\n5\n6\n7\n8\n9\n" 644 c="1\n2\n3\n4\n5\n6\n7\n8\n9\n" 644 [b c nlink `; !strings.HasPrefix(got, want) {
		t.Errorf("after the revert: %s\nwant b and c one inode: %s…", got, want)
	}
}
