package versionstore

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"ckptfs/internal/ckpt"
)

// Names are bytes in every record the store keeps, not only in events: a
// turn's label and programs, and a restore's journal, which a restore
// killed part-way resumes from.
func TestNamesNotUTF8SurviveTurnsAndJournals(t *testing.T) {
	for _, point := range []string{"rewind.journaled", "rewind.fixup@2", "rewind.fixup.done@1"} {
		t.Run(point, func(t *testing.T) {
			s, tree, root := offlineFixture(t)
			names := []string{"caf\xe9", "x\xff/y\xfe"}
			if err := os.Mkdir(filepath.Join(root, "x\xff"), 0o755); err != nil {
				t.Fatal(err)
			}
			for _, p := range names {
				writeFile(t, filepath.Join(root, p), []byte(p+" v0"))
			}
			if _, err := s.Begin(ckpt.KindAgent, "label caf\xe9", ""); err != nil {
				t.Fatal(err)
			}
			for _, p := range names {
				captureFileBy(t, s, tree, p, ckpt.Program{Comm: "cp\xe9"})
				writeFile(t, filepath.Join(root, p), []byte(p+" v1"))
			}
			closed, err := s.End("")
			if err != nil {
				t.Fatal(err)
			}
			if got, err := s.Turn(closed.Num); err != nil || got.Label != "label caf\xe9" || !slices.Equal(got.Programs, []string{"cp\xe9"}) {
				t.Fatalf("turn %d as stored: label %q, programs %q (%v)", closed.Num, got.Label, got.Programs, err)
			}
			got, err := untilCrash(t, point, func() error {
				_, err := s.Rewind(closed.Num-1, tree, RewindOptions{Paths: names})
				return err
			})
			if got == "" {
				t.Fatalf("the restore was not killed at %s: %v", point, err)
			}
			s2 := reopened(t, s)
			if ok, err := s2.Recover(tree); !ok || err != nil {
				t.Fatalf("recover: journal %v, %v", ok, err)
			}
			for _, p := range names {
				if b, err := os.ReadFile(filepath.Join(root, p)); err != nil || string(b) != p+" v0" {
					t.Errorf("%q after the resumed restore: %q %v, want %q", p, b, err, p+" v0")
				}
			}
			entries, _ := os.ReadDir(root)
			for _, e := range entries {
				if n := e.Name(); n != "caf\xe9" && n != "x\xff" && n[0] != '.' {
					t.Errorf("the resumed restore made %q", n)
				}
			}
		})
	}
}
