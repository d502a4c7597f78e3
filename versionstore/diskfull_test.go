package versionstore

import (
	"path/filepath"
	"testing"
	"time"
)

// TestOnDiskFullUnderTheStoreLock: Pebble calls onDiskFull from inside a
// write that meets ENOSPC, which may be the commit of an event or a turn
// boundary made while s.mu is held; it must return without that lock, and
// the store is noted full once the lock is free.
func TestOnDiskFullUnderTheStoreLock(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "store"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.mu.Lock()
	done := make(chan struct{})
	go func() {
		s.onDiskFull()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		s.mu.Unlock()
		t.Fatal("onDiskFull waited for the store's lock, which its caller's commit holds: a deadlock")
	}
	s.mu.Unlock()
	for i := 0; ; i++ {
		s.mu.Lock()
		full := s.full
		s.mu.Unlock()
		if full {
			break
		}
		if i == 1000 {
			t.Fatal("the store was never noted full")
		}
		time.Sleep(time.Millisecond)
	}
}
