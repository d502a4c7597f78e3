package versionstore

import (
	"fmt"
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
