package versionstore

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// StoreBytes counts an attic file by the size it had once it settled,
// without a stat of it at each call; a file new since the last call, one
// still changing, and one removed are counted as they are.
func TestStoreBytesKeepsSettledAtticSizes(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	attic := filepath.Join(dir, "attic")
	blocks := func(name string) int64 {
		t.Helper()
		var st syscall.Stat_t
		if err := syscall.Stat(filepath.Join(attic, name), &st); err != nil {
			t.Fatal(err)
		}
		return st.Blocks * 512
	}
	write := func(name string, size int, mtime time.Time) {
		t.Helper()
		p := filepath.Join(attic, name)
		if err := os.WriteFile(p, make([]byte, size), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	old, now := time.Now().Add(-time.Hour), time.Now()
	b0 := s.StoreBytes()
	write("test-settled", 64<<10, old)
	b1 := s.StoreBytes()
	if want := b0 + blocks("test-settled"); b1 != want {
		t.Fatalf("with a settled attic file: %d, want %d", b1, want)
	}
	// An attic file never changes once settled: its size is not read again.
	write("test-settled", 256<<10, old)
	if b := s.StoreBytes(); b != b1 {
		t.Errorf("a settled file's size was read again: %d, want %d", b, b1)
	}
	// One changed a moment ago (a span file in use) is read at each call.
	write("test-recent", 64<<10, now)
	if b, want := s.StoreBytes(), b1+blocks("test-recent"); b != want {
		t.Errorf("with a new attic file: %d, want %d", b, want)
	}
	write("test-recent", 192<<10, now)
	b2 := s.StoreBytes()
	if want := b1 + blocks("test-recent"); b2 != want {
		t.Errorf("with a recent file grown: %d, want %d", b2, want)
	}
	if err := os.Remove(filepath.Join(attic, "test-settled")); err != nil {
		t.Fatal(err)
	}
	if b, want := s.StoreBytes(), b2-(b1-b0); b != want {
		t.Errorf("with the settled file removed: %d, want %d", b, want)
	}
}

// The span file in use is stat'ed at each call however old its last
// change: a turn that pauses longer than atticSettle writes into it
// again, and a size kept from the pause would leave what it holds after
// uncounted until the store is opened again.
func TestStoreBytesRereadsTheSpanFileInUse(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	p := filepath.Join(dir, "attic", "test-span")
	write := func(size int, mtime time.Time) {
		t.Helper()
		if err := os.WriteFile(p, make([]byte, size), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	blocks := func() int64 {
		t.Helper()
		var st syscall.Stat_t
		if err := syscall.Stat(p, &st); err != nil {
			t.Fatal(err)
		}
		return st.Blocks * 512
	}
	b0 := s.StoreBytes()
	s.spanMu.Lock()
	s.spanFile = &spanFile{name: "test-span"}
	s.spanMu.Unlock()
	defer func() { // not a file the store made: nothing to sync at Close
		s.spanMu.Lock()
		s.spanFile = nil
		s.spanMu.Unlock()
	}()
	// Last written before a pause longer than atticSettle.
	write(64<<10, time.Now().Add(-time.Minute))
	if b, want := s.StoreBytes(), b0+blocks(); b != want {
		t.Fatalf("with the span file in use: %d, want %d", b, want)
	}
	// The turn writes into it again.
	write(512<<10, time.Now())
	if b, want := s.StoreBytes(), b0+blocks(); b != want {
		t.Errorf("with the span file in use grown after a pause: %d, want %d", b, want)
	}
}

// An attic file's blocks preallocated past its end (XFS's speculative
// preallocation, which its background trim gives back later without a
// change of mtime) are not counted: a settled file's size is kept, and
// with them it would stay counted larger than the file is once trimmed.
func TestStoreBytesLeavesOutPreallocationPastTheEnd(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	p := filepath.Join(dir, "attic", "test-linked")
	const size = 100000
	old := time.Now().Add(-time.Hour)
	b0 := s.StoreBytes()
	if err := os.WriteFile(p, make([]byte, size), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	err = syscall.Fallocate(int(f.Fd()), 1 /* FALLOC_FL_KEEP_SIZE */, size, 4<<20)
	f.Close()
	if err != nil {
		t.Skipf("no fallocate with KEEP_SIZE here: %v", err)
	}
	if err := os.Chtimes(p, old, old); err != nil {
		t.Fatal(err)
	}
	s.StoreBytes() // the size is kept by name
	// The preallocation is given back, the mtime as it was (the trim).
	if err := os.Truncate(p, size); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(p, old, old); err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	if st.Blocks*512 > 2*size {
		t.Skip("the truncate gave back no preallocation here")
	}
	if b, want := s.StoreBytes(), b0+st.Blocks*512; b != want {
		t.Errorf("after the preallocation past its end was given back: %d, want %d", b, want)
	}
}
