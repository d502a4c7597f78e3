package tests

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// gitSide is what git can hold of a tree: each file's bytes and
// executable bit, each symlink's target (no directories, no modes beyond
// the executable bit, no owners).
func gitSide(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for p, e := range snapshot(t, dir, []string{".ckptfs"}, nil) {
		switch e.Type {
		case "file":
			out[p] = fmt.Sprintf("file exec=%v %s", e.Mode&0o111 != 0, e.Sum)
		case "symlink":
			out[p] = "symlink " + e.Target
		}
	}
	return out
}

// copyProject copies the project, through the mount, into a new directory.
func copyProject(t *testing.T, proj string) string {
	t.Helper()
	dst := t.TempDir()
	runIn(t, proj, "cp -a . "+dst)
	return dst
}

// rewindLines returns a rewind's or restore's report without its first
// line's wording: the file count and lines, and each change listed.
func rewindLines(t *testing.T, out string) string {
	t.Helper()
	first, rest, _ := strings.Cut(out, "\n")
	m := regexp.MustCompile(`(would change|done as turn \d+:) (.*?):?$`).FindStringSubmatch(first)
	if m == nil {
		t.Fatalf("not a rewind report:\n%s", out)
	}
	return m[2] + "\n" + rest
}

// TestDiffsAreTrueAndApply, through a real mount: after chmod 600 d/f
// (turn 1) and mv d e (turn 2), diff 0 2 shows d/f renamed to e/f with
// its mode change, not a deletion of d/f and a rename of d; piped into git
// apply on a copy of the tree at 0, it gives the tree at 2 (names with
// spaces and non-ASCII, a binary file, a symlink, an executable bit); and
// the dry run of a restore of main.go and pkg lists exactly what the
// restore then does.
func TestDiffsAreTrueAndApply(t *testing.T) {
	needTurnctl(t)
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	proj := t.TempDir()
	runIn(t, proj, `
		mkdir d pkg
		printf 'eff\n' > d/f
		printf 'package main\n' > main.go
		printf 'package pkg\n' > pkg/a.go
		printf 'one\ntwo\n' > 'with space.txt'
		printf 'x\000y' > bin.dat
		printf '#!/bin/sh\n' > run.sh`)
	m := mountProject(t, proj)
	at0 := copyProject(t, proj)
	m.turnctl(t, "begin", "--label", "chmod")
	runIn(t, proj, `chmod 600 d/f; chmod +x run.sh; printf 'x\000z\001' > bin.dat; printf 'one\n2\n' > 'with space.txt'; ln -s 'with space.txt' café`)
	m.turnctl(t, "end")
	m.turnctl(t, "begin", "--label", "mv")
	runIn(t, proj, `mv d e; mv pkg lib; mv main.go cmd.go`)
	m.turnctl(t, "end")

	patch := m.turnctl(t, "diff", "0", "2")
	for _, want := range []string{
		"diff --git a/d/f b/e/f\nrename from d/f\nrename to e/f\n",
		"# ckptfs: mode of e/f 0644 -> 0600",
		"old mode 100644\nnew mode 100755\n",
		"GIT binary patch\nliteral 4\n",
		`diff --git "a/caf\303\251" "b/caf\303\251"` + "\nnew file mode 120000\n",
		"--- a/with space.txt\t\n+++ b/with space.txt\t\n",
	} {
		if !strings.Contains(patch, want) {
			t.Errorf("diff 0 2 lacks %q:\n%s", want, patch)
		}
	}
	if strings.Contains(patch, "deleted file mode 100644\n--- a/d/f") || strings.Contains(patch, "a/d/ b/e/") {
		t.Errorf("diff 0 2 shows d/f deleted or a directory entry:\n%s", patch)
	}
	apply := exec.Command("git", "apply", "-")
	apply.Dir = at0
	apply.Env = append(os.Environ(), "GIT_CEILING_DIRECTORIES="+filepath.Dir(at0))
	apply.Stdin = strings.NewReader(patch)
	if out, err := apply.CombinedOutput(); err != nil {
		t.Fatalf("git apply: %v\n%s\n%s", err, out, patch)
	}
	want, got := gitSide(t, proj), gitSide(t, at0)
	if fmt.Sprint(want) != fmt.Sprint(got) {
		t.Errorf("diff 0 2 | git apply gives\n%v\nwant\n%v", got, want)
	}

	// The restore the issue names: its dry run said 2 files, the run did 3.
	dry := m.turnctl(t, "restore", "0", "--dry-run", "--", "main.go", "pkg")
	run := m.turnctl(t, "restore", "0", "--", "main.go", "pkg")
	if d, r := rewindLines(t, dry), rewindLines(t, run); d != r {
		t.Errorf("restore --dry-run listed\n%s\nthe restore did\n%s", dry, run)
	}
	if !strings.Contains(run, "2 files") || !regexp.MustCompile(`(?m)^  added +pkg/a\.go +\+1 -0$`).MatchString(run) {
		t.Errorf("restore of main.go and pkg:\n%s", run)
	}
	dry = m.turnctl(t, "rewind", "--dry-run", "0")
	run = m.turnctl(t, "rewind", "0")
	if d, r := rewindLines(t, dry), rewindLines(t, run); d != r {
		t.Errorf("rewind --dry-run listed\n%s\nthe rewind did\n%s", dry, run)
	}
	if !regexp.MustCompile(`(?m)^  renamed +e/f -> d/f +0600 -> 0644$`).MatchString(run) {
		t.Errorf("rewind 0 does not report the rename back and the mode it restored:\n%s", run)
	}
}
