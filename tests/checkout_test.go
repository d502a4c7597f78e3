package tests

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// exportHistory plays a history with edits, renames, a chmod +x, a
// symlink, hard links, a FIFO and a rewind (a branch) on a mount, and
// returns the mount and the number of its newest turn. With git, the
// project starts as a git repository with one commit.
//
//	1 edit a.txt, b.txt -> d/b.txt, chmod +x run.sh, a symlink
//	2 rm dir/c.txt, new.txt, dir -> dir2, a second hard link
//	3 rewind to 1
//	4 edit a.txt after the rewind, a FIFO
func exportHistory(t *testing.T, git bool) (*Mount, int) {
	t.Helper()
	proj := t.TempDir()
	runIn(t, proj, `
		printf 'one\ntwo\n' > a.txt
		printf 'b\n' > b.txt
		mkdir dir && printf 'c\n' > dir/c.txt && printf 'keep\n' > dir/k.txt
		printf '#!/bin/sh\necho hi\n' > run.sh && chmod 644 run.sh
		printf 'linked\n' > h1 && ln h1 h2
		chmod 600 b.txt`)
	if git {
		runIn(t, proj, `git init -q -b main && git add -A && git commit -qm init`)
	}
	m := mountProject(t, proj)
	m.turnctl(t, "begin", "--label", "first edits\n\nThe whole prompt,\nover several lines.")
	runIn(t, proj, `printf 'one\nTWO\n' > a.txt; mkdir d; mv b.txt d/b.txt; chmod +x run.sh; ln -s a.txt link`)
	m.turnctl(t, "end", "--ref", "msg-1")
	m.turnctl(t, "begin", "--label", "second")
	runIn(t, proj, `rm dir/c.txt; printf 'new\n' > new.txt; mv dir dir2; ln h1 h3; printf 'more\n' >> h1`)
	m.turnctl(t, "end")
	m.turnctl(t, "rewind", "1")
	m.turnctl(t, "begin", "--label", "after the rewind")
	runIn(t, proj, `printf 'three\n' >> a.txt; mkfifo pipe`)
	m.turnctl(t, "end")
	return m, 4
}

// TestCheckout: checkout of every turn of a history with renames, modes,
// symlinks, hard links, a FIFO and a rewind writes exactly the tree a
// rewind to that turn leaves, mounted and offline, and changes nothing in
// the project; bad input is refused with one line and exit 2.
func TestCheckout(t *testing.T) {
	m, last := exportHistory(t, false)
	out := t.TempDir()
	before := tree(t, m.Dir)
	for n := 0; n <= last; n++ {
		dir := filepath.Join(out, "t"+strconv.Itoa(n))
		got := m.turnctl(t, "checkout", strconv.Itoa(n), dir)
		if !strings.HasPrefix(got, "turn "+strconv.Itoa(n)+" checked out into "+dir+": ") {
			t.Errorf("checkout %d said %q", n, got)
		}
	}
	sameTree(t, "the project after the checkouts", before, tree(t, m.Dir))

	// Bad input: one line, exit 2, nothing written.
	full := filepath.Join(out, "t1")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"checkout", "1", full}, "is not empty"},
		{[]string{"checkout", "1", filepath.Join(m.Dir, "sub")}, "is inside the project"},
		{[]string{"checkout", "99", filepath.Join(out, "none")}, "no turn 99"},
		{[]string{"checkout", "x", filepath.Join(out, "none")}, "is not a turn"},
	} {
		stderr, code := m.turnctlFail(t, c.args...)
		if code != 2 || !strings.Contains(stderr, c.want) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("turnctl %s: exit %d, %q (want exit 2 and %q)", strings.Join(c.args, " "), code, stderr, c.want)
		}
	}
	for _, p := range []string{filepath.Join(out, "none"), filepath.Join(m.Dir, "sub")} {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s made by a refused checkout", p)
		}
	}

	// Offline: the same trees from the store alone.
	m.Unmount(t)
	for _, n := range []int{1, 2} {
		dir := filepath.Join(out, "off"+strconv.Itoa(n))
		m.turnctl(t, "checkout", strconv.Itoa(n), dir)
		sameTree(t, "offline checkout of turn "+strconv.Itoa(n), tree(t, filepath.Join(out, "t"+strconv.Itoa(n))), tree(t, dir))
	}
	m = mountProject(t, m.Dir)

	// Each checkout is the tree a rewind to its turn leaves.
	for n := 0; n <= last; n++ {
		m.turnctl(t, "rewind", strconv.Itoa(n))
		want := tree(t, m.Dir)
		sameTree(t, "checkout of turn "+strconv.Itoa(n)+" against a rewind to it", want, tree(t, filepath.Join(out, "t"+strconv.Itoa(n))))
		if len(want) < 5 {
			t.Fatalf("turn %d: a tree of %d paths", n, len(want))
		}
	}
}

// Two names of one file at the end of a turn stay one inode in its
// checkout and its view after a later turn replaced one of them (sed -i
// gives it a new inode, the other keeping the old one alone).
func TestCheckoutKeepsALinkALaterTurnBroke(t *testing.T) {
	proj := t.TempDir()
	m := mountProject(t, proj)
	m.turnctl(t, "begin", "--label", "link")
	runIn(t, proj, `printf 'one\n' > f; ln f g`)
	m.turnctl(t, "end")
	m.turnctl(t, "begin", "--label", "sed")
	runIn(t, proj, `sed -i 's/one/two/' f`)
	m.turnctl(t, "end")
	co := filepath.Join(t.TempDir(), "co")
	m.turnctl(t, "checkout", "1", co)
	view := mountAt(t, m, "1")
	for _, dir := range []string{co, view} {
		if one, n := sharedInode(t, filepath.Join(dir, "f"), filepath.Join(dir, "g")); !one || n != 2 {
			t.Errorf("%s: f and g one inode %v, %d links; want one inode with 2", dir, one, n)
		}
		if b := readFile(t, filepath.Join(dir, "g")); b != "one\n" {
			t.Errorf("%s/g = %q, want %q", dir, b, "one\n")
		}
	}
}
