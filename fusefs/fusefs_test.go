package fusefs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"golang.org/x/sys/unix"

	"ckptfs/internal/ckpt"
)

// fakeRec is a Recorder that remembers every call and the prior bytes.
type fakeRec struct {
	mu       sync.Mutex
	touched  map[string]uint8
	records  []rec
	renames  []string
	fail     error
	linkDir  string
	linkSeqn int
	order    []string // records and renames in the order they were made
	onRename func()   // called after a rename is recorded (tests of races)
}

type rec struct {
	ckpt.Capture
	Data   string
	Linked bool
	Who    string
}

func newFakeRec(t *testing.T) *fakeRec {
	return &fakeRec{touched: map[string]uint8{}, linkDir: t.TempDir()}
}

func (f *fakeRec) CapturesByClone(fd int, dev uint64, size int64) bool { return false }

func (f *fakeRec) NeedsRange(p string, off, end int64) bool { return f.NeedsCapture(p, false) }

func (f *fakeRec) NeedsCapture(p string, metaOnly bool) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := f.touched[p]
	if t&1 != 0 {
		return false
	}
	return !metaOnly || t&2 == 0
}

func (f *fakeRec) Credit(who ckpt.Program) error { return nil }

func (f *fakeRec) UnshareAttic() error { return nil }

func (f *fakeRec) Record(c ckpt.Capture, who ckpt.Program) error {
	f.mu.Lock()
	fail := f.fail
	f.linkSeqn++
	seq := f.linkSeqn
	f.mu.Unlock()
	if fail != nil {
		return fail
	}
	r := rec{Capture: c, Who: who.Comm}
	if c.Prior.Type == ckpt.Regular && !c.MetaOnly {
		var rd io.ReadCloser
		if c.Link != nil {
			d, _ := os.Open(f.linkDir)
			name := "l" + strconv.Itoa(seq)
			if err := c.Link(d, name); err == nil {
				r.Linked = true
				rd, _ = os.Open(filepath.Join(f.linkDir, name))
			}
			d.Close()
		}
		if rd == nil {
			fh, err := c.Open()
			if err != nil {
				return err
			}
			rd = fh
		}
		b, _ := io.ReadAll(rd)
		rd.Close()
		r.Data = string(b)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if c.MetaOnly {
		f.touched[c.Path] |= 2
	} else {
		f.touched[c.Path] |= 1
	}
	f.records = append(f.records, r)
	f.order = append(f.order, "capture "+c.Path)
	return nil
}

func (f *fakeRec) RecordExchange(a, b string, _, _ uint64, who ckpt.Program) (func(bool), error) {
	return f.RecordRename(a, b, true, who)
}

func (f *fakeRec) RecordRename(from, to string, exchange bool, who ckpt.Program) (func(bool), error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return nil, f.fail
	}
	op := "rename"
	if exchange {
		op = "exchange"
	}
	i := len(f.renames)
	f.renames = append(f.renames, op+" "+from+" "+to)
	f.order = append(f.order, op+" "+from+" "+to)
	if f.onRename != nil {
		f.mu.Unlock()
		f.onRename()
		f.mu.Lock()
	}
	return func(ok bool) {
		f.mu.Lock()
		defer f.mu.Unlock()
		if !ok {
			f.renames[i] += " (failed)"
		}
	}, nil
}

func (f *fakeRec) take() ([]rec, []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, n := f.records, f.renames
	f.records, f.renames = nil, nil
	return r, n
}

func (f *fakeRec) newTurn() {
	f.mu.Lock()
	f.touched = map[string]uint8{}
	f.mu.Unlock()
}

// mountFake mounts an overlay in this process over dir itself.
func mountFake(t *testing.T, dir string, opts Options) *Root {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting needs root")
	}
	syscall.Umask(0) // as the daemon does (the test shares its umask)
	d, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	r, err := NewRoot(d, opts)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := r.Mount(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Unmount(); err != nil {
			unix.Unmount(dir, unix.MNT_DETACH)
		}
	})
	return r
}

