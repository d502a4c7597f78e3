package versionstore

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"ckptfs/internal/backing"
	"ckptfs/internal/ckpt"
)

// rangeLogChild is the daemon that is killed: in a turn it makes range
// records of five blocks of root/big, each followed by its write, the
// last four while Pebble's log writer is stalled (what they commit stays
// in its buffer, as it may when a kill comes: the writer writes a record
// committed without a sync when its block fills or a synced one follows),
// then kills itself with SIGKILL.
func rangeLogChild(dir string) {
	s, err := Open(filepath.Join(dir, "store"), Options{})
	if err != nil {
		panic(err)
	}
	s.rangeFrom = 0
	tree, err := backing.Open(filepath.Join(dir, "root"))
	if err != nil {
		panic(err)
	}
	if _, err := s.Begin(ckpt.KindAgent, "t1", ""); err != nil {
		panic(err)
	}
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
	cmd := exec.Command(os.Args[0], "-test.run=^TestRangeLogKeepsRecordsPebblesLogLacks$")
	cmd.Env = append(os.Environ(), "CKPTFS_TEST_RANGELOG_CHILD="+dir)
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("child: %v\n%s", err, out)
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

// Open sets an entry again only above the newest event Pebble holds, and
// reads the entries of the header's generation up to the first that is
// cut short or damaged.
func TestRangeLogReplaysOnlyWhatPebbleLacks(t *testing.T) {
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
