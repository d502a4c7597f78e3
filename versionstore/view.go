package versionstore

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"ckptfs/internal/ckpt"
)

// view.go: a Snapshot kept for as long as someone browses it (ckptfs
// mount --at), and random reads of its files' bytes while the live tree
// goes on changing.
//
// The list of entries is frozen when the view is taken (ViewAt). The bytes
// of a file are read when asked for, through the entry's resolution: from
// the store when an event after the turn recorded them, else from the
// live file, which then still holds them. A live file stays the turn's
// until an event names it (or a directory above it): the daemon records
// the prior state of every path before a change lands, so a read from the
// live file is the turn's if, once it is done, no event newer than the
// resolution names the path. When one does, the path is resolved again,
// which now finds the recorded bytes (or the file's new name, after a
// rename), and the read is done again from there.

// Where no daemon records the tree's changes (the project is not mounted:
// ViewOptions.Unwatched), a live file is the turn's only while it is the
// inode, size and mtime it was when the view was taken; a read finds out
// after the fact, and fails: the bytes it had were never captured.

// viewRetries bounds how often ViewAt retakes a snapshot that changed
// under its walk, and how often a read resolves a file again.
const viewRetries = 5

// ViewOptions say how a view's live files may change.
type ViewOptions struct {
	// Unwatched: nothing records the tree's changes while the view is
	// read (the project is not mounted), so a live file is checked
	// against its inode, size and mtime instead of against the events.
	Unwatched bool
}

// ViewAt returns the tree at the end of turn n, as TreeAt, to be browsed
// for a while: its files are read with OpenView. The turn must be closed
// (an open turn's end is still moving): ErrOpenTurn. A snapshot that the
// project changed under is taken again.
func (s *Store) ViewAt(n uint64, live ckpt.Tree, opts ViewOptions) (*Snapshot, error) {
	t, err := s.Turn(n)
	if err != nil {
		return nil, err
	}
	if t.Open {
		return nil, detailf(ErrOpenTurn, "turn %d is still open: its end is not known yet (turnctl end closes it)", n)
	}
	for try := 0; ; try++ {
		sn, err := s.TreeAt(n, live)
		if err != nil {
			return nil, err
		}
		if err = s.Check(sn); err == nil && opts.Unwatched {
			err = stampLive(sn, live)
		}
		if err == nil {
			sn.watch = &watch{upTo: sn.mark, last: map[string]uint64{}}
			sn.unwatched = opts.Unwatched
			return sn, nil
		}
		if try == viewRetries {
			return nil, err
		}
	}
}

// stampLive gives every live regular file of sn its stamp (the walk gave
// most of them theirs), checking that it is still the size the view
// shows.
func stampLive(sn *Snapshot, live ckpt.Tree) error {
	for i := range sn.Entries {
		e := &sn.Entries[i]
		if e.State.Type != ckpt.Regular || e.r.livePath() == "" || e.stamp.Ino != 0 {
			continue
		}
		f, err := live.Open(e.r.livePath())
		if err != nil {
			return err
		}
		var st unix.Stat_t
		err = unix.Fstat(int(f.Fd()), &st)
		f.Close()
		if err != nil {
			return err
		}
		if st.Size != e.r.liveSize() {
			return fmt.Errorf("versionstore: %s changed while it was being read: run again", e.r.livePath())
		}
		e.stamp = ckpt.Stamp{Ino: st.Ino, Mtime: st.Mtim.Nano(), Ctime: st.Ctim.Nano()}
	}
	return nil
}

// watch remembers, for the events after a view's mark, the newest event
// that named each path, scanning the log as far as it has grown.
type watch struct {
	mu   sync.Mutex
	upTo uint64            // the events up to upTo are in last
	last map[string]uint64 // path → the newest event that named it
}

// changedSince reports whether an event newer than since names p or a
// directory above it.
func (s *Store) changedSince(w *watch, p string, since uint64) (bool, error) {
	end := s.lastSeq() + 1
	w.mu.Lock()
	defer w.mu.Unlock()
	if end > w.upTo+1 {
		err := s.scanEvents(w.upTo+1, end, func(r *record) (bool, error) {
			w.last[r.Path] = r.Seq
			if r.To != "" {
				w.last[r.To] = r.Seq
			}
			return true, nil
		})
		if err != nil {
			return false, err
		}
		w.upTo = end - 1
	}
	for d := p; ; d = parentOf(d) {
		if w.last[d] > since {
			return true, nil
		}
		if d == "" {
			return false, nil
		}
	}
}

// ViewFile reads the bytes of one regular file of a view (OpenView). It
// is safe for concurrent use.
type ViewFile struct {
	s    *Store
	sn   *Snapshot
	live ckpt.Tree
	path string // the entry's path at the turn
	size int64

	mu    sync.Mutex
	r     resolved
	stamp ckpt.Stamp // the live file's then (unwatched)
	mark  uint64     // the newest event when r was resolved
	f     *os.File   // the live file (r.livePath()) or the attic file, once opened
	ch    *chunksAt
	pa    *partAt        // the bytes as a part of a span file
	pr    *patchedFile   // a range-captured version over a stored base
	plr   *patchedReader // or over the live file f
}

