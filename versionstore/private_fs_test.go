package versionstore

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"ckptfs/internal/ckpt"
)

// A store in a directory others may enter, opened with umask 0 (as the
// daemon runs), keeps every file and directory it makes its owner's
// alone; and a store made before with Pebble's own modes (a 0755 db) is
// closed to others when it opens.
func TestStoreFilesAreTheOwnersAlone(t *testing.T) {
	old := syscall.Umask(0)
	t.Cleanup(func() { syscall.Umask(old) })
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.Begin(ckpt.KindAgent, "", "")
	recordBytes(t, s, "f", make([]byte, 3<<20)) // chunks, and an ingested table
	s.End("")
	if err := s.db.Flush(); err != nil {
		t.Fatal(err)
	}
	s.Close()
	open := func() {
		t.Helper()
		seen := 0
		err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || p == dir {
				return err
			}
			fi, err := d.Info()
			if err != nil {
				return err
			}
			if rel, _ := filepath.Rel(dir, p); rel != ".gitignore" && fi.Mode().Perm()&0o077 != 0 {
				t.Errorf("%s: mode %v: others may reach it", rel, fi.Mode())
			}
			seen++
			return nil
		})
		if err != nil || seen < 8 {
			t.Fatalf("walked %d files (%v)", seen, err)
		}
	}
	open()

	// A store whose db directory and files were made with 0755 and 0666.
	filepath.WalkDir(filepath.Join(dir, "db"), func(p string, d fs.DirEntry, err error) error {
		if d.IsDir() {
			return os.Chmod(p, 0o755)
		}
		return os.Chmod(p, 0o666)
	})
	s, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	fi, err := os.Stat(filepath.Join(dir, "db"))
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("db after a reopen: %v (%v), want 0700", fi.Mode(), err)
	}
}
