package versionstore

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"golang.org/x/sys/unix"

	"ckptfs/internal/ckpt"
)

// Fault injection (Pebble's errorfs) under the store. What a store error
// may never do: let Record return nil without the prior state stored, or
// leave the store's memory disagreeing with what it committed.

// errEIO is what the injector returns.
var errEIO = fmt.Errorf("injected: %w", syscall.EIO)

// faultStore opens a store on an in-memory filesystem that fails the
// operations inj picks while the returned toggle is on. A Pebble fatal
// error panics with fatalPanic instead of exiting the test binary.
func faultStore(t *testing.T, inj errorfs.Injector) (*Store, *errorfs.Toggle) {
	t.Helper()
	tog := &errorfs.Toggle{Injector: inj}
	s, err := Open("/store", Options{
		FS:    errorfs.Wrap(vfs.NewMem(), tog),
		Fatal: func(msg string) { panic(fatalPanic(msg)) },
	})
	if err != nil {
		t.Fatal(err)
	}
	return s, tog
}

type fatalPanic string

// on injects errEIO into operations of kind k on files whose name ends in
// suffix.
func on(suffix string, kinds ...errorfs.OpKind) errorfs.Injector {
	return errorfs.InjectorFunc(func(op errorfs.Op) error {
		if !strings.HasSuffix(op.Path, suffix) {
			return nil
		}
		for _, k := range kinds {
			if op.Kind == k {
				return errEIO
			}
		}
		return nil
	})
}

func tryRecord(s *Store, path string, data []byte) error {
	c := ckpt.Capture{Path: path, Prior: ckpt.State{Type: ckpt.Regular, Mode: 0o644, Size: int64(len(data))}}
	c.Open = func() (*os.File, error) {
		f, err := os.CreateTemp("", "ckptfs-capture-")
		if err != nil {
			return nil, err
		}
		os.Remove(f.Name())
		f.Write(data)
		f.Seek(0, 0)
		return f, nil
	}
	return s.Record(c, ckpt.Program{Comm: "test"})
}

// A capture whose bytes cannot be read is an error, and nothing of it is
// recorded: the path still needs its capture.
func TestRecordFailsWhenPriorBytesUnreadable(t *testing.T) {
	s := NewTestStore(t)
	s.Begin(ckpt.KindAgent, "", "")
	c := ckpt.Capture{Path: "f", Prior: ckpt.State{Type: ckpt.Regular, Mode: 0o644, Size: 3}}
	c.Open = func() (*os.File, error) { return nil, errEIO }
	if err := s.Record(c, ckpt.Program{}); !errors.Is(err, syscall.EIO) {
		t.Fatalf("Record with unreadable bytes: %v", err)
	}
	if !s.NeedsCapture("f", false) {
		t.Fatal("a failed capture counts as captured")
	}
	if h := s.Health(); !strings.Contains(h.LastError, "injected") || h.Full {
		t.Errorf("health after the failure: %+v", h)
	}
	cur, _ := s.Current()
	if !cur.Empty() {
		t.Errorf("the failed capture left an event: %+v", cur)
	}
}

