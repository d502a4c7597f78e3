package versionstore

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"ckptfs/internal/ckpt"
)

// TestSealKeepsRangeKeptVersions: a file kept by range records, renamed,
// then written while unmounted: the unmount's seal gives the offline
// turn its bytes at the unmount, so every earlier version still reads
// back exactly (a gc in between keeps the seal), and nothing is Lost.
func TestSealKeepsRangeKeptVersions(t *testing.T) {
	s, tree, root := offlineFixture(t)
	s.rangeFrom = 0
	p := filepath.Join(root, "db")
	v0 := bytes.Repeat([]byte("0123456789abcdef"), 4096) // 64 KiB
	if err := os.WriteFile(p, v0, 0o644); err != nil {
		t.Fatal(err)
	}
	versions := [][]byte{v0}
	write := func(name string, off int64, b []byte) {
		t.Helper()
		st, ino, err := tree.LstatInode(name)
		if err != nil {
			t.Fatal(err)
		}
		c := ckpt.Capture{Path: name, Prior: st, Inode: ino, Range: &ckpt.ByteRange{Off: off, End: off + int64(len(b))},
			Open: func() (*os.File, error) { return tree.Open(name) }}
		if err := s.Record(c, ckpt.Program{Comm: "test"}); err != nil {
			t.Fatal(err)
		}
		f, err := os.OpenFile(filepath.Join(root, name), os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteAt(b, off)
		f.Close()
	}
	turn := func(fn func()) {
		t.Helper()
		s.Begin(ckpt.KindAgent, "", "")
		fn()
		if _, err := s.End(""); err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(filepath.Join(root, "db2"))
		if b == nil {
			b, _ = os.ReadFile(p)
		}
		versions = append(versions, b)
	}
	turn(func() { write("db", 4096, bytes.Repeat([]byte("A"), 4096)) })
	turn(func() { write("db", 32768, bytes.Repeat([]byte("B"), 100)) })
	turn(func() {
		commit, err := s.RecordRename("db", "db2", false, ckpt.Program{Comm: "mv"})
		if err != nil {
			t.Fatal(err)
		}
		err = os.Rename(p, filepath.Join(root, "db2"))
		commit(err == nil)
	})
	if err := s.SaveManifest(tree, nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GC(GCOptions{}); err != nil {
		t.Fatal(err)
	}
	// While unmounted: rewritten with other bytes.
	if err := os.WriteFile(filepath.Join(root, "db2"), bytes.Repeat([]byte("z"), 70000), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := s.RecordOffline(tree, nil, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	if res.Paths != 1 || res.Lost != 0 {
		t.Fatalf("offline changes: %+v, want db2 recorded with its bytes", res)
	}
	for n, want := range versions {
		name := "db"
		if n == len(versions)-1 {
			name = "db2"
		}
		got, err := versionBytes(t, s, uint64(n), name, tree)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s at turn %d: %d bytes (%v), want the %d it had", name, n, len(got), err, len(want))
		}
	}
	// The mount dropped the seals with the manifest.
	if sl, err := s.seals(); err != nil || len(sl) != 0 {
		t.Errorf("seals after the mount: %v %v", sl, err)
	}
}

// TestSealsOfOfflineCommands: an offline command (which keeps the
// manifest) keeps the seal of a file it finds unchanged, uses the seal of
// one changed since, and drops that one.
func TestSealsOfOfflineCommands(t *testing.T) {
	s, tree, root := offlineFixture(t)
	s.rangeFrom = 0
	p := filepath.Join(root, "db")
	v0 := bytes.Repeat([]byte("x"), 65536)
	os.WriteFile(p, v0, 0o644)
	s.Begin(ckpt.KindAgent, "", "")
	st, ino, _ := tree.LstatInode("db")
	c := ckpt.Capture{Path: "db", Prior: st, Inode: ino, Range: &ckpt.ByteRange{Off: 0, End: 4096},
		Open: func() (*os.File, error) { return tree.Open("db") }}
	if err := s.Record(c, ckpt.Program{Comm: "test"}); err != nil {
		t.Fatal(err)
	}
	f, _ := os.OpenFile(p, os.O_WRONLY, 0)
	f.WriteAt(bytes.Repeat([]byte("y"), 4096), 0)
	f.Close()
	if _, err := s.End(""); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveManifest(tree, nil, nil); err != nil {
		t.Fatal(err)
	}
	if res, err := s.RecordOffline(tree, nil, nil, true); err != nil || res.Paths != 0 {
		t.Fatalf("an offline command, nothing changed: %+v %v", res, err)
	}
	if sl, _ := s.seals(); len(sl) != 1 {
		t.Fatalf("seals after an offline command that changed nothing: %v", sl)
	}
	os.WriteFile(p, bytes.Repeat([]byte("z"), 100), 0o644)
	res, err := s.RecordOffline(tree, nil, nil, true)
	if err != nil || res.Paths != 1 || res.Lost != 0 {
		t.Fatalf("an offline command after an edit: %+v %v", res, err)
	}
	if sl, _ := s.seals(); len(sl) != 0 {
		t.Errorf("the seal of a file recorded since is kept: %v", sl)
	}
	rc, _, err := s.OpenAt(0, "db", tree)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if got, _ := io.ReadAll(rc); !bytes.Equal(got, v0) {
		t.Errorf("db at turn 0: %d bytes, want the %d it had", len(got), len(v0))
	}
}

// dropSeals removes the seals of the last unmount, as an unmount that had
// no room to seal leaves none.
func dropSeals(t *testing.T, s *Store) {
	t.Helper()
	if err := s.db.DeleteRange([]byte{prefixSeal}, upper(prefixSeal), pebble.Sync); err != nil {
		t.Fatal(err)
	}
}
