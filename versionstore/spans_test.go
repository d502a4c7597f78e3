package versionstore

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"ckptfs/internal/backing"
	"ckptfs/internal/ckpt"
)

// spanTurn writes tag at each offset of big in a turn of its own, and
// returns the turn's number and the file's bytes at its end.
func spanTurn(t *testing.T, s *Store, tree *backing.Tree, root, tag string, offs ...int64) (uint64, []byte) {
	t.Helper()
	if _, err := s.Begin(ckpt.KindAgent, tag, ""); err != nil {
		t.Fatal(err)
	}
	for _, off := range offs {
		writeAt(t, s, tree, root, "big", []byte(tag), off)
	}
	tn, err := s.End("")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "big"))
	if err != nil {
		t.Fatal(err)
	}
	return tn.Num, b
}

// TestSpanFiles: where the store has an attic, the bytes of a turn's
// range records go into one span file of that turn, written once (no
// chunks); every version reads back exactly, verify checks the bytes
// against their sums, and a forgotten turn's span file is collected.
func TestSpanFiles(t *testing.T) {
	s, tree, root := rangeFixture(t)
	v0 := lines(4000, "orig") // 64000 bytes: sixteen blocks
	os.WriteFile(filepath.Join(root, "big"), v0, 0o644)
	n1, v1 := spanTurn(t, s, tree, root, "AAAA", 16, 20000, 40000)
	n2, v2 := spanTurn(t, s, tree, root, "BBBB", 17, 60000)
	n3, v3 := spanTurn(t, s, tree, root, "CCCC", 30000)
	if names := atticNames(t, s); len(names) != 3 {
		t.Fatalf("attic %v, want a span file per turn", names)
	}
	if rep, err := s.Verify(); err != nil || len(rep.Corrupt) > 0 || rep.Attic != 3 || rep.Chunks != 0 || rep.Bytes != 6*4096 {
		t.Fatalf("verify: %+v %v, want 3 span files of 6 blocks and no chunks", rep, err)
	}
	for n, want := range map[uint64][]byte{n1 - 1: v0, n1: v1, n2: v2, n3: v3} {
		if got, err := versionBytes(t, s, n, "big", tree); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("end of turn %d: %v", n, err)
		}
	}
	// Forgetting the first two turns: history starts at the end of n2,
	// which only n3's records still tell.
	if _, err := s.Forget([]uint64{n1 - 1, n1}, "test"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GC(GCOptions{NoPolicy: true}); err != nil {
		t.Fatal(err)
	}
	if names := atticNames(t, s); len(names) != 1 {
		t.Errorf("attic %v after the first turns were forgotten, want the last turn's span file", names)
	}
	checkNoGarbage(t, s)
	if got, err := versionBytes(t, s, n2, "big", tree); err != nil || !bytes.Equal(got, v2) {
		t.Fatalf("end of turn %d after gc: %v", n2, err)
	}
}

