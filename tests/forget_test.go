package tests

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// dropCaches asks the kernel to forget every unused dentry and inode
// (machine-wide): the FORGETs it sends race with the lookups of running
// programs, as under memory pressure. No test may depend on the kernel
// keeping an inode that nothing holds: any other test may call this.
func dropCaches() error {
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("2\n"), 0); err != nil {
		return fmt.Errorf("dropping dentries and inodes: %w", err)
	}
	return nil
}

// A LOOKUP that races with the FORGET of the same inode must not hand the
// kernel a node whose backing fd is being closed: the path would then fail
// with ENOENT or EBADF until the kernel forgot the node again.
func TestLookupRacingForgetKeepsTheFileUsable(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"a", "b"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(name), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mountProject(t, dir)
	iters := scale(t, 3000, 20000)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	// Two threads on one file race a lookup with the other's forget; a
	// third on another file keeps its directory's lookups busy.
	for w, name := range []string{"a", "a", "b"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := filepath.Join(dir, name)
			for i := 0; i < iters; i++ {
				f, err := os.Open(p)
				if err == nil {
					var b [8]byte
					n, rerr := f.Read(b[:])
					f.Close()
					if rerr == nil && string(b[:n]) != name {
						rerr = fmt.Errorf("read %q", b[:n])
					}
					err = rerr
				}
				if err == nil {
					_, err = os.Stat(p)
				}
				if err != nil {
					errs <- fmt.Errorf("worker %d, iteration %d: %w", w, i, err)
					return
				}
				if w < 2 {
					if err := dropCaches(); err != nil {
						errs <- err
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	if err := errors.Join(all...); err != nil {
		t.Fatal(err)
	}
}
