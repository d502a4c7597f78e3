package turnctlcli

import (
	"fmt"
	"io/fs"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"ckptfs/fusefs/fusefstest"
)

// After chmod 600 d/f (turn 2) and mv d e (turn 3), diff 1 3 says what
// happened to each path: d/f was renamed to e/f with its mode changed, not
// deleted with no e/f; a rewind to 1 reports the rename back and the mode
// it restored, not an added d/f.
func TestDiffFollowsDirectoryRenamesPerPath(t *testing.T) {
	dir := historyOf(t, func(turn func(label, ref string, fn func()), ov *fusefstest.Overlay) {
		turn("", "", func() {
			ov.Mkdir("d")
			ov.Write("d/f", "eff\n")
		})
		turn("", "", func() { ov.Chmod("d/f", 0o600) })
		turn("", "", func() { ov.Rename("d", "e") })
	})
	out, errs, code := tc(t, "-C", dir, "diff", "1", "3")
	want := "# ckptfs: mode of e/f 0644 -> 0600 (git patches hold only whether a file is executable)\n" +
		"diff --git a/d/f b/e/f\n" +
		"rename from d/f\nrename to e/f\n"
	if code != 0 || out != want {
		t.Errorf("diff 1 3: %d %s\n%s\nwant\n%s", code, errs, out, want)
	}
	out, _, _ = tc(t, "-C", dir, "show", "3")
	if !regexp.MustCompile(`(?m)^  renamed +d/f -> e/f *$`).MatchString(out) {
		t.Errorf("show 3 does not list the file the directory rename moved:\n%s", out)
	}
	dry, _, _ := tc(t, "-C", dir, "rewind", "--dry-run", "1")
	out, errs, code = tc(t, "-C", dir, "rewind", "1")
	if code != 0 {
		t.Fatalf("rewind 1: %d %s", code, errs)
	}
	for _, o := range []string{dry, out} {
		if !regexp.MustCompile(`(?m)^  renamed +e/f -> d/f +0600 -> 0644$`).MatchString(o) || strings.Contains(o, "added") || strings.Contains(o, "deleted") {
			t.Errorf("rewind 1 reports:\n%s", o)
		}
	}
	if fi, err := os.Stat(filepath.Join(dir, "d/f")); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("after rewind 0, d/f: %v %v", fi, err)
	}
}

// A patch notes every mode git apply would not give: an executable made
// 0600 (git's mode line says 100644) and a new file of 0600 (git makes it
// 0644), as well as a change within one git mode.
func TestDiffNotesModesGitCannotHold(t *testing.T) {
	dir := historyOf(t, func(turn func(label, ref string, fn func()), ov *fusefstest.Overlay) {
		turn("", "", func() {
			ov.Write("run.sh", "#!/bin/sh\n")
			ov.Chmod("run.sh", 0o755)
			ov.Write("plain", "p\n")
		})
		turn("", "", func() {
			ov.Chmod("run.sh", 0o600)
			ov.Write("secret", "s\n")
			ov.Chmod("secret", 0o600)
			ov.Chmod("plain", 0o755)
		})
	})
	out, errs, code := tc(t, "-C", dir, "diff", "1", "2")
	if code != 0 {
		t.Fatalf("diff 1 2: %d %s", code, errs)
	}
	for _, want := range []string{
		"# ckptfs: mode of run.sh 0755 -> 0600 (git patches hold only whether a file is executable)\n",
		"# ckptfs: mode of secret 0600 (git patches hold only whether a file is executable)\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("diff 1 2 lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "mode of plain") {
		t.Errorf("diff 1 2 notes a mode git holds (0644 -> 0755):\n%s", out)
	}
}

// gitEntry is what git can hold of one path: a file's bytes and whether it
// is executable, or a symlink's target.
type gitEntry struct {
	symlink bool
	exec    bool
	data    string
}

