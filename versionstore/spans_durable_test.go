package versionstore

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"ckptfs/internal/backing"
	"ckptfs/internal/ckpt"
	"ckptfs/internal/crashpoint"
)

// dirtyPages reports how many of the file's page-cache pages are dirty
// (not yet written to disk), by cachestat(2) (Linux 6.5+).
func dirtyPages(t *testing.T, path string) uint64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rng [2]uint64 // off, len (0: to the end)
	var cs [5]uint64  // nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted
	_, _, e := unix.Syscall6(unix.SYS_CACHESTAT, f.Fd(), uintptr(unsafe.Pointer(&rng)), uintptr(unsafe.Pointer(&cs)), 0, 0, 0)
	if e != 0 {
		t.Skipf("cachestat: %v", e)
	}
	return cs[1] + cs[2]
}

// childInTurn is the start of a daemon a test kills: the store
// dir/store (every file range-captured) and the tree dir/root, in a turn.
func childInTurn(dir string) (*Store, *backing.Tree) {
	s, err := Open(filepath.Join(dir, "store"), Options{})
	if err != nil {
		panic(err)
	}
	s.rangeFrom = 0
	tree, err := backing.Open(filepath.Join(dir, "root"))
	if err != nil {
		panic(err)
	}
	if _, err := s.Begin(ckpt.KindAgent, "t", ""); err != nil {
		panic(err)
	}
	return s, tree
}

// spanChild is the daemon that is killed: it opens a turn, makes one range
// record (its bytes in a span file), then is killed -9 at the point named
// by CKPTFS_TEST_SPAN_KILL ("turn.committed": End committed the closed turn but
// had not synced; "mid": right after the capture, the turn open).
func spanChild(dir string) {
	s, tree := childInTurn(dir)
	st, ino, err := tree.LstatInode("big")
	if err != nil {
		panic(err)
	}
	c := ckpt.Capture{Path: "big", Prior: st, Inode: ino, Range: &ckpt.ByteRange{Off: 16, End: 20},
		Open: func() (*os.File, error) { return tree.Open("big") }}
	if err := s.Record(c, ckpt.Program{Comm: "test"}); err != nil {
		panic(err)
	}
	kill := func(string) { syscall.Kill(os.Getpid(), syscall.SIGKILL); select {} }
	if os.Getenv("CKPTFS_TEST_SPAN_KILL") == "mid" {
		kill("")
	}
	crashpoint.Arm("turn.committed", kill)
	s.End("")
	panic("not killed")
}

// TestSpanFileDurableAfterKillReopen: a kill -9 leaves the span file in
// use unsynced, and Pebble's Open flushes (and fsyncs) every event the
// killed daemon committed: the reopen fsyncs the span file first
// (spanNote), so a turn closed before the kill, or by End after the
// reopen, survives a power loss with its bytes.
func TestSpanFileDurableAfterKillReopen(t *testing.T) {
	if dir := os.Getenv("CKPTFS_TEST_SPAN_CHILD"); dir != "" {
		spanChild(dir)
		return
	}
	for _, when := range []string{"turn.committed", "mid"} {
		t.Run(when, func(t *testing.T) {
			dir := t.TempDir()
			os.Mkdir(filepath.Join(dir, "root"), 0o755)
			os.WriteFile(filepath.Join(dir, "root", "big"), lines(4000, "orig"), 0o644)
			cmd := exec.Command(os.Args[0], "-test.run=^TestSpanFileDurableAfterKillReopen$")
			cmd.Env = append(os.Environ(), "CKPTFS_TEST_SPAN_CHILD="+dir, "CKPTFS_TEST_SPAN_KILL="+when)
			out, err := cmd.CombinedOutput()
			if ee, ok := err.(*exec.ExitError); !ok || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("child: %v\n%s", err, out)
			}
			s, err := Open(filepath.Join(dir, "store"), Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if cur, ok := s.Current(); ok {
				if _, err := s.End(""); err != nil { // the daemon closes the turn
					t.Fatal(err)
				}
				t.Logf("turn %d closed after reopening", cur.Num)
			}
			var span string
			s.scanEvents(1, s.nextSeq, func(r *record) (bool, error) {
				if r.Content != nil && r.Content.Part {
					span = r.Content.Attic
				}
				return true, nil
			})
			if span == "" {
				t.Fatal("no part recorded")
			}
			if n := dirtyPages(t, filepath.Join(s.dir, "attic", span)); n != 0 {
				t.Errorf("span file %s, named by a closed turn's durable records, has %d dirty pages", span, n)
			}
		})
	}
}