// OpenView opens the regular file entry e of sn (taken by ViewAt) for
// reads of its bytes at the end of the turn, for as long as the caller
// keeps it. A Lost entry is ErrNotCaptured.
func (s *Store) OpenView(sn *Snapshot, e Entry, live ckpt.Tree) (*ViewFile, error) {
	if sn.watch == nil {
		return nil, fmt.Errorf("versionstore: BUG: OpenView of a snapshot not taken by ViewAt")
	}
	if e.State.Type != ckpt.Regular {
		return nil, fmt.Errorf("versionstore: BUG: OpenView of a %v", e.State.Type)
	}
	if e.Lost {
		return nil, fmt.Errorf("%s: %w: the file changed while the project was not mounted, so its bytes from before were never seen", e.Path, ErrNotCaptured)
	}
	return &ViewFile{s: s, sn: sn, live: live, path: e.Path, size: e.State.Size, r: e.r, stamp: e.stamp, mark: sn.mark}, nil
}

// Size is the file's size at the end of the turn.
func (f *ViewFile) Size() int64 { return f.size }

// ReadAt reads the file's bytes at the end of the turn (io.ReaderAt).
func (f *ViewFile) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("versionstore: negative offset")
	}
	if off >= f.size {
		return 0, io.EOF
	}
	var eof error
	if rest := f.size - off; int64(len(p)) >= rest {
		p, eof = p[:rest], io.EOF
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for try := 0; ; try++ {
		if f.r.livePath() == "" {
			n, err := f.readStored(p, off)
			if err == nil {
				err = eof
			}
			return n, err
		}
		n, rerr := f.readLive(p, off)
		if f.sn.unwatched {
			if rerr == nil {
				rerr = eof
			}
			return n, rerr
		}
		changed, err := f.s.changedSince(f.sn.watch, f.r.livePath(), f.mark)
		if err != nil {
			return 0, err
		}
		if !changed && rerr == nil {
			return n, eof
		}
		if try == viewRetries {
			if rerr == nil {
				rerr = fmt.Errorf("it keeps changing")
			}
			return 0, fmt.Errorf("versionstore: %s at the end of turn %d: %w", f.path, f.sn.Turn, rerr)
		}
		if !changed {
			// Read from a live file no event names yet: a rename
			// whose record follows its syscall, say.
			time.Sleep(time.Duration(try+1) * 5 * time.Millisecond)
		}
		if err := f.resolveAgain(); errors.Is(err, errUnsettled) && try < viewRetries {
			// A rename is recorded before its syscall: until that is
			// made, the path's new name holds nothing yet.
			time.Sleep(time.Duration(try+1) * 5 * time.Millisecond)
		} else if err != nil {
			return 0, err
		}
	}
}

// readLive reads p from the live file, opening it first; a file that is
// not the turn's (another size or inode) is an error.
func (f *ViewFile) readLive(p []byte, off int64) (int, error) {
	if f.f == nil {
		lf, err := f.live.Open(f.r.livePath())
		if err != nil {
			return 0, err
		}
		var st unix.Stat_t
		if err := unix.Fstat(int(lf.Fd()), &st); err != nil {
			lf.Close()
			return 0, err
		}
		if st.Size != f.r.liveSize() || (f.r.Patch == nil && f.r.Inode.Ino != 0 && st.Ino != f.r.Inode.Ino) {
			lf.Close()
			if f.sn.unwatched {
				return 0, f.changedOffline()
			}
			return 0, fmt.Errorf("the live file is another one now")
		}
		f.f = lf
	}
	var n int
	var err error
	if f.r.Patch != nil {
		if f.plr == nil {
			f.plr = f.s.newPatchedReader(f.size, f.r.Patch.Layers, f.f, f.r.Patch.BaseSize)
		}
		n, err = f.plr.ReadAt(p, off)
		f.plr.dropChunks()
	} else {
		n, err = f.f.ReadAt(p, off)
	}
	if err == io.EOF && n < len(p) {
		err = io.ErrUnexpectedEOF // the file shrank
	}
	if f.sn.unwatched {
		// Still the file seen when the view was taken, after the read.
		var st unix.Stat_t
		if serr := unix.Fstat(int(f.f.Fd()), &st); serr != nil {
			return 0, serr
		}
		if !f.stamp.SameBytes(ckpt.Stamp{Ino: st.Ino, Mtime: st.Mtim.Nano(), Ctime: st.Ctim.Nano()}) || st.Size != f.r.liveSize() {
			return 0, f.changedOffline()
		}
	}
	return n, err
}

