package versionstore

import (
	"bytes"
	"errors"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"ckptfs/internal/ckpt"
)

func recordBytes(t *testing.T, s *Store, path string, data []byte) {
	t.Helper()
	c := ckpt.Capture{Path: path, Prior: ckpt.State{Type: ckpt.Regular, Mode: 0o644, Size: int64(len(data))}}
	c.Open = func() (*os.File, error) {
		f, err := os.CreateTemp(t.TempDir(), "c")
		if err != nil {
			return nil, err
		}
		f.Write(data)
		f.Seek(0, 0)
		return f, nil
	}
	if err := s.Record(c, ckpt.Program{Comm: "test"}); err != nil {
		t.Fatal(err)
	}
}

func TestTurnsAndRefs(t *testing.T) {
	s := NewTestStore(t)
	if _, err := s.End(""); !errors.Is(err, ErrNoOpenTurn) {
		t.Fatalf("End with no open turn: %v", err)
	}
	t1, err := s.Begin(ckpt.KindAgent, "first", "msg-1")
	if err != nil || t1.Num != 1 || !t1.Open {
		t.Fatalf("begin: %+v %v", t1, err)
	}
	// Begin closes the open turn.
	t2, _ := s.Begin(ckpt.KindAgent, "second", "")
	if got, _ := s.Turn(1); got.Open || got.End.IsZero() {
		t.Fatalf("turn 1 not closed by the next begin: %+v", got)
	}
	if _, err := s.End("msg-2-final"); err != nil {
		t.Fatal(err)
	}
	for spec, want := range map[string]uint64{"ref:msg-1": 1, "ref:msg-2-final": t2.Num, "0": 0, "2": 2} {
		if n, err := s.Resolve(spec); err != nil || n != want {
			t.Errorf("Resolve(%q) = %d, %v; want %d", spec, n, err, want)
		}
	}
	_, err = s.Resolve("9")
	if !errors.Is(err, ErrTurnNotFound) || !strings.Contains(err.Error(), "turns are 0-2") {
		t.Errorf("unknown turn: %v", err)
	}
	if _, err := s.Resolve("ref:nope"); !errors.Is(err, ErrTurnNotFound) {
		t.Errorf("unknown ref: %v", err)
	}
	// A ref names one turn.
	if _, err := s.Begin(ckpt.KindAgent, "", "msg-1"); !errors.Is(err, ErrRefTaken) {
		t.Errorf("reused ref: %v", err)
	}
	// Changes with no turn open land in a manual turn.
	recordBytes(t, s, "x", []byte("hi"))
	cur, ok := s.Current()
	if !ok || cur.Kind != ckpt.KindManual || cur.Num != 3 || len(cur.Programs) != 1 || cur.Programs[0] != "test" {
		t.Fatalf("manual turn: %+v %v", cur, ok)
	}
	ts, _ := s.Turns(0)
	if len(ts) != 4 || ts[0].Num != 3 || ts[3].Num != 0 || ts[3].Kind != ckpt.KindInitial {
		t.Fatalf("Turns: %+v", ts)
	}
}

func TestNewerFormatRefused(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.db.Set(keyFormat, []byte("99"), pebble.Sync)
	s.Close()
	_, err = Open(dir, Options{})
	if !errors.Is(err, ErrNewerFormat) || !strings.Contains(err.Error(), "upgrade") {
		t.Fatalf("newer format: %v", err)
	}
}

func TestLockedStore(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := Open(dir, Options{}); !errors.Is(err, ErrLocked) {
		t.Fatalf("second open: %v", err)
	}
}

func TestCorruptChunkDetected(t *testing.T) {
	s := NewTestStore(t)
	s.Begin(ckpt.KindAgent, "", "")
	data := bytes.Repeat([]byte("precious "), 1000)
	recordBytes(t, s, "f", data)
	s.End("")
	// Flip a byte of the stored chunk.
	sum := sha256Of(data)
	key := chunkKey(sum)
	val, closer, err := s.db.Get(key)
	if err != nil {
		t.Fatal(err)
	}
	bad := append([]byte(nil), val...)
	closer.Close()
	bad[len(bad)-1] ^= 0xff
	s.db.Set(key, bad, pebble.Sync)
	rc, _, err := s.OpenAt(0, "f", nil)
	if err == nil {
		_, err = io.ReadAll(rc)
	}
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("reading a damaged chunk: %v", err)
	}
	rep, err := s.Verify()
	if err != nil || len(rep.Corrupt) != 1 {
		t.Fatalf("verify: %+v %v", rep, err)
	}
}

