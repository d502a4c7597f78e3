package versionstore

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"ckptfs/internal/ckpt"
)

// sealFixture: dir/db, 64 KiB, written in place in turn 1 (a range
// record), then the unmount's manifest and seals. It returns the bytes db
// had at turn 0's end.
func sealFixture(t *testing.T) (*Store, ckpt.Tree, string, []byte) {
	t.Helper()
	s, tree, root := rangeFixture(t)
	if err := os.Mkdir(filepath.Join(root, "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(root, "dir", "db")
	v0 := bytes.Repeat([]byte("0123456789abcdef"), 4096)
	if err := os.WriteFile(p, v0, 0o644); err != nil {
		t.Fatal(err)
	}
	s.Begin(ckpt.KindAgent, "", "")
	recordRange(t, s, tree, "dir/db", 4096, 8192)
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt(fill(4096, 'A'), 4096)
	f.Close()
	if _, err := s.End(""); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveManifest(tree, nil, nil); err != nil {
		t.Fatal(err)
	}
	if sl, err := s.seals(); err != nil || len(sl) != 1 {
		t.Fatalf("seals at the unmount: %v %v", sl, err)
	}
	return s, tree, root, v0
}

// While unmounted, the directory holding a sealed file is renamed, then
// the file is written into: findRenames records the directory's rename
// and compares the file under its new name, where the seal (kept under
// the old one) must still give its record the sealed bytes.
func TestSealFollowsOfflineDirRename(t *testing.T) {
	s, tree, root, v0 := sealFixture(t)
	if err := os.Rename(filepath.Join(root, "dir"), filepath.Join(root, "dir2")); err != nil {
		t.Fatal(err)
	}
	editThenMount(t, s, tree, root, "dir2/db", v0)
}

// The same with an offline command in between (keep): it records the
// directory's rename, and the seal must survive it under the new name,
// for the edit that follows before the mount.
func TestSealFollowsOfflineDirRenameThroughAnOfflineCommand(t *testing.T) {
	s, tree, root, v0 := sealFixture(t)
	if err := os.Rename(filepath.Join(root, "dir"), filepath.Join(root, "dir2")); err != nil {
		t.Fatal(err)
	}
	if res, err := s.RecordOffline(tree, nil, nil, true); err != nil || res.Paths != 1 {
		t.Fatalf("offline command: %+v %v", res, err)
	}
	editThenMount(t, s, tree, root, "dir2/db", v0)
}

// An offline command finds the sealed file renamed (findRenames: the same
// inode, size and mtime under a new name) and records the rename; the
// file is written into before the mount.
func TestSealFollowsFileRenameThroughAnOfflineCommand(t *testing.T) {
	s, tree, root, v0 := sealFixture(t)
	if err := os.Rename(filepath.Join(root, "dir", "db"), filepath.Join(root, "dir", "db2")); err != nil {
		t.Fatal(err)
	}
	if res, err := s.RecordOffline(tree, nil, nil, true); err != nil || res.Paths != 1 {
		t.Fatalf("offline command: %+v %v", res, err)
	}
	editThenMount(t, s, tree, root, "dir/db2", v0)
}

// editThenMount writes into the sealed file, now at rel, as dd would
// while unmounted, then mounts (RecordOffline): the file's record must
// have the sealed bytes, and dir/db at turn 0 read back as v0.
func editThenMount(t *testing.T, s *Store, tree ckpt.Tree, root, rel string, v0 []byte) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(root, rel), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt(fill(4096, 'z'), 0)
	f.Close()
	res, err := s.RecordOffline(tree, nil, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	if res.Lost != 0 {
		t.Errorf("mount: %+v: %s recorded Lost though the unmount sealed it", res, rel)
	}
	got, err := versionBytes(t, s, 0, "dir/db", tree)
	if err != nil || !bytes.Equal(got, v0) {
		t.Errorf("dir/db at turn 0: %d bytes, %v; want the %d it had", len(got), err, len(v0))
	}
}
