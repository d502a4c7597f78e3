package versionstore

import (
	rand2 "math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"ckptfs/internal/backing"
	"ckptfs/internal/ckpt"
)

// TestKillBetweenRenameRecordAndRename: the daemon records a rename before
// it renames (RecordRename, then the syscall, then commit). A kill -9
// between the two leaves a rename in history that never happened; the
// reopened store goes on from it, and a later capture of the destination
// is taken for the source's state: rewinding to 0 then gives a the
// content of y. Found by the long kill test (writes and rewinds, several
// seeds). Recover, which the mount runs first, now drops such a rename
// (its source still exists); one that did happen is kept.
func TestKillBetweenRenameRecordAndRename(t *testing.T) {
	for _, done := range []bool{false, true} {
		t.Run(map[bool]string{false: "not renamed", true: "renamed"}[done], func(t *testing.T) {
			killBetweenRenameRecordAndConfirm(t, done)
		})
	}
}

func killBetweenRenameRecordAndConfirm(t *testing.T, renamed bool) {
	mem := vfs.NewCrashableMem()
	s := openOn(t, mem)
	root := t.TempDir()
	os.WriteFile(filepath.Join(root, "a"), []byte("a0"), 0o644)
	os.WriteFile(filepath.Join(root, "y"), []byte("y0"), 0o644)
	tree, _ := backing.Open(root)
	defer tree.Close()
	m := &sim{t: t, root: root, tree: tree, store: s}
	s.Begin(ckpt.KindAgent, "", "")
	// mv a y: the destination is captured, the rename recorded, and the
	// daemon is killed before the rename syscall (or after it, before
	// its confirmation).
	m.capture("y", true)
	if _, err := s.RecordRename("a", "y", false, ckpt.Program{Comm: "mv"}); err != nil {
		t.Fatal(err)
	}
	if renamed {
		if err := os.Rename(filepath.Join(root, "a"), filepath.Join(root, "y")); err != nil {
			t.Fatal(err)
		}
	}
	killed := openOn(t, mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 100, RNG: rand2.New(rand2.NewPCG(1, 2))}))
	if _, err := killed.Recover(tree); err != nil {
		t.Fatal(err)
	}
	// The open turn goes on after the remount: y, then a, are written.
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
}

// TestDroppedEventSeqIsNotGivenAgain: Recover drops the record of a
// rename that never happened; when it was the newest event, the next
// Open numbered events from its seq again, inside the range of the turn
// that had closed over it, so a rewind to that turn skipped the new
// turn's first event (b kept the bytes of turn 2).
func TestDroppedEventSeqIsNotGivenAgain(t *testing.T) {
	mem := vfs.NewCrashableMem()
	s := openOn(t, mem)
	root := t.TempDir()
	os.WriteFile(filepath.Join(root, "a"), []byte("a0"), 0o644)
	os.WriteFile(filepath.Join(root, "b"), []byte("b0"), 0o644)
	tree, _ := backing.Open(root)
	defer tree.Close()
	m := &sim{t: t, root: root, tree: tree, store: s}
	s.Begin(ckpt.KindAgent, "", "")
	m.capture("b", false)
	os.WriteFile(filepath.Join(root, "b"), []byte("b1"), 0o644)
	if _, err := s.RecordRename("a", "y", false, ckpt.Program{Comm: "mv"}); err != nil {
		t.Fatal(err)
	}
	// kill -9 before the rename; the remount drops it and closes turn 1.
	s2, mem2 := killClone(t, mem)
	if _, err := s2.Recover(tree); err != nil {
		t.Fatal(err)
	}
	t1, err := s2.End("")
	if err != nil {
		t.Fatal(err)
	}
	s2.Close()
	// The next mount: turn 2 writes b again.
	s3 := openOn(t, mem2)
	defer s3.Close()
	m.store = s3
	t2, _ := s3.Begin(ckpt.KindAgent, "", "")
	m.capture("b", false)
	os.WriteFile(filepath.Join(root, "b"), []byte("b2"), 0o644)
	if t2.FirstSeq <= t1.LastSeq {
		t.Errorf("turn 2 starts at seq %d, inside turn 1 (%d-%d)", t2.FirstSeq, t1.FirstSeq, t1.LastSeq)
	}
	if _, err := s3.Rewind(t1.Num, tree, RewindOptions{}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "b")); string(b) != "b1" {
		t.Errorf("b after the rewind to turn 1: %q, want b1", b)
	}
}
