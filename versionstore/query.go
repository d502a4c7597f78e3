package versionstore

import (
	"bytes"
	"fmt"
	"io"
	"sort"
	"sync"

	"ckptfs/internal/ckpt"
)

// resolved is one path's state at some moment, with where its bytes are.
type resolved struct {
	State   ckpt.State
	Content *contentRef // bytes kept in the store (state taken from a record)
	Live    string      // else the live path that holds this state now
	FromLog bool        // the state came from a record, not from the live tree
	Seq     uint64      // with FromLog: the record's event (0: renamed over)
	Lost    bool        // a regular file whose bytes were never captured
	// Inode is the inode at that moment of anything but a directory (the
	// record's tag, or the live inode now; zero: not known), Links the
	// other names the record lists (links.go).
	Inode ckpt.Inode
	Links []string
	// Data: bytes held in memory (a revert's merge, not yet stored).
	Data []byte
	// Patch: a regular file's bytes told by range records (ranges.go):
	// a later version with spans put back. Content and Live are then
	// empty.
	Patch *patched
}

// livePath is the live path whose bytes the resolution reads ("": none),
// and liveSize the size that file had when resolved.
func (r resolved) livePath() string {
	if r.Patch != nil {
		return r.Patch.Live
	}
	return r.Live
}

func (r resolved) liveSize() int64 {
	if r.Patch != nil {
		return r.Patch.BaseSize
	}
	return r.State.Size
}

// sameObject reports whether two resolutions of a path found the same
// object: the same record, or the same live path. A directory moves with
// its contents, which have no events of their own, so two directories
// with equal metadata are only known equal when they are the same object.
func sameObject(x, y resolved) bool {
	if x.FromLog != y.FromLog {
		return false
	}
	if x.FromLog {
		return x.Seq == y.Seq
	}
	return x.Live == y.Live
}

// endSeq returns the last event sequence number that belongs to the state
// "at the end of turn n" (Now: the live tree). An open turn's end is now.
func (s *Store) endSeq(n uint64) (uint64, error) {
	s.mu.Lock()
	next := s.nextSeq
	s.mu.Unlock()
	if n == Now {
		return next - 1, nil
	}
	if _, k := SplitPoint(n); k > 0 {
		return s.stepEnd(n)
	}
	if n < s.startTurn() {
		return 0, s.forgottenErr(n)
	}
	t, err := s.turnRecord(n)
	if err != nil {
		return 0, err
	}
	if t.Open {
		return next - 1, nil
	}
	return t.LastSeq, nil
}

// resolveMany answers, for each path, what it was right after event
// `after`. One forward pass over the later events: the first record of a
// path's prior state is its state then; a rename moves the question to the
// new name (or answers "absent" when the path was renamed over); whatever
// no event touched is as it is in the live tree now.
func (s *Store) resolveMany(after uint64, paths []string, live ckpt.Tree) ([]resolved, error) {
	return s.resolveManyIx(after, paths, live, nil)
}

