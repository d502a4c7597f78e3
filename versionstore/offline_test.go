package versionstore

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"ckptfs/internal/backing"
	"ckptfs/internal/ckpt"
)

func offlineFixture(t testing.TB) (*Store, *backing.Tree, string) {
	t.Helper()
	root := t.TempDir()
	s, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	tree, err := backing.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tree.Close() })
	return s, tree, root
}

// A change recorded after the manifest was saved (one that reached the
// daemon after the unmount's walk, a rewind with no daemon) is not taken
// for a change made while unmounted: it was captured by its own event.
func TestOfflineIgnoresWhatEventsRecordedSinceTheManifest(t *testing.T) {
	s, tree, root := offlineFixture(t)
	os.WriteFile(filepath.Join(root, "a"), []byte("a"), 0o644)
	if err := s.SaveManifest(tree, nil, nil); err != nil {
		t.Fatal(err)
	}
	// Through the "mount", after the manifest: h created, a rewritten.
	if err := s.Record(ckpt.Capture{Path: "h", Prior: ckpt.State{}}, ckpt.Program{}); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(root, "h"), []byte("h"), 0o644)
	if err := s.Record(ckpt.Capture{Path: "a", Prior: ckpt.State{Type: ckpt.Regular, Mode: 0o644, Size: 1},
		Open: func() (*os.File, error) { return tree.Open("a") }}, ckpt.Program{}); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(root, "a"), []byte("a2"), 0o644)
	if _, err := s.End(""); err != nil {
		t.Fatal(err)
	}
	// While unmounted: b created.
	os.WriteFile(filepath.Join(root, "b"), []byte("b"), 0o644)

	res, err := s.RecordOffline(tree, nil, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Checked || res.Paths != 1 || res.Lost != 0 {
		t.Fatalf("offline check: %+v; want one path (b), none lost", res)
	}
	cs, err := s.Changes(res.Turn.Num-1, res.Turn.Num, tree)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 1 || cs[0].Path != "b" || cs[0].Kind != ckpt.Added {
		t.Fatalf("offline turn: %+v", cs)
	}
	// The manifest is gone: a second check finds nothing to compare with.
	if res, err := s.RecordOffline(tree, nil, nil, false); err != nil || res.Checked {
		t.Fatalf("second check: %+v, %v", res, err)
	}
}

// keep (a command run with no daemon) makes the tree as it is the new
// manifest: the next check records only what changed after it.
func TestOfflineKeepRebasesTheManifest(t *testing.T) {
	s, tree, root := offlineFixture(t)
	os.WriteFile(filepath.Join(root, "a"), []byte("a"), 0o644)
	if err := s.SaveManifest(tree, nil, []string{"build"}); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(root, "a"), []byte("edited by hand"), 0o644)
	res, err := s.RecordOffline(tree, nil, nil, true)
	if err != nil || res.Paths != 1 || res.Lost != 1 {
		t.Fatalf("first check: %+v, %v; want a, lost", res, err)
	}
	if pats, ok, err := s.ManifestPatterns(); err != nil || !ok || len(pats) != 1 || pats[0] != "build" {
		t.Fatalf("kept manifest: %v %v %v", pats, ok, err)
	}
	if _, _, err := s.OpenAt(0, "a", tree); err == nil {
		t.Fatal("cat of a's bytes before the hand edit: no error")
	}
	os.WriteFile(filepath.Join(root, "c"), []byte("c"), 0o644)
	res, err = s.RecordOffline(tree, nil, nil, false)
	if err != nil || res.Paths != 1 || res.Lost != 0 {
		t.Fatalf("second check: %+v, %v; want c only", res, err)
	}
}

// An offline command that finds nothing to record but events since the
// manifest (an earlier offline rewind) rebases the manifest: a hand edit
// of a path that rewind changed is found by the check after it.
func TestOfflineKeepRebasesAfterEvents(t *testing.T) {
	s, tree, root := offlineFixture(t)
	os.WriteFile(filepath.Join(root, "a"), []byte("a"), 0o644)
	if err := s.SaveManifest(tree, nil, nil); err != nil {
		t.Fatal(err)
	}
	// An offline rewind's change of a, recorded.
	if err := s.Record(ckpt.Capture{Path: "a", Prior: ckpt.State{Type: ckpt.Regular, Mode: 0o644, Size: 1},
		Open: func() (*os.File, error) { return tree.Open("a") }}, ckpt.Program{}); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(root, "a"), []byte("rewound"), 0o644)
	if _, err := s.End(""); err != nil {
		t.Fatal(err)
	}
	if res, err := s.RecordOffline(tree, nil, nil, true); err != nil || res.Paths != 0 {
		t.Fatalf("check after the rewind: %+v, %v; want nothing", res, err)
	}
	os.WriteFile(filepath.Join(root, "a"), []byte("edited by hand"), 0o644)
	if res, err := s.RecordOffline(tree, nil, nil, false); err != nil || res.Paths != 1 || res.Lost != 1 {
		t.Fatalf("check after the hand edit: %+v, %v; want a, lost", res, err)
	}
}

