package versionstore

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"ckptfs/internal/backing"
)

// TestKillBetweenExchangeRecordAndExchange: an exchange recorded before a
// kill -9 and never made was kept by Recover (both names exist either
// way), so history said a and y had swapped: a later capture of y stood
// for a's state, and a rewind to 0 gave a the bytes of y. The record's
// mark now holds the two inode numbers, and Recover drops an exchange
// whose names still have their own; one that was made is kept.
func TestKillBetweenExchangeRecordAndExchange(t *testing.T) {
	for _, done := range []bool{false, true} {
		t.Run(map[bool]string{false: "not exchanged", true: "exchanged"}[done], func(t *testing.T) {
			mem := vfs.NewCrashableMem()
			s := openOn(t, mem)
			root := t.TempDir()
			os.WriteFile(filepath.Join(root, "a"), []byte("a0"), 0o644)
			os.WriteFile(filepath.Join(root, "y"), []byte("y0"), 0o644)
			tree, _ := backing.Open(root)
			defer tree.Close()
			m := &sim{t: t, root: root, tree: tree, store: s}
			s.Begin(KindAgent, "", "")
			ia, _ := tree.Ident("a")
			iy, _ := tree.Ident("y")
			if _, err := s.RecordExchange("a", "y", ia, iy, Program{Comm: "mv"}); err != nil {
				t.Fatal(err)
			}
			if done {
				if err := tree.Exchange("a", "y"); err != nil {
					t.Fatal(err)
				}
			}
			killed, _ := killClone(t, mem)
			defer killed.Close()
			if _, err := killed.Recover(tree); err != nil {
				t.Fatal(err)
			}
			// The open turn goes on after the remount: y, then a, are
			// written.
			m.store = killed
			for _, p := range []string{"y", "a"} {
				if killed.NeedsCapture(p, false) {
					m.capture(p, true)
				}
				os.WriteFile(filepath.Join(root, p), []byte(p+"1"), 0o644)
			}
			if _, err := killed.Rewind(0, tree, RewindOptions{}); err != nil {
				t.Fatal(err)
			}
			for p, want := range map[string]string{"a": "a0", "y": "y0"} {
				if b, _ := os.ReadFile(filepath.Join(root, p)); string(b) != want {
					t.Errorf("%s after the rewind to 0: %q, want %q", p, b, want)
				}
			}
		})
	}
}
