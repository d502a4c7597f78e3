package tests

import (
	"bytes"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"ckptfs/internal/xfstest"
)

// A big file on a filesystem that does not clone (the test's temporary
// directory, ext4 or tmpfs here), mounted for real, written in place
// over several turns: each turn's writes keep only the blocks they
// change (the store grows by about them, not by the file), and every
// turn's bytes come back exactly through cat, checkout and rewinds, with
// the file truncated, extended, written again, renamed and renamed back
// in the same and in later turns, and removed in the last.
func TestRangeCaptureOnAMount(t *testing.T) {
	needTurnctl(t)
	dir := t.TempDir()
	const size = 64 << 20
	big := filepath.Join(dir, "big.bin")
	sums := [][32]byte{xfstest.WriteSeeded(t, big, size, 7)}
	m := mountProject(t, dir)
	// What history keeps (du's content; the store's files also hold
	// Pebble's preallocated log).
	store := func() int64 {
		var du struct {
			Content int64 `json:"content_bytes"`
		}
		if err := json.Unmarshal([]byte(m.turnctl(t, "du", "--json")), &du); err != nil {
			t.Fatal(err)
		}
		return du.Content
	}
	stored0 := store()

	// Turn 1: one 4 KiB write in the middle: about a block kept.
	m.turnctl(t, "begin", "--label", "one block")
	xfstest.WriteAt(t, big, 1<<20+100, []byte(strings.Repeat("A", 4096)))
	m.turnctl(t, "end")
	sums = append(sums, xfstest.FileSum(t, big))
	if grew := store() - stored0; grew > 1<<20 {
		t.Errorf("a 4 KiB write into a %d MiB file grew the store by %d KiB: its whole bytes were kept", size>>20, grew>>10)
	}

	// Turn 2: truncate (1 MiB cut, kept), write past the new end,
	// extend, write again, rename, write under the new name, rename back.
	m.turnctl(t, "begin", "--label", "shuffle")
	if err := os.Truncate(big, 63<<20); err != nil {
		t.Fatal(err)
	}
	xfstest.WriteAt(t, big, 63<<20+5000, []byte("past the cut"))
	if err := os.Truncate(big, 70<<20); err != nil {
		t.Fatal(err)
	}
	xfstest.WriteAt(t, big, 50<<20, []byte(strings.Repeat("B", 10000)))
	xfstest.WriteAt(t, big, 1<<20, []byte(strings.Repeat("C", 200)))
	moved := filepath.Join(dir, "moved.bin")
	if err := os.Rename(big, moved); err != nil {
		t.Fatal(err)
	}
	xfstest.WriteAt(t, moved, 3<<20, []byte(strings.Repeat("D", 8192)))
	if err := os.Rename(moved, big); err != nil {
		t.Fatal(err)
	}
	m.turnctl(t, "end")
	sums = append(sums, xfstest.FileSum(t, big))

	// Turn 3: write the same blocks again, then rename it away for good.
	m.turnctl(t, "begin", "--label", "again")
	xfstest.WriteAt(t, big, 1<<20, []byte(strings.Repeat("E", 5000)))
	if err := os.Rename(big, moved); err != nil {
		t.Fatal(err)
	}
	xfstest.WriteAt(t, moved, 0, []byte("F"))
	m.turnctl(t, "end")
	movedSum := xfstest.FileSum(t, moved)
	// The 1 MiB cut off and some blocks; not the file.
	if grew := store() - stored0; grew > 3<<20 {
		t.Errorf("three turns of small writes into a %d MiB file grew the store by %d KiB", size>>20, grew>>10)
	}

	// Turn 4: written, then removed in the same turn (the attic keeps
	// the removed file by a link).
	m.turnctl(t, "begin", "--label", "gone")
	xfstest.WriteAt(t, moved, 60<<20, []byte("G"))
	if err := os.Remove(moved); err != nil {
		t.Fatal(err)
	}
	m.turnctl(t, "end")

	// Every turn's bytes, read back through cat and checkout.
	for n, want := range sums {
		cat := m.turnctlCmd("cat", itoa(n), "big.bin")
		out, err := cat.Output()
		if err != nil {
			t.Fatalf("turnctl cat %d big.bin: %v", n, err)
		}
		if xfstest.SumOf(t, strings.NewReader(string(out))) != want {
			t.Errorf("turnctl cat %d big.bin: not the file's bytes at the end of turn %d", n, n)
		}
	}
	co := filepath.Join(t.TempDir(), "co")
	m.turnctl(t, "checkout", "3", co)
	if xfstest.FileSum(t, filepath.Join(co, "moved.bin")) != movedSum {
		t.Error("turnctl checkout 3: moved.bin is not the file's bytes at the end of turn 3")
	}
	if out := m.turnctl(t, "verify"); !strings.Contains(out, "ok") {
		t.Errorf("turnctl verify: %s", out)
	}
	// Rewinds to each turn, and back to the end, in an order that
	// crosses the renames both ways.
	for _, n := range []int{1, 0, 2, 3, 0} {
		m.turnctl(t, "rewind", itoa(n), "--quiet")
		name, want := big, movedSum
		if n < len(sums) {
			want = sums[n]
		} else {
			name = moved
		}
		if xfstest.FileSum(t, name) != want {
			t.Fatalf("after turnctl rewind %d: %s is not the file's bytes at the end of turn %d", n, filepath.Base(name), n)
		}
		if fi, err := os.Stat(name); err != nil || fi.Mode().Perm() != 0o644 {
			t.Fatalf("after turnctl rewind %d: %s: %v %v", n, filepath.Base(name), fi.Mode(), err)
		}
	}
	m.turnctl(t, "undo", "--quiet") // the rewind to 0 undone: the tree of turn 3
	if xfstest.FileSum(t, moved) != movedSum {
		t.Error("turnctl undo: moved.bin is not the file's bytes at the end of turn 3")
	}
	if _, err := os.Stat(big); !os.IsNotExist(err) {
		t.Errorf("turnctl undo: big.bin should be gone (%v)", err)
	}
}