func (f *ViewFile) changedOffline() error {
	return fmt.Errorf("%s: %w: it changed while the project was not mounted, so its bytes at the end of turn %d were never captured", f.r.livePath(), ErrNotCaptured, f.sn.Turn)
}

func (f *ViewFile) readStored(p []byte, off int64) (int, error) {
	r := f.r
	switch {
	case r.Data != nil:
		return bytes.NewReader(r.Data).ReadAt(p, off)
	case r.Lost:
		return 0, fmt.Errorf("%s: %w: the file changed while the project was not mounted, so its bytes from before were never seen", f.path, ErrNotCaptured)
	case r.Patch != nil:
		if f.pr == nil {
			rc, err := f.s.openPatched(r, f.live)
			if err != nil {
				return 0, err
			}
			f.pr = rc
		}
		return f.pr.ReadAt(p, off)
	case r.Content == nil:
		return 0, fmt.Errorf("%w: %s: no bytes recorded for a regular file", ErrCorrupt, f.path)
	case r.Content.Part:
		if f.pa == nil {
			f.pa = &partAt{s: f.s, ref: r.Content}
		}
		return f.pa.ReadAt(p, off)
	case r.Content.Attic != "":
		if f.f == nil {
			af, err := f.s.openAttic(r.Content)
			if err != nil {
				return 0, err
			}
			f.f = af
		}
		n, err := f.f.ReadAt(p, off)
		if err == io.EOF && n < len(p) {
			err = fmt.Errorf("%w: attic file %s changed size while read", ErrCorrupt, r.Content.Attic)
		}
		return n, err
	}
	if f.ch == nil {
		f.ch = &chunksAt{s: f.s, sums: r.Content.Chunks}
	}
	return f.ch.ReadAt(p, off)
}

// errUnsettled: a view's file resolves to something else than the turn's
// file, for now: a rename recorded whose syscall is not made yet, or
// history that is not the turn's (ErrCorrupt, once retries are spent).
var errUnsettled = fmt.Errorf("%w (or a rename in flight)", ErrCorrupt)

// resolveAgain resolves the path at the end of the turn anew, after an
// event named it: its bytes are now recorded, or live under a new name.
func (f *ViewFile) resolveAgain() error {
	f.closeFile()
	mark := f.s.lastSeq()
	after, err := f.s.endSeq(f.sn.Turn)
	if err != nil {
		return err
	}
	rs, err := f.s.resolveMany(after, []string{f.path}, f.live)
	if err != nil {
		return err
	}
	r := rs[0]
	if r.State.Type != ckpt.Regular || r.State.Size != f.size {
		return fmt.Errorf("%w: %s at the end of turn %d resolves to a %v of %d bytes now, was %d bytes", errUnsettled, f.path, f.sn.Turn, r.State.Type, r.State.Size, f.size)
	}
	f.r, f.mark = r, mark
	return nil
}

func (f *ViewFile) closeFile() {
	if f.f != nil {
		f.f.Close()
		f.f = nil
	}
	if f.pr != nil {
		f.pr.Close()
		f.pr = nil
	}
	f.ch, f.plr = nil, nil
}

// Close releases the file's fds.
func (f *ViewFile) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closeFile()
	return nil
}

// chunksAt reads a chunked version at any offset: the chunks' ends are
// learnt as they are decoded, and the last decoded chunk is kept, so
// reading it in order decodes each chunk once.
type chunksAt struct {
	s    *Store
	sums []byte  // 32 bytes a chunk
	ends []int64 // the end offsets of the first len(ends) chunks
	cur  int     // the chunk in buf (-1: none)
	buf  []byte
}

func (c *chunksAt) chunk(i int) ([]byte, error) {
	if c.buf != nil && c.cur == i {
		return c.buf, nil
	}
	b, err := c.s.getChunk(c.sums[32*i : 32*i+32])
	if err != nil {
		return nil, err
	}
	c.buf, c.cur = b, i
	return b, nil
}

func (c *chunksAt) ReadAt(p []byte, off int64) (int, error) {
	n := 0
	for n < len(p) {
		pos := off + int64(n)
		// The chunk holding pos: among those whose end is known, else
		// the next ones in order.
		i := sort.Search(len(c.ends), func(i int) bool { return c.ends[i] > pos })
		for i == len(c.ends) {
			if 32*i >= len(c.sums) {
				return n, io.EOF
			}
			b, err := c.chunk(i)
			if err != nil {
				return n, err
			}
			start := int64(0)
			if i > 0 {
				start = c.ends[i-1]
			}
			c.ends = append(c.ends, start+int64(len(b)))
			if c.ends[i] <= pos {
				i++
			}
		}
		b, err := c.chunk(i)
		if err != nil {
			return n, err
		}
		start := int64(0)
		if i > 0 {
			start = c.ends[i-1]
		}
		n += copy(p[n:], b[pos-start:])
	}
	return n, nil
}