// resolveManyIx is resolveMany; with ix, and few paths, it reads among the
// events ix covers only those that can concern a pending path (naming it
// or a directory above it), and the events after them as usual.
func (s *Store) resolveManyIx(after uint64, paths []string, live ckpt.Tree, ix *touchIndex) ([]resolved, error) {
	res := make([]resolved, len(paths))
	meta := make([]*ckpt.State, len(paths))
	pending := map[string][]int{}
	for i, p := range paths {
		pending[p] = append(pending[p], i)
	}
	// waiting: the paths answered by a range record, whose base (the
	// later version the record's spans patch) is still to be found.
	waiting := map[string][]int{}
	s.mu.Lock()
	end := s.nextSeq
	s.mu.Unlock()
	step := func(r *record) (bool, error) {
		switch r.Op {
		case opPrior:
			for _, id := range waiting[r.Path] {
				pt := res[id].Patch
				switch {
				case r.State.Type != ckpt.Regular:
					pt.None = true
				case r.Lost && s.layersTell(pt.Layers, res[id].State.Size):
					pt.None = true // the bytes never seen are not needed
				case r.Lost:
					res[id].Lost = true
				default:
					pt.Content = r.Content
					if r.Content != nil {
						pt.BaseSize = r.Content.Size // what the store holds
					}
				}
			}
			delete(waiting, r.Path)
			for _, id := range pending[r.Path] {
				res[id] = resolved{State: r.State, Content: r.Content, FromLog: true, Seq: r.Seq, Lost: r.Lost, Links: r.Links}
				if r.Inode != nil && r.State.Type.Linkable() {
					res[id].Inode = *r.Inode
				}
			}
			delete(pending, r.Path)
		case opRange:
			for _, id := range waiting[r.Path] {
				res[id].Patch.Layers = append(res[id].Patch.Layers, layerOf(r))
			}
			for _, id := range pending[r.Path] {
				res[id] = resolved{State: r.State, FromLog: true, Seq: r.Seq, Patch: &patched{Layers: []layer{layerOf(r)}}}
				if r.Inode != nil {
					res[id].Inode = *r.Inode
				}
				waiting[r.Path] = append(waiting[r.Path], id)
			}
			delete(pending, r.Path)
		case opMeta:
			for _, id := range pending[r.Path] {
				if meta[id] == nil {
					st := r.State
					meta[id] = &st
				}
			}
		case opRename, opExchange:
			// A path renamed over was absent before; a version waiting
			// for its base has none (its layers tell every byte: a path
			// range-captured is captured whole before it is replaced).
			moveUnder(pending, r, func(ids []int) {
				for _, id := range ids {
					res[id] = resolved{FromLog: true}
				}
			})
			moveUnder(waiting, r, func(ids []int) {
				for _, id := range ids {
					res[id].Patch.None = true
				}
			})
		}
		return len(pending)+len(waiting) > 0, nil
	}
	from := after + 1
	if ix != nil && len(pending) <= ixMaxPaths && after < ix.end {
		// The indexed events that concern a pending path, in order.
		for cur := after; len(pending)+len(waiting) > 0; {
			next := uint64(0)
			for _, m := range []map[string][]int{pending, waiting} {
				for p := range m {
					if n := ix.next(p, cur); n != 0 && (next == 0 || n < next) {
						next = n
					}
				}
			}
			if next == 0 {
				break
			}
			r, ok, err := s.event(next)
			if err != nil {
				return nil, err
			}
			if ok {
				if _, err := step(r); err != nil {
					return nil, err
				}
			}
			cur = next
		}
		from = ix.end + 1
	}
	var err error
	if len(pending)+len(waiting) > 0 && from < end {
		err = s.scanEvents(from, end, step)
	}
	if err != nil {
		return nil, err
	}
	if live == nil && len(pending)+len(waiting) > 0 {
		for p := range pending {
			return nil, fmt.Errorf("versionstore: the live tree is needed to answer for %q", p)
		}
		for p := range waiting {
			return nil, fmt.Errorf("versionstore: the live tree is needed to answer for %q", p)
		}
	}
	for p, ids := range pending {
		st, ino, err := live.LstatInode(p)
		if err != nil {
			return nil, err
		}
		if !st.Type.Linkable() {
			ino = ckpt.Inode{}
		}
		for _, id := range ids {
			res[id] = resolved{State: st, Live: p, Inode: ino}
		}
	}
	for p, ids := range waiting {
		st, err := live.Lstat(p)
		if err != nil {
			return nil, err
		}
		for _, id := range ids {
			if pt := res[id].Patch; st.Type == ckpt.Regular {
				pt.Live, pt.BaseSize = p, st.Size
			} else {
				pt.None = true
			}
		}
	}
	for i, m := range meta {
		if m != nil && res[i].State.Type == ckpt.Regular {
			res[i].State.Mode, res[i].State.UID, res[i].State.GID = m.Mode, m.UID, m.GID
		}
	}
	return res, nil
}

// StateAt returns what path was at the end of turn n (Now: the live tree).
func (s *Store) StateAt(n uint64, path string, live ckpt.Tree) (ckpt.State, error) {
	r, err := s.resolveAt(n, path, live)
	return r.State, err
}

func (s *Store) resolveAt(n uint64, path string, live ckpt.Tree) (resolved, error) {
	p, ok := ckpt.Clean(path)
	if !ok {
		return resolved{}, fmt.Errorf("%w: %q", ErrBadPath, path)
	}
	after, err := s.endSeq(n)
	if err != nil {
		return resolved{}, err
	}
	rs, err := s.resolveMany(after, []string{p}, live)
	if err != nil {
		return resolved{}, err
	}
	return rs[0], nil
}