// gitView walks dir (without its store) into what git can hold: regular
// files and symlinks; directories and special files are not in it.
func gitView(t *testing.T, dir string) map[string]gitEntry {
	t.Helper()
	view := map[string]gitEntry{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == ".ckptfs" || rel == ".git" {
			return filepath.SkipDir
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			view[rel] = gitEntry{symlink: true, data: target}
		case fi.Mode().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			view[rel] = gitEntry{exec: fi.Mode()&0o111 != 0, data: string(data)}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return view
}

// materialize writes view into a new directory.
func materialize(t *testing.T, view map[string]gitEntry) string {
	t.Helper()
	dir := t.TempDir()
	for p, e := range view {
		abs := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
			t.Fatal(err)
		}
		if e.symlink {
			if err := os.Symlink(e.data, abs); err != nil {
				t.Fatal(err)
			}
			continue
		}
		mode := os.FileMode(0o644)
		if e.exec {
			mode = 0o755
		}
		if err := os.WriteFile(abs, []byte(e.data), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(abs, mode); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// Names git quotes, and names it does not.
var gitNames = []string{"a", "b c", "é", `q"t`, "new\nline", `back\slash`, "tab\tx", "日本", "-x", "z"}

// randomGitHistory makes turns of random changes through the overlay
// stand-in: text, empty and binary files (some larger than a base85 line
// many times over), chmods, symlinks, FIFOs, removals and renames of files
// and directories, under names git must quote. It returns the project and
// what git can hold of the tree at the end of each turn (0 the empty
// tree).
func randomGitHistory(t *testing.T, seed int64, nTurns int) (string, []map[string]gitEntry) {
	rng := rand.New(rand.NewSource(seed))
	var views []map[string]gitEntry
	var root string
	dir := historyOf(t, func(turn func(label, ref string, fn func()), ov *fusefstest.Overlay) {
		root = ov.Dir
		views = append(views, gitView(t, root))
		exists := func(p string) (os.FileInfo, bool) {
			fi, err := os.Lstat(filepath.Join(root, p))
			return fi, err == nil
		}
		randPath := func() string {
			depth := 1 + rng.Intn(3)
			var els []string
			for i := 0; i < depth; i++ {
				els = append(els, gitNames[rng.Intn(len(gitNames))])
			}
			return strings.Join(els, "/")
		}
		// existing picks a path that exists, most of the time.
		existing := func() string {
			var all []string
			filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
				rel, _ := filepath.Rel(root, p)
				if err != nil || rel == "." {
					return nil
				}
				if rel == ".ckptfs" {
					return filepath.SkipDir
				}
				all = append(all, rel)
				return nil
			})
			if len(all) == 0 || rng.Intn(5) == 0 {
				return randPath()
			}
			return all[rng.Intn(len(all))]
		}
		parentIsDir := func(p string) bool {
			d := filepath.Dir(p)
			fi, ok := exists(d)
			return d == "." || ok && fi.IsDir()
		}
		data := func() string {
			switch rng.Intn(6) {
			case 0:
				return ""
			case 1: // binary
				b := make([]byte, 1+rng.Intn(3000))
				rng.Read(b)
				b[0] = 0
				return string(b)
			case 2: // no newline at the end
				return fmt.Sprintf("line %d", rng.Intn(3))
			}
			var b strings.Builder
			for i := rng.Intn(12); i >= 0; i-- {
				fmt.Fprintf(&b, "line %d\n", rng.Intn(4))
			}
			return b.String()
		}
		step := func() {
			p := randPath()
			if rng.Intn(2) == 0 {
				p = existing()
			}
			fi, ok := exists(p)
			switch op := rng.Intn(8); {
			case op <= 1: // write
				if parentIsDir(p) && (!ok || fi.Mode().IsRegular()) {
					ov.Write(p, data())
				}
			case op == 2:
				if !ok && parentIsDir(p) {
					ov.Mkdir(p)
				}
			case op == 3: // chmod: executable or not, or a mode git does not hold
				if ok && fi.Mode().IsRegular() {
					ov.Chmod(p, []os.FileMode{0o755, 0o644, 0o600, 0o700}[rng.Intn(4)])
				}
			case op == 4:
				if !ok && parentIsDir(p) {
					if rng.Intn(4) == 0 {
						ov.Mkfifo(p)
					} else {
						ov.Symlink([]string{"a", "../b c", "é/x", "new\nline"}[rng.Intn(4)], p)
					}
				}
			case op == 5: // remove a file or an empty directory
				if ents, _ := os.ReadDir(filepath.Join(root, p)); ok && len(ents) == 0 {
					ov.Remove(p)
				}
			default: // rename a file or a directory
				q := randPath()
				qi, qok := exists(q)
				if !ok || p == q || !parentIsDir(q) || strings.HasPrefix(q+"/", p+"/") || strings.HasPrefix(p+"/", q+"/") {
					return
				}
				if qok && (qi.IsDir() || fi.IsDir()) {
					return
				}
				ov.Rename(p, q)
			}
		}
		for n := 0; n < nTurns; n++ {
			turn("", "", func() {
				for k := 1 + rng.Intn(10); k > 0; k-- {
					step()
				}
			})
			views = append(views, gitView(t, root))
		}
	})
	return dir, views
}

// TestDiffAppliesWithGit: on random histories (seeded, replayable with
// go test -run 'TestDiffAppliesWithGit/SEED'), turnctl diff A B piped into
// git apply on a copy of the tree at A gives exactly the tree at B: every
// file's bytes and executable bit, every symlink's target (the copy holds
// what git can: no FIFOs, no empty directories).
func TestDiffAppliesWithGit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	for seed := int64(1); seed <= 6; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			dir, views := randomGitHistory(t, seed, 10)
			rng := rand.New(rand.NewSource(seed))
			for k := 0; k < 8; k++ {
				a, b := rng.Intn(len(views)), rng.Intn(len(views))
				patch, errs, code := tc(t, "-C", dir, "diff", fmt.Sprint(a), fmt.Sprint(b))
				if code != 0 {
					t.Fatalf("seed %d: diff %d %d: %d %s", seed, a, b, code, errs)
				}
				copyDir := materialize(t, views[a])
				if strings.Contains(patch, "diff --git") {
					cmd := exec.Command("git", "apply", "--allow-empty", "-")
					cmd.Dir = copyDir
					cmd.Env = append(os.Environ(), "GIT_CEILING_DIRECTORIES="+filepath.Dir(copyDir))
					cmd.Stdin = strings.NewReader(patch)
					if out, err := cmd.CombinedOutput(); err != nil {
						t.Fatalf("seed %d: diff %d %d | git apply: %v\n%s\n%s", seed, a, b, err, out, patch)
					}
				}
				got := gitView(t, copyDir)
				var diffs []string
				for _, p := range slices.Sorted(mapsKeys(views[b], got)) {
					w, okw := views[b][p]
					g, okg := got[p]
					if okw != okg || w != g {
						diffs = append(diffs, fmt.Sprintf("%q: got %v %+v, want %v %+v", p, okg, g, okw, w))
					}
				}
				if len(diffs) > 0 {
					t.Fatalf("seed %d: diff %d %d | git apply gives another tree:\n%s\npatch:\n%s", seed, a, b, strings.Join(diffs, "\n"), patch)
				}
			}
		})
	}
}

// mapsKeys iterates over the keys of both maps (a key of both twice).
func mapsKeys(x, y map[string]gitEntry) func(func(string) bool) {
	return func(yield func(string) bool) {
		for _, m := range []map[string]gitEntry{x, y} {
			for k := range m {
				if !yield(k) {
					return
				}
			}
		}
	}
}
