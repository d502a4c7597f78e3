package turnctlcli

import (
	"bytes"
	"compress/zlib"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"ckptfs/fusefs/fusefstest"
	"ckptfs/turnctl"
)

const (
	hash1 = "1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d"
	hash2 = "ec90ceb0123456789abcdef0123456789abcdef0"
)

// gitProject is a project whose .git changes as git would change it:
//
//	1 "init":   .git/HEAD on main, main at hash1 (its object), a.txt
//	2 "commit": a.txt edited; hash2's object written (a zlib stream with
//	            no NUL in it), main moved to hash2, a line in logs/HEAD
//	3 "switch": HEAD moved to the branch feature, nothing else
func gitProject(t *testing.T) string {
	t.Helper()
	return historyOf(t, func(turn func(label, ref string, fn func()), ov *fusefstest.Overlay) {
		turn("init", "", func() {
			for _, d := range []string{".git", ".git/refs", ".git/refs/heads", ".git/objects", ".git/objects/1a", ".git/logs"} {
				ov.Mkdir(d)
			}
			ov.Write(".git/HEAD", "ref: refs/heads/main\n")
			ov.Write(".git/objects/1a/"+hash1[2:], "x\x01\x9d\x8eA\n")
			ov.Write(".git/refs/heads/main", hash1+"\n")
			ov.Write("a.txt", "a\n")
		})
		turn("commit", "", func() {
			ov.Write("a.txt", "a\nb\n")
			ov.Mkdir(".git/objects/ec")
			ov.Write(".git/objects/ec/"+hash2[2:], "x\x01\x9d\x8eK\nz\n")
			ov.Write(".git/refs/heads/main", hash2+"\n")
			ov.Write(".git/logs/HEAD", hash1+" "+hash2+" t <t> 0 +0000\tcommit: b\n")
		})
		turn("switch", "", func() { ov.Write(".git/HEAD", "ref: refs/heads/feature\n") })
	})
}

func TestGitChangesAreOneLine(t *testing.T) {
	dir := gitProject(t)
	out, errs, code := tc(t, "-C", dir, "show", "2")
	if code != 0 {
		t.Fatalf("show 2: %d %s", code, errs)
	}
	want := "  modified  a.txt  +1 -0\n  git: commit ec90ceb, 3 files in .git\n1 file (+1 -0)\n"
	if !strings.HasSuffix(out, want) || strings.Contains(out, ".git/") {
		t.Errorf("show 2:\n%s\nwant it to end in:\n%s", out, want)
	}
	// --all lists them; git's objects are binary, whatever their bytes.
	out, _, _ = tc(t, "-C", dir, "show", "2", "--all")
	for _, want := range []string{"added .git/objects/ec/" + hash2[2:] + " binary, 8 B", "modified .git/refs/heads/main +1 -1", "added .git/logs/HEAD +1 -0", "4 files (+3 -1)"} {
		if !strings.Contains(squeeze(out), want) {
			t.Errorf("show 2 --all lacks %q:\n%s", want, out)
		}
	}
	// Paths under .git asked for by name are listed too.
	out, _, _ = tc(t, "-C", dir, "show", "2", "--", ".git/refs")
	if !strings.Contains(out, "modified  .git/refs/heads/main  +1 -1") || strings.Contains(out, "git:") {
		t.Errorf("show 2 -- .git/refs:\n%s", out)
	}
	out, _, _ = tc(t, "-C", dir, "show", "3")
	if !strings.HasSuffix(out, "\n  git: on feature (was main), 1 file in .git\nno files changed outside .git\n") {
		t.Errorf("show 3:\n%s", out)
	}
	out, _, _ = tc(t, "-C", dir, "log")
	lines := strings.Split(out, "\n")
	if !strings.Contains(squeeze(lines[1]), "commit 1 file +1 -0 git: commit ec90ceb, 3 files in .git test") {
		t.Errorf("log, turn 2: %q", lines[1])
	}
	if !strings.Contains(squeeze(lines[0]), "switch git: on feature (was main), 1 file in .git test") {
		t.Errorf("log, turn 3: %q", lines[0])
	}
	out, _, _ = tc(t, "-C", dir, "log", "--all")
	if lines := strings.Split(out, "\n"); !strings.Contains(lines[1], "commit  4 files  +3 -1  test") || strings.Contains(out, "git:") {
		t.Errorf("log --all:\n%s", out)
	}
	// JSON lists every change, and says what git did.
	out, _, _ = tc(t, "-C", dir, "--json", "show", "2")
	var rep turnctl.ShowReply
	if err := json.Unmarshal([]byte(out), &rep); err != nil || len(rep.Changes) != 5 || rep.Stats.Git == nil ||
		rep.Stats.Git.Files != 3 || rep.Stats.Git.Head != hash2 || rep.Stats.Git.PrevHead != hash1 || !rep.Stats.Git.Commit || rep.Stats.Git.Branch != "main" {
		t.Errorf("show --json 2: %v\n%s", err, out)
	}
	// A rewind past the commit moves the branch back.
	out, errs, code = tc(t, "-C", dir, "rewind", "1")
	if code != 0 || !strings.Contains(out, "\n  git: on main (was feature), main at 1a2b3c4 (was ec90ceb), 4 files in .git\n") || strings.Contains(out, ".git/") ||
		!strings.HasPrefix(out, "rewind to turn 1 done as turn 4: 1 file (+0 -1)\n") {
		t.Errorf("rewind 1: %d %s\n%s", code, errs, out)
	}
}