func TestCaptureTable(t *testing.T) {
	dir := t.TempDir()
	for name, c := range map[string]string{"a": "v1", "b": "bb", "d": "dd", "e": "ee", "g": "gg", "build/o": "obj"} {
		os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755)
		os.WriteFile(filepath.Join(dir, name), []byte(c), 0o644)
	}
	os.Mkdir(filepath.Join(dir, "emptydir"), 0o755)
	fr := newFakeRec(t)
	mountFake(t, dir, Options{Recorder: fr, Hidden: []string{".store"},
		Exclude: func(p string, isDir bool) bool { return p == "build" || strings.HasPrefix(p, "build/") }})
	p := func(n string) string { return filepath.Join(dir, n) }

	type want struct {
		path   string
		typ    ckpt.Type
		data   string
		meta   bool
		linked bool
	}
	check := func(what string, ws []want, renames ...string) {
		t.Helper()
		rs, rn := fr.take()
		if len(rs) != len(ws) {
			t.Fatalf("%s: %d records %+v, want %d", what, len(rs), rs, len(ws))
		}
		for i, w := range ws {
			r := rs[i]
			if r.Path != w.path || r.Prior.Type != w.typ || r.Data != w.data || r.MetaOnly != w.meta || r.Linked != w.linked {
				t.Errorf("%s: record %d = {%s %v %q meta=%v linked=%v}, want %+v", what, i, r.Path, r.Prior.Type, r.Data, r.MetaOnly, r.Linked, w)
			}
			if r.Who == "" {
				t.Errorf("%s: record without program name", what)
			}
		}
		if strings.Join(rn, ";") != strings.Join(renames, ";") {
			t.Errorf("%s: renames %q, want %q", what, rn, renames)
		}
	}

	if err := os.WriteFile(p("a"), []byte("version 2"), 0o644); err != nil {
		t.Fatal(err)
	}
	check("overwrite", []want{{path: "a", typ: ckpt.Regular, data: "v1"}})
	os.WriteFile(p("a"), []byte("version 3"), 0o644)
	check("second write in the turn", nil)

	os.Chmod(p("b"), 0o600)
	check("chmod", []want{{path: "b", typ: ckpt.Regular, meta: true}})
	os.Truncate(p("b"), 1)
	check("truncate after chmod", []want{{path: "b", typ: ckpt.Regular, data: "bb"}})

	os.WriteFile(p("c"), []byte("new"), 0o644)
	check("create", []want{{path: "c", typ: ckpt.Absent}})

	os.Remove(p("d"))
	check("unlink", []want{{path: "d", typ: ckpt.Regular, data: "dd", linked: true}})

	os.Rename(p("e"), p("f"))
	check("rename", nil, "rename e f")
	os.Rename(p("f"), p("g"))
	check("rename over", []want{{path: "g", typ: ckpt.Regular, data: "gg", linked: true}}, "rename f g")

	os.Mkdir(p("dir"), 0o755)
	check("mkdir", []want{{path: "dir", typ: ckpt.Absent}})
	os.Remove(p("emptydir"))
	check("rmdir", []want{{path: "emptydir", typ: ckpt.Dir}})
	os.Symlink("target", p("sl"))
	check("symlink", []want{{path: "sl", typ: ckpt.Absent}})
	fr.newTurn()
	os.Remove(p("sl"))
	rs, _ := fr.take()
	if len(rs) != 1 || rs[0].Prior.Type != ckpt.Symlink || rs[0].Prior.Target != "target" {
		t.Errorf("unlink symlink: %+v", rs)
	}

	os.WriteFile(p("build/o"), []byte("x"), 0o644)
	os.WriteFile(p("build/new"), []byte("x"), 0o644)
	check("excluded", nil)

	// Hard links: a write through one name captures every name.
	fr.newTurn()
	os.WriteFile(p("h1"), []byte("orig"), 0o644)
	os.Link(p("h1"), p("h2"))
	fr.newTurn()
	fr.take()
	f, _ := os.OpenFile(p("h2"), os.O_WRONLY|os.O_APPEND, 0)
	f.Write([]byte("+"))
	f.Close()
	rs, _ = fr.take()
	got := map[string]string{}
	for _, r := range rs {
		got[r.Path] = r.Data
	}
	if len(rs) != 2 || got["h1"] != "orig" || got["h2"] != "orig" {
		t.Errorf("write through a hard link captured %+v", rs)
	}
	// Unlinking one of two names offers no link (the other name can change).
	fr.newTurn()
	os.Remove(p("h2"))
	rs, _ = fr.take()
	if len(rs) != 1 || rs[0].Linked {
		t.Errorf("unlink of a hard link: %+v", rs)
	}

	// An open writer prevents the link offer too.
	fr.newTurn()
	os.WriteFile(p("w"), []byte("w0"), 0o644)
	w, _ := os.OpenFile(p("w"), os.O_WRONLY, 0)
	fr.newTurn()
	fr.take()
	os.Remove(p("w"))
	w.Close()
	rs, _ = fr.take()
	if len(rs) != 1 || rs[0].Linked || rs[0].Data != "w0" {
		t.Errorf("unlink of a file open for writing: %+v", rs)
	}
}

