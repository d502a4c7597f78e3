package versionstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"golang.org/x/sys/unix"

	"ckptfs/internal/ckpt"
	"ckptfs/internal/crashpoint"
)

// Event ops.
const (
	opPrior    = "p" // Path's whole prior state (type, mode, owner, bytes or target)
	opMeta     = "m" // Path's prior mode and owner only; bytes unchanged
	opRename   = "r" // Path was renamed to To
	opExchange = "x" // Path and To were swapped
	opRange    = "w" // Path's prior state, and the prior bytes of Spans only (ranges.go)
)

// record is one change-log entry, stored under eventKey(seq).
type record struct {
	Seq     uint64      `json:"-"`
	Turn    uint64      `json:"t"`
	Op      string      `json:"o"`
	Path    string      `json:"p"`
	To      string      `json:"q,omitempty"`
	State   ckpt.State  `json:"s"`
	Content *contentRef `json:"c,omitempty"`
	// Lost: the prior bytes of this regular file were never captured (it
	// changed while the project was not mounted); State is still right.
	Lost bool `json:"x,omitempty"`
	// Inode: for the prior state of anything but a directory, the
	// identity of its inode then, and Links the other names it had then
	// (links.go). Records of older stores, and offline records, have none.
	Inode *ckpt.Inode `json:"i,omitempty"`
	Links []string    `json:"l,omitempty"`
	// Spans: for a range record, the offset, length pairs whose prior
	// bytes Content holds, one after another (ranges.go).
	Spans []int64 `json:"w,omitempty"`
}

// NeedsCapture reports whether path still needs its prior state recorded in
// the open turn (metaOnly: for a chmod/chown). It is an in-memory check.
func (s *Store) NeedsCapture(path string, metaOnly bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.needs(path, metaOnly)
}

func (s *Store) needs(path string, metaOnly bool) bool {
	if s.cur == nil {
		return true
	}
	t := s.touched[path]
	if t&touchFull != 0 {
		return false
	}
	return !metaOnly || t&touchMeta == 0
}

// touch updates the open turn's touched set and span sets for an event
// (s.mu held).
func (s *Store) touch(r *record) {
	touchSet(s.touched, r)
	s.touchSpans(r)
}

// touchSet updates a touched set (path -> touchFull|touchMeta|touchRange:
// its prior state, its mode and owner, or some of its bytes are recorded
// since the set began) for event r: a rename or exchange carries the
// marks of the names it moves, and a name renamed over loses its marks
// (it is another object now). A record of a path whose mark says so is
// one no resolution from the set's beginning reaches (merge.go relies on
// it); a range record is never such a one.
func touchSet(touched map[string]uint8, r *record) {
	switch r.Op {
	case opPrior:
		touched[r.Path] |= touchFull
	case opMeta:
		touched[r.Path] |= touchMeta
	case opRange:
		touched[r.Path] |= touchRange | touchMeta
	case opRename, opExchange:
		moveUnder(touched, r, nil)
	}
}

// moveUnder moves the entries of m at and below the names rename or
// exchange r moves, and drops those at and below a name renamed over,
// passing each to dropped (if not nil).
func moveUnder[V any](m map[string]V, r *record, dropped func(V)) {
	moved := map[string]V{}
	for p, v := range m {
		if rest, ok := ckpt.Under(p, r.Path); ok {
			moved[join(r.To, rest)] = v
			delete(m, p)
		} else if rest, ok := ckpt.Under(p, r.To); ok {
			if r.Op == opExchange {
				moved[join(r.Path, rest)] = v
			} else if dropped != nil {
				dropped(v)
			}
			delete(m, p)
		}
	}
	for p, v := range moved {
		m[p] = v
	}
}

func join(dir, rest string) string {
	if rest == "" {
		return dir
	}
	return ckpt.Join(dir, rest)
}

// Record records the prior state of c.Path in the open turn (opening a
// turn of kind manual if none is open), unless it was recorded there
// already. When Record returns nil the record survives a kill -9 of the
// process; only then may the caller change the path. A capture refused
// for want of space (ckpt.ErrStoreFull) first has the store reclaim what
// its retention policy allows (reclaim), and is tried once more.
func (s *Store) Record(c ckpt.Capture, who ckpt.Program) error {
	return s.recordRanges(c, rangesOf(c), who)
}

// recordRanges is Record before a change of the bytes ranges (ascending
// [off, end) pairs; nil: anything), which may be kept as a range record.
func (s *Store) recordRanges(c ckpt.Capture, ranges []int64, who ckpt.Program) error {
	err := s.record(c, ranges, who)
	if errors.Is(err, ckpt.ErrStoreFull) && s.mayReclaim() {
		// What the policy lets go, then, if the write still does not
		// fit, the undo of the newest turn too.
		for _, undoToo := range []bool{false, true} {
			if s.reclaim(undoToo) {
				if err = s.record(c, ranges, who); !errors.Is(err, ckpt.ErrStoreFull) {
					break
				}
			}
		}
	}
	return err
}

