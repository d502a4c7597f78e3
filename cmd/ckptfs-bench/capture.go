package main

// The big-file capture figure (doc/BENCH.md, "Big-file capture"): the
// first 4 KiB write of a turn into a big file and into a 1 MiB file, on
// C (the work directory's filesystem: on ext4 the capture copies the
// file into the store) and on Cx, ckptfs over a project on a loop-mounted
// XFS image made with reflink=1 (the capture clones it into the attic);
// then, on C, the rewind, log -S and revert of such a turn, and the read
// of a file as it was before a turn that wrote all of it at random.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// xfsMount is a loop-mounted XFS image, registered as a target so that
// the bench's cleanup unmounts it after the ckptfs mount above it.
type xfsMount struct {
	dir  string
	once sync.Once
	err  error
}

func (x *xfsMount) Name() string                    { return "xfs" }
func (x *xfsMount) Dir() string                     { return x.dir }
func (x *xfsMount) DaemonPID() int                  { return 0 }
func (x *xfsMount) Begin(ctx context.Context) error { return nil }
func (x *xfsMount) End(ctx context.Context) error   { return nil }

// Close unmounts the image (lazily if it stays busy); the loop device
// goes with it (mount -o loop sets autoclear).
func (x *xfsMount) Close() error {
	x.once.Do(func() {
		for i := 0; i < 50; i++ {
			if x.err = syscall.Unmount(x.dir, 0); x.err != syscall.EBUSY {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if x.err == syscall.EINVAL {
			x.err = nil // not mounted
		}
		if x.err != nil {
			x.err = errors.Join(fmt.Errorf("xfs: umount %s: %v", x.dir, x.err), syscall.Unmount(x.dir, syscall.MNT_DETACH))
		}
	})
	return x.err
}

// mountXFS makes a sparse XFS image of size bytes, made with reflink=1,
// at base/xfs.img, mounts it on base/mnt and registers it for cleanup.
func mountXFS(ctx context.Context, b *bench, base string, size int64) (*xfsMount, error) {
	mkfs, err := exec.LookPath("mkfs.xfs")
	if err != nil {
		if _, serr := os.Stat("/usr/sbin/mkfs.xfs"); serr != nil {
			return nil, errors.New("mkfs.xfs not found (apt-get install xfsprogs)")
		}
		mkfs = "/usr/sbin/mkfs.xfs"
	}
	img, mnt := filepath.Join(base, "xfs.img"), filepath.Join(base, "mnt")
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		return nil, err
	}
	f, err := os.Create(img)
	if err != nil {
		return nil, err
	}
	err = f.Truncate(size)
	f.Close()
	if err != nil {
		return nil, err
	}
	if _, err := command(ctx, "", nil, mkfs, "-q", "-f", "-m", "reflink=1", img); err != nil {
		return nil, err
	}
	if _, err := command(ctx, "", nil, "mount", "-o", "loop", img, mnt); err != nil {
		return nil, err
	}
	x := &xfsMount{dir: mnt}
	b.register(x)
	return x, nil
}

// startXFSCkptfs makes a sparse XFS image of size bytes under WORK/Cx,
// mounts it, and mounts ckptfs over a project directory on it (the store
// in DIR/.ckptfs, so on XFS too): Cx.
func startXFSCkptfs(ctx context.Context, b *bench, size int64) (*ckptfsTarget, *xfsMount, error) {
	base := filepath.Join(b.o.work, "Cx")
	x, err := mountXFS(ctx, b, base, size)
	if err != nil {
		return nil, nil, err
	}
	c, err := ckptfsOver(ctx, b, filepath.Join(x.dir, "dir"), filepath.Join(base, "daemon.log"), "Cx")
	if err != nil {
		x.Close()
		return nil, nil, err
	}
	return c, x, nil
}

// ckptfsOver makes dir and mounts ckptfs (root's) over it with the store
// in its default place, dir/.ckptfs, on the same filesystem; name names
// the configuration.
func ckptfsOver(ctx context.Context, b *bench, dir, log, name string) (*ckptfsTarget, error) {
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, err
	}
	c := &ckptfsTarget{b: b, store: filepath.Join(dir, ".ckptfs"), inTree: true}
	c.daemon = daemon{name: name, mnt: dir, cmd: exec.Command(b.o.ckptfs, "mount", "-f", dir), log: log}
	c.unmount = func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if out, err := exec.CommandContext(ctx, b.o.ckptfs, "umount", dir).CombinedOutput(); err != nil {
			return fmt.Errorf("%s: ckptfs umount: %v: %s", name, err, out)
		}
		return nil
	}
	if err := c.launch(ctx, b, c); err != nil {
		return nil, err
	}
	return c, nil
}