// TestSpanFileDurableAtTurnEnd: End fsyncs the span file before the
// turn is durable.
func TestSpanFileDurableAtTurnEnd(t *testing.T) {
	s, tree, root := rangeFixture(t)
	os.WriteFile(filepath.Join(root, "big"), lines(4000, "orig"), 0o644)
	spanTurn(t, s, tree, root, "AAAA", 16)
	names := atticNames(t, s)
	if n := dirtyPages(t, filepath.Join(s.dir, "attic", names[0])); n != 0 {
		t.Errorf("%d dirty pages after End", n)
	}
}

// spanStress is a store kept by ranges over files f0..f5 of 32 kB, and
// what its goroutines report.
type spanStress struct {
	s    *Store
	tree *backing.Tree
	root string
	wg   sync.WaitGroup
	stop chan struct{}
	errs chan error
}

const stressFiles = 6

func newSpanStress(t *testing.T) *spanStress {
	s, tree, root := rangeFixture(t)
	for i := 0; i < stressFiles; i++ {
		os.WriteFile(filepath.Join(root, fmt.Sprintf("f%d", i)), lines(8000, "orig"), 0o644)
	}
	return &spanStress{s: s, tree: tree, root: root, stop: make(chan struct{}), errs: make(chan error, 100)}
}