func TestRecordFailureLeavesFileAlone(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a"), []byte("keep"), 0o644)
	fr := newFakeRec(t)
	mountFake(t, dir, Options{Recorder: fr})
	for _, c := range []struct {
		err  error
		want syscall.Errno
	}{
		{fmt.Errorf("%w: 10 bytes free", ckpt.ErrStoreFull), syscall.ENOSPC},
		{errors.New("versionstore: store full"), syscall.EIO}, // the cause, not the words
		{errors.New("versionstore: disk on fire"), syscall.EIO},
	} {
		fr.mu.Lock()
		fr.fail = c.err
		fr.mu.Unlock()
		f, err := os.OpenFile(filepath.Join(dir, "a"), os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		_, err = f.Write([]byte("XXXX"))
		f.Close()
		if !errors.Is(err, c.want) {
			t.Errorf("write with %v: %v, want %v", c.err, err, c.want)
		}
		if err := os.Remove(filepath.Join(dir, "a")); !errors.Is(err, c.want) {
			t.Errorf("unlink with %v: %v, want %v", c.err, err, c.want)
		}
		if err := os.Rename(filepath.Join(dir, "a"), filepath.Join(dir, "b")); !errors.Is(err, c.want) {
			t.Errorf("rename with %v: %v, want %v", c.err, err, c.want)
		}
		if b, _ := os.ReadFile(filepath.Join(dir, "a")); string(b) != "keep" {
			t.Errorf("file changed although its capture failed: %q", b)
		}
	}
}

func TestExclusiveAndInvalidate(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a"), []byte("old"), 0o644)
	backing, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer backing.Close()
	fr := newFakeRec(t)
	r := mountFake(t, dir, Options{Recorder: fr})
	if b, _ := os.ReadFile(filepath.Join(dir, "a")); string(b) != "old" {
		t.Fatalf("read %q", b)
	}
	wrote := make(chan time.Time, 1)
	var released time.Time
	err = r.Exclusive(func() error {
		go func() {
			os.WriteFile(filepath.Join(dir, "b"), []byte("x"), 0o644)
			wrote <- time.Now()
		}()
		time.Sleep(200 * time.Millisecond)
		// Change the backing tree underneath, as a rewind does.
		fd, err := unix.Openat(int(backing.Fd()), "a.tmp", unix.O_WRONLY|unix.O_CREAT, 0o644)
		if err != nil {
			return err
		}
		unix.Write(fd, []byte("new content"))
		unix.Close(fd)
		if err := unix.Renameat(int(backing.Fd()), "a.tmp", int(backing.Fd()), "a"); err != nil {
			return err
		}
		r.Invalidate("a")
		released = time.Now()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if w := <-wrote; w.Before(released) {
		t.Errorf("a mutation completed while Exclusive held the gate")
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "a")); string(b) != "new content" {
		t.Errorf("after Invalidate, read %q", b)
	}
}

func TestHiddenStore(t *testing.T) {
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, ".store"), 0o700)
	os.WriteFile(filepath.Join(dir, "x"), nil, 0o644)
	mountFake(t, dir, Options{Recorder: newFakeRec(t), Hidden: []string{".store"}})
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 || ents[0].Name() != "x" {
		t.Errorf("readdir: %v", ents)
	}
	if _, err := os.Stat(filepath.Join(dir, ".store")); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("stat: %v", err)
	}
	if err := os.Mkdir(filepath.Join(dir, ".store"), 0o700); !errors.Is(err, syscall.EPERM) {
		t.Errorf("mkdir: %v", err)
	}
	if err := os.Rename(filepath.Join(dir, "x"), filepath.Join(dir, ".store")); !errors.Is(err, syscall.EPERM) {
		t.Errorf("rename onto: %v", err)
	}
}

