package tests

import (
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// gitView is a tree as git holds it: path -> "MODE SHA" of each regular
// file and symlink, .git and everything else left out.
func gitView(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	blob := func(b []byte) string {
		h := sha1.New()
		fmt.Fprintf(h, "blob %d\x00", len(b))
		h.Write(b)
		return hex.EncodeToString(h.Sum(nil))
	}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == ".git" {
			return filepath.SkipDir
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			mode := "100644"
			if fi.Mode()&0o100 != 0 {
				mode = "100755"
			}
			out[rel] = mode + " " + blob(b)
		case fi.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			out[rel] = "120000 " + blob([]byte(target))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// git runs git with GIT_DIR=dir.
func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	c := exec.Command("git", args...)
	c.Env = append(os.Environ(), "GIT_DIR="+dir)
	c.Dir = filepath.Dir(dir)
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// lsTree is gitView of a commit.
func lsTree(t *testing.T, dir, rev string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, rec := range strings.Split(git(t, dir, "ls-tree", "-r", "-z", rev), "\x00") {
		meta, p, ok := strings.Cut(rec, "\t")
		if f := strings.Fields(meta); ok && len(f) == 3 {
			out[p] = f[0] + " " + f[2]
		}
	}
	return out
}

func sameView(t *testing.T, what string, want, got map[string]string) {
	t.Helper()
	for p, w := range want {
		if got[p] != w {
			t.Errorf("%s: %s is %q, want %q", what, p, got[p], w)
		}
	}
	for p, g := range got {
		if _, ok := want[p]; !ok {
			t.Errorf("%s: %s is there (%s), should not", what, p, g)
		}
	}
	if len(want) == 0 {
		t.Errorf("%s: an empty tree", what)
	}
}

// exportedTurns maps each turn on ref to its commit, following first
// parents from the tip.
func exportedTurns(t *testing.T, dir, ref string) map[uint64]string {
	t.Helper()
	out := map[uint64]string{}
	log := git(t, dir, "log", "--first-parent", "--format=%H %(trailers:key=Ckptfs-Turn,valueonly,separator=)", ref)
	for _, l := range strings.Split(log, "\n") {
		f := strings.Fields(l)
		if len(f) != 2 {
			t.Fatalf("a commit without its turn on %s: %q", ref, l)
		}
		n, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		out[n] = f[0]
	}
	return out
}

// closedTurns lists the closed turns turnctl log knows.
func closedTurns(t *testing.T, m *Mount) []uint64 {
	t.Helper()
	var lg struct {
		Turns []struct {
			Num uint64 `json:"num"`
			End *string
		} `json:"turns"`
	}
	if err := json.Unmarshal([]byte(m.turnctl(t, "--json", "log")), &lg); err != nil {
		t.Fatal(err)
	}
	var out []uint64
	for _, tr := range lg.Turns {
		if tr.End != nil {
			out = append(out, tr.Num)
		}
	}
	return out
}

// TestExportGit: every turn of a history with renames, chmod +x, a
// symlink, hard links, a FIFO and a rewind becomes a commit on a private
// ref of the project's repository whose tree is the turn's (as checkout
// writes it), with HEAD, the index, the work tree and the branches
// untouched; a second export adds exactly the new turns; a foreign ref
// and unknown turns are refused; --git-dir makes a bare repository; an
// exported patch applies with git am.
func TestExportGit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	m, last := exportHistory(t, true)
	gd := filepath.Join(m.Dir, ".git")
	state := func() string {
		return git(t, gd, "rev-parse", "HEAD") + "\n" + git(t, gd, "for-each-ref", "refs/heads") + "\n" +
			git(t, gd, "ls-files", "-s") + "\n" + runIn(t, m.Dir, "git status --porcelain")
	}
	before := state()
	out := m.turnctl(t, "export", "git")
	if !strings.Contains(out, "exported turns 0-"+strconv.Itoa(last)+" to refs/ckptfs/turns") {
		t.Errorf("export git said %q", out)
	}
	if after := state(); after != before {
		t.Errorf("export changed the repository's state:\n%s\nwas\n%s", after, before)
	}
	commits := exportedTurns(t, gd, "refs/ckptfs/turns")
	if len(commits) != last+1 {
		t.Fatalf("exported %v, want turns 0-%d", commits, last)
	}
	co := t.TempDir()
	for n := 0; n <= last; n++ {
		dir := filepath.Join(co, strconv.Itoa(n))
		m.turnctl(t, "checkout", strconv.Itoa(n), dir)
		sameView(t, "commit of turn "+strconv.Itoa(n), gitView(t, dir), lsTree(t, gd, commits[uint64(n)]))
	}
	// The message: label, whole prompt, trailers; the date: the turn's end.
	msg := git(t, gd, "log", "-1", "--format=%B", commits[1])
	for _, w := range []string{"first edits\n", "over several lines.", "Ckptfs-Turn: 1\n", "Ckptfs-Kind: agent", "Ckptfs-Ref: msg-1", "Ckptfs-Programs: "} {
		if !strings.Contains(msg, w) {
			t.Errorf("turn 1's message lacks %q:\n%s", w, msg)
		}
	}
	if msg := git(t, gd, "log", "-1", "--format=%B", commits[4]); !strings.Contains(msg, "pipe (a FIFO)") {
		t.Errorf("turn 4's message does not name the FIFO:\n%s", msg)
	}
	// b.txt is 0600 from the start: the first commit says what git keeps.
	if msg := git(t, gd, "log", "-1", "--format=%B", commits[0]); !strings.Contains(msg, "b.txt (mode 0600, kept as 644)") {
		t.Errorf("turn 0's message does not name b.txt's mode:\n%s", msg)
	}
	if msg := git(t, gd, "log", "-1", "--format=%B", commits[2]); strings.Contains(msg, "mode 0600") {
		t.Errorf("turn 2's message names a mode it did not set:\n%s", msg)
	}
	var show struct {
		Turn struct{ End string } `json:"turn"`
	}
	json.Unmarshal([]byte(m.turnctl(t, "--json", "show", "1")), &show)
	if d := git(t, gd, "log", "-1", "--format=%cI", commits[1]); !strings.HasPrefix(show.Turn.End, strings.TrimSuffix(d, "+00:00")) {
		t.Errorf("turn 1's commit is dated %s, the turn ended %s", d, show.Turn.End)
	}
	if p := git(t, gd, "rev-parse", commits[3]+"^"); p != commits[2] {
		t.Errorf("turn 3's parent is %s, want turn 2's %s", p, commits[2])
	}

	// Incremental: a new turn, and exactly the new closed turns added.
	m.turnctl(t, "begin", "--label", "later")
	runIn(t, m.Dir, `printf 'later\n' > later.txt`)
	m.turnctl(t, "end")
	m.turnctl(t, "export", "git")
	again := exportedTurns(t, gd, "refs/ckptfs/turns")
	closed := closedTurns(t, m)
	if len(again) != len(closed) {
		t.Errorf("after a second export the ref holds turns %v, the closed turns are %v", again, closed)
	}
	for _, n := range closed {
		if again[n] == "" {
			t.Errorf("turn %d not exported", n)
		}
		if n <= uint64(last) && again[n] != commits[n] {
			t.Errorf("turn %d exported again: %s, was %s", n, again[n], commits[n])
		}
	}
	newest := closed[0]
	dir := filepath.Join(co, "newest")
	m.turnctl(t, "checkout", strconv.Itoa(int(newest)), dir)
	sameView(t, "commit of the newest turn", gitView(t, dir), lsTree(t, gd, "refs/ckptfs/turns"))
	// The FIFO turn 4 made is still there: each later commit, also one a
	// later export made, names it.
	if msg := git(t, gd, "log", "-1", "--format=%B", "refs/ckptfs/turns"); !strings.Contains(msg, "pipe (a FIFO)") {
		t.Errorf("the newest turn's message does not name the FIFO its tree lacks:\n%s", msg)
	}

	// Bad input: one line, exit 2, nothing changed.
	git(t, gd, "update-ref", "refs/ckptfs/other", "HEAD")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"export", "git", "--ref", "refs/ckptfs/other"}, "was not made by ckptfs"},
		{[]string{"export", "git", "99"}, "no turn 99"},
		{[]string{"export", "git", "3..x"}, "is not a turn"},
		{[]string{"export", "patch", "99"}, "no turn 99"},
		{[]string{"export", "svn"}, "unknown export"},
	} {
		tip := git(t, gd, "rev-parse", "refs/ckptfs/turns")
		stderr, code := m.turnctlFail(t, c.args...)
		if code != 2 || !strings.Contains(stderr, c.want) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("turnctl %s: exit %d, %q (want exit 2 and %q)", strings.Join(c.args, " "), code, stderr, c.want)
		}
		if git(t, gd, "rev-parse", "refs/ckptfs/turns") != tip {
			t.Errorf("turnctl %s moved the ref", strings.Join(c.args, " "))
		}
	}
	if git(t, gd, "rev-parse", "refs/ckptfs/other") != git(t, gd, "rev-parse", "HEAD") {
		t.Errorf("a refused export moved refs/ckptfs/other")
	}
	m.turnctl(t, "export", "git", "--ref", "refs/ckptfs/other", "--force", "1..2")
	if got := exportedTurns(t, gd, "refs/ckptfs/other"); len(got) != 2 || got[1] == "" || got[2] == "" {
		t.Errorf("a forced export of 1..2 holds %v", got)
	}

	// --git-dir: a new bare repository.
	bare := filepath.Join(t.TempDir(), "hist.git")
	m.turnctl(t, "export", "git", "--git-dir", bare, "2..")
	if git(t, bare, "rev-parse", "--is-bare-repository") != "true" {
		t.Errorf("%s is not a bare repository", bare)
	}
	sameView(t, "the bare repository's newest commit", gitView(t, dir), lsTree(t, bare, "refs/ckptfs/turns"))

	// export patch N | git am on the tree at N-1 gives N.
	for _, n := range []int{1, 2, 3} {
		patch := filepath.Join(t.TempDir(), "p")
		if err := os.WriteFile(patch, []byte(m.turnctl(t, "export", "patch", strconv.Itoa(n))), 0o644); err != nil {
			t.Fatal(err)
		}
		work := filepath.Join(co, "am"+strconv.Itoa(n))
		m.turnctl(t, "checkout", strconv.Itoa(n-1), work)
		runIn(t, work, `rm -rf .git && git init -q && git add -A && git commit -qm base && git am -q `+patch)
		sameView(t, "git am of turn "+strconv.Itoa(n), gitView(t, filepath.Join(co, strconv.Itoa(n))), gitView(t, work))
		if s := git(t, filepath.Join(work, ".git"), "log", "-1", "--format=%s%n%b"); !strings.Contains(s, "Ckptfs-Turn: "+strconv.Itoa(n)) {
			t.Errorf("git am of turn %d: the message is %q", n, s)
		}
	}
}

