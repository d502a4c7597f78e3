package versionstore

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// gitIndexEntries reads git's own indexes, of each version and object
// format: a refresh of the stat data (git status after the files' times
// moved) leaves the entries as they were, while git add, a mode change
// and an intent-to-add entry change them.
func TestGitIndexEntries(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	for _, c := range []struct {
		name    string
		init    []string
		version string
	}{
		{"v2", nil, "2"},
		{"v3", nil, "3"},
		{"v4", nil, "4"},
		{"v4 sha256", []string{"--object-format=sha256"}, "4"},
		{"v2 sha256", []string{"--object-format=sha256"}, "2"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			git := func(args ...string) {
				t.Helper()
				cmd := exec.Command("git", args...)
				cmd.Dir = dir
				cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("git %v: %v\n%s", args, err, out)
				}
			}
			index := func() []byte {
				t.Helper()
				b, err := os.ReadFile(filepath.Join(dir, ".git/index"))
				if err != nil {
					t.Fatal(err)
				}
				return b
			}
			entries := func(b []byte) [][]byte {
				t.Helper()
				es, ok := gitIndexEntries(b)
				if !ok {
					t.Fatalf("gitIndexEntries refused git's index (%d bytes)", len(b))
				}
				return es
			}
			same := func(x, y []byte) bool {
				return slices.EqualFunc(entries(x), entries(y), func(a, b []byte) bool { return string(a) == string(b) })
			}
			git(append([]string{"init", "-q"}, c.init...)...)
			for _, name := range []string{"a", "dir/b", "dir/sub/c", "dir/sub/d", "long-name-of-some-length.txt"} {
				os.MkdirAll(filepath.Join(dir, filepath.Dir(name)), 0o755)
				os.WriteFile(filepath.Join(dir, name), []byte(name+"\n"), 0o644)
			}
			git("add", "-A")
			git("update-index", "--index-version", c.version)
			git("commit", "-qm", "one")
			before := index()
			if got := len(entries(before)); got != 5 {
				t.Fatalf("%d entries, want 5", got)
			}

			// Refresh: the files' times move, git status rewrites the index.
			future := time.Now().Add(time.Hour)
			filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
				if err == nil && fi.Mode().IsRegular() && filepath.Base(filepath.Dir(p)) != ".git" {
					os.Chtimes(p, future, future)
				}
				return nil
			})
			git("status", "--porcelain")
			refreshed := index()
			if string(refreshed) == string(before) {
				t.Fatal("git status did not rewrite the index")
			}
			if !same(before, refreshed) {
				t.Error("a refresh changed the entries")
			}

			// Changes of what the index holds.
			os.WriteFile(filepath.Join(dir, "dir/b"), []byte("changed\n"), 0o644)
			git("add", "dir/b")
			if same(refreshed, index()) {
				t.Error("git add of new bytes left the entries alike")
			}
			added := index()
			os.Chmod(filepath.Join(dir, "a"), 0o755)
			git("add", "a")
			if same(added, index()) {
				t.Error("a mode change left the entries alike")
			}
			moded := index()
			os.WriteFile(filepath.Join(dir, "new"), []byte("n\n"), 0o644)
			git("add", "--intent-to-add", "new")
			if same(moded, index()) {
				t.Error("an intent-to-add entry left the entries alike")
			}
		})
	}
	for _, bad := range [][]byte{nil, []byte("DIRC"), []byte("DIRC\x00\x00\x00\x05\x00\x00\x00\x00"), []byte("DIRC\x00\x00\x00\x02\x00\x00\x00\x01short"),
		// A count of 4 billion entries in a file of 76 bytes: refused, not
		// allocated for.
		append([]byte("DIRC\x00\x00\x00\x02\xff\xff\xff\xff"), make([]byte, 64)...)} {
		if _, ok := gitIndexEntries(bad); ok {
			t.Errorf("gitIndexEntries(%q) took it", bad)
		}
	}
}

// A SHA-256 index whose names are short has entries of the same length
// as a SHA-1 index's: its checksum, not the first length that parses,
// tells which, so that git mv is a change of the entries, not a refresh.
// A split index is refused.
func TestGitIndexIDLengthAndSplit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	dir := t.TempDir()
	git := func(args ...string) {
		t.Helper()
		c := exec.Command("git", args...)
		c.Dir = dir
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	index := func() []byte {
		b, _ := os.ReadFile(filepath.Join(dir, ".git/index"))
		return b
	}
	git("init", "-q", "--object-format=sha256")
	os.WriteFile(filepath.Join(dir, "a"), []byte("content 0"), 0o644)
	git("add", "a")
	before := index()
	git("mv", "a", "b")
	x, okx := gitIndexEntries(before)
	y, oky := gitIndexEntries(index())
	if !okx || !oky || len(x) != 1 || !bytes.HasSuffix(x[0], []byte("\x00a")) || !bytes.HasSuffix(y[0], []byte("\x00b")) {
		t.Errorf("a SHA-256 index of short names read as %q and %q", x, y)
	}
	git("config", "core.splitIndex", "true")
	git("update-index", "--split-index")
	if es, ok := gitIndexEntries(index()); ok {
		t.Errorf("a split index was read: %q", es)
	}
}

func TestIsGitIndex(t *testing.T) {
	for p, want := range map[string]bool{
		".git/index": true, ".git/worktrees/w/index": true, ".git/modules/m/index": true, "sub/.git/index": true,
		"index": false, "src/index": false, ".gitx/index": false, ".git/index.lock": false, "a.git/index": false,
	} {
		if got := isGitIndex(p); got != want {
			t.Errorf("isGitIndex(%q) = %v", p, got)
		}
	}
}