// capture times the first 4 KiB write of a turn (open, pwrite, close)
// into a file of the sequential size (1 GiB; --quick 256 MiB) and into a
// 1 MiB file, on C and on Cx side by side, each repetition a turn of its
// own so that each write captures the file anew. The files were written
// just before, so a copy reads them from the page cache. It also records
// the space the first capture of each took: du -sb of C's store (its
// chunks), the free space of Cx's filesystem (a clone shares the file's
// blocks, which du would count in full).
func (h *history) capture(ctx context.Context) error {
	big := h.b.sz.seqBytes
	cx, x, err := startXFSCkptfs(ctx, h.b, 3*big+(512<<20))
	if err != nil {
		h.b.note("capture: Cx (XFS with reflinks) unavailable: %v", err)
	} else {
		defer x.Close()
		defer cx.Close()
	}
	type side struct {
		config string
		t      *ckptfsTarget
		dir    string
		used   func() (int64, error) // space used so far, by the store or the filesystem
	}
	sides := []side{{"C", h.c, h.p("capture"), func() (int64, error) { return duBytes(ctx, h.c.store) }}}
	if cx != nil {
		fs := filepath.Dir(cx.Dir())
		sides = append(sides, side{"Cx", cx, filepath.Join(cx.Dir(), "capture"), func() (int64, error) { return fsUsed(fs) }})
	}
	// settled is the space used once the daemon is idle and synced.
	settled := func(s side) (int64, error) {
		syscall.Sync()
		h.idleOn(s.t)
		return s.used()
	}
	files := []struct {
		name string
		size int64
	}{{sizeLabel(big), big}, {"1 MiB", 1 << 20}}
	for _, s := range sides {
		if err := os.MkdirAll(s.dir, 0o755); err != nil {
			return err
		}
		if err := s.t.Begin(ctx); err != nil {
			return err
		}
		for i, f := range files {
			if err := writeRandom(filepath.Join(s.dir, fmt.Sprint(i)), f.size, uint64(20+i), false); err != nil {
				return err
			}
		}
		if err := s.t.End(ctx); err != nil {
			return err
		}
	}
	stored := map[string][]int64{} // by side: the first capture's space, per file
	block := make([]byte, 4096)
	for rep := 0; rep < h.reps; rep++ {
		for i, f := range files {
			for _, s := range sides {
				var before int64
				if before, err = settled(s); err != nil {
					return err
				}
				if err := s.t.Begin(ctx); err != nil {
					return err
				}
				p := filepath.Join(s.dir, fmt.Sprint(i))
				off := int64(rep) * 8192 % f.size
				sm, err := timedOn(s.t, func() error { return pwrite(p, block, off) })
				if err != nil {
					return err
				}
				if err := s.t.End(ctx); err != nil {
					return err
				}
				h.record(captureStep(f.name), s.config, sm)
				if rep == 0 {
					after, err := settled(s)
					if err != nil {
						return err
					}
					how := "du -sb of the store"
					if s.config == "Cx" {
						how = "XFS, reflink=1: statfs"
					}
					st := h.noteStored(fmt.Sprintf("first 4 KiB write of a turn into a %s file [%s; %s]", f.name, s.config, how), 4096, after-before)
					stored[s.config] = append(stored[s.config], st.Stored)
				}
			}
		}
	}
	// On C, per repetition: a turn's 4 KiB write into the big file and
	// the rewind to before it; then a turn that writes a text into the
	// file, log -S finding that turn (the newest), and the revert of it.
	// Each compares or writes the versions only where the turn wrote.
	// (Cx's store, on a small image, counts its clones at their full
	// size: its retention policy forgets the turn before.)
	c := sides[0]
	writeTurn := func(b []byte, off int64) (int, error) {
		t, err := h.beginTurn(ctx) // on C
		if err != nil {
			return 0, err
		}
		if err := pwrite(filepath.Join(c.dir, "0"), b, off); err != nil {
			return 0, err
		}
		return t, c.t.End(ctx)
	}
	timed := func(step string, args ...string) (out string, err error) {
		sm, err := timedOn(c.t, func() error {
			out, err = h.b.turnctlCmd(ctx, c.t.Dir(), args...)
			return err
		})
		if err == nil {
			h.record(step, c.config, sm)
		}
		return out, err
	}
	grown := func(what string, before int64) error {
		after, err := settled(c)
		if err == nil {
			h.noteStored(fmt.Sprintf("%s of a 4 KiB write into a %s file (both turns) [%s]", what, files[0].name, c.config), 4096, after-before)
		}
		return err
	}
	for rep := 0; rep < h.reps; rep++ {
		before, err := settled(c)
		if err != nil {
			return err
		}
		t, err := writeTurn(block, int64(rep+1)*(1<<20))
		if err != nil {
			return err
		}
		if _, err := timed(rewindStep(files[0].name), "rewind", "--quiet", strconv.Itoa(t-1)); err != nil {
			return err
		}
		if rep == 0 {
			if err := grown("rewind", before); err != nil {
				return err
			}
		}
		if before, err = settled(c); err != nil {
			return err
		}
		text := fmt.Sprintf("ckptfs-bench pickaxe %d;", rep)
		if t, err = writeTurn(append([]byte(text), block[len(text):]...), int64(rep+1)*(3<<20)); err != nil {
			return err
		}
		out, err := timed(pickaxeStep(files[0].name), "--json", "log", "-n", "1", "-S", text)
		if err != nil {
			return err
		}
		var reply struct {
			Turns []struct {
				Num int `json:"num"`
			} `json:"turns"`
		}
		if json.Unmarshal([]byte(out), &reply) != nil || len(reply.Turns) != 1 || reply.Turns[0].Num != t {
			return fmt.Errorf("log -S %q did not find turn %d: %s", text, t, out)
		}
		if _, err := timed(revertStep(files[0].name), "revert", "--quiet", strconv.Itoa(t)); err != nil {
			return err
		}
		if rep == 0 {
			if err := grown("revert", before); err != nil {
				return err
			}
		}
	}
	// On C: a turn of random 4 KiB writes over all of a 64 MiB file (a
	// range record per write until its 256 KiB regions fill: thousands
	// of layers), then turnctl cat of the file as it was before the
	// turn, checked against its bytes then.
	if err := h.catOfManyLayers(ctx, c.dir); err != nil {
		return err
	}
	for _, s := range sides {
		r := captureRow{Config: s.config, Big: files[0].name}
		r.BigS = summarizeSamples(h.b.res.historyRow(captureStep(files[0].name)).Samples[s.config])
		r.SmallS = summarizeSamples(h.b.res.historyRow(captureStep(files[1].name)).Samples[s.config])
		r.Ratio, _ = ratio(r.BigS.Median, r.SmallS.Median)
		if st := stored[s.config]; len(st) == 2 {
			r.BigStored, r.SmallStored = st[0], st[1]
		}
		h.b.res.Capture = append(h.b.res.Capture, r)
	}
	return nil
}

