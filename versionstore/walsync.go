package versionstore

import (
	"strings"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// walFS wraps the store's vfs so that Sync on a write-ahead-log file does
// not fsync.
//
// Why: a capture must survive a kill -9 of the daemon before the caller may
// change the backing file, but need not survive a power loss (SPEC §4: a
// power loss may lose the open turn). A pebble.NoSync commit returns before
// the WAL bytes were handed to the kernel (they wait in the LogWriter's
// buffer for its flusher goroutine), so a kill -9 can lose them. A
// pebble.Sync commit waits until the flusher has written them AND synced.
// With this wrapper that sync is a no-op, so a Sync commit costs a write(2)
// and a goroutine hand-off, not a disk flush, and group commit still batches
// concurrent captures.
//
// Durability against power loss is restored at turn boundaries by SyncWAL,
// which fsyncs every WAL file that is open for writing, and by closing a WAL
// (rotation) always fsyncing it. Everything else Pebble syncs (sstables,
// MANIFEST, OPTIONS, directories) is synced for real.
type walFS struct {
	vfs.FS
	mu   sync.Mutex
	open map[*walFile]struct{}
	// beforeClose runs before a WAL being closed is fsynced: what its
	// events name must be durable first (the span file in use).
	beforeClose func()
}

func newWalFS(fs vfs.FS) *walFS { return &walFS{FS: fs, open: map[*walFile]struct{}{}} }

func isWAL(name string) bool { return strings.HasSuffix(name, ".log") }

func (w *walFS) wrap(name string, f vfs.File, err error) (vfs.File, error) {
	if err != nil || !isWAL(name) {
		return f, err
	}
	wf := &walFile{File: f, fs: w}
	w.mu.Lock()
	w.open[wf] = struct{}{}
	w.mu.Unlock()
	return wf, nil
}

func (w *walFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := w.FS.Create(name, c)
	return w.wrap(name, f, err)
}

func (w *walFS) ReuseForWrite(old, name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := w.FS.ReuseForWrite(old, name, c)
	return w.wrap(name, f, err)
}

func (w *walFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := w.FS.OpenReadWrite(name, c, opts...)
	return w.wrap(name, f, err)
}

func (w *walFS) Unwrap() vfs.FS { return w.FS }

// SyncWAL fsyncs every open WAL file: all captures committed before the call
// survive a power loss once it returns.
func (w *walFS) SyncWAL() error {
	w.mu.Lock()
	files := make([]*walFile, 0, len(w.open))
	for f := range w.open {
		files = append(files, f)
	}
	w.mu.Unlock()
	for _, f := range files {
		if err := f.File.Sync(); err != nil {
			return err
		}
	}
	return nil
}

type walFile struct {
	vfs.File
	fs *walFS
}

// testHookWALWrite, in tests, runs before each write to a WAL file (on
// Pebble's log writer goroutine).
var testHookWALWrite atomic.Pointer[func()]

func (f *walFile) Write(p []byte) (int, error) {
	if h := testHookWALWrite.Load(); h != nil {
		(*h)()
	}
	return f.File.Write(p)
}

func (f *walFile) Sync() error     { return nil }
func (f *walFile) SyncData() error { return nil }
func (f *walFile) SyncTo(int64) (bool, error) {
	return false, nil
}

// Close fsyncs first: a rotated-away WAL may hold captures of the open turn
// whose memtable is not yet flushed.
func (f *walFile) Close() error {
	f.fs.mu.Lock()
	delete(f.fs.open, f)
	f.fs.mu.Unlock()
	if h := f.fs.beforeClose; h != nil {
		h()
	}
	serr := f.File.Sync()
	cerr := f.File.Close()
	if serr != nil {
		return serr
	}
	return cerr
}