// A failed fsync at a turn boundary is reported, and the store's memory
// follows what was committed: the turn is closed (or open) as Pebble says.
func TestBoundarySyncFailureKeepsStateConsistent(t *testing.T) {
	s, tog := faultStore(t, on(".log", errorfs.OpFileSync))
	defer s.Close()
	if _, err := s.Begin(ckpt.KindAgent, "one", ""); err != nil {
		t.Fatal(err)
	}
	if err := tryRecord(s, "f", []byte("v0")); err != nil {
		t.Fatal(err)
	}
	tog.On()
	t1, err := s.End("")
	if !errors.Is(err, syscall.EIO) {
		t.Fatalf("End with a failing fsync: %v", err)
	}
	if _, open := s.Current(); open {
		t.Fatal("End failed to sync but the store still thinks turn 1 is open")
	}
	if st, err := s.Turn(t1.Num); err != nil || st.Open {
		t.Fatalf("turn %d as stored: %+v %v", t1.Num, st, err)
	}
	t2, err := s.Begin(ckpt.KindAgent, "two", "")
	if !errors.Is(err, syscall.EIO) {
		t.Fatalf("Begin with a failing fsync: %v", err)
	}
	if cur, open := s.Current(); !open || cur.Num != t2.Num || t2.Num != 2 {
		t.Fatalf("after Begin failed to sync: current %+v %v, begin returned %+v", cur, open, t2)
	}
	tog.Off()
	// The store keeps working, and history reads back.
	if err := tryRecord(s, "f", []byte("v1")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.End(""); err != nil {
		t.Fatal(err)
	}
	if b, err := versionBytes(t, s, 0, "f", nil); err != nil || string(b) != "v0" {
		t.Fatalf("f at 0: %q %v", b, err)
	}
	if b, err := versionBytes(t, s, 1, "f", nil); err != nil || string(b) != "v1" {
		t.Fatalf("f at 1: %q %v", b, err)
	}
	if h := s.Health(); !strings.Contains(h.LastError, "could not be synced") {
		t.Errorf("health: %+v", h)
	}
}

// sstable writes failing (a flush or compaction): captures keep being
// accepted (they live in the WAL and the memtable), and once the disk
// works again the flush completes and every version reads back.
func TestSSTableWriteErrorsDoNotLoseCaptures(t *testing.T) {
	s, tog := faultStore(t, on(".sst", errorfs.OpCreate, errorfs.OpFileWrite, errorfs.OpFileSync))
	defer s.Close()
	s.Begin(ckpt.KindAgent, "", "")
	tog.On()
	want := map[string][]byte{}
	for i := 0; i < 20; i++ {
		p := fmt.Sprintf("f%d", i)
		want[p] = bytes.Repeat([]byte(p), 5000)
		if err := tryRecord(s, p, want[p]); err != nil {
			t.Fatal(err)
		}
	}
	s.End("")
	done := make(chan error, 1)
	go func() { done <- s.db.Flush() }()
	select {
	case err := <-done:
		t.Fatalf("flush succeeded while every sstable write fails: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	tog.Off()
	if err := <-done; err != nil {
		t.Fatalf("flush after the disk recovered: %v", err)
	}
	for p, w := range want {
		if b, err := versionBytes(t, s, 0, p, nil); err != nil || !bytes.Equal(b, w) {
			t.Fatalf("%s at 0: %d bytes, %v", p, len(b), err)
		}
	}
	if rep, err := s.Verify(); err != nil || len(rep.Corrupt) != 0 {
		t.Fatalf("verify: %+v %v", rep, err)
	}
}

// Read errors under history are errors, not wrong bytes; once the disk
// reads again, so does history.
func TestReadErrorsAreErrors(t *testing.T) {
	s, tog := faultStore(t, on(".sst", errorfs.OpFileRead, errorfs.OpFileReadAt))
	defer s.Close()
	s.Begin(ckpt.KindAgent, "", "")
	data := bytes.Repeat([]byte("x"), 100000)
	if err := tryRecord(s, "f", data); err != nil {
		t.Fatal(err)
	}
	s.End("")
	if err := s.db.Flush(); err != nil {
		t.Fatal(err)
	}
	tog.On()
	if b, err := versionBytes(t, s, 0, "f", nil); err == nil && !bytes.Equal(b, data) {
		t.Fatalf("read error turned into wrong bytes: %d bytes", len(b))
	} else if err == nil {
		t.Log("the block cache answered without a read") // still right bytes
	}
	tog.Off()
	if b, err := versionBytes(t, s, 0, "f", nil); err != nil || !bytes.Equal(b, data) {
		t.Fatalf("after the disk recovered: %d bytes, %v", len(b), err)
	}
}

// A failed WAL write is fatal in Pebble (db.go "pebble: fatal commit
// error"): Options.Fatal runs, and Record never returns nil for the capture
// it could not write. The daemon's Fatal exits (cmd/ckptfs), leaving the
// mount dead rather than writable unrecorded.
func TestWALWriteErrorIsFatal(t *testing.T) {
	s, tog := faultStore(t, on(".log", errorfs.OpFileWrite, errorfs.OpFileWriteAt))
	// No Close: a store whose commit pipeline failed is abandoned, as the
	// daemon abandons it by exiting.
	s.Begin(ckpt.KindAgent, "", "")
	tog.On()
	var err error
	var fatal any
	func() {
		defer func() { fatal = recover() }()
		err = tryRecord(s, "f", []byte("data"))
	}()
	switch {
	case fatal != nil:
		msg, _ := fatal.(fatalPanic)
		if !strings.Contains(string(msg), "pebble: fatal") {
			t.Fatalf("fatal with %v", fatal)
		}
	case err == nil:
		t.Fatal("Record returned nil although the WAL write failed")
	}
	t.Logf("WAL write error: fatal=%v err=%v", fatal, err)
}

// An attic file changed after it was linked (same size: a size check alone
// would pass it) is ErrCorrupt to readers and to Verify, never content.
func TestTamperedAtticFileDetected(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(filepath.Join(dir, "store"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	src := filepath.Join(dir, "src")
	data := []byte("the only copy of precious work\n")
	os.WriteFile(src, data, 0o644)
	s.Begin(ckpt.KindAgent, "", "")
	c := ckpt.Capture{Path: "f", Prior: ckpt.State{Type: ckpt.Regular, Mode: 0o644, Size: int64(len(data))}}
	c.Link = func(d *os.File, name string) error {
		return unix.Linkat(unix.AT_FDCWD, src, int(d.Fd()), name, 0)
	}
	if err := s.Record(c, ckpt.Program{}); err != nil {
		t.Fatal(err)
	}
	s.End("")
	if b, err := versionBytes(t, s, 0, "f", nil); err != nil || !bytes.Equal(b, data) {
		t.Fatalf("intact attic file: %q %v", b, err)
	}
	// Same size, other bytes, as a stray write or bit flip by a tool would.
	time.Sleep(10 * time.Millisecond)
	f, err := os.OpenFile(src, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte("X"), 4)
	f.Close()
	if b, err := versionBytes(t, s, 0, "f", nil); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("tampered attic file read back as %q, %v", b, err)
	}
	rep, err := s.Verify()
	if err != nil || len(rep.Corrupt) != 1 || rep.Attic != 1 {
		t.Fatalf("verify: %+v %v", rep, err)
	}
	// A shrunken one too.
	os.Truncate(src, 3)
	if _, err := versionBytes(t, s, 0, "f", nil); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("truncated attic file: %v", err)
	}
}
