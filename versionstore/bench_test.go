package versionstore

import (
	"fmt"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"ckptfs/internal/ckpt"
)

// BenchmarkCapture measures one capture of a new path (the cost every
// create pays) under three WAL policies:
//
//	nosync:    pebble.NoSync — may lose captures on kill -9 (not used)
//	writeonly: pebble.Sync through walFS — survives kill -9 (what we use)
//	fsync:     pebble.Sync with a real fsync — survives power loss
func BenchmarkCapture(b *testing.B) {
	for _, mode := range []string{"nosync", "writeonly", "fsync"} {
		b.Run(mode, func(b *testing.B) {
			s, err := Open(b.TempDir(), Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			s.Begin(ckpt.KindAgent, "", "")
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				r := &record{Op: opPrior, Path: fmt.Sprintf("dir/file%d", i), State: ckpt.State{}}
				switch mode {
				case "nosync":
					batch := s.db.NewBatch()
					putJSON(batch, eventKey(uint64(i)+1e9), r)
					batch.Commit(pebble.NoSync)
					batch.Close()
				case "writeonly":
					if err := s.append(r, ckpt.Program{Comm: "bench"}, true); err != nil {
						b.Fatal(err)
					}
				case "fsync":
					if err := s.append(r, ckpt.Program{Comm: "bench"}, true); err != nil {
						b.Fatal(err)
					}
					s.syncWAL()
				}
			}
		})
	}
}

// BenchmarkTurnChangesOfRanges measures listing what a turn of many range
// records into one file changed (what a turn end pays for fio's pass).
func BenchmarkTurnChangesOfRanges(b *testing.B) {
	s, tree, root := offlineFixture(b)
	s.rangeFrom = 0
	p := root + "/big"
	f, _ := os.Create(p)
	f.Truncate(256 << 20)
	defer f.Close()
	page := make([]byte, 4096)
	for i := range page {
		page[i] = 'x'
	}
	turn, _ := s.Begin(ckpt.KindAgent, "t", "")
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 40000; i++ {
		off := rng.Int64N(256<<20/4096) * 4096
		st, ino, _ := tree.LstatInode("big")
		if !s.NeedsRange("big", off, off+4096) {
			f.WriteAt(page, off)
			continue
		}
		c := ckpt.Capture{Path: "big", Prior: st, Inode: ino, Range: &ckpt.ByteRange{Off: off, End: off + 4096},
			Open: func() (*os.File, error) { return tree.Open("big") }}
		if err := s.Record(c, ckpt.Program{Comm: "test"}); err != nil {
			b.Fatal(err)
		}
		f.WriteAt(page, off)
	}
	if _, err := s.End(""); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		cs, err := s.TurnChanges(turn.Num, tree)
		if err != nil || len(cs) != 1 {
			b.Fatal(err, len(cs))
		}
	}
}

// BenchmarkRangeCapture measures fio's pass as the store sees it: 4 KiB
// writes at random blocks of a 256 MiB file, each first write of a block
// recorded as a range capture (what a daemon-served write pays).
func BenchmarkRangeCapture(b *testing.B) {
	s, tree, root := offlineFixture(b)
	p := root + "/big"
	f, _ := os.Create(p)
	defer f.Close()
	const size = 64 << 20
	f.Truncate(size)
	page := make([]byte, 4096)
	for i := 0; i < b.N; i++ {
		s.Begin(ckpt.KindAgent, "t", "")
		rng := rand.New(rand.NewPCG(1, uint64(i)))
		st, ino, _ := tree.LstatInode("big")
		for _, blk := range rng.Perm(size / 4096) {
			off := int64(blk) * 4096
			if s.NeedsRange("big", off, off+4096) {
				c := ckpt.Capture{Path: "big", Prior: st, Inode: ino, Range: &ckpt.ByteRange{Off: off, End: off + 4096}, ReadAt: f.ReadAt}
				if err := s.Record(c, ckpt.Program{Comm: "test"}); err != nil {
					b.Fatal(err)
				}
			}
			f.WriteAt(page, off)
		}
		if _, err := s.End(""); err != nil {
			b.Fatal(err)
		}
	}
}