// squeeze collapses runs of spaces (a table's alignment) into one.
func squeeze(s string) string {
	return strings.Join(strings.FieldsFunc(s, func(r rune) bool { return r == ' ' }), " ")
}

// diff leaves the changes inside .git out of its patch, which git apply
// would refuse whole ("invalid path '.git/...'"), and says so on a line
// git apply passes over; --all or a path under .git puts them in, git's
// objects as GIT binary patches. show --patch prints the patches of what
// it lists.
func TestDiffLeavesGitOut(t *testing.T) {
	dir := gitProject(t)
	note := "# ckptfs: left out the changes inside .git (git: commit ec90ceb, 3 files in .git): git apply does not write there; --all adds them\n"
	out, errs, code := tc(t, "-C", dir, "diff", "1", "2")
	if code != 0 || !strings.HasPrefix(out, "diff --git a/a.txt b/a.txt\n") || !strings.HasSuffix(out, "\n+b\n"+note) || strings.Contains(out, ".git/") {
		t.Errorf("diff 1 2: %d %s\n%s", code, errs, out)
	}
	if _, err := exec.LookPath("git"); err == nil {
		copyDir := materialize(t, map[string]gitEntry{"a.txt": {data: "a\n"}})
		cmd := exec.Command("git", "apply", "-")
		cmd.Dir = copyDir
		cmd.Env = append(os.Environ(), "GIT_CEILING_DIRECTORIES="+filepath.Dir(copyDir))
		cmd.Stdin = strings.NewReader(out)
		if msg, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("diff 1 2 | git apply: %v\n%s", err, msg)
		} else if b, _ := os.ReadFile(filepath.Join(copyDir, "a.txt")); string(b) != "a\nb\n" {
			t.Errorf("diff 1 2 | git apply: a.txt is %q", b)
		}
	}
	for _, args := range [][]string{{"diff", "1", "2", "--all"}, {"diff", "1", "2", "--", ".git"}} {
		out, _, _ = tc(t, append([]string{"-C", dir}, args...)...)
		for _, want := range []string{
			"diff --git a/.git/objects/ec/" + hash2[2:] + " b/.git/objects/ec/" + hash2[2:] + "\nnew file mode 100644\nindex 0000000000000000000000000000000000000000..",
			"GIT binary patch\nliteral 8\n",
			"diff --git a/.git/refs/heads/main b/.git/refs/heads/main\n",
		} {
			if !strings.Contains(out, want) || strings.Contains(out, "left out") {
				t.Errorf("%v lacks %q:\n%s", args, want, out)
			}
		}
	}
	out, _, _ = tc(t, "-C", dir, "show", "2", "--patch")
	if !strings.Contains(out, "\ndiff --git a/a.txt b/a.txt\n") || strings.Contains(out, "diff --git a/.git") {
		t.Errorf("show 2 --patch:\n%s", out)
	}
	out, _, _ = tc(t, "-C", dir, "show", "2", "--patch", "--all")
	if !strings.Contains(out, "\ndiff --git a/.git/refs/heads/main b/.git/refs/heads/main\n") {
		t.Errorf("show 2 --patch --all:\n%s", out)
	}
	// JSON lists every change, with its patch, and what git did.
	out, _, _ = tc(t, "-C", dir, "--json", "diff", "1", "2")
	var rep turnctl.DiffReply
	if err := json.Unmarshal([]byte(out), &rep); err != nil || len(rep.Changes) != 5 || rep.Stats.Git == nil || !rep.Stats.Git.Commit {
		t.Errorf("--json diff 1 2: %v\n%s", err, out)
	}
}

