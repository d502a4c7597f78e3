package tests

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"ckptfs/turnctl"
)

// TestRandomDifferential is an fsx-style differential tester: seeded random
// operations (reads and writes at offsets, appends, truncates, writes
// through shared mmap, fallocate, copy_file_range, long-lived descriptors
// (reopened after the kernel was made to forget its inodes, as fsx -c),
// renames with NOREPLACE and EXCHANGE, hard links (of files, symlinks and
// sockets alike), symlinks, sockets, mkdir, rmdir, chmod, stat, readdir)
// are applied to a plain directory and through a ckptfs mount side by
// side; every operation must return the same error, the same count and
// the same bytes, and the trees must match. Several workers run at once,
// each in its own subdirectory. The run is split into phases, each a
// turn; at the end every turn is rewound to and compared with the plain
// tree as it was then. Files of 8 KiB and more are range-captured.
// CKPTFS_SEED reproduces a run.
//
// make test runs a few thousand operations; make test-long a million.
func TestRandomDifferential(t *testing.T) {
	seed := testSeed(t)
	workers := scale(t, 2, 4)
	if n, err := strconv.Atoi(os.Getenv("CKPTFS_FSX_WORKERS")); err == nil && n > 0 {
		workers = n // a worker's operations depend only on the seed and its index
	}
	phases := scale(t, 3, 10)
	perPhase := scale(t, 2000, 25000) // per worker: 12,000 ops fast, 1,000,000 long
	plain, dir := t.TempDir(), t.TempDir()
	// Files of 8 KiB and more (the workers' go up to 12 KB) are
	// range-captured, smaller ones whole: both ways every run.
	t.Setenv("CKPTFS_RANGE_MIN", "8192")
	m := mountProject(t, dir)
	c := control(t, m)
	ctx := context.Background()

	ws := make([]*fsxWorker, workers)
	for i := range ws {
		ws[i] = newFsxWorker(seed+int64(i), fmt.Sprintf("w%d", i), [2]string{plain, dir})
		for _, root := range []string{plain, dir} {
			if err := os.Mkdir(filepath.Join(root, ws[i].sub), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Cleanup(func() {
		for _, w := range ws {
			w.closeAll()
		}
	})
	states := map[uint64]map[string]entry{}
	start := time.Now()
	for p := 0; p < phases; p++ {
		if _, err := c.Begin(ctx, turnctl.BeginRequest{Label: fmt.Sprintf("phase %d", p)}); err != nil {
			t.Fatalf("begin: %v", err)
		}
		var wg sync.WaitGroup
		errs := make([]error, workers)
		for i, w := range ws {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = w.run(perPhase)
			}()
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatalf("%v (seed %d)", err, seed)
			}
		}
		end, err := c.End(ctx, turnctl.EndRequest{})
		if err != nil {
			t.Fatalf("end: %v", err)
		}
		s := snapshot(t, plain, nil, nil)
		diffTrees(t, s, snapshot(t, dir, []string{".ckptfs"}, nil))
		if t.Failed() {
			t.Fatalf("phase %d: the trees differ (seed %d)", p, seed)
		}
		states[end.Turn.Num] = s
	}
	total, counts := 0, map[string]int{}
	for _, w := range ws {
		w.closeAll()
		for k, v := range w.counts {
			counts[k] += v
			total += v
		}
	}
	t.Logf("%d operations by %d workers in %v: %v", total, workers, time.Since(start).Round(time.Millisecond), counts)

	// Every phase's turn rewinds to the plain tree of its end, in random order.
	var turns []uint64
	for n := range states {
		turns = append(turns, n)
	}
	sort.Slice(turns, func(i, j int) bool { return turns[i] < turns[j] })
	last := turns[len(turns)-1]
	rng := rand.New(rand.NewSource(seed))
	rng.Shuffle(len(turns), func(i, j int) { turns[i], turns[j] = turns[j], turns[i] })
	for _, n := range append(turns, last) {
		if _, err := c.Rewind(ctx, turnctl.RewindRequest{Turn: fmt.Sprint(n)}); err != nil {
			t.Fatalf("rewind %d: %v", n, err)
		}
		diffTrees(t, states[n], snapshot(t, dir, []string{".ckptfs"}, nil))
		if t.Failed() {
			t.Fatalf("after rewind to turn %d (seed %d)", n, seed)
		}
	}
	m.Unmount(t)
	diffTrees(t, states[last], snapshot(t, dir, []string{".ckptfs"}, nil))
}

func errnoOf(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	var e syscall.Errno
	if errors.As(err, &e) {
		return e
	}
	return syscall.EIO
}

// fsxResult is what one operation returned: compared between the roots.
type fsxResult struct {
	Errno syscall.Errno
	N     int
	Data  string // bytes read, a listing, a stat
}

// fsxWorker applies random operations under sub/ of two roots (0: plain,
// 1: ckptfs), with a few long-lived descriptors per root.
type fsxWorker struct {
	rng    *rand.Rand
	sub    string
	roots  [2]string
	names  []string
	fds    [2][3]int // per root, per slot; -1: closed
	counts map[string]int
	n      int
	trace  bool // CKPTFS_FSX_TRACE=<sub> prints every operation
}

func newFsxWorker(seed int64, sub string, roots [2]string) *fsxWorker {
	w := &fsxWorker{rng: rand.New(rand.NewSource(seed)), sub: sub, roots: roots, counts: map[string]int{},
		trace: os.Getenv("CKPTFS_FSX_TRACE") == sub,
		names: []string{"a", "b", "c", "d/a", "d/b", "d/e/a", "e", "e/f", "d/e", "f/g/h"}}
	for r := range w.fds {
		for s := range w.fds[r] {
			w.fds[r][s] = -1
		}
	}
	return w
}

func (w *fsxWorker) pick() string { return w.names[w.rng.Intn(len(w.names))] }

// run applies n operations to both roots and returns the first difference.
func (w *fsxWorker) run(n int) error {
	for i := 0; i < n; i++ {
		op, args, fn := w.randomOp()
		r0 := fn(0, filepath.Join(w.roots[0], w.sub))
		r1 := fn(1, filepath.Join(w.roots[1], w.sub))
		if w.trace {
			fmt.Println(w.n+1, op, args, short(r0), short(r1))
		}
		w.counts[op]++
		w.n++
		if r0 != r1 {
			return fmt.Errorf("%s op %d %s %v: plain %+v, ckptfs %+v", w.sub, w.n, op, args, short(r0), short(r1))
		}
	}
	return nil
}

func short(r fsxResult) fsxResult {
	if len(r.Data) > 200 {
		r.Data = r.Data[:200] + "..."
	}
	return r
}

func (w *fsxWorker) closeAll() {
	for r := range w.fds {
		for s, fd := range w.fds[r] {
			if fd >= 0 {
				unix.Close(fd)
				w.fds[r][s] = -1
			}
		}
	}
}

func res(err error) fsxResult { return fsxResult{Errno: errnoOf(err)} }

// randomOp returns an operation as a name, its arguments and a function
// applying it under one root (ri: which root, for the descriptor slots).
func (w *fsxWorker) randomOp() (string, []any, func(ri int, root string) fsxResult) {
	rng := w.rng
	pick := w.pick
	k := rng.Intn(27)
	switch k {
	case 0, 1, 2:
		p, off, n := pick(), rng.Intn(9000), rng.Intn(5000)
		data := make([]byte, n)
		rng.Read(data)
		mode := uint32(0o600 + rng.Intn(0o200))
		return "write", []any{p, off, n}, func(_ int, root string) fsxResult {
			fd, err := unix.Open(filepath.Join(root, p), unix.O_WRONLY|unix.O_CREAT, mode)
			if err != nil {
				return res(err)
			}
			defer unix.Close(fd)
			k, err := unix.Pwrite(fd, data, int64(off))
			return fsxResult{Errno: errnoOf(err), N: k}
		}
	case 3:
		p := pick()
		data := []byte(fmt.Sprintf("appended %d\n", rng.Int()))
		return "append", []any{p}, func(_ int, root string) fsxResult {
			f, err := os.OpenFile(filepath.Join(root, p), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
			if err != nil {
				return res(err)
			}
			defer f.Close()
			k, err := f.Write(data)
			return fsxResult{Errno: errnoOf(err), N: k}
		}
	case 4, 5, 6:
		p, off, n := pick(), rng.Intn(12000), rng.Intn(6000)
		return "read", []any{p, off, n}, func(_ int, root string) fsxResult {
			fd, err := unix.Open(filepath.Join(root, p), unix.O_RDONLY, 0)
			if err != nil {
				return res(err)
			}
			defer unix.Close(fd)
			buf := make([]byte, n)
			k, err := unix.Pread(fd, buf, int64(off))
			if k < 0 {
				k = 0
			}
			return fsxResult{Errno: errnoOf(err), N: k, Data: string(buf[:k])}
		}
	case 7:
		p, sz := pick(), int64(rng.Intn(12000))
		return "truncate", []any{p, sz}, func(_ int, root string) fsxResult {
			return res(unix.Truncate(filepath.Join(root, p), sz))
		}
	case 8:
		p := pick()
		return "otrunc", []any{p}, func(_ int, root string) fsxResult {
			fd, err := unix.Open(filepath.Join(root, p), unix.O_WRONLY|unix.O_TRUNC, 0)
			if err == nil {
				unix.Close(fd)
			}
			return res(err)
		}
	case 9, 10:
		p, r1, r2, doSync := pick(), rng.Int(), rng.Intn(6000), rng.Intn(2) == 0
		data := make([]byte, 6000)
		rng.Read(data)
		return "mmap-write", []any{p, r1, r2, doSync}, func(_ int, root string) (r fsxResult) {
			fd, err := unix.Open(filepath.Join(root, p), unix.O_RDWR, 0)
			if err != nil {
				return res(err)
			}
			defer unix.Close(fd)
			var st unix.Stat_t
			if err := unix.Fstat(fd, &st); err != nil {
				return res(err)
			}
			size := int(st.Size)
			if size == 0 {
				return fsxResult{Data: "empty"}
			}
			mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
			if err != nil {
				return res(err)
			}
			off := r1 % size
			// Another worker on the same tree may truncate the file under
			// the mapping: the fault is a result, not a crash.
			defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
			defer func() {
				if recover() != nil {
					unix.Munmap(mem)
					r = fsxResult{Data: "fault"}
				}
			}()
			k := copy(mem[off:], data[:r2])
			if doSync {
				err = unix.Msync(mem, unix.MS_SYNC)
			}
			unix.Munmap(mem)
			return fsxResult{Errno: errnoOf(err), N: k}
		}
	case 11:
		p, mode, off, n := pick(), rng.Intn(3), int64(rng.Intn(10000)), int64(1+rng.Intn(6000))
		modes := []uint32{unix.FALLOC_FL_KEEP_SIZE, unix.FALLOC_FL_PUNCH_HOLE | unix.FALLOC_FL_KEEP_SIZE, unix.FALLOC_FL_ZERO_RANGE}
		return "fallocate", []any{p, mode, off, n}, func(_ int, root string) fsxResult {
			fd, err := unix.Open(filepath.Join(root, p), unix.O_WRONLY, 0)
			if err != nil {
				return res(err)
			}
			defer unix.Close(fd)
			return res(unix.Fallocate(fd, modes[mode], off, n))
		}
	case 12:
		a, b, offIn, offOut, n := pick(), pick(), int64(rng.Intn(8000)), int64(rng.Intn(8000)), rng.Intn(6000)
		return "copy_file_range", []any{a, b, offIn, offOut, n}, func(_ int, root string) fsxResult {
			in, err := unix.Open(filepath.Join(root, a), unix.O_RDONLY, 0)
			if err != nil {
				return res(err)
			}
			defer unix.Close(in)
			out, err := unix.Open(filepath.Join(root, b), unix.O_WRONLY|unix.O_CREAT, 0o644)
			if err != nil {
				return res(err)
			}
			defer unix.Close(out)
			// Copies: copy_file_range advances the offsets it is given,
			// and this function runs once per root.
			oi, oo := offIn, offOut
			k, err := unix.CopyFileRange(in, &oi, out, &oo, n, 0)
			return fsxResult{Errno: errnoOf(err), N: k}
		}
	case 13, 14:
		a, b := pick(), pick()
		flags := uint(0)
		switch rng.Intn(5) {
		case 0:
			flags = unix.RENAME_NOREPLACE
		case 1:
			flags = unix.RENAME_EXCHANGE
		}
		return "rename", []any{a, b, flags}, func(_ int, root string) fsxResult {
			return res(unix.Renameat2(unix.AT_FDCWD, filepath.Join(root, a), unix.AT_FDCWD, filepath.Join(root, b), flags))
		}
	case 15:
		p := pick()
		return "unlink", []any{p}, func(_ int, root string) fsxResult {
			return res(unix.Unlink(filepath.Join(root, p)))
		}
	case 16:
		p, mode := pick(), uint32(0o700+rng.Intn(0o100))
		return "mkdir", []any{p}, func(_ int, root string) fsxResult {
			return res(unix.Mkdir(filepath.Join(root, p), mode))
		}
	case 17:
		p := pick()
		return "rmdir", []any{p}, func(_ int, root string) fsxResult {
			return res(unix.Rmdir(filepath.Join(root, p)))
		}
	case 18:
		p, mode := pick(), uint32(rng.Intn(0o1000))|0o700
		return "chmod", []any{p, mode}, func(_ int, root string) fsxResult {
			return res(unix.Fchmodat(unix.AT_FDCWD, filepath.Join(root, p), mode, 0))
		}
	case 19:
		p, target := pick(), pick()
		return "symlink", []any{target, p}, func(_ int, root string) fsxResult {
			return res(unix.Symlink(target, filepath.Join(root, p)))
		}
	case 20:
		a, b := pick(), pick()
		return "link", []any{a, b}, func(_ int, root string) fsxResult {
			return res(unix.Linkat(unix.AT_FDCWD, filepath.Join(root, a), unix.AT_FDCWD, filepath.Join(root, b), 0))
		}
	case 21:
		p := pick()
		return "stat", []any{p}, func(_ int, root string) fsxResult {
			var st unix.Stat_t
			if err := unix.Lstat(filepath.Join(root, p), &st); err != nil {
				return res(err)
			}
			s := fmt.Sprintf("mode %o", st.Mode)
			if st.Mode&unix.S_IFMT == unix.S_IFREG {
				s += fmt.Sprintf(" size %d nlink %d", st.Size, st.Nlink)
			}
			return fsxResult{Data: s}
		}
	case 22:
		p := pick()
		if rng.Intn(3) == 0 {
			p = "."
		}
		return "readdir", []any{p}, func(_ int, root string) fsxResult {
			ents, err := os.ReadDir(filepath.Join(root, p))
			var names []string
			for _, e := range ents {
				names = append(names, fmt.Sprintf("%s:%v", e.Name(), e.Type()))
			}
			return fsxResult{Errno: errnoOf(err), Data: strings.Join(names, ",")}
		}
	case 25:
		// A socket's inode: one opens as nothing (ENXIO) through any
		// operation here, unlike a FIFO (an open blocks) or a device.
		p, mode := pick(), uint32(0o600+rng.Intn(0o100))
		return "mksock", []any{p, mode}, func(_ int, root string) fsxResult {
			return res(unix.Mknod(filepath.Join(root, p), unix.S_IFSOCK|mode, 0))
		}
	case 23:
		slot, p, drop := rng.Intn(3), pick(), rng.Intn(2) == 0
		flags := []int{unix.O_RDONLY, unix.O_RDWR, unix.O_RDWR | unix.O_CREAT}[rng.Intn(3)]
		return "fd-open", []any{slot, p, flags, drop}, func(ri int, root string) fsxResult {
			if fd := w.fds[ri][slot]; fd >= 0 {
				unix.Close(fd)
				w.fds[ri][slot] = -1
			}
			if drop && ri == 1 {
				// fsx's close/open mode: the kernel forgets the inode
				// between the close and the open.
				if err := dropCaches(); err != nil {
					return fsxResult{Data: err.Error()}
				}
			}
			fd, err := unix.Open(filepath.Join(root, p), flags, 0o644)
			if err != nil {
				return res(err)
			}
			w.fds[ri][slot] = fd
			return fsxResult{}
		}
	case 24:
		slot, off, n, trunc := rng.Intn(3), rng.Intn(10000), rng.Intn(4000), rng.Intn(4) == 0
		data := make([]byte, n)
		rng.Read(data)
		return "fd-write", []any{slot, off, n, trunc}, func(ri int, root string) fsxResult {
			fd := w.fds[ri][slot]
			if fd < 0 {
				return fsxResult{Data: "closed"}
			}
			if trunc {
				return res(unix.Ftruncate(fd, int64(off)))
			}
			k, err := unix.Pwrite(fd, data, int64(off))
			return fsxResult{Errno: errnoOf(err), N: k}
		}
	default:
		slot, off, n, closeIt := rng.Intn(3), rng.Intn(10000), rng.Intn(4000), rng.Intn(3) == 0
		return "fd-read", []any{slot, off, n, closeIt}, func(ri int, root string) fsxResult {
			fd := w.fds[ri][slot]
			if fd < 0 {
				return fsxResult{Data: "closed"}
			}
			if closeIt {
				w.fds[ri][slot] = -1
				return res(unix.Close(fd))
			}
			buf := make([]byte, n)
			k, err := unix.Pread(fd, buf, int64(off))
			if k < 0 {
				k = 0
			}
			var st unix.Stat_t
			unix.Fstat(fd, &st)
			return fsxResult{Errno: errnoOf(err), N: k, Data: fmt.Sprintf("size %d %s", st.Size, buf[:k])}
		}
	}
}
