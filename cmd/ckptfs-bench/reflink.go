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
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
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
			if err == nil {
				nx, err := newNativeClone(x.dir)
				if err != nil {
					b.failStep(wl, "", "Nx", err)
					break
				}
				b.res.Configs["Nx"] = configInfo{Available: true, Dir: nx.dir, What: nativeCloneWhat}
				ts = append(ts, nx)
			}
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

// nativeCloneWhat describes Nx.
const nativeCloneWhat = "N on the same XFS image, each file of 1 MiB or more cloned aside (FICLONE) at the start of each timed repetition, as C's capture clones it: what copy-on-write itself costs the workload, without FUSE"

// nativeClone is Nx: a plain directory whose big files are cloned aside
// at Begin, the floor of C on a filesystem that clones: every later write
// to a cloned block moves it, and a sync commits the move.
type nativeClone struct {
	dir  string // the workload's directory
	keep string // the clones
}

func newNativeClone(base string) (*nativeClone, error) {
	n := &nativeClone{dir: filepath.Join(base, "Nx"), keep: filepath.Join(base, "Nx.clones")}
	if err := os.Mkdir(n.dir, 0o755); err != nil {
		return nil, err
	}
	return n, nil
}

func (n *nativeClone) Name() string                  { return "Nx" }
func (n *nativeClone) Dir() string                   { return n.dir }
func (n *nativeClone) DaemonPID() int                { return 0 }
func (n *nativeClone) End(ctx context.Context) error { return nil }
func (n *nativeClone) Close() error                  { return os.RemoveAll(n.keep) }

// Begin drops the last repetition's clones and clones every regular file
// of captureMin bytes or more under dir.
func (n *nativeClone) Begin(ctx context.Context) error {
	if err := os.RemoveAll(n.keep); err != nil {
		return err
	}
	if err := os.Mkdir(n.keep, 0o755); err != nil {
		return err
	}
	i := 0
	return filepath.WalkDir(n.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		if fi, err := d.Info(); err != nil || fi.Size() < captureMin {
			return err
		}
		i++
		return cloneFile(p, filepath.Join(n.keep, fmt.Sprint(i)))
	})
}

// captureMin is the size from which ckptfs clones a file where the
// filesystem clones (README, "Big files").
const captureMin = 1 << 20

// cloneFile makes dst a clone of src.
func cloneFile(src, dst string) error {
	return newFileFrom(src, dst, func(in, out *os.File) error {
		return unix.IoctlFileClone(int(out.Fd()), int(in.Fd()))
	})
}
