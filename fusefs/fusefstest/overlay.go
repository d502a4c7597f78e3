// Package fusefstest changes a real directory the way the capturing
// overlay (fusefs) would: it records each path's prior state in the store
// before changing it. Tests of turnctl and cmd/turnctl use it to build a
// history without a FUSE mount.
package fusefstest

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"ckptfs/internal/backing"
	"ckptfs/internal/ckpt"
	"ckptfs/versionstore"
)

// Overlay changes Dir, recording into Store as Comm.
type Overlay struct {
	T     testing.TB
	Dir   string
	Tree  *backing.Tree
	Store *versionstore.Store
	Comm  string
}

// New returns an Overlay on dir (the caller's temporary directory).
func New(t testing.TB, dir string, store *versionstore.Store) *Overlay {
	t.Helper()
	tree, err := backing.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tree.Close() })
	return &Overlay{T: t, Dir: dir, Tree: tree, Store: store, Comm: "test"}
}

func (o *Overlay) capture(p string) {
	o.T.Helper()
	st, err := o.Tree.Lstat(p)
	if err != nil {
		o.T.Fatal(err)
	}
	c := ckpt.Capture{Path: p, Prior: st, Open: func() (*os.File, error) { return o.Tree.Open(p) }}
	if err := o.Store.Record(c, ckpt.Program{PID: 1, Comm: o.Comm}); err != nil {
		o.T.Fatal(err)
	}
}

// Write creates or replaces the regular file p (parents must exist).
func (o *Overlay) Write(p, data string) {
	o.T.Helper()
	o.capture(p)
	if err := os.WriteFile(filepath.Join(o.Dir, p), []byte(data), 0o644); err != nil {
		o.T.Fatal(err)
	}
}

// WriteAt writes data at off of the existing regular file p, recording
// the prior bytes of that range only where the store keeps the file by
// ranges (versionstore.Options.RangeFrom), as the overlay's write does.
func (o *Overlay) WriteAt(p string, off int64, data string) {
	o.T.Helper()
	st, ino, err := o.Tree.LstatInode(p)
	if err != nil {
		o.T.Fatal(err)
	}
	end := off + int64(len(data))
	if o.Store.NeedsRange(p, off, end) {
		c := ckpt.Capture{Path: p, Prior: st, Inode: ino, Range: &ckpt.ByteRange{Off: off, End: end},
			Open: func() (*os.File, error) { return o.Tree.Open(p) }}
		if err := o.Store.Record(c, ckpt.Program{PID: 1, Comm: o.Comm}); err != nil {
			o.T.Fatal(err)
		}
	}
	f, err := os.OpenFile(filepath.Join(o.Dir, p), os.O_WRONLY, 0)
	if err != nil {
		o.T.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte(data), off); err != nil {
		o.T.Fatal(err)
	}
}

// Mkdir creates the directory p.
func (o *Overlay) Mkdir(p string) {
	o.T.Helper()
	o.capture(p)
	if err := os.Mkdir(filepath.Join(o.Dir, p), 0o755); err != nil {
		o.T.Fatal(err)
	}
}

// Chmod changes p's mode.
func (o *Overlay) Chmod(p string, mode os.FileMode) {
	o.T.Helper()
	st, _ := o.Tree.Lstat(p)
	if err := o.Store.Record(ckpt.Capture{Path: p, Prior: st, MetaOnly: true}, ckpt.Program{PID: 1, Comm: o.Comm}); err != nil {
		o.T.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(o.Dir, p), mode); err != nil {
		o.T.Fatal(err)
	}
}

// Chown changes p's owner.
func (o *Overlay) Chown(p string, uid, gid int) {
	o.T.Helper()
	st, _ := o.Tree.Lstat(p)
	if err := o.Store.Record(ckpt.Capture{Path: p, Prior: st, MetaOnly: true}, ckpt.Program{PID: 1, Comm: o.Comm}); err != nil {
		o.T.Fatal(err)
	}
	if err := os.Lchown(filepath.Join(o.Dir, p), uid, gid); err != nil {
		o.T.Fatal(err)
	}
}

// Remove removes the file or empty directory p.
func (o *Overlay) Remove(p string) {
	o.T.Helper()
	o.capture(p)
	if err := os.Remove(filepath.Join(o.Dir, p)); err != nil {
		o.T.Fatal(err)
	}
}

// Rename renames from to to.
func (o *Overlay) Rename(from, to string) {
	o.T.Helper()
	if st, _ := o.Tree.Lstat(to); st.Exists() {
		o.capture(to)
	}
	commit, err := o.Store.RecordRename(from, to, false, ckpt.Program{PID: 1, Comm: o.Comm})
	if err != nil {
		o.T.Fatal(err)
	}
	err = os.Rename(filepath.Join(o.Dir, from), filepath.Join(o.Dir, to))
	commit(err == nil)
	if err != nil {
		o.T.Fatal(err)
	}
}

// Symlink creates the symlink p pointing to target.
func (o *Overlay) Symlink(target, p string) {
	o.T.Helper()
	o.capture(p)
	if err := os.Symlink(target, filepath.Join(o.Dir, p)); err != nil {
		o.T.Fatal(err)
	}
}

// Mkfifo creates the FIFO p.
func (o *Overlay) Mkfifo(p string) {
	o.T.Helper()
	o.capture(p)
	if err := syscall.Mkfifo(filepath.Join(o.Dir, p), 0o644); err != nil {
		o.T.Fatal(err)
	}
}

// Read returns the bytes of p in the directory.
func (o *Overlay) Read(p string) string {
	o.T.Helper()
	data, err := os.ReadFile(filepath.Join(o.Dir, p))
	if err != nil {
		o.T.Fatal(err)
	}
	return string(data)
}
