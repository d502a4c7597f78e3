package versionstore

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
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
	dry, err := s.Revert(n, m.tree, RevertOptions{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Revert(n, m.tree, RevertOptions{})
	if err != nil {
		t.Fatal(err)
	}
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
