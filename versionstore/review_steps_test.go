package versionstore

import (
	"os"
	"path/filepath"
	"testing"

	"ckptfs/internal/ckpt"
)

// TestLastStepIsItsOwnPoint: "1.2", the last step of a turn of two steps,
// names what step 2 did: its changes are b's alone, and reverting it
// keeps step 1's change of a (Resolve gave the whole turn: show listed
// a too, and revert undid a).
func TestLastStepIsItsOwnPoint(t *testing.T) {
	s := NewTestStore(t)
	root := t.TempDir()
	tree := openTree(t, root)
	for _, f := range []string{"a", "b"} {
		writeFile(t, filepath.Join(root, f), []byte("0"))
	}
	s.Begin(ckpt.KindAgent, "", "")
	captureFile(t, s, tree, "a")
	writeFile(t, filepath.Join(root, "a"), []byte("1"))
	if _, ok, err := s.Step("Write", "a"); err != nil || !ok {
		t.Fatal(ok, err)
	}
	captureFile(t, s, tree, "b")
	writeFile(t, filepath.Join(root, "b"), []byte("1"))
	if _, err := s.End(""); err != nil {
		t.Fatal(err)
	}
	p, err := s.Resolve("1.2")
	if err != nil {
		t.Fatal(err)
	}
	cs, err := s.TurnChanges(p, tree)
	if err != nil || len(cs) != 1 || cs[0].Path != "b" {
		t.Fatalf("changes of step 1.2 (resolved to %s): %+v, %v", PointName(p), cs, err)
	}
	if got := catAt(t, s, p, "a", tree); got != "1" {
		t.Fatalf("a at the end of 1.2: %q", got)
	}
	if _, err := s.Revert(p, tree, RevertOptions{}); err != nil {
		t.Fatal(err)
	}
	for f, want := range map[string]string{"a": "1", "b": "0"} {
		if b, _ := os.ReadFile(filepath.Join(root, f)); string(b) != want {
			t.Fatalf("after reverting step 1.2, %s holds %q, want %q", f, b, want)
		}
	}
}
