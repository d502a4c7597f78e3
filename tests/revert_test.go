package tests

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// revertReply is the part of turnctl's --json reply of a revert or undo
// these tests read.
type revertReply struct {
	Changes []struct {
		Path string `json:"path"`
		From string `json:"from"`
		Kind string `json:"kind"`
	} `json:"changes"`
	Turn *struct {
		Num   uint64 `json:"num"`
		Kind  string `json:"kind"`
		Label string `json:"label"`
	} `json:"turn"`
	Merged     []string `json:"merged"`
	Kept       []string `json:"kept"`
	KeptTurns  []uint64 `json:"kept_turns"`
	SplitLinks []struct {
		Path  string   `json:"path"`
		Names []string `json:"names"`
	} `json:"split_links"`
}

func (r revertReply) list() string {
	var out []string
	for _, c := range r.Changes {
		out = append(out, c.Kind+" "+c.From+" "+c.Path)
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}

func parseRevert(t *testing.T, out string) revertReply {
	t.Helper()
	var r revertReply
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	return r
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func modeOf(t *testing.T, p string) os.FileMode {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

// TestRevertOnMount: revert of a past turn on a real mount undoes its
// edit, chmod, directory rename, deletion and addition, keeps a later
// turn's edit of the same file (merged), lists in its dry run exactly
// what it then does; a conflict refuses with the tree untouched, or is
// written between markers when asked; a binary conflict refuses anyway.
func TestRevertOnMount(t *testing.T) {
	proj := t.TempDir()
	runIn(t, proj, `
		printf '1\n2\n3\n4\n' > a.txt
		printf 'b\n' > b.txt
		printf '#!/bin/sh\n' > run.sh && chmod 644 run.sh
		mkdir old && printf 'x\n' > old/x.txt
		printf 'bin\0one' > blob`)
	m := mountProject(t, proj)
	m.turnctl(t, "begin", "--label", "turn 1")
	runIn(t, proj, `sed -i 's/^3$/X/' a.txt; chmod 755 run.sh; mv old new; rm b.txt; echo c > c.txt; printf 'bin\0two' > blob`)
	m.turnctl(t, "end")
	m.turnctl(t, "begin", "--label", "turn 2")
	runIn(t, proj, `sed -i 's/^1$/A/' a.txt; printf 'bin\0three' > blob`)
	m.turnctl(t, "end")

	// The binary file changed by both: refused even with markers.
	before := tree(t, proj)
	out, err := runTurnctl(t, proj, "revert", "1", "--conflicts=markers")
	if err == nil || !strings.Contains(out, "blob (a binary file") {
		t.Fatalf("revert with a binary conflict: %v\n%s", err, out)
	}
	sameTree(t, "after a refused revert", before, tree(t, proj))
	m.turnctl(t, "begin", "--label", "turn 3")
	runIn(t, proj, `printf 'bin\0two' > blob`) // as turn 1 left it
	m.turnctl(t, "end")

	m.jsonOut(t, "turnctl-rewind", "revert", "1", "--dry-run") // by its schema
	dry := parseRevert(t, m.turnctl(t, "--json", "revert", "1", "--dry-run"))
	before = tree(t, proj)
	if len(dry.Changes) == 0 || dry.Turn != nil {
		t.Fatalf("dry run: %+v", dry)
	}
	sameTree(t, "after a dry run", before, tree(t, proj))
	rep := parseRevert(t, m.turnctl(t, "--json", "revert", "1"))
	if rep.Turn == nil || rep.Turn.Kind != "revert" || rep.Turn.Label != "revert of turn 1" {
		t.Fatalf("revert turn: %+v", rep.Turn)
	}
	if dry.list() != rep.list() {
		t.Errorf("the dry run listed\n%s\nthe revert did\n%s", dry.list(), rep.list())
	}
	if d, r := fmt.Sprint(dry.SplitLinks), fmt.Sprint(rep.SplitLinks); d != r {
		t.Errorf("the dry run splits %s, the revert split %s", d, r)
	}
	// old is made again and new removed (a revert plans a directory
	// path by path), x.txt moved back: as the revert turn records it.
	want := strings.Join([]string{"added  b.txt", "added  old", "deleted  c.txt", "deleted  new", "mode  run.sh", "modified  a.txt", "modified  blob", "renamed new/x.txt old/x.txt"}, "\n")
	if rep.list() != want {
		t.Errorf("revert changes:\n%s\nwant\n%s", rep.list(), want)
	}
	if shown := parseRevert(t, m.turnctl(t, "--json", "show", itoa(int(rep.Turn.Num)))); shown.list() != rep.list() {
		t.Errorf("show of the revert turn lists\n%s\nthe revert reported\n%s", shown.list(), rep.list())
	}
	if len(rep.Merged) != 1 || rep.Merged[0] != "a.txt" {
		t.Errorf("merged %v, want a.txt", rep.Merged)
	}
	for p, w := range map[string]string{"a.txt": "A\n2\n3\n4\n", "b.txt": "b\n", "old/x.txt": "x\n", "blob": "bin\x00one"} {
		if got := readFile(t, filepath.Join(proj, p)); got != w {
			t.Errorf("%s = %q, want %q", p, got, w)
		}
	}
	if modeOf(t, filepath.Join(proj, "run.sh")) != 0o644 {
		t.Errorf("run.sh mode %o", modeOf(t, filepath.Join(proj, "run.sh")))
	}
	for _, p := range []string{"c.txt", "new"} {
		if _, err := os.Lstat(filepath.Join(proj, p)); !os.IsNotExist(err) {
			t.Errorf("%s still there: %v", p, err)
		}
	}

	// A later change of the line turn 2 changed: a conflict.
	m.turnctl(t, "begin", "--label", "turn 5")
	runIn(t, proj, `sed -i 's/^A$/AA/' a.txt; chmod 600 a.txt; printf 'bin\0three' > blob`)
	m.turnctl(t, "end")
	before = tree(t, proj)
	log := m.turnctl(t, "log")
	out, err = runTurnctl(t, proj, "revert", "2")
	if err == nil || !strings.Contains(out, "a.txt") || !strings.Contains(out, "nothing changed") {
		t.Fatalf("conflicting revert: %v\n%s", err, out)
	}
	out, err = runTurnctl(t, proj, "revert", "2", "--dry-run")
	if err == nil || !strings.Contains(out, "a.txt") {
		t.Fatalf("conflicting revert's dry run: %v\n%s", err, out)
	}
	sameTree(t, "after a refused revert", before, tree(t, proj))
	if m.turnctl(t, "log") != log {
		t.Fatal("a refused revert made a turn")
	}
	out = m.turnctl(t, "revert", "2", "--conflicts=markers")
	if !strings.Contains(out, "conflicts written between markers") {
		t.Errorf("revert with markers says:\n%s", out)
	}
	if got, w := readFile(t, filepath.Join(proj, "a.txt")), "<<<<<<< now\nAA\n=======\n1\n>>>>>>> before turn 2\n2\n3\n4\n"; got != w {
		t.Errorf("a.txt with markers = %q, want %q", got, w)
	}
	if modeOf(t, filepath.Join(proj, "a.txt")) != 0o600 {
		t.Errorf("a.txt mode %o, want the later 600", modeOf(t, filepath.Join(proj, "a.txt")))
	}
	// Undo takes the revert back.
	m.turnctl(t, "undo")
	sameTree(t, "after undoing the revert", before, tree(t, proj))
}

// TestUndoAfterBackgroundGitStatus: rewind, then git status refreshing
// .git/index in a manual turn (as a background writer does): undo must
// undo the rewind, keep the refreshed index and say so.
func TestUndoAfterBackgroundGitStatus(t *testing.T) {
	proj := t.TempDir()
	runIn(t, proj, `
		printf 'one\n' > f.txt
		git init -q -b main . && git add -A && git commit -qm init`)
	m := mountProject(t, proj)
	m.turnctl(t, "begin", "--label", "edit")
	runIn(t, proj, `printf 'two\n' > f.txt; echo new > g.txt`)
	m.turnctl(t, "end")
	edited := tree(t, proj)
	m.turnctl(t, "rewind", "0")
	// The rewind gave f.txt a fresh mtime: git status refreshes the index.
	runIn(t, proj, `git status --porcelain >/dev/null; printf x >> .git/description`)
	index := readFile(t, filepath.Join(proj, ".git/index"))
	desc := readFile(t, filepath.Join(proj, ".git/description"))
	if u := m.jsonOut(t, "turnctl-rewind", "undo", "--dry-run"); len(u["kept_turns"].([]any)) != 1 {
		t.Errorf("undo --dry-run --json: %v", u)
	}
	out := m.turnctl(t, "undo")
	if !strings.Contains(out, "later changes kept") || !strings.Contains(out, "kept the later changes of turn") || !strings.Contains(out, "in .git") {
		t.Errorf("undo says:\n%s", out)
	}
	got := tree(t, proj)
	for _, p := range []string{"f.txt", "g.txt"} {
		if got[p] != edited[p] {
			t.Errorf("after undo %s = %v, want %v (the rewind undone)", p, got[p], edited[p])
		}
	}
	if readFile(t, filepath.Join(proj, ".git/index")) != index || readFile(t, filepath.Join(proj, ".git/description")) != desc {
		t.Error("undo did not keep the background changes in .git")
	}
	// Undo again: the rewind again, .git's later changes still kept.
	m.turnctl(t, "undo")
	if got := readFile(t, filepath.Join(proj, "f.txt")); got != "one\n" {
		t.Errorf("second undo: f.txt = %q", got)
	}
	if readFile(t, filepath.Join(proj, ".git/description")) != desc {
		t.Error("second undo lost .git/description")
	}
}

// TestUndoOfARewindPastACommitAfterGitStatus: a rewind back past a git
// commit rewrites .git/index, and the git status after it refreshes the
// index's stat data: the undo takes the index as it was before the rewind
// (the refresh is git's cache, done again at the next git status), where
// it refused with the index "changed both by the turn and later". A later
// change of the index's entries (git add) still refuses it.
func TestUndoOfARewindPastACommitAfterGitStatus(t *testing.T) {
	proj := t.TempDir()
	runIn(t, proj, `
		printf 'v1\n' > f
		git init -q -b main . && git add -A && git commit -qm one`)
	m := mountProject(t, proj)
	m.turnctl(t, "begin", "--label", "commit two")
	runIn(t, proj, `printf 'v2\n' > f; git commit -qam two`)
	m.turnctl(t, "end")
	two := runIn(t, proj, `git rev-parse HEAD`)
	committed := tree(t, proj)

	m.turnctl(t, "rewind", "0")
	if got := runIn(t, proj, `git status --porcelain; git log --format=%s`); got != "one\n" {
		t.Fatalf("after the rewind, git status and log: %q", got)
	}
	out := m.turnctl(t, "undo")
	if !strings.Contains(out, "undo of turn 2") {
		t.Errorf("undo says:\n%s", out)
	}
	if got := tree(t, proj); got[".git/index"] != committed[".git/index"] || got["f"] != committed["f"] {
		t.Errorf("after the undo, .git/index and f are not as the commit left them")
	}
	if got := runIn(t, proj, `git rev-parse HEAD; git status --porcelain; git fsck --no-progress 2>&1`); got != two {
		t.Errorf("after the undo, HEAD, status and fsck: %q; want HEAD %q, clean", got, two)
	}

	// Staged since the rewind: the index's entries changed later too.
	m.turnctl(t, "rewind", "0")
	runIn(t, proj, `echo new > g; git add g`)
	staged := tree(t, proj)
	if errs, code := m.turnctlFail(t, "undo"); code != 1 || !strings.Contains(errs, ".git/index") || !strings.Contains(errs, "nothing changed") {
		t.Errorf("undo over a git add: exit %d, %s", code, errs)
	}
	sameTree(t, "after the refused undo", staged, tree(t, proj))
}

// TestRevertOfATurnARewindWentBackPast: a turn on the branch a rewind
// left (sed -i, whose new file replaced the old one, then `rewind` to the
// turn before it) is not in the tree's history: revert refuses it in one
// line that says which rewind went back past it, exit 1, nothing changed.
// Before, it refused with "deleted by a later turn" for a file no turn
// deleted, or ("nothing to change") answered as if it had looked. A step
// the rewind went back past is refused alike; the turns on the line still
// revert.
func TestRevertOfATurnARewindWentBackPast(t *testing.T) {
	proj := t.TempDir()
	writeTree(t, proj, map[string]string{"main.go": "package main\n", "b.txt": "b\n"})
	m := mountProject(t, proj)
	runIn(t, proj, `
T=`+turnctlBin+`
$T begin --label "good" >/dev/null; echo ok > ok.txt; $T end >/dev/null
$T begin --label "break it" >/dev/null; sed -i 's/main/broken/' main.go; $T step --label sed >/dev/null; echo c > c.txt; $T end >/dev/null
$T rewind 1 >/dev/null
$T begin --label "steps" >/dev/null; echo x > x.txt; $T step --label x >/dev/null; echo y > y.txt; $T end >/dev/null
$T rewind 4.1 >/dev/null
$T begin --label "later" >/dev/null; echo b2 >> b.txt; $T end >/dev/null
`)
	before, log := snapshot(t, proj, []string{".ckptfs"}, nil), m.turnctl(t, "log")
	for _, c := range []struct {
		want string
		args []string
	}{
		{"revert of turn 2 refused, nothing changed: turn 2 is not in the tree's history: turn 3 (rewind to 1) went back past it", []string{"revert", "2"}},
		{"turn 3 (rewind to 1) went back past it", []string{"revert", "2", "--dry-run"}},
		{"revert of step 2.1 refused, nothing changed: step 2.1 is not in the tree's history", []string{"revert", "2.1"}},
		{"revert of step 4.2 refused, nothing changed: step 4.2 is not in the tree's history: turn 5 (rewind to 4.1) went back past it", []string{"revert", "4.2"}},
	} {
		turnctlFails(t, proj, 1, c.want, c.args...)
	}
	diffTrees(t, before, snapshot(t, proj, []string{".ckptfs"}, nil))
	if m.turnctl(t, "log") != log {
		t.Fatal("a refused revert made a turn")
	}
	// On the line: turn 1, step 4.1 and turn 6 revert.
	m.turnctl(t, "revert", "6")
	m.turnctl(t, "revert", "4.1")
	m.turnctl(t, "revert", "1")
	for _, gone := range []string{"ok.txt", "x.txt"} {
		if _, err := os.Lstat(filepath.Join(proj, gone)); !os.IsNotExist(err) {
			t.Errorf("%s after its revert: %v", gone, err)
		}
	}
	if got := readFile(t, filepath.Join(proj, "b.txt")); got != "b\n" {
		t.Errorf("b.txt after the revert of turn 6: %q", got)
	}
}

// A revert follows a file through a later turn's sed -i (a new file
// renamed over it) and a rename after that, and merges into the file
// where it is now; and a merged revert of a file with two names keeps
// them one inode.
func TestRevertFollowsAFileThroughSedAndARename(t *testing.T) {
	proj := t.TempDir()
	runIn(t, proj, `printf 'p\nq\nr\ns\nt\nu\n' > a.txt; printf '1\n2\n3\n4\n5\n6\n7\n8\n9\n' > l1; ln l1 l2`)
	m := mountProject(t, proj)
	edit := `python3 -c 'import sys;p,o,n=sys.argv[1:];s=open(p).read().replace(o,n,1);f=open(p,"r+");f.write(s);f.truncate()'`
	m.turnctl(t, "begin", "--label", "one")
	runIn(t, proj, `echo zz >> a.txt; `+edit+` l1 '2' 'two'`)
	m.turnctl(t, "end")
	m.turnctl(t, "begin", "--label", "sed")
	runIn(t, proj, `sed -i 's/^q$/Q2/' a.txt; `+edit+` l2 '8' 'eight'`)
	m.turnctl(t, "end")
	m.turnctl(t, "begin", "--label", "mv")
	runIn(t, proj, `mv a.txt b.txt`)
	m.turnctl(t, "end")
	out := m.turnctl(t, "revert", "1")
	if got, want := readFile(t, filepath.Join(proj, "b.txt")), "p\nQ2\nr\ns\nt\nu\n"; got != want {
		t.Errorf("b.txt after the revert: %q, want %q (turn 1's line gone, the later sed kept)\n%s", got, want, out)
	}
	if _, err := os.Lstat(filepath.Join(proj, "a.txt")); !os.IsNotExist(err) {
		t.Errorf("a.txt after the revert: %v, want it absent", err)
	}
	if one, n := sharedInode(t, filepath.Join(proj, "l1"), filepath.Join(proj, "l2")); !one || n != 2 {
		t.Errorf("l1 and l2 after the merged revert: one inode %v, %d links; want one inode with 2", one, n)
	}
	if got, want := readFile(t, filepath.Join(proj, "l2")), "1\n2\n3\n4\n5\n6\n7\neight\n9\n"; got != want {
		t.Errorf("l2 after the revert: %q, want %q", got, want)
	}
}
