package main

// Workloads run on a reflink filesystem (issue 16): N, L, L+ and C with
// their directories (and C's store, in its default place DIR/.ckptfs) on a
// loop-mounted XFS image made with reflink=1, where ckptfs captures a file
// of 1 MiB or more by cloning it, and then lets root's mount write it
// through FUSE passthrough. Cu is left out: it has no passthrough, and
// what it costs is measured on ext4.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
)

// runOnXFS runs wl on configurations of its own, made on an XFS image
// under WORK/X, and unmounts them and the image when it ends (the bench's
// cleanup does it too, on failure or Ctrl-C: everything is registered).
func (b *bench) runOnXFS(ctx context.Context, wl *workload) error {
	base := filepath.Join(b.o.work, "X")
	// Each configuration's copy of the file, C's clones, the XFS log; for
	// SQLite, also C's history of a database per turn (sparse image).
	size := 4*b.sz.randBytes + 1<<30
	if wl.global != nil && wl.name == "sqlite-xfs" {
		size = 8 << 30
	}
	x, err := mountXFS(ctx, b, base, size)
	if err != nil {
		return fmt.Errorf("XFS (reflink=1) unavailable: %w", err)
	}
	defer func() {
		if err := x.Close(); err != nil {
			b.logf("%s: %v", wl.name, err)
		}
	}()
	var ts []target
	defer func() {
		for i := len(ts) - 1; i >= 0; i-- {
			if err := ts[i].Close(); err != nil {
				b.logf("%s: %v", wl.name, err)
			}
		}
	}()
	for _, name := range b.o.configs {
		var t target
		var err error
		switch name {
		case "N":
			dir := filepath.Join(x.dir, "N")
			err = os.Mkdir(dir, 0o755)
			t = &native{dir: dir}
		case "L", "L+":
			t, err = startLoopbackIn(b, name, filepath.Join(x.dir, configDirName(name)), nil)
		case "C":
			t, err = ckptfsOver(ctx, b, filepath.Join(x.dir, "C"), filepath.Join(base, "C.log"), "C")
		default:
			continue
		}
		if err != nil {
			b.failStep(wl, "", name, err)
			continue
		}
		ts = append(ts, t)
	}
	if len(ts) == 0 {
		return nil
	}
	return b.runWorkload(ctx, wl, ts)
}