// A file opened for writing while it has passthrough readers is written
// through passthrough too (the kernel forbids mixing): it is captured at
// open and again at each turn boundary while open.
func TestPassthroughWriterRecapturedAtBoundary(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a"), []byte("one"), 0o644)
	fr := newFakeRec(t)
	r := mountFake(t, dir, Options{Recorder: fr, ReadPassthrough: true})
	rd, err := os.Open(filepath.Join(dir, "a"))
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	wr, err := os.OpenFile(filepath.Join(dir, "a"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatalf("writable open next to a passthrough reader: %v", err)
	}
	rs, _ := fr.take()
	if len(rs) != 1 || rs[0].Data != "one" {
		t.Fatalf("capture at writable open: %+v", rs)
	}
	if _, err := wr.WriteAt([]byte("TWO"), 0); err != nil {
		t.Fatal(err)
	}
	fr.newTurn()
	r.Exclusive(func() error { return nil })
	rs, _ = fr.take()
	if len(rs) != 1 || rs[0].Data != "TWO" {
		t.Fatalf("capture at the boundary: %+v", rs)
	}
	wr.Close()
	for i := 0; i < 100; i++ { // RELEASE reaches the daemon after close returns
		r.ptMu.Lock()
		n := len(r.ptWriters)
		r.ptMu.Unlock()
		if n == 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	fr.newTurn()
	r.Exclusive(func() error { return nil })
	if rs, _ = fr.take(); len(rs) != 0 {
		t.Fatalf("capture at the boundary after close: %+v", rs)
	}
}

// ptFile must not offer go-fuse its fd: go-fuse would register a backing ID
// of its own and drop references of handles that never took one (see
// rawFS.Open); the daemon registers backing files itself.
func TestPtFileIsNotAGoFusePassthroughFder(t *testing.T) {
	if _, ok := any(&ptFile{}).(fs.FilePassthroughFder); ok {
		t.Fatal("ptFile implements fs.FilePassthroughFder")
	}
}

// TestCaptureDuringARenameOfItsDirectory: a rename is recorded before its
// syscall, and go-fuse moves its own tree only after Rename returns. A
// first write into a file of the directory being renamed (the kernel does
// not serialize it with the rename) was captured under the file's old
// path but recorded after the rename: history then gave its prior bytes
// to whatever the old path means after the rename (found by the long kill
// test, with two writers: "a final-sweep rewind gave a file other bytes").
// Now the capture comes before the rename under the old path, or after it
// under the new one.
func TestCaptureDuringARenameOfItsDirectory(t *testing.T) {
	for _, exchange := range []bool{false, true} {
		t.Run(map[bool]string{false: "rename", true: "exchange"}[exchange], func(t *testing.T) {
			dir := t.TempDir()
			os.MkdirAll(filepath.Join(dir, "d"), 0o755)
			os.MkdirAll(filepath.Join(dir, "x"), 0o755)
			os.WriteFile(filepath.Join(dir, "d", "f"), []byte("old"), 0o644)
			fr := newFakeRec(t)
			mountFake(t, dir, Options{Recorder: fr})
			f, err := os.OpenFile(filepath.Join(dir, "d", "f"), os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			fr.take()
			recorded, release := make(chan bool), make(chan bool)
			fr.mu.Lock()
			fr.order = nil
			fr.onRename = func() {
				close(recorded)
				select { // the write's capture may come now (or wait)
				case <-release:
				case <-time.After(300 * time.Millisecond):
				}
			}
			fr.mu.Unlock()
			renamed := make(chan error)
			go func() {
				if exchange {
					renamed <- unix.Renameat2(unix.AT_FDCWD, filepath.Join(dir, "d"), unix.AT_FDCWD, filepath.Join(dir, "x"), unix.RENAME_EXCHANGE)
				} else {
					renamed <- os.Rename(filepath.Join(dir, "d"), filepath.Join(dir, "e"))
				}
			}()
			<-recorded
			written := make(chan error, 1)
			go func() { _, err := f.Write([]byte("new")); written <- err }()
			select {
			case <-written: // captured while the rename waits: too early
				written <- nil
			case <-time.After(100 * time.Millisecond):
			}
			close(release)
			if err := <-renamed; err != nil {
				t.Fatal(err)
			}
			if err := <-written; err != nil {
				t.Fatal(err)
			}
			fr.mu.Lock()
			order := strings.Join(fr.order, "; ")
			fr.mu.Unlock()
			want := map[bool]string{false: "rename d e; capture e/f", true: "exchange d x; capture x/f"}[exchange]
			if order != want {
				t.Errorf("records %q, want %q", order, want)
			}
		})
	}
}

// With KeepCache, a file's pages outlive its handles: a change underneath
// that is not announced stays unseen (proof that the cache is kept), and
// Invalidate, as a rewind calls it, drops them. (Reads without a stat: a
// stat after a read refreshes the attributes, and the kernel drops pages
// whose file's mtime changed.)
func TestKeepCacheAndInvalidate(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a"), []byte("old!"), 0o644)
	backing, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer backing.Close()
	r := mountFake(t, dir, Options{Recorder: newFakeRec(t), KeepCache: true})
	read := func() string {
		fd, err := unix.Open(filepath.Join(dir, "a"), unix.O_RDONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(fd)
		buf := make([]byte, 16)
		n, _ := unix.Read(fd, buf)
		return string(buf[:max(n, 0)])
	}
	if b := read(); b != "old!" {
		t.Fatalf("read %q", b)
	}
	// In place, same size: only the kernel's pages can tell.
	fd, err := unix.Openat(int(backing.Fd()), "a", unix.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	unix.Pwrite(fd, []byte("new!"), 0)
	unix.Close(fd)
	if b := read(); b != "old!" {
		t.Errorf("second open read %q: the kernel did not keep the pages", b)
	}
	r.Invalidate("a")
	if b := read(); b != "new!" {
		t.Errorf("after Invalidate, read %q", b)
	}
}

// A private mount has neither allow_other nor default_permissions; a
// shared one has both.
func TestPrivateMountOptions(t *testing.T) {
	for _, private := range []bool{false, true} {
		dir := t.TempDir()
		mountFake(t, dir, Options{Recorder: newFakeRec(t), Private: private})
		b, err := os.ReadFile("/proc/self/mountinfo")
		if err != nil {
			t.Fatal(err)
		}
		var line string
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) > 4 && f[4] == dir {
				line = l
			}
		}
		shared := strings.Contains(line, ",allow_other") && strings.Contains(line, ",default_permissions")
		if line == "" || shared == private || strings.Contains(line, "allow_other") == private {
			t.Errorf("private %v: mountinfo %q", private, line)
		}
	}
}
