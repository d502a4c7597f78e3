package versionstore

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"ckptfs/internal/backing"
	"ckptfs/internal/ckpt"
)

// TestPlanRestoreRenamesLinear: a name renamed back and forth n times
// must not make planning a restore cost O(n²). planRestore kept one move
// per rename, each event compared against all of them; the time for 4n
// renames was about 16 times that for n. Linear is about 4.
func TestPlanRestoreRenamesLinear(t *testing.T) {
	plan := func(n int) time.Duration {
		root := t.TempDir()
		s := NewTestStore(t)
		tree, err := backing.Open(root)
		if err != nil {
			t.Fatal(err)
		}
		defer tree.Close()
		os.WriteFile(filepath.Join(root, "a"), []byte("x"), 0o644)
		os.Mkdir(filepath.Join(root, "d"), 0o755)
		s.Begin(ckpt.KindAgent, "", "")
		names := []string{"a", "b", "d/c"}
		for i := 0; i < n; i++ {
			from, to := names[i%3], names[(i+1)%3]
			commit, err := s.RecordRename(from, to, false, ckpt.Program{})
			if err != nil {
				t.Fatal(err)
			}
			commit(os.Rename(filepath.Join(root, from), filepath.Join(root, to)) == nil)
		}
		s.End("")
		start := time.Now()
		if _, _, _, err := s.planRestore(0, []string{""}, tree, nil); err != nil {
			t.Fatal(err)
		}
		return time.Since(start)
	}
	n := 3000
	small, big := plan(n), plan(4*n)
	t.Logf("planRestore: %d renames %v, %d renames %v", n, small, 4*n, big)
	if big > 10*small && big > 200*time.Millisecond {
		t.Errorf("planRestore grows faster than linearly in renames: %v for %d, %v for %d", small, n, big, 4*n)
	}
}