// TestDryRunOfGitOnlyChanges: a rewind's dry run that would change only
// files in .git says so in words that read.
func TestDryRunOfGitOnlyChanges(t *testing.T) {
	dir := gitProject(t)
	out, errs, code := tc(t, "-C", dir, "rewind", "2", "--dry-run")
	if code != 0 || !strings.HasPrefix(out, "rewind to turn 2 would change only files in .git:\n") {
		t.Errorf("rewind 2 --dry-run: exit %d, %s%s", code, out, errs)
	}
}

// TestGitCommitBroughtBackIsNoNewCommit: a turn that adds a commit
// object and moves the branch to it made a commit (an amend too), unless
// the head before is that commit's child: a rewind past a gc that had
// packed the commit's loose object away brings the object back, and
// moved the branch.
func TestGitCommitBroughtBackIsNoNewCommit(t *testing.T) {
	obj := func(body string) string {
		var b bytes.Buffer
		zw := zlib.NewWriter(&b)
		fmt.Fprintf(zw, "commit %d\x00%s", len(body), body)
		zw.Close()
		return b.String()
	}
	const a, b, c = "aa" + "11111111111111111111111111111111111111", "bb" + "22222222222222222222222222222222222222", "cc" + "33333333333333333333333333333333333333"
	const tree = "tree 4b825dc642cb6eb9a060e54bf8d69288fbee4904\n"
	objA := obj(tree + "\nfirst\n")
	dir := historyOf(t, func(turn func(label, ref string, fn func()), ov *fusefstest.Overlay) {
		turn("init", "", func() {
			for _, d := range []string{".git", ".git/refs", ".git/refs/heads", ".git/objects", ".git/objects/aa", ".git/objects/bb", ".git/objects/cc"} {
				ov.Mkdir(d)
			}
			ov.Write(".git/HEAD", "ref: refs/heads/main\n")
			ov.Write(".git/objects/aa/"+a[2:], objA)
			ov.Write(".git/refs/heads/main", a+"\n")
		})
		turn("commit", "", func() {
			ov.Write(".git/objects/bb/"+b[2:], obj(tree+"parent "+a+"\n\nsecond\n"))
			ov.Write(".git/refs/heads/main", b+"\n")
		})
		turn("gc", "", func() { ov.Remove(".git/objects/aa/" + a[2:]) })
		turn("amend", "", func() {
			ov.Write(".git/objects/cc/"+c[2:], obj(tree+"parent "+a+"\n\nsecond, amended\n"))
			ov.Write(".git/refs/heads/main", c+"\n")
		})
		turn("back", "", func() {
			ov.Write(".git/objects/aa/"+a[2:], objA)
			ov.Write(".git/refs/heads/main", a+"\n")
		})
	})
	for n, want := range map[string]string{
		"2": "git: commit bb22222, 2 files in .git",
		"4": "git: commit cc33333, 2 files in .git",
		"5": "git: main at aa11111 (was cc33333), 2 files in .git",
	} {
		out, errs, code := tc(t, "-C", dir, "show", n)
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("show %s: exit %d, %s%s; want %q", n, code, out, errs, want)
		}
	}
}
