package control

import (
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aymanbagabas/go-udiff/lcs"

	"ckptfs/internal/ckpt"
)

func unifiedText(a, b string) (string, int, int) {
	al, bl := splitLines([]byte(a)), splitLines([]byte(b))
	hunks := makeHunks(al, bl, lcs.DiffLines(al, bl))
	reg := ckpt.State{Type: ckpt.Regular, Mode: 0o644}
	patch := formatPatch("f", "f", side{st: reg, data: []byte(a)}, side{st: reg, data: []byte(b)}, hunks)
	add, del := 0, 0
	for _, h := range hunks {
		add += h.added
		del += h.deleted
	}
	return patch, add, del
}

func TestUnifiedKnown(t *testing.T) {
	patch, add, del := unifiedText("a\nb\nc\n", "a\nB\nc\nd")
	want := "diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1,3 +1,4 @@\n a\n-b\n+B\n c\n+d\n\\ No newline at end of file\n"
	if patch != want || add != 2 || del != 1 {
		t.Errorf("patch:\n%s\nwant:\n%s (+%d -%d)", patch, want, add, del)
	}
}

// TestUnifiedAppliesWithPatch checks random diffs with patch(1): applying
// ours to the old text must give the new text.
func TestUnifiedAppliesWithPatch(t *testing.T) {
	if _, err := exec.LookPath("patch"); err != nil {
		t.Skip("no patch(1)")
	}
	rng := rand.New(rand.NewSource(1))
	dir := t.TempDir()
	gen := func() string {
		var b strings.Builder
		n := rng.Intn(30)
		for i := 0; i < n; i++ {
			b.WriteString(string(rune('a' + rng.Intn(4))))
			if i < n-1 || rng.Intn(4) > 0 {
				b.WriteByte('\n')
			}
		}
		return b.String()
	}
	for i := 0; i < 60; i++ {
		a, b := gen(), gen()
		patch, _, _ := unifiedText(a, b)
		f := filepath.Join(dir, "f")
		os.WriteFile(f, []byte(a), 0o644)
		if a == b {
			continue
		}
		cmd := exec.Command("patch", "-s", "-f", "-p1", "-d", dir)
		cmd.Stdin = strings.NewReader(patch)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("patch failed: %v %s\nold %q\nnew %q\n%s", err, out, a, b, patch)
		}
		got, _ := os.ReadFile(f)
		if string(got) != b {
			t.Fatalf("patched %q, want %q\n%s", got, b, patch)
		}
	}
}
