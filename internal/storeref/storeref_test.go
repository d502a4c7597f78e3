package storeref

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestRememberLookupResolve(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	base := t.TempDir()
	dir, store := filepath.Join(base, "proj"), filepath.Join(base, "store")
	for _, d := range []string{dir, store} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if s, err := Resolve(dir); err != nil || s != filepath.Join(dir, ".ckptfs") {
		t.Fatalf("nothing remembered: %q %v", s, err)
	}
	if err := Remember(dir, store); err != nil {
		t.Fatal(err)
	}
	if s, err := Resolve(dir); err != nil || s != store {
		t.Fatalf("remembered: %q %v", s, err)
	}
	// The project moves: the record follows it (same inode).
	moved := filepath.Join(base, "moved")
	if err := os.Rename(dir, moved); err != nil {
		t.Fatal(err)
	}
	if s, err := Resolve(moved); err != nil || s != store {
		t.Fatalf("after a move of the project: %q %v", s, err)
	}
	// (A mount there updates the record.) The store moves: one clear
	// error naming it and the way out.
	if err := Remember(moved, store); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(store, store+"2"); err != nil {
		t.Fatal(err)
	}
	_, err := Resolve(moved)
	var me *MissingError
	if !errors.As(err, &me) || !strings.Contains(err.Error(), store+" (given with --store on ") || !strings.Contains(err.Error(), "--store "+filepath.Join(moved, ".ckptfs")) {
		t.Errorf("a missing store: %v", err)
	}
	// ... unless the record names another directory: then it is one of a
	// deleted directory whose inode was reused, and is ignored.
	if err := os.Rename(moved, dir); err != nil {
		t.Fatal(err)
	}
	if s, err := Resolve(dir); err != nil || s != filepath.Join(dir, ".ckptfs") {
		t.Errorf("a stale record: %q %v", s, err)
	}
	// The default store forgets the record.
	if err := Remember(dir, store+"2"); err != nil {
		t.Fatal(err)
	}
	if err := Remember(dir, filepath.Join(dir, ".ckptfs")); err != nil {
		t.Fatal(err)
	}
	if _, ok := Lookup(dir); ok {
		t.Error("a record is left after --store DIR/.ckptfs")
	}
}

// A record of a deleted directory whose inode number a new directory got
// is ignored even though its store is still there (it is the deleted
// project's history): its birth time is not the new directory's.
func TestRecordOfAReusedInodeIsIgnored(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	base := t.TempDir()
	dir, store := filepath.Join(base, "new"), filepath.Join(base, "old-store")
	for _, d := range []string{dir, store} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	k, err := KeyOf(dir)
	if err != nil {
		t.Fatal(err)
	}
	p, born := k.Path, k.Born
	if born == 0 {
		t.Skip("this filesystem tells no birth time")
	}
	// What the deleted project's mount left: its path, its birth time.
	old := Ref{Dir: filepath.Join(base, "deleted"), Born: born - 1e9, Store: store, Saved: time.Now()}
	data, _ := json.Marshal(old)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if s, err := Resolve(dir); err != nil || s != filepath.Join(dir, ".ckptfs") {
		t.Fatalf("a new directory with a deleted one's inode number resolves to %q (%v), want its default store", s, err)
	}
	// The same record with the directory's own birth time is its move.
	old.Born = born
	data, _ = json.Marshal(old)
	os.WriteFile(p, data, 0o600)
	if s, err := Resolve(dir); err != nil || s != store {
		t.Fatalf("a moved project resolves to %q (%v), want its store", s, err)
	}
}

// On overlayfs a directory copied up (at the first change below it)
// keeps its inode but gets a new birth time: its record is kept by the
// old rule there, not dropped.
func TestRecordSurvivesAnOverlayCopyUp(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	base := t.TempDir()
	lower, upper, work, merged := filepath.Join(base, "l"), filepath.Join(base, "u"), filepath.Join(base, "w"), filepath.Join(base, "m")
	for _, d := range []string{filepath.Join(lower, "proj"), upper, work, merged, filepath.Join(base, "store")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := unix.Mount("overlay", merged, "overlay", 0, "lowerdir="+lower+",upperdir="+upper+",workdir="+work); err != nil {
		t.Skipf("overlayfs: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(merged, unix.MNT_DETACH) })
	dir, store := filepath.Join(merged, "proj"), filepath.Join(base, "store")
	if err := Remember(dir, store); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o644); err != nil { // the copy-up
		t.Fatal(err)
	}
	if s, err := Resolve(dir); err != nil || s != store {
		t.Errorf("after a copy-up the project resolves to %q (%v), want its store", s, err)
	}
}
