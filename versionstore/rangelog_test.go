package versionstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"ckptfs/internal/ckpt"
)

// rangeLogChild is the daemon that is killed: in a turn it makes range
// records of five blocks of root/big, each followed by its write, the
// last four while Pebble's log writer is stalled (what they commit stays
// in its buffer, as it may when a kill comes: the writer writes a record
// committed without a sync when its block fills or a synced one follows),
// then kills itself with SIGKILL.
func rangeLogChild(dir string) {
	s, tree := childInTurn(dir)
	p := filepath.Join(dir, "root", "big")
	write := func(blk int) {
		off := int64(blk) * rangeBlock
		st, ino, err := tree.LstatInode("big")
		if err != nil {
			panic(err)
		}
		c := ckpt.Capture{Path: "big", Prior: st, Inode: ino, Range: &ckpt.ByteRange{Off: off, End: off + 10},
			Open: func() (*os.File, error) { return tree.Open("big") }}
		if err := s.Record(c, ckpt.Program{Comm: "test"}); err != nil {
			panic(err)
		}
		f, _ := os.OpenFile(p, os.O_WRONLY, 0)
		f.WriteAt(bytes.Repeat([]byte{'w'}, 10), off)
		f.Close()
	}
	write(0) // the turn's first record of its program: a synced commit
	stall := func() { select {} }
	testHookWALWrite.Store(&stall)
	for _, blk := range []int{5, 17, 40, 63} {
		write(blk)
	}
	syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {}
}

// A range record committed while Pebble's log writer has not yet written
// it survives a kill -9: the range log keeps it, and the next Open sets
// it again. The rewind of the killed daemon's turn then puts back every
// block the turn wrote.
func TestRangeLogKeepsRecordsPebblesLogLacks(t *testing.T) {
	if dir := os.Getenv("CKPTFS_TEST_RANGELOG_CHILD"); dir != "" {
		rangeLogChild(dir)
		return
	}
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	os.Mkdir(root, 0o755)
	p := filepath.Join(root, "big")
	orig := make([]byte, 64*rangeBlock)
	for i := range orig {
		orig[i] = byte(i / 97)
	}
	os.WriteFile(p, orig, 0o644)
	// The child hangs on the stalled writer if a record takes a synced
	// commit: it is killed at the deadline, and the test fails.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestRangeLogKeepsRecordsPebblesLogLacks$")
	cmd.Env = append(os.Environ(), "CKPTFS_TEST_RANGELOG_CHILD="+dir)
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL || ctx.Err() != nil {
		t.Fatalf("child: %v (%v)\n%s", err, ctx.Err(), out)
	}
	if b, _ := os.ReadFile(p); bytes.Equal(b, orig) {
		t.Fatal("the child wrote nothing")
	}

	s, err := Open(filepath.Join(dir, "store"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if n := countOps(t, s, opRange); n != 5 {
		t.Fatalf("the killed daemon's store has %d range records, want 5", n)
	}
	tree := openTree(t, root)
	if _, err := s.Rewind(0, tree, RewindOptions{}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); !bytes.Equal(b, orig) {
		t.Fatalf("after the rewind big differs from what it had (%d bytes)", len(b))
	}
}

// The range log is read in the header's generation, up to the first
// entry that is cut short or damaged.
func TestRangeLogReadsUpToTheFirstBadEntry(t *testing.T) {
	gen := uint64(7)
	var log []byte
	for seq := uint64(3); seq <= 6; seq++ {
		log = append(log, encodeRangeEntry(gen, seq, []byte{byte('a' + seq)})...)
	}
	stale := encodeRangeEntry(gen-1, 9, []byte("old"))
	got := parseRangeLog(append(bytes.Clone(log), stale...), gen)
	if len(got) != 4 || got[0].seq != 3 || got[3].seq != 6 || string(got[3].value) != "g" {
		t.Fatalf("entries %+v, want seqs 3-6 and no entry of another generation", got)
	}
	cut := parseRangeLog(log[:len(log)-1], gen)
	if len(cut) != 3 {
		t.Fatalf("%d entries of a log cut in its last, want 3", len(cut))
	}
	bad := bytes.Clone(log)
	bad[len(encodeRangeEntry(gen, 3, []byte{'d'}))+rangeLogFixed] ^= 1 // the second entry's value
	if n := len(parseRangeLog(bad, gen)); n != 1 {
		t.Fatalf("%d entries up to a damaged one, want 1", n)
	}
}

// writeRangeLog writes a range log of generation gen and boot id boot
// holding entries into store directory dir.
func writeRangeLog(t *testing.T, dir string, gen uint64, boot [rangeLogBoot]byte, entries ...rangeEntry) {
	t.Helper()
	b := make([]byte, rangeLogHeader)
	binary.BigEndian.PutUint32(b, rangeLogMagic)
	binary.BigEndian.PutUint64(b[4:], gen)
	copy(b[12:], boot[:])
	for _, e := range entries {
		b = append(b, encodeRangeEntry(gen, e.seq, e.value)...)
	}
	if err := os.WriteFile(filepath.Join(dir, rangeLogName), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// Open sets an entry again only when Pebble lacks it, above its newest
// event (one at or below it is there, or was deleted after), and only
// from a log of this boot (after a reboot its pages may have outlived
// Pebble's log around them).
func TestRangeLogReplaysOnlyAboveTheNewestEventOfThisBoot(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.rangeFrom = 0
	root := t.TempDir()
	tree := openTree(t, root)
	os.WriteFile(filepath.Join(root, "big"), fill(8*rangeBlock, 'a'), 0o644)
	s.Begin(ckpt.KindAgent, "t1", "")
	recordRange(t, s, tree, "big", 0, 10)
	newest := s.nextSeq - 1
	raw := func(s *Store, seq uint64) []byte {
		v, closer, err := s.db.Get(eventKey(seq))
		if err != nil {
			return nil
		}
		defer closer.Close()
		return bytes.Clone(v)
	}
	kept := raw(s, newest)
	if kept == nil {
		t.Fatal("no event recorded")
	}
	s.Close()

	other := kept[:len(kept)-1] // not the event's value
	writeRangeLog(t, dir, 9, bootID(), rangeEntry{newest, other}, rangeEntry{newest + 1, kept})
	s, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := raw(s, newest); !bytes.Equal(got, kept) {
		t.Errorf("event %d set again from the range log: %q", newest, got)
	}
	if got := raw(s, newest+1); !bytes.Equal(got, kept) {
		t.Errorf("event %d above the newest not set from the range log: %q", newest+1, got)
	}
	s.Close()

	rebooted := bootID()
	rebooted[0] ^= 1
	writeRangeLog(t, dir, 9, rebooted, rangeEntry{newest + 2, kept})
	s, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := raw(s, newest+2); got != nil {
		t.Errorf("event %d set from a range log of another boot", newest+2)
	}
}
