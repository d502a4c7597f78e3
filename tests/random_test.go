package tests

import (
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestRandomDifferential applies the same seeded random operations to a
// plain directory and through a ckptfs mount; every operation must return
// the same error, and the final trees must match.
// CKPTFS_SEED reproduces a run.
func TestRandomDifferential(t *testing.T) {
	seed := time.Now().UnixNano()
	if s := os.Getenv("CKPTFS_SEED"); s != "" {
		seed, _ = strconv.ParseInt(s, 10, 64)
	}
	t.Logf("seed %d (CKPTFS_SEED=%d reproduces)", seed, seed)
	plain, dir := t.TempDir(), t.TempDir()
	m := mountProject(t, dir)

	rng := rand.New(rand.NewSource(seed))
	names := []string{"a", "b", "c", "d/a", "d/b", "d/e/a", "e", "e/f", "d/e"}
	pick := func() string { return names[rng.Intn(len(names))] }
	const ops = 1500
	for i := 0; i < ops; i++ {
		op, args, fn := randomOp(rng, pick)
		e1 := fn(plain)
		e2 := fn(dir)
		if e1 != e2 {
			t.Fatalf("op %d %s %v: plain %v, ckptfs %v (seed %d)", i, op, args, e1, e2, seed)
		}
	}
	diffTrees(t, snapshot(t, plain, nil, nil), snapshot(t, dir, []string{".ckptfs"}, nil))
	m.Unmount(t)
	diffTrees(t, snapshot(t, plain, nil, nil), snapshot(t, dir, []string{".ckptfs"}, nil))
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

// randomOp returns an operation on one root, as a name, its arguments and
// a function applying it under root.
func randomOp(rng *rand.Rand, pick func() string) (string, []any, func(root string) syscall.Errno) {
	switch rng.Intn(13) {
	case 0, 1:
		p, off, n := pick(), rng.Intn(9000), rng.Intn(5000)
		data := make([]byte, n)
		rng.Read(data)
		mode := uint32(0o600 + rng.Intn(0o200))
		return "write", []any{p, off, n}, func(root string) syscall.Errno {
			fd, err := unix.Open(filepath.Join(root, p), unix.O_WRONLY|unix.O_CREAT, mode)
			if err != nil {
				return errnoOf(err)
			}
			defer unix.Close(fd)
			_, err = unix.Pwrite(fd, data, int64(off))
			return errnoOf(err)
		}
	case 2:
		p := pick()
		data := []byte(fmt.Sprintf("appended %d\n", rng.Int()))
		return "append", []any{p}, func(root string) syscall.Errno {
			f, err := os.OpenFile(filepath.Join(root, p), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
			if err != nil {
				return errnoOf(err)
			}
			defer f.Close()
			_, err = f.Write(data)
			return errnoOf(err)
		}
	case 3:
		p, sz := pick(), int64(rng.Intn(12000))
		return "truncate", []any{p, sz}, func(root string) syscall.Errno {
			return errnoOf(unix.Truncate(filepath.Join(root, p), sz))
		}
	case 4:
		p := pick()
		return "otrunc", []any{p}, func(root string) syscall.Errno {
			fd, err := unix.Open(filepath.Join(root, p), unix.O_WRONLY|unix.O_TRUNC, 0)
			if err == nil {
				unix.Close(fd)
			}
			return errnoOf(err)
		}
	case 5, 6:
		a, b := pick(), pick()
		flags := uint(0)
		switch rng.Intn(5) {
		case 0:
			flags = unix.RENAME_NOREPLACE
		case 1:
			flags = unix.RENAME_EXCHANGE
		}
		return "rename", []any{a, b, flags}, func(root string) syscall.Errno {
			return errnoOf(unix.Renameat2(unix.AT_FDCWD, filepath.Join(root, a), unix.AT_FDCWD, filepath.Join(root, b), flags))
		}
	case 7:
		p := pick()
		return "unlink", []any{p}, func(root string) syscall.Errno {
			return errnoOf(unix.Unlink(filepath.Join(root, p)))
		}
	case 8:
		p, mode := pick(), uint32(0o700+rng.Intn(0o100))
		return "mkdir", []any{p}, func(root string) syscall.Errno {
			return errnoOf(unix.Mkdir(filepath.Join(root, p), mode))
		}
	case 9:
		p := pick()
		return "rmdir", []any{p}, func(root string) syscall.Errno {
			return errnoOf(unix.Rmdir(filepath.Join(root, p)))
		}
	case 10:
		p, mode := pick(), uint32(rng.Intn(0o1000))|0o700
		return "chmod", []any{p, mode}, func(root string) syscall.Errno {
			return errnoOf(unix.Fchmodat(unix.AT_FDCWD, filepath.Join(root, p), mode, 0))
		}
	case 11:
		p, target := pick(), pick()
		return "symlink", []any{target, p}, func(root string) syscall.Errno {
			return errnoOf(unix.Symlink(target, filepath.Join(root, p)))
		}
	default:
		a, b := pick(), pick()
		return "link", []any{a, b}, func(root string) syscall.Errno {
			return errnoOf(unix.Linkat(unix.AT_FDCWD, filepath.Join(root, a), unix.AT_FDCWD, filepath.Join(root, b), 0))
		}
	}
}