func (s *Store) record(c ckpt.Capture, ranges []int64, who ckpt.Program) error {
	p, ok := ckpt.Clean(c.Path)
	if !ok {
		return fmt.Errorf("%w: %q", ErrBadPath, c.Path)
	}
	if !s.NeedsCapture(p, c.MetaOnly) {
		return nil
	}
	if plan, ok := s.planRange(p, c, ranges); ok {
		err := s.recordRange(p, c, plan, who)
		if !errors.Is(err, errRangeShort) {
			if err != nil {
				return s.noteErr(err)
			}
			crashpoint.Hit("record.committed")
			return nil
		}
		// The file is shorter than the spans held say: not a range the
		// turn can tell; its whole state now is kept as the base.
		c.Range = nil
	}
	r := &record{Path: p, State: c.Prior, Op: opPrior}
	if c.MetaOnly && c.Prior.Type == ckpt.Regular {
		r.Op = opMeta
		r.State.Size = 0
	}
	// A record that keeps no bytes (an unlink or rename over a file the
	// attic links, a rename, a mode change) is paid by the ballast on a
	// full disk (checkSpace(0)), so rm and mv work on a disk too full to
	// copy the file. A regular file's prior bytes are checked by keepBytes,
	// once it knows whether it links, clones or copies them: a copy that
	// is refused must not have given up ballast for nothing.
	keeps := r.Op == opPrior && c.Prior.Type == ckpt.Regular
	if !keeps {
		if err := s.checkSpace(0); err != nil {
			return s.noteErr(err)
		}
	}
	if r.Op == opPrior && c.Prior.Type.Linkable() && c.Inode.Known() {
		ino := c.Inode
		r.Inode = &ino
		for _, l := range c.Links {
			if q, ok := ckpt.Clean(l); ok && q != "" && q != p {
				r.Links = append(r.Links, q)
			}
		}
	}
	if keeps {
		// From before keepBytes looks for its chunks until the event
		// naming them is committed: no gc batch deletes them meanwhile
		// (gc.go).
		s.contentMu.RLock()
		defer s.contentMu.RUnlock()
		ref, err := s.keepBytes(c)
		if err != nil {
			return s.noteErr(err)
		}
		r.Content = ref
		s.noteGrowth(ref.Size)
	}
	if err := s.append(r, who, true); err != nil {
		return s.noteErr(err)
	}
	crashpoint.Hit("record.committed")
	return nil
}

