package versionstore

import (
	"path/filepath"
	"testing"

	"ckptfs/internal/ckpt"
)

// TestHistoryGenDiffersAcrossOpens: a client that caches the log by the
// latest turn and HistoryGen (turnctl ui, which outlives a remount) must
// see a forget made while the project was unmounted (an offline command)
// as a change: the daemon that opens the store next must not report the
// HistoryGen the one before it did.
func TestHistoryGenDiffersAcrossOpens(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	open := func() *Store {
		s, err := Open(dir, Options{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := open()
	for i := 0; i < 3; i++ {
		s.Begin(ckpt.KindAgent, "", "")
		s.End("")
	}
	latest, gen := s.Latest(), s.HistoryGen() // what the page saw
	s.Close()
	s = open() // an offline turnctl forget
	if _, err := s.Forget([]uint64{0, 1}, ckpt.ReasonForget); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = open() // the remount
	defer s.Close()
	if s.Latest() == latest && s.HistoryGen() == gen {
		t.Errorf("after a forget by another process, latest %d and history %d are as before: a cached log shows forgotten turns", latest, gen)
	}
	if g := s.HistoryGen(); g >= 1<<53 {
		t.Errorf("HistoryGen %d is past what a JavaScript number holds exactly (the page compares it)", g)
	}
}
