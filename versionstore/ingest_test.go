package versionstore

import (
	"bytes"
	"io"
	"math/rand"
	rand2 "math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"ckptfs/internal/ckpt"
)

// TestLargeContentIsIngested: content past ingestMin goes into ingested
// tables, reads back byte for byte, shares chunks with an edited copy,
// survives a power loss once Record returned, and passes Verify. A file
// that grew past ingestMin after it was stat'ed switches over too.
func TestLargeContentIsIngested(t *testing.T) {
	defer func(n int) { ingestTable = n }(ingestTable)
	ingestTable = 6 << 20
	mem := vfs.NewCrashableMem()
	s := openOn(t, mem)
	rng := rand.New(rand.NewSource(1))
	big := make([]byte, 3*ingestTable/2)
	rng.Read(big)
	edited := append([]byte(nil), big...)
	copy(edited[len(edited)/2:], "an edit in the middle")
	grown := make([]byte, 3*ingestMin)
	rng.Read(grown)

	before := ingests.Load()
	s.Begin(ckpt.KindAgent, "", "")
	recordBytes(t, s, "big", big)
	recordBytes(t, s, "edited", edited)
	// Stat'ed small, read large.
	c := ckpt.Capture{Path: "grown", Prior: ckpt.State{Type: ckpt.Regular, Mode: 0o644, Size: 10}}
	c.Open = func() (*os.File, error) {
		p := filepath.Join(t.TempDir(), "g")
		os.WriteFile(p, grown, 0o644)
		return os.Open(p)
	}
	if err := s.Record(c, ckpt.Program{Comm: "test"}); err != nil {
		t.Fatal(err)
	}
	if n := ingests.Load() - before; n < 3 {
		t.Fatalf("%d tables ingested, want at least 3", n)
	}
	// A power loss now: only what was fsynced survives, and the open
	// turn's events were only written. Close the turn (fsync) first.
	if _, err := s.End(""); err != nil {
		t.Fatal(err)
	}
	clone := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0, RNG: rand2.New(rand2.NewPCG(1, 2))})
	s.Close()
	s2 := openOn(t, clone)
	defer s2.Close()
	for p, want := range map[string][]byte{"big": big, "edited": edited, "grown": grown} {
		rc, st, err := s2.OpenAt(0, p, nil)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || !bytes.Equal(got, want) || (p != "grown" && st.Size != int64(len(want))) {
			t.Fatalf("%s: read back %d bytes (err %v), want %d", p, len(got), err, len(want))
		}
	}
	rep, err := s2.Verify()
	if err != nil || len(rep.Corrupt) > 0 || rep.Chunks == 0 {
		t.Fatalf("verify: %+v %v", rep, err)
	}
}