func TestChunksShared(t *testing.T) {
	s := NewTestStore(t)
	rng := rand.New(rand.NewSource(1))
	big := make([]byte, 4<<20)
	rng.Read(big)
	s.Begin(ckpt.KindAgent, "", "")
	recordBytes(t, s, "big", big)
	s.End("")
	before := s.db.Metrics().Total().TableBytesIn + uint64(s.db.Metrics().WAL.BytesWritten)
	// The same file with 100 KiB appended: only the tail is new.
	appended := append(append([]byte(nil), big...), make([]byte, 100<<10)...)
	rng.Read(appended[len(big):])
	s.Begin(ckpt.KindAgent, "", "")
	recordBytes(t, s, "big", appended)
	s.End("")
	after := s.db.Metrics().Total().TableBytesIn + uint64(s.db.Metrics().WAL.BytesWritten)
	if grew := after - before; grew > 1<<20 {
		t.Fatalf("appending 100 KiB to a 4 MiB file stored %d bytes", grew)
	}
	for turn, want := range map[uint64][]byte{0: big, 1: appended} {
		rc, _, err := s.OpenAt(turn, "big", nil)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(rc)
		if !bytes.Equal(got, want) {
			t.Fatalf("turn %d: %d bytes back, want %d", turn, len(got), len(want))
		}
	}
}

func TestRecordRejectsBadPaths(t *testing.T) {
	s := NewTestStore(t)
	for _, p := range []string{"../x", "/etc", "a//b", "a/../b"} {
		if err := s.Record(ckpt.Capture{Path: p}, ckpt.Program{}); !errors.Is(err, ErrBadPath) {
			t.Errorf("Record(%q): %v", p, err)
		}
	}
}

var _ = filepath.Join

// Adopt makes an open implicit turn the agent's turn, keeping its number
// and records but not its programs; Credit adds a program without a
// record.
func TestAdoptAndCredit(t *testing.T) {
	s := NewTestStore(t)
	if _, err := s.Begin(ckpt.KindAgent, "one", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := s.End(""); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Adopt(ckpt.KindAgent, "x", ""); err == nil {
		t.Fatal("Adopt with no open turn succeeded")
	}
	recordBytes(t, s, "f", []byte("same"))
	cur, _ := s.Current()
	if cur.Kind != ckpt.KindManual || cur.Num != 2 {
		t.Fatalf("implicit turn: %+v", cur)
	}
	got, err := s.Adopt(ckpt.KindAgent, "two", "msg-2")
	if err != nil || got.Num != 2 || got.Kind != ckpt.KindAgent || got.Label != "two" || !got.Open {
		t.Fatalf("Adopt: %+v %v", got, err)
	}
	if n, err := s.Resolve("ref:msg-2"); err != nil || n != 2 {
		t.Fatalf("ref of the adopted turn: %d %v", n, err)
	}
	if !s.NeedsCapture("g", false) || s.NeedsCapture("f", false) {
		t.Fatal("the adopted turn lost its captures")
	}
	if _, err := s.Adopt(ckpt.KindAgent, "again", ""); err == nil {
		t.Fatal("Adopt of a labelled agent turn succeeded")
	}
	if err := s.Credit(ckpt.Program{Comm: "cc"}); err != nil {
		t.Fatal(err)
	}
	s.End("")
	// The programs of the implicit turn, whose changes came to nothing,
	// are not the agent's turn's: "test" recorded f before the Adopt.
	if tt, _ := s.Turn(2); !slices.Equal(tt.Programs, []string{"cc"}) || tt.Label != "two" || tt.Kind != ckpt.KindAgent {
		t.Fatalf("turn 2 after end: %+v", tt)
	}
	if err := s.Credit(ckpt.Program{Comm: "late"}); err != nil {
		t.Fatal(err) // no open turn: nothing to credit
	}
	if s.Latest() != 2 {
		t.Fatalf("Credit opened a turn: latest %d", s.Latest())
	}
}

// Retext renames the open turn (runs at the same time sharing it): its
// label and whole text, kept across a reopen, and its records and
// captures stay.
func TestRetext(t *testing.T) {
	s, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Retext("x"); err == nil {
		t.Fatal("Retext with no open turn succeeded")
	}
	if _, err := s.Begin(ckpt.KindAgent, "make", ""); err != nil {
		t.Fatal(err)
	}
	recordBytes(t, s, "f", []byte("old"))
	got, err := s.Retext("make & test\n\nmake\n\ntest")
	if err != nil || got.Num != 1 || got.Label != "make & test" || got.Prompt != "make & test\n\nmake\n\ntest" || !got.Open {
		t.Fatalf("Retext: %+v %v", got, err)
	}
	if s.NeedsCapture("f", false) {
		t.Fatal("the retexted turn lost its captures")
	}
	if _, err := s.End(""); err != nil {
		t.Fatal(err)
	}
	s = reopened(t, s)
	if tu, err := s.Turn(1); err != nil || tu.Label != "make & test" || tu.Prompt != "make & test\n\nmake\n\ntest" || tu.LastSeq < tu.FirstSeq {
		t.Fatalf("after reopen: %+v %v", tu, err)
	}
}
