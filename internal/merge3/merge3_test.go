package merge3

import (
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

var lab = Labels{Ours: "ours", Theirs: "theirs"}

func TestMerge(t *testing.T) {
	for _, c := range []struct {
		name, base, ours, theirs, want string
		conflicts                      int
	}{
		{"ours only", "a\nb\nc\n", "a\nB\nc\n", "a\nb\nc\n", "a\nB\nc\n", 0},
		{"theirs only", "a\nb\nc\n", "a\nb\nc\n", "a\nb\nC\n", "a\nb\nC\n", 0},
		{"apart", "a\nb\nc\nd\ne\n", "A\nb\nc\nd\ne\n", "a\nb\nc\nd\nE\n", "A\nb\nc\nd\nE\n", 0},
		{"same change", "a\nb\n", "a\nX\n", "a\nX\n", "a\nX\n", 0},
		{"conflict", "a\nb\nc\n", "a\nO\nc\n", "a\nT\nc\n", "a\n<<<<<<< ours\nO\n=======\nT\n>>>>>>> theirs\nc\n", 1},
		{"no final newline", "a\nb", "a\nO", "a\nT", "a\n<<<<<<< ours\nO\n=======\nT\n>>>>>>> theirs\n", 1},
		{"both append", "a\n", "a\nO\n", "a\nT\n", "a\n<<<<<<< ours\nO\n=======\nT\n>>>>>>> theirs\n", 1},
		{"empty base", "", "x\n", "", "x\n", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := Merge([]byte(c.base), []byte(c.ours), []byte(c.theirs), lab)
			if string(r.Text) != c.want || r.Conflicts != c.conflicts {
				t.Errorf("got %q (%d conflicts), want %q (%d)", r.Text, r.Conflicts, c.want, c.conflicts)
			}
		})
	}
}

// TestMergeRandom: changes of one side only give that side; changes of
// both sides to lines far apart give both; and where git is installed, a
// merge without conflicts is what `git merge-file -p` gives.
func TestMergeRandom(t *testing.T) {
	git, _ := exec.LookPath("git")
	for seed := int64(1); seed <= 200; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			r := rand.New(rand.NewSource(seed))
			base := randLines(r, 30)
			ours := edit(r, base)
			theirs := edit(r, base)
			if m := Merge(j(base), j(ours), j(base), lab); string(m.Text) != string(j(ours)) || m.Conflicts != 0 {
				t.Fatalf("ours only: %q", m.Text)
			}
			if m := Merge(j(base), j(base), j(theirs), lab); string(m.Text) != string(j(theirs)) || m.Conflicts != 0 {
				t.Fatalf("theirs only: %q", m.Text)
			}
			m := Merge(j(base), j(ours), j(theirs), lab)
			if git == "" || m.Conflicts > 0 {
				return
			}
			dir := t.TempDir()
			for n, ls := range map[string][]string{"o": ours, "b": base, "t": theirs} {
				os.WriteFile(filepath.Join(dir, n), j(ls), 0o644)
			}
			out, err := exec.Command(git, "merge-file", "-p", filepath.Join(dir, "o"), filepath.Join(dir, "b"), filepath.Join(dir, "t")).Output()
			if err != nil {
				return // git saw a conflict (it may join hunks differently)
			}
			if string(out) != string(m.Text) {
				t.Fatalf("git merge-file gives\n%s\nmerge3 gives\n%s", out, m.Text)
			}
		})
	}
}

func randLines(r *rand.Rand, n int) []string {
	var out []string
	for i := 0; i < n; i++ {
		out = append(out, fmt.Sprintf("line %d", r.Intn(1000)))
	}
	return out
}

func edit(r *rand.Rand, ls []string) []string {
	out := append([]string(nil), ls...)
	for k := r.Intn(3); k >= 0; k-- {
		i := r.Intn(len(out) + 1)
		switch r.Intn(3) {
		case 0:
			out = append(out[:i], append([]string{fmt.Sprintf("new %d", r.Intn(1000))}, out[i:]...)...)
		case 1:
			if i < len(out) {
				out = append(out[:i], out[i+1:]...)
			}
		case 2:
			if i < len(out) {
				out[i] = "changed " + out[i]
			}
		}
	}
	return out
}

func j(ls []string) []byte {
	if len(ls) == 0 {
		return nil
	}
	return []byte(strings.Join(ls, "\n") + "\n")
}