// An export into a ref that holds another project's history is refused,
// ref untouched: a delta of this history on that tree would give every
// commit a wrong tree. --force starts the ref over with this history.
func TestExportGitRefusesAnotherHistorysRef(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	a, _ := exportHistory(t, false)
	b, _ := exportHistory(t, false)
	bare := filepath.Join(t.TempDir(), "shared.git")
	a.turnctl(t, "export", "git", "--git-dir", bare)
	tip := git(t, bare, "rev-parse", "refs/ckptfs/turns")
	if msg := git(t, bare, "log", "-1", "--format=%B", tip); !strings.Contains(msg, "Ckptfs-End: ") {
		t.Errorf("the commit does not name its turn's start:\n%s", msg)
	}
	// b has a turn 4 too: its export must not take a's commit as its own.
	b.turnctl(t, "begin", "--label", "b's fifth")
	runIn(t, b.Dir, `printf 'b\n' > only-b.txt`)
	b.turnctl(t, "end")
	stderr, code := b.turnctlFail(t, "export", "git", "--git-dir", bare)
	if code != 2 || !strings.Contains(stderr, "of another history") {
		t.Errorf("export of b into a's ref: exit %d, %q", code, stderr)
	}
	if got := git(t, bare, "rev-parse", "refs/ckptfs/turns"); got != tip {
		t.Errorf("the refused export moved the ref")
	}
	b.turnctl(t, "export", "git", "--git-dir", bare, "--force")
	co := filepath.Join(t.TempDir(), "b5")
	b.turnctl(t, "checkout", "5", co)
	sameView(t, "b's turn 5 after --force", gitView(t, co), lsTree(t, bare, "refs/ckptfs/turns"))

	// b's own tip is still b's after a forget merged turn 4 into 5 (which
	// moves 5's start): the next export adds b's new turn.
	b.turnctl(t, "forget", "4")
	b.turnctl(t, "begin", "--label", "b's sixth")
	runIn(t, b.Dir, `printf 'b6\n' > six.txt`)
	b.turnctl(t, "end")
	if out := b.turnctl(t, "export", "git", "--git-dir", bare); !strings.Contains(out, "exported turn 6 ") {
		t.Errorf("b's export after a merge: %q", out)
	}
}