// write records the range [off, off+100) of p if the turn does not hold
// it, then writes tag there, as the overlay does.
func (x *spanStress) write(p string, off int64, tag string) error {
	st, ino, err := x.tree.LstatInode(p)
	if err != nil {
		return err
	}
	if x.s.NeedsRange(p, off, off+100) {
		c := ckpt.Capture{Path: p, Prior: st, Inode: ino, Range: &ckpt.ByteRange{Off: off, End: off + 100},
			Open: func() (*os.File, error) { return x.tree.Open(p) }}
		if err := x.s.Record(c, ckpt.Program{Comm: "test"}); err != nil {
			return err
		}
	}
	f, err := os.OpenFile(filepath.Join(x.root, p), os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.WriteAt([]byte(tag), off)
	return err
}

// loop runs fn in a goroutine until stop, reporting its first error.
func (x *spanStress) loop(fn func(k int) error) {
	x.wg.Add(1)
	go func() {
		defer x.wg.Done()
		for k := 0; ; k++ {
			select {
			case <-x.stop:
				return
			default:
			}
			if err := fn(k); err != nil {
				x.errs <- err
				return
			}
		}
	}()
}

// gcLoop collects garbage over and over until stop.
func (x *spanStress) gcLoop() {
	x.loop(func(int) error {
		if _, err := x.s.GC(GCOptions{NoPolicy: true}); err != nil && !errors.Is(err, ErrBusy) {
			return err
		}
		return nil
	})
}

// finish stops the goroutines, fails on what they reported, and checks
// that verify finds nothing corrupt.
func (x *spanStress) finish(t *testing.T) {
	close(x.stop)
	x.wg.Wait()
	close(x.errs)
	for err := range x.errs {
		t.Fatal(err)
	}
	rep, err := x.s.Verify()
	if err != nil || len(rep.Corrupt) > 0 {
		t.Fatalf("verify: %+v %v", rep, err)
	}
	t.Logf("verify: %+v, attic %d files", rep, len(atticNames(t, x.s)))
}

// TestSpanStress: captures into span files from many goroutines while
// turns begin and end, steps are taken and gc runs; run with -race. At the
// end verify finds nothing corrupt.
func TestSpanStress(t *testing.T) {
	x := newSpanStress(t)
	x.gcLoop()
	for round := 0; round < 30; round++ {
		if _, err := x.s.Begin(ckpt.KindAgent, "t", ""); err != nil {
			t.Fatal(err)
		}
		var cw sync.WaitGroup
		for i := 0; i < stressFiles; i++ {
			cw.Add(1)
			go func() {
				defer cw.Done()
				for k := 0; k < 20; k++ {
					off := int64((round*7+k*13+i)%30) * 4096
					if err := x.write(fmt.Sprintf("f%d", i), off, fmt.Sprintf("r%03dk%02d", round, k)); err != nil {
						x.errs <- err
						return
					}
				}
			}()
		}
		if round%3 == 1 {
			x.s.Step("tool", "x")
		}
		cw.Wait()
		if _, err := x.s.End(""); err != nil {
			t.Fatal(err)
		}
	}
	x.finish(t)
}

// TestSpanStressStraddle: as TestSpanStress, but turns begin and end
// while captures are in flight (a record may straddle a boundary).
func TestSpanStressStraddle(t *testing.T) {
	x := newSpanStress(t)
	for i := 0; i < stressFiles; i++ {
		x.loop(func(k int) error {
			return x.write(fmt.Sprintf("f%d", i), int64((k*13+i)%30)*4096, fmt.Sprintf("k%06d", k))
		})
	}
	x.gcLoop()
	for round := 0; round < 200; round++ {
		if round%2 == 0 {
			x.s.Begin(ckpt.KindAgent, "t", "")
		} else {
			x.s.End("")
		}
		if round%5 == 0 {
			x.s.Step("tool", "x")
		}
	}
	x.finish(t)
}

// spanInFlight opens a turn and makes one range record of a 16 kB file,
// and returns the store and the path of the span file in use.
func spanInFlight(t *testing.T) (*Store, string) {
	s, tree, root := rangeFixture(t)
	os.WriteFile(filepath.Join(root, "big"), lines(4000, "orig"), 0o644)
	if _, err := s.Begin(ckpt.KindAgent, "t", ""); err != nil {
		t.Fatal(err)
	}
	writeAt(t, s, tree, root, "big", []byte("AAAA"), 16)
	names := atticNames(t, s)
	if len(names) != 1 {
		t.Fatalf("attic %v, want the span file in use", names)
	}
	return s, filepath.Join(s.dir, "attic", names[0])
}

// TestSpanFileDurableAtStep: a step (syncWAL, mid-turn) fsyncs the span
// file in use.
func TestSpanFileDurableAtStep(t *testing.T) {
	s, span := spanInFlight(t)
	if _, _, err := s.Step("tool", "x"); err != nil {
		t.Fatal(err)
	}
	if n := dirtyPages(t, span); n != 0 {
		t.Errorf("%d dirty pages after a step", n)
	}
}

// TestSpanFileDurableAtFlush: a flush of Pebble's memtable makes the
// events in it durable, mid-turn: the span file in use is fsynced first.
func TestSpanFileDurableAtFlush(t *testing.T) {
	s, span := spanInFlight(t)
	if n := dirtyPages(t, span); n == 0 {
		t.Skip("the span file's pages were written back already")
	}
	if err := s.db.Flush(); err != nil {
		t.Fatal(err)
	}
	if n := dirtyPages(t, span); n != 0 {
		t.Errorf("%d dirty pages after a flush", n)
	}
}

// TestSpanSyncFailureAtWALClose: when the span file's fsync fails as
// Pebble closes a WAL file (on a committing goroutine that may hold s.mu,
// where Pebble cannot take an error), nothing panics or hangs, and the
// next sync point reports the failure.
func TestSpanSyncFailureAtWALClose(t *testing.T) {
	s, _ := spanInFlight(t)
	s.spanMu.Lock()
	s.spanFile.f.Close() // its next fsync fails, as after a writeback error
	s.spanMu.Unlock()
	s.mu.Lock() // as Close holds it around its flush
	err := s.db.Flush()
	s.mu.Unlock()
	if err != nil {
		t.Fatalf("flush: %v", err)
	}
	if s.spanSyncErr.Load() == nil {
		t.Fatal("the failed sync before the WAL's close was not kept")
	}
	if _, _, err := s.Step("tool", "x"); err == nil {
		t.Error("a step after a failed span file sync succeeded")
	}
}