// catOfManyLayers is the last part of the capture figure (see there).
func (h *history) catOfManyLayers(ctx context.Context, dir string) error {
	t := h.c
	const size, block = 64 << 20, 4096
	p := filepath.Join(dir, "layers")
	for rep := 0; rep < h.reps; rep++ {
		if err := t.Begin(ctx); err != nil {
			return err
		}
		if err := writeRandom(p, size, uint64(40+rep), false); err != nil {
			return err
		}
		if err := t.End(ctx); err != nil {
			return err
		}
		want, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		n, err := h.beginTurn(ctx)
		if err != nil {
			return err
		}
		f, err := os.OpenFile(p, os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		rng := rand.New(rand.NewPCG(uint64(rep), 41))
		buf := make([]byte, block)
		for i, k := range rng.Perm(size / block) {
			buf[0], buf[1] = byte(i), byte(i>>8)
			if _, err := f.WriteAt(buf, int64(k)*block); err != nil {
				f.Close()
				return err
			}
		}
		if err := f.Close(); err != nil {
			return err
		}
		if err := t.End(ctx); err != nil {
			return err
		}
		var got string
		sm, err := timedOn(t, func() error {
			got, err = h.b.turnctlCmd(ctx, dir, "cat", strconv.Itoa(n-1), "layers")
			return err
		})
		if err != nil {
			return err
		}
		if got != string(want) {
			return fmt.Errorf("turnctl cat %d layers: %d bytes, not the file's %d before turn %d", n-1, len(got), len(want), n)
		}
		h.record(manyLayersStep, "C", sm)
	}
	return nil
}

const manyLayersStep = "cat of a 64 MiB file before a turn of random 4 KiB writes over all of it"

// noteStored adds a row to the bytes-stored figure.
func (h *history) noteStored(op string, changed, stored int64) storedRow {
	st := storedRow{Op: op, Changed: changed, Stored: stored}
	st.PerByte = float64(st.Stored) / float64(st.Changed)
	h.b.res.Stored = append(h.b.res.Stored, st)
	h.b.logf("history  stored: %s: %d bytes", st.Op, st.Stored)
	return st
}

func captureStep(file string) string { return "first 4 KiB write of a turn into a " + file + " file" }

func rewindStep(file string) string { return "rewind of a turn's 4 KiB write into a " + file + " file" }

func pickaxeStep(file string) string {
	return "log -S of a text a turn wrote into a " + file + " file"
}

func revertStep(file string) string { return "revert of a turn's 4 KiB write into a " + file + " file" }

// timedOn runs fn and charges t's daemon CPU to it.
func timedOn(t *ckptfsTarget, fn func() error) (sample, error) {
	pid := t.DaemonPID()
	cpu0 := cpuSeconds(pid)
	start := time.Now()
	if err := fn(); err != nil {
		return sample{}, err
	}
	s := sample{Wall: since(start), CPU: -1}
	if cpu1 := cpuSeconds(pid); cpu0 >= 0 && cpu1 >= 0 {
		s.CPU = cpu1 - cpu0
	}
	return s, nil
}

// idleOn waits until t's daemon has finished what it deferred.
func (h *history) idleOn(t *ckptfsTarget) {
	pid := t.DaemonPID()
	if c := cpuSeconds(pid); c >= 0 {
		settle(pid, c, 30*time.Second)
	}
}

// pwrite opens p for writing, writes b at off in place and closes it.
func pwrite(p string, b []byte, off int64) error {
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(b, off); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// fsUsed is the space used on dir's filesystem.
func fsUsed(dir string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Blocks-st.Bfree) * st.Bsize, nil
}

func sizeLabel(n int64) string {
	if n >= 1<<30 {
		return fmt.Sprintf("%d GiB", n>>30)
	}
	return fmt.Sprintf("%d MiB", n>>20)
}