// OpenAt streams the bytes path had at the end of turn n. The state tells
// its type: for anything but a regular file the reader is empty.
func (s *Store) OpenAt(n uint64, path string, live ckpt.Tree) (io.ReadCloser, ckpt.State, error) {
	r, err := s.resolveAt(n, path, live)
	if err != nil {
		return nil, ckpt.State{}, err
	}
	rc, err := s.open(r, live)
	if r.Lost {
		err = fmt.Errorf("%s at the end of turn %d: %w", path, n, err)
	}
	return rc, r.State, err
}

// readAll returns the bytes of r (none for what is not a regular file).
func (s *Store) readAll(r resolved, live ckpt.Tree) ([]byte, error) {
	rc, err := s.open(r, live)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

func (s *Store) open(r resolved, live ckpt.Tree) (io.ReadCloser, error) {
	if r.State.Type != ckpt.Regular {
		return io.NopCloser(bytes.NewReader(nil)), nil
	}
	if r.Data != nil {
		return io.NopCloser(bytes.NewReader(r.Data)), nil
	}
	if r.Lost {
		return nil, fmt.Errorf("%w: the file changed while the project was not mounted, so its bytes from before were never seen", ErrNotCaptured)
	}
	if r.Patch != nil {
		return s.openPatched(r, live)
	}
	if r.Content != nil {
		return s.openContent(r.Content)
	}
	if r.Live == "" || live == nil {
		return nil, fmt.Errorf("%w: no bytes recorded for a regular file", ErrCorrupt)
	}
	return live.Open(r.Live)
}

// Changes lists the paths whose state differs between the end of turn
// `from` and the end of turn `to` (either may be Now), Before being the
// state at `from`. It costs time in proportion to the events after the
// earlier of the two, never to the size of the tree.
func (s *Store) Changes(from, to uint64, live ckpt.Tree) ([]Change, error) {
	return s.changes(from, to, live, nil)
}

func (s *Store) changes(from, to uint64, live ckpt.Tree, ix *touchIndex) ([]Change, error) {
	a, err := s.endSeq(from)
	if err != nil {
		return nil, err
	}
	b, err := s.endSeq(to)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	last := s.nextSeq - 1
	s.mu.Unlock()
	lo, hi := a, b
	if lo > hi {
		lo, hi = hi, lo
	}
	seen := map[string]bool{}
	var cands []string
	add := func(p string) {
		if !seen[p] {
			seen[p] = true
			cands = append(cands, p)
		}
	}
	// Each event's paths, and the names they had at the earlier end: a
	// file changed while its directory had another name, since moved
	// back, is a change under a name no event names.
	var ml moveLog
	err = s.scanNames(lo+1, hi+1, func(r *record) (bool, error) {
		add(r.Path)
		add(ml.back(r.Path))
		if r.To != "" {
			add(r.To)
			add(ml.back(r.To))
		}
		ml.note(r)
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	// What lies below a directory moved between the two ends changed its
	// name without an event of its own: every such path, under its name
	// at the later end and the one it had at the earlier end, so that a
	// directory rename is reported per path (and a file chmodded before
	// its directory moved is seen under its new name).
	if len(ml.moves) > 0 {
		dirs := make([]string, 0, len(ml.moves))
		for _, m := range ml.moves {
			dirs = append(dirs, m.cur)
		}
		below, err := s.belowAt(hi, last, dirs, live)
		if err != nil {
			return nil, err
		}
		for _, p := range below {
			add(p)
			add(ml.back(p))
		}
	}
	before, err := s.resolveManyIx(a, cands, live, ix)
	if err != nil {
		return nil, err
	}
	after, err := s.resolveManyIx(b, cands, live, ix)
	if err != nil {
		return nil, err
	}
	out := map[string]Change{}
	kinds := make([]ckpt.ChangeKind, len(cands))
	for i := range cands {
		k, err := s.compare(before[i], after[i], live)
		if err != nil {
			return nil, err
		}
		kinds[i] = k
	}
	parted := make([]bool, len(cands))
	if err := s.linkChanges(a, b, cands, before, after, kinds, parted, live, last); err != nil {
		return nil, err
	}
	for i, p := range cands {
		if k := kinds[i]; k != "" {
			out[p] = Change{Path: p, Kind: k, Before: before[i].State, After: after[i].State, before: before[i], after: after[i], parted: parted[i]}
		}
	}
	// A path that disappeared while the path it was moved to (by renames
	// of it or of a directory above it) appeared is shown as one rename.
	for _, y := range cands {
		x := ml.back(y)
		if x == y {
			continue
		}
		for _, pair := range [][2]string{{x, y}, {y, x}} {
			gone, came := pair[0], pair[1]
			cx, okx := out[gone]
			cy, oky := out[came]
			if okx && oky && cx.Kind == ckpt.Deleted && cy.Kind == ckpt.Added && cx.Before.Type == cy.After.Type {
				delete(out, gone)
				out[came] = Change{Path: came, From: gone, Kind: ckpt.Renamed, Before: cx.Before, After: cy.After, before: cx.before, after: cy.after}
			}
		}
	}
	list := make([]Change, 0, len(out))
	for _, c := range out {
		list = append(list, c)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Path < list[j].Path })
	return list, nil
}

// belowAt returns every path that may lie below one of dirs right after
// event `after` (last: the newest event): what lies below them in the live
// tree, and, when events came after, the names the paths those events
// touched had then, and what lies below directories moved since. It may
// return paths that were absent then; it costs a walk of the directories
// and one pass over the events since.
func (s *Store) belowAt(after, last uint64, dirs []string, live ckpt.Tree) ([]string, error) {
	var out []string
	unv := s.unversionedFunc()
	for _, d := range dirs {
		if err := walkLive(live, d, unv, func(rel string) { out = append(out, join(d, rel)) }); err != nil {
			return nil, err
		}
	}
	if after < last {
		more, err := s.candidates(after, dirs, live)
		if err != nil {
			return nil, err
		}
		out = append(out, more...)
	}
	return out, nil
}

// OpenChange streams the bytes of one side of a Change returned by Changes
// (after: the later state) without resolving its path again: listing the
// lines of k changed files costs one pass over the log, not k.
func (s *Store) OpenChange(c Change, after bool, live ckpt.Tree) (io.ReadCloser, error) {
	if after {
		return s.open(c.after, live)
	}
	return s.open(c.before, live)
}

// ChangedRanges reports, for a change of a regular file whose two sides
// rest on the same live file (range records over it on one side or
// both), the only ranges where the sides' bytes may differ (differIn): a
// turn's own writes, not those of the turns after it. ok is false when
// the sides are not known to share bytes so (each must then be read
// whole).
func (s *Store) ChangedRanges(c Change) (ranges []int64, ok bool) {
	return differIn(c.before, c.after)
}

// compare classifies the difference between two resolved states ("" if
// none).
func (s *Store) compare(x, y resolved, live ckpt.Tree) (ckpt.ChangeKind, error) {
	a, b := x.State, y.State
	switch {
	case a.Type == b.Type && a.Type == ckpt.Absent:
		return "", nil
	case a.Type == ckpt.Absent:
		return ckpt.Added, nil
	case b.Type == ckpt.Absent:
		return ckpt.Deleted, nil
	case a.Type != b.Type:
		return ckpt.TypeChg, nil
	}
	metaDiff := a.Mode != b.Mode || a.UID != b.UID || a.GID != b.GID
	switch a.Type {
	case ckpt.Symlink:
		if a.Target != b.Target {
			return ckpt.Modified, nil
		}
		metaDiff = a.UID != b.UID || a.GID != b.GID // a symlink has no mode
	case ckpt.CharDevice, ckpt.BlockDevice:
		if a.Rdev != b.Rdev {
			return ckpt.Modified, nil
		}
	case ckpt.Regular:
		same, err := s.sameBytes(x, y, live)
		if err != nil {
			return "", err
		}
		if !same {
			return ckpt.Modified, nil
		}
	}
	if metaDiff {
		return ckpt.ModeOnly, nil
	}
	return "", nil
}

func (s *Store) sameBytes(x, y resolved, live ckpt.Tree) (bool, error) {
	if x.FromLog && y.FromLog && x.Seq == y.Seq && x.Seq != 0 {
		return true, nil // one record
	}
	if x.State.Size != y.State.Size || x.Lost || y.Lost {
		return false, nil // never captured: not known to be the same
	}
	if x.Content != nil && y.Content != nil {
		if x.Content.Attic == "" && y.Content.Attic == "" {
			return bytes.Equal(x.Content.Chunks, y.Content.Chunks), nil
		}
		if x.Content.Attic != "" && x.Content.Attic == y.Content.Attic && x.Content.Off == y.Content.Off {
			return true, nil
		}
	}
	if !x.FromLog && !y.FromLog && x.Live == y.Live {
		return true, nil
	}
	if suspect, ok := differIn(x, y); ok {
		return s.sameAt(x, y, suspect, live)
	}
	ra, err := s.open(x, live)
	if err != nil {
		return false, err
	}
	defer ra.Close()
	rb, err := s.open(y, live)
	if err != nil {
		return false, err
	}
	defer rb.Close()
	return equalReaders(ra, rb)
}

// cmpBufs holds the buffer pairs of equalReaders. A rewind or a listing of
// changes compares thousands of files, most of them small: a fresh 128 KiB
// per comparison cost more than the reads (zeroing and GC were 3.2 s of
// the 8.7 s that listing the changes of three 10k-file rewinds and their
// turns took).
var cmpBufs = sync.Pool{New: func() any { b := make([]byte, 2*cmpBufSize); return &b }}

const cmpBufSize = 64 << 10

func equalReaders(a, b io.Reader) (bool, error) {
	buf := cmpBufs.Get().(*[]byte)
	defer cmpBufs.Put(buf)
	ba, bb := (*buf)[:cmpBufSize], (*buf)[cmpBufSize:]
	for {
		na, ea := io.ReadFull(a, ba)
		nb, eb := io.ReadFull(b, bb)
		if na != nb || !bytes.Equal(ba[:na], bb[:nb]) {
			return false, nil
		}
		if ea == io.EOF || ea == io.ErrUnexpectedEOF {
			return eb == io.EOF || eb == io.ErrUnexpectedEOF, nil
		}
		if ea != nil {
			return false, ea
		}
		if eb != nil {
			return false, eb
		}
	}
}

// TurnChanges is what turn n changed: Changes from the end of the turn
// before it (Turn.Prev: before those merged into it) to its end; for a
// step point, what the step changed. Turn 0 and the start of history have
// none of their own (the start's were forgotten with the turns before
// it, and its steps with them).
func (s *Store) TurnChanges(n uint64, live ckpt.Tree) ([]Change, error) {
	return s.turnChanges(n, live, nil)
}

func (s *Store) turnChanges(n uint64, live ckpt.Tree, ix *touchIndex) ([]Change, error) {
	if turn, _ := SplitPoint(n); turn == 0 || turn <= s.startTurn() {
		return nil, nil
	}
	prev, err := s.prevPoint(n)
	if err != nil {
		return nil, err
	}
	return s.changes(prev, n, live, ix)
}

// Touches reports whether an event recorded in turn n names a path at,
// below or above one of prefixes (root-relative; "" is the whole tree),
// either end of a rename included. It is a cheap, conservative filter for
// a path's history: when it is false, TurnChanges(n) lists nothing at or
// below prefixes (every change Changes finds comes from an event on the
// path itself or on a directory above it, or from a rename to or from
// one of them); when it is true, the turn may still have changed nothing
// there in the end. It costs one pass over the turn's own events.
func (s *Store) Touches(n uint64, prefixes []string) (bool, error) {
	if n == 0 || n <= s.startTurn() {
		return false, nil // no changes of its own (forgotten with the turns before)
	}
	t, err := s.turnRecord(n)
	if err != nil {
		return false, err
	}
	a, err := s.endSeq(t.Prev())
	if err != nil {
		return false, err
	}
	b, err := s.endSeq(n)
	if err != nil {
		return false, err
	}
	related := func(p string) bool {
		for _, d := range prefixes {
			if _, ok := ckpt.Under(p, d); ok {
				return true
			}
			if _, ok := ckpt.Under(d, p); ok {
				return true
			}
		}
		return false
	}
	found := false
	err = s.scanEvents(a+1, b+1, func(r *record) (bool, error) {
		found = related(r.Path) || r.To != "" && related(r.To)
		return !found, nil
	})
	return found, err
}