// keepBytes keeps the prior bytes of a regular file: linked into the attic
// when the caller offers it, else cloned into the attic where the
// filesystem can (clone.go), else copied into chunks. Whichever way, the
// bytes are durable as doc.go's rules 2 and 3 ask before it returns. It
// checks the space each way needs (checkSpace): a link or a clone none
// for the bytes, a copy theirs.
func (s *Store) keepBytes(c ckpt.Capture) (*contentRef, error) {
	if c.Link != nil && s.attic != nil {
		name := s.atticName()
		if err := c.Link(s.attic, name); err == nil {
			if err := s.checkSpace(0); err != nil {
				unix.Unlinkat(int(s.attic.Fd()), name, 0) // no event names it
				return nil, err
			}
			ref := &contentRef{Size: c.Prior.Size, Attic: name}
			var st unix.Stat_t
			if err := unix.Fstatat(int(s.attic.Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW); err == nil {
				ref.Size = st.Size // what the attic holds, whatever the caller saw
				ref.Ino, ref.MTime = st.Ino, st.Mtim.Nano()
			}
			return ref, nil
		}
	}
	if c.Open == nil {
		return nil, fmt.Errorf("versionstore: capture of %q has no way to read its bytes", c.Path)
	}
	f, err := c.Open()
	if err != nil {
		return nil, fmt.Errorf("versionstore: read prior bytes of %q: %w", c.Path, err)
	}
	defer f.Close()
	// A clone needs no room for the bytes: its blocks are the live file's
	// until that diverges.
	if ref := s.cloneInto(f, c.Prior.Size); ref != nil {
		if err := s.checkSpace(0); err != nil {
			unix.Unlinkat(int(s.attic.Fd()), ref.Attic, 0) // no event names it
			return nil, err
		}
		return ref, nil
	}
	if err := s.checkSpace(c.Prior.Size); err != nil {
		return nil, err
	}
	return s.putContent(f, c.Prior.Size)
}

// append writes one event into the open turn (opening a manual turn if
// needed), synced so that it survives a kill -9. touchNow updates the
// touched set at once (renames do it only when committed).
func (s *Store) append(r *record, who ckpt.Program, touchNow bool) error {
	return s.appendWith(r, who, touchNow, nil)
}

// appendWith is append, with extra writing more keys into the event's
// batch (it gets the event's seq).
func (s *Store) appendWith(r *record, who ckpt.Program, touchNow bool, extra func(b *pebble.Batch, seq uint64)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if (r.Op == opPrior || r.Op == opMeta) && !s.needs(r.Path, r.Op == opMeta) {
		return nil // a concurrent capture of the same path won
	}
	b := s.db.NewBatch()
	defer b.Close()
	newTurn := false
	cur := s.cur
	if cur == nil {
		cur = s.newTurn(b, ckpt.KindManual, "")
		newTurn = true
	}
	r.Seq = s.nextSeq
	r.Turn = cur.Num
	value := putEvent(b, r)
	if extra != nil {
		extra(b, r.Seq)
	}
	addProg := who.Comm != "" && !s.programs[who.Comm]
	if addProg || newTurn {
		t := *cur
		if addProg {
			t.Programs = append(append([]string(nil), t.Programs...), who.Comm)
			sortStrings(t.Programs)
		}
		putJSON(b, turnKey(t.Num), t)
		cur = &t
	}
	// A range record alone in its batch, its bytes (if any) in a span
	// file, goes by the range log: it is most of a turn of random
	// writes' records (rangelog.go). One whose chunks were committed
	// before it, without a sync, needs the synced commit that makes
	// them durable with it.
	// An error after commitRange applied b (the record may not outlive
	// a kill) is returned once the record is counted.
	var err error
	if r.Op == opRange && extra == nil && !addProg && !newTurn && (r.Content == nil || r.Content.Part) {
		var applied bool
		if applied, err = s.commitRange(b, r.Seq, value); !applied {
			return err
		}
	} else if err = s.commit(b, pebble.Sync); err != nil {
		return err
	}
	s.nextSeq++
	if newTurn {
		s.latest = cur.Num
		s.resetTouched()
		s.programs = map[string]bool{}
	}
	if addProg {
		s.programs[who.Comm] = true
	}
	s.cur = cur
	if touchNow {
		s.touch(r)
	}
	return err
}

// Credit adds who to the programs of the open turn, for a change that
// needs no record of its own (a write through FUSE passthrough to a file
// whose prior state the turn holds already). Without an open turn it does
// nothing.
func (s *Store) Credit(who ckpt.Program) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.cur == nil || who.Comm == "" || s.programs[who.Comm] {
		return nil
	}
	t := *s.cur
	t.Programs = append(append([]string(nil), t.Programs...), who.Comm)
	sortStrings(t.Programs)
	b := s.db.NewBatch()
	defer b.Close()
	putJSON(b, turnKey(t.Num), t)
	if err := s.commit(b, pebble.Sync); err != nil {
		s.lastErr, s.lastErrAt = err, time.Now().UTC()
		return err
	}
	s.programs[who.Comm] = true
	s.cur = &t
	return nil
}

// RecordRename records a rename (or, with exchange, a RENAME_EXCHANGE
// whose inode numbers are not known: see RecordExchange) before it is
// carried out. The caller must first Record the prior state of `to` if
// something is there (and it is not an exchange). After the syscall, and
// before anything else may change either name (the overlay: before it
// answers the request), the caller calls commit(true) if it succeeded,
// or commit(false), which removes the record again; either way the
// outcome is durable when commit returns.
func (s *Store) RecordRename(from, to string, exchange bool, who ckpt.Program) (commit func(ok bool), err error) {
	if exchange {
		return s.RecordExchange(from, to, 0, 0, who)
	}
	return s.recordMove(opRename, from, to, nil, who)
}

// RecordExchange records a RENAME_EXCHANGE of a and b before it is carried
// out, as RecordRename does a rename. ia and ib are the inode numbers of a
// and b just before the syscall, taken while nothing else can change
// either name (0: unknown). An exchange leaves both names in place, so
// they are what tells Recover, after a kill between this record and its
// commit, whether the exchange happened (a and b have swapped inodes) or
// not (each still has its own): see dropPhantomRenames.
func (s *Store) RecordExchange(a, b string, ia, ib uint64, who ckpt.Program) (commit func(ok bool), err error) {
	var ids []byte
	if ia != 0 && ib != 0 {
		ids = binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, ia), ib)
	}
	return s.recordMove(opExchange, a, b, ids, who)
}

