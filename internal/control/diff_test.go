package control

import (
	"bytes"
	"io"
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

// countingReader counts the bytes read from it.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// A side larger than the limit is skipped without being read (a build's
// binaries, every turn), one within it read whole, and one that is
// larger than its size said is cut at the limit all the same.
func TestReadUpTo(t *testing.T) {
	big := bytes.Repeat([]byte("x"), 100)
	for _, c := range []struct {
		name      string
		data      []byte
		size      int64
		want      []byte
		wantBytes int // read at most
	}{
		{"too large, unread", big, 100, nil, 0},
		{"within", big[:64], 64, big[:64], 64},
		{"empty", nil, 0, []byte{}, 0},
		{"grew past the limit", big, 10, nil, 65},
		{"shrank", big[:5], 10, big[:5], 5},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := &countingReader{r: bytes.NewReader(c.data)}
			got, err := readUpTo(r, c.size, 64)
			if err != nil {
				t.Fatal(err)
			}
			if (got == nil) != (c.want == nil) || !bytes.Equal(got, c.want) {
				t.Errorf("got %d bytes (nil %v), want %d (nil %v)", len(got), got == nil, len(c.want), c.want == nil)
			}
			if r.n > c.wantBytes {
				t.Errorf("read %d bytes, want at most %d", r.n, c.wantBytes)
			}
		})
	}
}

// TestPatchNoteOfTwoLargeSides: a file too large to diff on both sides
// gets one reason, not the same one twice.
func TestPatchNoteOfTwoLargeSides(t *testing.T) {
	st := ckpt.State{Type: ckpt.Regular, Mode: 0o644, Size: 9 << 20}
	big := side{st: st, binary: true, skip: "larger than 8 MiB"}
	if got, want := formatPatch("big.bin", "big.bin", big, big, nil), "# ckptfs: skipped big.bin: larger than 8 MiB\n"; !strings.HasSuffix(got, want) {
		t.Errorf("patch of a large file:\n%s\nwant it to end in %q", got, want)
	}
	gone := side{st: st, binary: true, skip: "it vanished while being read"}
	if got, want := formatPatch("big.bin", "big.bin", big, gone, nil), "# ckptfs: skipped big.bin: larger than 8 MiB; it vanished while being read\n"; !strings.HasSuffix(got, want) {
		t.Errorf("patch of two sides skipped for two reasons:\n%s\nwant it to end in %q", got, want)
	}
}
