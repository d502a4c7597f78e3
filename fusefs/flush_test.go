package fusefs

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

// TestFlushFlushesReadWriteHandlesOnly: a boundary fsyncs the files a
// shared writable mmap may have dirtied, those open read-write through
// the daemon, and nothing for a file only open write-only (a log a
// server appends to: no mapping can write through it) or read-only.
func TestFlushFlushesReadWriteHandlesOnly(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"log", "db", "ro"} {
		os.WriteFile(filepath.Join(dir, n), []byte("x"), 0o644)
	}
	var flushed [][]string
	r := mountFake(t, dir, Options{Recorder: newFakeRec(t), Flush: func(args []string) error {
		flushed = append(flushed, args[3:])
		return FlushFiles(args)
	}})
	boundary := func() []string {
		flushed = nil
		if err := r.Exclusive(func() error { return nil }); err != nil {
			t.Fatal(err)
		}
		if len(flushed) == 0 {
			return nil
		}
		return flushed[0]
	}
	log, err := os.OpenFile(filepath.Join(dir, "log"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	ro, err := os.Open(filepath.Join(dir, "ro"))
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if got := boundary(); got != nil {
		t.Errorf("with only write-only and read-only handles open, the boundary flushed %q", got)
	}
	db, err := os.OpenFile(filepath.Join(dir, "db"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := boundary(); !reflect.DeepEqual(got, []string{"db"}) {
		t.Errorf("with db open read-write, the boundary flushed %q, want [db]", got)
	}
	db.Close()
	// The kernel sends the RELEASE after close returns.
	got := boundary()
	for i := 0; i < 500 && got != nil; i++ {
		time.Sleep(10 * time.Millisecond)
		got = boundary()
	}
	if got != nil {
		t.Errorf("5 s after db's close, the boundary flushed %q", got)
	}
}