// TestSpanFileDamageIsCaught: a byte changed in a span file, or the file
// cut short, makes the versions that need it fail with ErrCorrupt, and
// verify name them; never wrong bytes.
func TestSpanFileDamageIsCaught(t *testing.T) {
	for _, damage := range []string{"byte", "cut"} {
		t.Run(damage, func(t *testing.T) {
			s, tree, root := rangeFixture(t)
			os.WriteFile(filepath.Join(root, "big"), lines(2000, "orig"), 0o644)
			n, _ := spanTurn(t, s, tree, root, "AAAA", 16, 20000)
			names := atticNames(t, s)
			if len(names) != 1 {
				t.Fatalf("attic %v, want one span file", names)
			}
			p := filepath.Join(s.dir, "attic", names[0])
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			switch damage {
			case "byte":
				b[len(b)-1] ^= 1
			case "cut":
				b = b[:len(b)-1]
			}
			if err := os.WriteFile(p, b, 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := versionBytes(t, s, n-1, "big", tree); !errors.Is(err, ErrCorrupt) {
				t.Errorf("before turn %d: err %v, want ErrCorrupt", n, err)
			}
			rep, err := s.Verify()
			if err != nil || len(rep.Corrupt) != 1 {
				t.Errorf("verify: %+v %v, want the damaged record named", rep, err)
			}
		})
	}
}

// TestSpanFileKillBeforeRecord: a kill after the span bytes were written
// but before their event was committed leaves the path not captured (the
// next write captures it again) and bytes no event names, which gc
// removes with their span file.
func TestSpanFileKillBeforeRecord(t *testing.T) {
	s, tree, root := rangeFixture(t)
	v0 := lines(2000, "orig")
	os.WriteFile(filepath.Join(root, "big"), v0, 0o644)
	if _, err := s.Begin(ckpt.KindAgent, "t", ""); err != nil {
		t.Fatal(err)
	}
	point, err := untilCrash(t, "record.spans", func() error {
		recordRange(t, s, tree, "big", 16, 20)
		return nil
	})
	if point != "record.spans" || err != nil {
		t.Fatalf("capture: killed at %q (%v), want record.spans", point, err)
	}
	dir := s.dir
	s.Close()
	s, err = Open(dir, Options{RangeFrom: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if !s.NeedsRange("big", 16, 20) {
		t.Fatal("big counts as captured, but its record was never committed")
	}
	writeAt(t, s, tree, root, "big", []byte("AAAA"), 16)
	tn, err := s.End("")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := versionBytes(t, s, tn.Num-1, "big", tree); err != nil || !bytes.Equal(got, v0) {
		t.Fatalf("before the turn: %v", err)
	}
	if names := atticNames(t, s); len(names) != 2 {
		t.Fatalf("attic %v, want the killed capture's span file and the next one", names)
	}
	if _, err := s.GC(GCOptions{NoPolicy: true}); err != nil {
		t.Fatal(err)
	}
	if names := atticNames(t, s); len(names) != 1 {
		t.Errorf("attic %v after gc, want only the span file an event names", names)
	}
	checkNoGarbage(t, s)
}

// TestGCLeavesTheSpanFileInUse: bytes written into the span file in use
// whose event is not committed yet (a capture in flight) are not
// garbage: gc leaves the file until the turn lets go of it.
func TestGCLeavesTheSpanFileInUse(t *testing.T) {
	s, _, _ := rangeFixture(t)
	if _, err := s.Begin(ckpt.KindAgent, "t", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := s.putSpans([]byte("in flight")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GC(GCOptions{NoPolicy: true}); err != nil {
		t.Fatal(err)
	}
	if names := atticNames(t, s); len(names) != 1 {
		t.Fatalf("attic %v after gc, want the span file in use", names)
	}
	if _, err := s.End(""); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GC(GCOptions{NoPolicy: true}); err != nil {
		t.Fatal(err)
	}
	if names := atticNames(t, s); len(names) != 0 {
		t.Errorf("attic %v after the turn ended, want the unnamed span file gone", names)
	}
}

// lostPartFixture: a turn "closed" over files a and b, then a turn
// "open" that wrote into a and b (range records, each in a span file of
// its own), and a's span file cut to nothing, as a power loss can leave
// the part of an event the kernel wrote back first.
func lostPartFixture(t *testing.T) (s *Store, tree *backing.Tree, root string, closed, open uint64) {
	s, tree, root = rangeFixture(t)
	for _, p := range []string{"a", "b"} {
		os.WriteFile(filepath.Join(root, p), lines(4000, "orig"), 0o644)
	}
	if _, err := s.Begin(ckpt.KindAgent, "closed", ""); err != nil {
		t.Fatal(err)
	}
	c, err := s.End("")
	if err != nil {
		t.Fatal(err)
	}
	o, err := s.Begin(ckpt.KindAgent, "open", "")
	if err != nil {
		t.Fatal(err)
	}
	writeAt(t, s, tree, root, "a", []byte("AAAA"), 16)
	lost := atticNames(t, s)
	if err := s.rotateSpans(); err != nil { // b's part in a file of its own
		t.Fatal(err)
	}
	writeAt(t, s, tree, root, "b", []byte("BBBB"), 16)
	if len(lost) != 1 {
		t.Fatalf("attic %v, want a's span file", lost)
	}
	if err := os.Truncate(filepath.Join(s.dir, "attic", lost[0]), 0); err != nil {
		t.Fatal(err)
	}
	return s, tree, root, c.Num, o.Num
}

// refusedCleanly checks that a command that failed with ErrCorrupt
// changed none of the files and left no journal for Recover.
func refusedCleanly(t *testing.T, s *Store, tree *backing.Tree, root string, err error, before map[string][]byte) {
	t.Helper()
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("err %v, want ErrCorrupt", err)
	}
	for p, want := range before {
		if got, _ := os.ReadFile(filepath.Join(root, p)); !bytes.Equal(got, want) {
			t.Errorf("the refused command changed %s", p)
		}
	}
	dir := s.dir
	s.Close()
	s2, oerr := Open(dir, Options{RangeFrom: 1})
	if oerr != nil {
		t.Fatal(oerr)
	}
	t.Cleanup(func() { s2.Close() })
	if ok, rerr := s2.Recover(tree); ok || rerr != nil {
		t.Fatalf("recover after the refusal: journal %v, %v; want none", ok, rerr)
	}
}

// TestRefusalsOverALostPart: a rewind past a lost part, a restore of its
// path and a revert of its turn refuse before they change anything,
// leaving no journal (they used to stop half-way, and Recover then
// failed at every start); a restore of another path works.
func TestRefusalsOverALostPart(t *testing.T) {
	files := func(root string) map[string][]byte {
		m := map[string][]byte{}
		for _, p := range []string{"a", "b"} {
			m[p], _ = os.ReadFile(filepath.Join(root, p))
		}
		return m
	}
	t.Run("rewind", func(t *testing.T) {
		s, tree, root, closed, _ := lostPartFixture(t)
		before := files(root)
		_, err := s.Rewind(closed, tree, RewindOptions{})
		refusedCleanly(t, s, tree, root, err, before)
	})
	t.Run("restore", func(t *testing.T) {
		s, tree, root, closed, _ := lostPartFixture(t)
		before := files(root)
		if _, err := s.Rewind(closed, tree, RewindOptions{Paths: []string{"b"}}); err != nil {
			t.Fatalf("restore of b: %v", err)
		}
		if !bytes.Equal(files(root)["b"], lines(4000, "orig")) {
			t.Fatal("the restore of b did not bring its bytes back")
		}
		before["b"] = files(root)["b"]
		_, err := s.Rewind(closed, tree, RewindOptions{Paths: []string{"a"}})
		refusedCleanly(t, s, tree, root, err, before)
	})
	t.Run("revert", func(t *testing.T) {
		s, tree, root, _, open := lostPartFixture(t)
		if _, err := s.End(""); err != nil {
			t.Fatal(err)
		}
		before := files(root)
		_, err := s.Revert(open, tree, RevertOptions{})
		refusedCleanly(t, s, tree, root, err, before)
	})
}

// TestRewindRefusesOverALostAtticFile: as for a lost part, a rewind that
// would read an attic file a power loss took (its link's name was not
// durable yet) refuses before it changes anything.
func TestRewindRefusesOverALostAtticFile(t *testing.T) {
	s, tree, root := rangeFixture(t)
	os.WriteFile(filepath.Join(root, "a"), lines(4000, "orig"), 0o644)
	os.WriteFile(filepath.Join(root, "b"), lines(10, "b"), 0o644)
	c := closedThenOpen(t, s)
	// b is deleted: its prior bytes kept by a hard link into the attic.
	st, ino, err := tree.LstatInode("b")
	if err != nil {
		t.Fatal(err)
	}
	var linked string
	cb := ckpt.Capture{Path: "b", Prior: st, Inode: ino,
		Open: func() (*os.File, error) { return tree.Open("b") },
		Link: func(dir *os.File, name string) error {
			linked = name
			return unix.Linkat(unix.AT_FDCWD, filepath.Join(root, "b"), int(dir.Fd()), name, 0)
		}}
	if err := s.Record(cb, ckpt.Program{Comm: "test"}); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(root, "b"))
	writeAt(t, s, tree, root, "a", []byte("AAAA"), 16)
	if linked == "" {
		t.Fatal("b was not linked into the attic")
	}
	os.Remove(filepath.Join(s.dir, "attic", linked)) // the power loss took its name
	a1, _ := os.ReadFile(filepath.Join(root, "a"))
	_, err = s.Rewind(c.Num, tree, RewindOptions{})
	refusedCleanly(t, s, tree, root, err, map[string][]byte{"a": a1})
	if _, err := os.Lstat(filepath.Join(root, "b")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the refused rewind made b again (%v)", err)
	}
}

// closedThenOpen closes a turn "closed" over the tree as it is and opens
// a turn "open" after it; it returns the closed turn.
func closedThenOpen(t *testing.T, s *Store) ckpt.Turn {
	t.Helper()
	if _, err := s.Begin(ckpt.KindAgent, "closed", ""); err != nil {
		t.Fatal(err)
	}
	c, err := s.End("")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Begin(ckpt.KindAgent, "open", ""); err != nil {
		t.Fatal(err)
	}
	return c
}

// Two captures that both find no span file in use both make one: the
// one installed first is used by both, the other is removed, and the
// note (what a reopen after a kill -9 syncs) names the one in use, never
// the removed one, whichever capture made its file last.
func TestSpanNoteNamesTheFileInUse(t *testing.T) {
	s, _, _ := rangeFixture(t)
	if _, err := s.Begin(ckpt.KindAgent, "race", ""); err != nil {
		t.Fatal(err)
	}
	// The first capture stops before making its file until the second
	// has installed its own.
	entered, release := make(chan struct{}), make(chan struct{})
	first := true
	testHookNewSpanFile = func() {
		if first {
			first = false
			close(entered)
			<-release
		}
	}
	t.Cleanup(func() { testHookNewSpanFile = nil })
	type result struct {
		ref *contentRef
		err error
	}
	late := make(chan result)
	go func() {
		ref, err := s.putSpans([]byte("late"))
		late <- result{ref, err}
	}()
	<-entered
	early, err := s.putSpans([]byte("early"))
	if err != nil {
		t.Fatal(err)
	}
	close(release)
	r := <-late
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.ref.Attic != early.Attic {
		t.Fatalf("the captures wrote to span files %s and %s: want the one in use", r.ref.Attic, early.Attic)
	}
	note, err := os.ReadFile(filepath.Join(s.dir, spanNote))
	if err != nil || string(note) != early.Attic+"\n" {
		t.Fatalf("note %q (%v), want %q: the span file in use", note, err, early.Attic)
	}
	names, err := s.attic.Readdirnames(-1)
	if err != nil || len(names) != 1 || names[0] != early.Attic {
		t.Fatalf("attic %v (%v), want only %s: the other capture's file removed", names, err, early.Attic)
	}
	for _, ref := range []*contentRef{early, r.ref} {
		b, err := s.readPart(ref)
		if err != nil || (string(b) != "early" && string(b) != "late") {
			t.Fatalf("part %+v reads %q (%v)", ref, b, err)
		}
	}
}