// Big files range-captured through a real mount in the ways that may
// change a file besides a write: a hard link made after the first
// write, written through and the first name removed; an exchange of two
// range-captured files written before and after; a shared mmap's
// writes, a hole punched, copy_file_range into the file, O_TRUNC after
// writes; writes around steps. Every turn's files come back through cat
// and rewinds, the undo of the last too.
func TestRangeCaptureOtherChanges(t *testing.T) {
	needTurnctl(t)
	dir := t.TempDir()
	const size = 2 << 20
	path := func(n string) string { return filepath.Join(dir, n) }
	xfstest.WriteSeeded(t, path("a.bin"), size, 1)
	xfstest.WriteSeeded(t, path("b.bin"), size+100, 2)
	m := mountProject(t, dir)
	names := []string{"a.bin", "b.bin", "l.bin"}
	type state map[string][32]byte
	take := func() state {
		st := state{}
		for _, n := range names {
			if _, err := os.Stat(path(n)); err == nil {
				st[n] = xfstest.FileSum(t, path(n))
			}
		}
		return st
	}
	states := []state{take()}
	block := func(c byte, n int) []byte { return []byte(strings.Repeat(string(c), n)) }

	// Turn 1: hard link after the first write.
	m.turnctl(t, "begin", "--label", "link")
	xfstest.WriteAt(t, path("a.bin"), 4096, block('A', 4096))
	if err := os.Link(path("a.bin"), path("l.bin")); err != nil {
		t.Fatal(err)
	}
	xfstest.WriteAt(t, path("l.bin"), 1<<20, block('L', 5000))
	xfstest.WriteAt(t, path("a.bin"), 8192, block('a', 100))
	if err := os.Remove(path("a.bin")); err != nil {
		t.Fatal(err)
	}
	xfstest.WriteAt(t, path("l.bin"), 0, block('l', 10))
	m.turnctl(t, "end")
	states = append(states, take())

	// Turn 2: an exchange of two range-captured files.
	m.turnctl(t, "begin", "--label", "exchange")
	xfstest.WriteAt(t, path("l.bin"), 4096, block('X', 4096))
	xfstest.WriteAt(t, path("b.bin"), 12288, block('Y', 4096))
	if err := unix.Renameat2(unix.AT_FDCWD, path("l.bin"), unix.AT_FDCWD, path("b.bin"), unix.RENAME_EXCHANGE); err != nil {
		t.Fatal(err)
	}
	xfstest.WriteAt(t, path("l.bin"), 4096, block('x', 4096))
	xfstest.WriteAt(t, path("b.bin"), 12288, block('y', 4096))
	xfstest.WriteAt(t, path("b.bin"), 0, block('z', 4096))
	m.turnctl(t, "end")
	states = append(states, take())

	// Turn 3: mmap, a hole, copy_file_range, O_TRUNC after writes.
	m.turnctl(t, "begin", "--label", "others")
	f, err := os.OpenFile(path("b.bin"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, 1<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	copy(mem[300000:], block('M', 9000))
	if err := unix.Msync(mem, unix.MS_SYNC); err != nil {
		t.Fatal(err)
	}
	unix.Munmap(mem)
	f.Close()
	f, err = os.OpenFile(path("l.bin"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, 512<<10, 20000); err != nil {
		t.Fatal(err)
	}
	src, err := os.Open(path("b.bin"))
	if err != nil {
		t.Fatal(err)
	}
	offIn, offOut := int64(100), int64(1500<<10)
	if _, err := unix.CopyFileRange(int(src.Fd()), &offIn, int(f.Fd()), &offOut, 30000, 0); err != nil {
		t.Fatal(err)
	}
	src.Close()
	f.Close()
	xfstest.WriteAt(t, path("b.bin"), 1<<20, block('T', 100))
	xfstest.WriteSeeded(t, path("b.bin"), size+5000, 3) // O_TRUNC
	m.turnctl(t, "end")
	states = append(states, take())

	// Turn 4: steps between writes of the same blocks.
	m.turnctl(t, "begin", "--label", "steps")
	xfstest.WriteAt(t, path("l.bin"), 0, block('1', 4096))
	m.turnctl(t, "step")
	xfstest.WriteAt(t, path("l.bin"), 0, block('2', 6000))
	m.turnctl(t, "step")
	if err := os.Truncate(path("l.bin"), 3000); err != nil {
		t.Fatal(err)
	}
	m.turnctl(t, "end")
	states = append(states, take())

	for n, want := range states {
		for _, name := range names {
			sum, ok := want[name]
			out, err := m.turnctlCmd("cat", itoa(n), name).Output()
			if !ok {
				if err == nil {
					t.Errorf("turnctl cat %d %s: it did not exist then", n, name)
				}
				continue
			}
			if err != nil {
				t.Fatalf("turnctl cat %d %s: %v", n, name, err)
			}
			if xfstest.SumOf(t, strings.NewReader(string(out))) != sum {
				t.Errorf("turnctl cat %d %s: not its bytes at the end of turn %d", n, name, n)
			}
		}
	}
	if out := m.turnctl(t, "verify"); !strings.Contains(out, "ok") {
		t.Errorf("turnctl verify: %s", out)
	}
	for _, n := range []int{0, 3, 1, 2, 4, 0} {
		m.turnctl(t, "rewind", itoa(n), "--quiet")
		if got := take(); !maps.Equal(got, states[n]) {
			t.Fatalf("after turnctl rewind %d the files differ from turn %d's", n, n)
		}
	}
	m.turnctl(t, "undo", "--quiet")
	if got := take(); !maps.Equal(got, states[4]) {
		t.Fatal("after turnctl undo the files differ from turn 4's")
	}
}

// A rewind undoes a range-kept file's writes in place (the inode stays,
// a reader holding it sees the bytes come back). A process that holds
// the file open for writing through FUSE passthrough across a rewind
// writes into the old inode, not into the rewound tree: such a writer's
// turn holds the file whole, and undoing that replaces the file (and
// PatchFile refuses a file written past the daemon, see
// versionstore's TestRangeRewindReplacesAFileWrittenPast).
func TestRangeRewindInPlaceOnAMount(t *testing.T) {
	needTurnctl(t)
	dir := t.TempDir()
	const size = 2 << 20
	big := filepath.Join(dir, "big.bin")
	orig := xfstest.WriteSeeded(t, big, size, 11)
	m := mountProject(t, dir)
	mbig := filepath.Join(m.Dir, "big.bin")
	ino := func() uint64 {
		var st unix.Stat_t
		if err := unix.Stat(mbig, &st); err != nil {
			t.Fatal(err)
		}
		return st.Ino
	}
	ino0 := ino()

	// Turn 1: a 4 KiB write in place (a range record), rewound in place.
	m.turnctl(t, "begin", "--label", "write")
	xfstest.WriteAt(t, mbig, 1<<20, []byte(strings.Repeat("A", 4096)))
	m.turnctl(t, "end")
	afterWrite := xfstest.FileSum(t, mbig)
	reader, err := os.Open(mbig)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	m.turnctl(t, "rewind", "0")
	if got := xfstest.FileSum(t, mbig); got != orig {
		t.Fatal("after the rewind to 0 the file is not what it was")
	}
	if ino() != ino0 {
		t.Fatalf("the rewind replaced the file (inode %d, was %d): it should change it in place", ino(), ino0)
	}
	b := make([]byte, 4)
	if _, err := reader.ReadAt(b, 1<<20); err != nil || string(b) == "AAAA" {
		t.Fatalf("a reader holding the file reads %q (%v) after the rewind, want the bytes from before", b, err)
	}
	m.turnctl(t, "undo")
	if got := xfstest.FileSum(t, mbig); got != afterWrite {
		t.Fatal("after the undo the file is not what the write made it")
	}

	// A writer through passthrough (the file truncated and written back
	// whole in this turn) holds it open across a rewind to 0.
	m.turnctl(t, "begin", "--label", "rewrite")
	data, err := os.ReadFile(mbig)
	if err != nil {
		t.Fatal(err)
	}
	w, err := os.OpenFile(mbig, os.O_RDWR|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.WriteAt(data, 0); err != nil {
		t.Fatal(err)
	}
	m.turnctl(t, "end")
	m.turnctl(t, "rewind", "0")
	if got := xfstest.FileSum(t, mbig); got != orig {
		t.Fatal("after the second rewind to 0 the file is not what it was")
	}
	if _, err := w.WriteAt([]byte("past the daemon"), 0); err != nil {
		t.Fatal(err)
	}
	if got := xfstest.FileSum(t, mbig); got != orig {
		t.Fatal("a passthrough writer held across the rewind wrote into the rewound file")
	}
}

// A write through a handle opened O_RDWR|O_DIRECT into a file kept by
// ranges: the capture reads the prior bytes its own way (a direct read
// of the file's last, partial block through that handle would fail with
// EINVAL and fail the write), and a rewind brings them back exactly.
func TestRangeCaptureUnderDirectIO(t *testing.T) {
	needTurnctl(t)
	dir := t.TempDir()
	const size = 4<<20 + 100 // its last block partial
	p := filepath.Join(dir, "db.bin")
	before := xfstest.WriteSeeded(t, p, size, 3)
	m := mountProject(t, dir)
	m.turnctl(t, "begin", "--label", "direct")
	f, err := os.OpenFile(p, os.O_RDWR|unix.O_DIRECT, 0)
	if err != nil {
		t.Fatal(err)
	}
	buf, err := unix.Mmap(-1, 0, 8192, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE) // page-aligned
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(buf)
	copy(buf, strings.Repeat("Z", len(buf)))
	for _, off := range []int64{1 << 20, 4 << 20} { // a whole block; the partial last one
		if _, err := f.WriteAt(buf[:4096], off); err != nil {
			t.Fatalf("direct write at %d: %v", off, err)
		}
	}
	f.Close()
	m.turnctl(t, "end")
	if fi, err := os.Stat(p); err != nil || fi.Size() != 4<<20+4096 {
		t.Fatalf("after the writes: %v %v", fi, err)
	}
	m.turnctl(t, "rewind", "0", "--quiet")
	if got := xfstest.FileSum(t, p); got != before {
		t.Fatal("the rewind did not bring back the bytes before the direct writes")
	}
	if fi, err := os.Stat(p); err != nil || fi.Size() != size {
		t.Fatalf("after the rewind: %v %v", fi, err)
	}
}

// Range records of random writes into a big file survive a kill -9 of
// the daemon that made them, the last ones too (they are committed
// without waiting for Pebble's log writer, and kept by the range log
// until it wrote them): after the remount the turn rewinds exactly.
func TestRangeRecordsSurviveAKill(t *testing.T) {
	needTurnctl(t)
	dir := t.TempDir()
	const size = 8 << 20
	big := filepath.Join(dir, "big.bin")
	xfstest.WriteSeeded(t, big, size, 11)
	orig, err := os.ReadFile(big)
	if err != nil {
		t.Fatal(err)
	}
	m := mountProject(t, dir)
	m.turnctl(t, "begin", "--label", "random writes")
	f, err := os.OpenFile(big, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	block := make([]byte, 4096)
	for i := 0; i < 300; i++ {
		block[0] = byte(i + 1)
		// Blocks far apart: one range record each.
		if _, err := f.WriteAt(block, int64(i*97%(size/4096))*4096); err != nil {
			t.Fatal(err)
		}
	}
	f.Close()
	m.kill(t)
	m = mountProject(t, dir)
	m.turnctl(t, "rewind", "0")
	if got, err := os.ReadFile(big); err != nil || !bytes.Equal(got, orig) {
		t.Fatalf("big.bin after the rewind of the killed daemon's turn differs from what it had (%v)", err)
	}
}