// A file rewritten in place while unmounted, its size kept and its mtime
// put back (touch -r, rsync --inplace -t), is still seen: by its ctime,
// which no one can put back. Its bytes at the unmount are then never
// captured, rather than today's bytes taken for them.
func TestOfflineSeesAnEditWhoseMtimeWasPutBack(t *testing.T) {
	s, tree, root := offlineFixture(t)
	p := filepath.Join(root, "v.txt")
	os.WriteFile(p, []byte("version-one\n"), 0o644)
	os.WriteFile(filepath.Join(root, "k"), []byte("k\n"), 0o644)
	if err := s.SaveManifest(tree, nil, nil); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond) // a ctime the filesystem tells apart
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte("version-TWO\n"), 0)
	f.Close()
	if err := os.Chtimes(p, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	res, err := s.RecordOffline(tree, nil, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	if res.Paths != 1 || res.Lost != 1 {
		t.Fatalf("offline check: %+v; want v.txt, its bytes never captured", res)
	}
	cs, err := s.Changes(res.Turn.Num-1, res.Turn.Num, tree)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 1 || cs[0].Path != "v.txt" || cs[0].Kind != ckpt.Modified {
		t.Fatalf("offline turn: %+v", cs)
	}
}

// A file deleted while unmounted and a new one given its inode number,
// with the same size and mtime, is not a rename: the new inode was born
// later. A real rename (the same birth; its ctime changes) still is.
func TestFindRenamesTellsAReusedInodeNumber(t *testing.T) {
	file := ckpt.State{Type: ckpt.Regular, Mode: 0o644, Size: 5}
	old := map[string]manifestEntry{"": {State: ckpt.State{Type: ckpt.Dir, Mode: 0o755}}, "x": {State: file, Stamp: ckpt.Stamp{Ino: 7, Mtime: 100, Ctime: 100, Btime: 50}}}
	reused := map[string]treeEntry{"": {st: ckpt.State{Type: ckpt.Dir, Mode: 0o755}}, "y": {st: file, sp: ckpt.Stamp{Ino: 7, Mtime: 100, Ctime: 300, Btime: 250}}}
	if recs, _ := findRenames(old, reused); len(recs) != 0 {
		t.Errorf("a new inode with a deleted one's number is taken for its rename: %+v", recs[0])
	}
	renamed := map[string]treeEntry{"": reused[""], "y": {st: file, sp: ckpt.Stamp{Ino: 7, Mtime: 100, Ctime: 300, Btime: 50}}}
	if recs, _ := findRenames(old, renamed); len(recs) != 1 || recs[0].Op != opRename || recs[0].Path != "x" || recs[0].To != "y" {
		t.Errorf("a rename: %+v", recs)
	}
}

// TestUnsavedNoteIsToldOnce: the reason a daemon could not save its
// manifest (NoteUnsaved) is what the next TakeUnsaved returns, once; a
// manifest saved since drops it.
func TestUnsavedNoteIsToldOnce(t *testing.T) {
	s, tree, _ := offlineFixture(t)
	if err := s.NoteUnsaved("disk error"); err != nil {
		t.Fatal(err)
	}
	s = reopened(t, s)
	if why, err := s.TakeUnsaved(); why != "disk error" || err != nil {
		t.Errorf("TakeUnsaved: %q, %v; want the note", why, err)
	}
	if why, err := s.TakeUnsaved(); why != "" || err != nil {
		t.Errorf("TakeUnsaved again: %q, %v; want none", why, err)
	}
	if err := s.NoteUnsaved("disk error"); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveManifest(tree, nil, nil); err != nil {
		t.Fatal(err)
	}
	if why, err := s.TakeUnsaved(); why != "" || err != nil {
		t.Errorf("TakeUnsaved after a manifest was saved: %q, %v; want none", why, err)
	}
}
