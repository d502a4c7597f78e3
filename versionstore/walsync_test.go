package versionstore

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"ckptfs/internal/ckpt"
)

// TestWALNotPreallocated: a WAL rotation (a flush, as a gc makes) leaves
// a new log file that takes the blocks written to it, not Pebble's
// preallocation of 110 % of the memtable (35 MiB a log, counted in the
// store until the old log is gone).
func TestWALNotPreallocated(t *testing.T) {
	s, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := 0; i < 3; i++ {
		if _, err := s.Begin(ckpt.KindAgent, "", ""); err != nil {
			t.Fatal(err)
		}
		recordBytes(t, s, "f", []byte(strings.Repeat("x", 1000+i)))
		if err := s.db.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	logs := 0
	filepath.Walk(s.dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || !strings.HasSuffix(p, ".log") {
			return nil
		}
		logs++
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Blocks*512 > 1<<20 {
			t.Errorf("%s takes %d KiB", filepath.Base(p), st.Blocks/2)
		}
		return nil
	})
	if logs == 0 {
		t.Fatal("no WAL file found")
	}
}