// recordMove records a rename or exchange with its pending mark, whose
// value is mark.
func (s *Store) recordMove(op, from, to string, mark []byte, who ckpt.Program) (commit func(ok bool), err error) {
	f, ok1 := ckpt.Clean(from)
	t, ok2 := ckpt.Clean(to)
	if !ok1 || !ok2 || f == "" || t == "" {
		return nil, fmt.Errorf("%w: rename %q to %q", ErrBadPath, from, to)
	}
	r := &record{Op: op, Path: f, To: t}
	// The touched set moves only on commit(true): until the rename has
	// happened, the names still mean what they meant.
	if err := s.checkSpace(0); err != nil {
		return nil, s.noteErr(err)
	}
	// The record goes in with a pending mark: a kill before the syscall
	// must not leave a rename in history that never happened. Recover
	// looks at the live tree for every mark it finds (dropPhantomRenames).
	pending := func(b *pebble.Batch, seq uint64) { b.Set(pendingRenameKey(seq), mark, nil) }
	if err := s.appendWith(r, who, false, pending); err != nil {
		return nil, s.noteErr(err)
	}
	crashpoint.Hit("rename.recorded")
	return func(ok bool) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if ok {
			if s.cur != nil && s.cur.Num == r.Turn {
				s.touch(r)
			}
			// Synced: once the caller has answered, the names may
			// change again without a record (a name the turn holds
			// already is removed), and Recover could no longer tell
			// from them whether the move was made. So a mark that
			// survives a kill was left between the record and here,
			// while nothing else could change either name
			// (dropPhantomRenames). A mark is set once, so
			// SingleDelete lets compaction drop both.
			if err := s.db.SingleDelete(pendingRenameKey(r.Seq), pebble.Sync); err != nil {
				log.Printf("versionstore: cannot confirm rename %d (the next Recover settles it): %v", r.Seq, err)
			}
			crashpoint.Hit("rename.confirmed")
			return
		}
		// The rename failed: the record must not stay in history.
		b := s.db.NewBatch()
		defer b.Close()
		b.Delete(eventKey(r.Seq), nil)
		b.SingleDelete(pendingRenameKey(r.Seq), nil)
		if err := b.Commit(pebble.Sync); err != nil {
			log.Printf("versionstore: cannot drop failed rename %d (the next Recover settles it): %v", r.Seq, err)
		}
	}, nil
}

// scanEvents calls fn for every event with from <= seq < to, in order,
// until fn returns false.
func (s *Store) scanEvents(from, to uint64, fn func(*record) (bool, error)) error {
	return s.scan(from, to, false, fn)
}

// scanEventsReverse is scanEvents from newest to oldest.
func (s *Store) scanEventsReverse(from, to uint64, fn func(*record) (bool, error)) error {
	return s.scan(from, to, true, fn)
}

func (s *Store) scan(from, to uint64, reverse bool, fn func(*record) (bool, error)) error {
	return s.scanDecoded(from, to, reverse, decodeRecord, fn)
}

// scanDecoded is scan with each event's value decoded by decode.
func (s *Store) scanDecoded(from, to uint64, reverse bool, decode func(seq uint64, v []byte, r *record) error, fn func(*record) (bool, error)) error {
	if from >= to {
		return nil
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: eventKey(from), UpperBound: eventKey(to)})
	if err != nil {
		return err
	}
	defer it.Close()
	first, next := it.First, it.Next
	if reverse {
		first, next = it.Last, it.Prev
	}
	for ok := first(); ok; ok = next() {
		seq, err := decodeU64Key(prefixEvent, it.Key())
		if err != nil {
			return err
		}
		r := &record{}
		if err := decode(seq, it.Value(), r); err != nil {
			return err
		}
		r.Seq = seq
		more, err := fn(r)
		if err != nil || !more {
			return err
		}
	}
	return it.Error()
}

// An event is written and read by its own methods (rawnames.go), which
// keep its names as bytes: not through bytejson, whose rewrite of a
// value's strings it needs none of.

// putEvent sets r as event r.Seq in b and returns the value it set.
func putEvent(b *pebble.Batch, r *record) []byte {
	data, err := r.MarshalJSON()
	if err != nil {
		panic("versionstore: BUG: " + err.Error())
	}
	b.Set(eventKey(r.Seq), data, nil)
	return data
}

// decodeRecord reads event seq's value v into r.
func decodeRecord(seq uint64, v []byte, r *record) error {
	if err := r.UnmarshalJSON(v); err != nil {
		return fmt.Errorf("%w: event %d: %v", ErrCorrupt, seq, err)
	}
	return nil
}

func sortStrings(a []string) {
	for i := 1; i < len(a); i++ {
		for j := i; j > 0 && a[j] < a[j-1]; j-- {
			a[j], a[j-1] = a[j-1], a[j]
		}
	}
}
