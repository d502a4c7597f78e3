package versionstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/cockroachdb/pebble/v2"
	"golang.org/x/sys/unix"

	"ckptfs/internal/bytejson"
	"ckptfs/internal/ckpt"
	"ckptfs/internal/crashpoint"
)

// recover.go: Recover, which finishes what a crash cut short before the
// tree is served again: a half-done rewind, and renames and exchanges
// recorded but never confirmed.

// Recover finishes a rewind that a crash interrupted. It reports whether
// there was one. Call it before the tree is served again. A rewind that
// stops on bytes it cannot read is rolled back instead (or its rollback
// finished): Recover then returns a *RolledBackError, and the tree is as
// it was before that rewind.
func (s *Store) Recover(live ckpt.Tree) (bool, error) {
	crashpoint.Hit("recover.start")
	s.dropLinkIndex()
	defer s.dropLinkIndex()
	if err := s.dropPhantomRenames(live); err != nil {
		return false, err
	}
	if err := s.UnshareAttic(); err != nil {
		return false, err
	}
	crashpoint.Hit("recover.marks")
	v, closer, err := s.db.Get(keyJournal)
	if err == pebble.ErrNotFound {
		return false, s.closeUnjournaled()
	}
	if err != nil {
		return false, fmt.Errorf("versionstore: %w", err)
	}
	j := &rewindJournal{}
	jerr := bytejson.Unmarshal(v, j)
	closer.Close()
	if jerr == nil && j.Plan {
		if v, closer, err := s.db.Get(keyJournalPlan); err == nil {
			jerr = bytejson.Unmarshal(v, &j.Actions)
			closer.Close()
		} else if err != pebble.ErrNotFound {
			return false, fmt.Errorf("versionstore: %w", err)
		}
	}
	if jerr != nil {
		return false, fmt.Errorf("%w: rewind journal: %v", ErrCorrupt, jerr)
	}
	// The rewind turn must be the open one; reopen it if a crash left it
	// closed (End ran but the journal was not yet deleted).
	if cur, ok := s.Current(); !ok || cur.Num != j.Turn {
		_, unsynced, err := s.finishJournal(j)
		if err != nil {
			return true, err
		}
		if j.Rollback != "" {
			return true, journaledRollback(j, nil)
		}
		return true, unsyncedErr(j.Turn, unsynced)
	}
	// A rewind Recover cannot finish for any reason but unreadable bytes
	// (a full disk) keeps its journal: it is finished at a later start,
	// once the cause is gone, as the user asked for it.
	if err := s.runJournalOrRollBack(j, live, ckpt.Program{Comm: "ckptfs-recover"}, false); err != nil {
		return true, err
	}
	if err := s.noteRewound(j); err != nil {
		return true, err
	}
	_, unsynced, err := s.finishJournal(j)
	if err != nil {
		return true, err
	}
	crashpoint.Hit("recover.done")
	// Finished, but not synced: the daemon's start says so (and, as
	// before, stops; the next start finds nothing to finish).
	return true, unsyncedErr(j.Turn, unsynced)
}

// cutShort ends the label of a turn closeUnjournaled closed; cutShortLater
// that of one that holds changes made after the action failed.
const (
	cutShort      = " (cut short by a crash: nothing changed)"
	cutShortLater = " (it changed nothing; what this turn holds came after)"
)

// closeUnjournaled closes the open turn of a rewind, restore or revert
// that a crash cut short before it saved its journal, with a label that
// says so. Such an action had changed nothing (its journal comes before
// its first change), and its turn must not stay open to take the changes
// made after the restart, as if the rewind had made them (an undo would
// then undo them).
func (s *Store) closeUnjournaled() error {
	cur, ok := s.Current()
	if !ok || cur.Kind != ckpt.KindRewind && cur.Kind != ckpt.KindRevert {
		return nil
	}
	// (A turn that took changes after the action failed to start, in a
	// daemon that went on, holds them: said so. A crash after the
	// relabel finds the label already said.)
	suffix := cutShort
	if !cur.Empty() {
		suffix = cutShortLater
	}
	if !strings.HasSuffix(cur.Label, cutShort) && !strings.HasSuffix(cur.Label, cutShortLater) {
		if _, err := s.Retext(cur.Label + suffix); err != nil {
			return err
		}
	}
	_, err := s.End("")
	return err
}

// unsyncedErr is the error of a rewind Recover finished as turn n but
// whose log could not be synced (finishJournal's unsynced), or nil.
func unsyncedErr(n uint64, unsynced error) error {
	if unsynced == nil {
		return nil
	}
	return fmt.Errorf("versionstore: turn %d closed, but the log could not be synced to disk: %w", n, unsynced)
}

// dropPhantomRenames settles the renames and exchanges recorded but never
// confirmed (RecordRename's pending marks): the process died between
// recording one and the syscall, or between the syscall and its
// confirmation (which is synced: a mark outlives no later change of the
// names). A record of one that did not happen is dropped: history
// would otherwise have later captures of the names stand for the other
// name's state. While a rename runs, the kernel holds the locks of both
// parent directories, the overlay runs no other rename (fusefs: Root.ns;
// a rewind runs alone), and from the kill until this runs nothing else
// serves the tree, so the names are as the kill left them:
//
//   - a rename whose source still exists did not happen (nothing can have
//     created the source name again); one whose source is gone did.
//   - an exchange leaves both names in place either way; its mark holds
//     the inode numbers the two names had just before (RecordExchange).
//     Each name still on its own inode: it did not happen; the two
//     swapped: it did; a name gone: it did not (an exchange leaves both).
//     An exchange whose inode numbers are unknown (a mark written before
//     they were kept, a caller that had none) or are one inode (two hard
//     links: either way the tree is the same) is kept.
//
// A name that cannot be looked at keeps its record, as before marks
// existed. (A caller that renamed an ancestor at the same time, which the
// overlay does not, could mislead this: the kernel does not lock the
// parents' ancestors.)
func (s *Store) dropPhantomRenames(live ckpt.Tree) error {
	if live == nil {
		return nil // the marks wait for a Recover that can look
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: pendingRenamePrefix, UpperBound: upperBytes(pendingRenamePrefix)})
	if err != nil {
		return err
	}
	type mark struct {
		seq uint64
		ids []byte
	}
	var marks []mark
	for ok := it.First(); ok; ok = it.Next() {
		if k := it.Key(); len(k) == len(pendingRenamePrefix)+8 {
			marks = append(marks, mark{binary.BigEndian.Uint64(k[len(pendingRenamePrefix):]), append([]byte(nil), it.Value()...)})
		}
	}
	if err := it.Close(); err != nil {
		return err
	}
	if len(marks) == 0 {
		return nil
	}
	b := s.db.NewBatch()
	defer b.Close()
	dropped := false
	for _, m := range marks {
		b.SingleDelete(pendingRenameKey(m.seq), nil)
		var r *record
		err := s.scanEvents(m.seq, m.seq+1, func(x *record) (bool, error) { r = x; return false, nil })
		if err != nil {
			return err
		}
		if r == nil {
			continue
		}
		happened, known := true, false
		switch r.Op {
		case opRename:
			st, err := live.Lstat(r.Path)
			if known = err == nil; known {
				happened = !st.Exists()
			}
		case opExchange:
			happened, known = exchangeHappened(live, r, m.ids)
		}
		if known && !happened {
			b.Delete(eventKey(m.seq), nil)
			dropped = true
		}
	}
	if err := s.commit(b, pebble.Sync); err != nil {
		return err
	}
	if dropped {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.rebuildTouched()
	}
	return nil
}

// exchangeHappened tells by the inode numbers ids (RecordExchange's mark)
// whether the exchange r was made; known is false when it cannot tell.
func exchangeHappened(live ckpt.Tree, r *record, ids []byte) (happened, known bool) {
	if len(ids) != 16 {
		return true, false
	}
	ia, ib := binary.BigEndian.Uint64(ids), binary.BigEndian.Uint64(ids[8:])
	if ia == 0 || ib == 0 || ia == ib {
		return true, false
	}
	na, err := live.Ident(r.Path)
	if err != nil {
		return true, false
	}
	nb, err := live.Ident(r.To)
	if err != nil {
		return true, false
	}
	switch {
	case na == ia && nb == ib, na == 0 || nb == 0:
		return false, true
	case na == ib && nb == ia:
		return true, true
	}
	return true, false
}

// upperBytes is the exclusive upper bound of all keys starting with p.
func upperBytes(p []byte) []byte {
	u := append([]byte(nil), p...)
	u[len(u)-1]++
	return u
}

// UnshareAttic copies into the store the bytes of each attic file that a
// record of the open turn keeps by link and that still has a name in the
// tree. A capture links the inode of a file about to lose its last name
// (an unlink, a rename over it) into the attic before that change; a
// crash between the two leaves the inode with both names (the rename's
// record dropped as never made, the unlink never done), and so does the
// change failing: a write to the tree's name would change history.
// Recover calls it, and the overlay after such a failure. Only the turn
// open can hold such a record: a clean stop closes it, and a change that
// returned took the name away. The copy (chunks, or a clone) is
// committed, synced, in place of the link before the link is removed; a
// crash in between leaves the old attic name to the gc. It holds rewindMu
// (a running gc stops at its next batch), so that no merge rewrites the
// records it copies for, and two calls do not copy one file twice; a
// record it cannot copy does not keep it from the others.
func (s *Store) UnshareAttic() error {
	cur, ok := s.Current()
	if !ok || s.attic == nil {
		return nil
	}
	s.rewindWaiting.Add(1)
	s.rewindMu.Lock()
	s.rewindWaiting.Add(-1)
	defer s.rewindMu.Unlock()
	s.mu.Lock()
	end := s.nextSeq
	s.mu.Unlock()
	var shared []*record
	err := s.scanEvents(cur.FirstSeq, end, func(r *record) (bool, error) {
		if ref := r.Content; ref != nil && ref.Attic != "" && !ref.Part {
			var st unix.Stat_t
			if unix.Fstatat(int(s.attic.Fd()), ref.Attic, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Nlink > 1 {
				shared = append(shared, r)
			}
		}
		return true, nil
	})
	if err != nil {
		return err
	}
	var errs []error
	for _, r := range shared {
		if err := s.unshare(r); err != nil {
			errs = append(errs, fmt.Errorf("versionstore: attic file %s of %s: %w", r.Content.Attic, r.Path, err))
		}
	}
	return errors.Join(errs...)
}

// unshare keeps event r's bytes, an attic file shared with the tree, by a
// copy of their own (UnshareAttic).
func (s *Store) unshare(r *record) error {
	s.contentMu.RLock()
	defer s.contentMu.RUnlock()
	old := *r.Content
	ref, err := s.keepBytes(ckpt.Capture{Path: r.Path, Prior: r.State, Open: func() (*os.File, error) { return s.openAttic(&old) }})
	if err != nil {
		return err
	}
	r.Content = ref
	b := s.db.NewBatch()
	defer b.Close()
	putEvent(b, r)
	if err := s.commit(b, pebble.Sync); err != nil {
		return err
	}
	crashpoint.Hit("recover.unshared")
	if err := unix.Unlinkat(int(s.attic.Fd()), old.Attic, 0); err != nil && err != unix.ENOENT {
		return err
	}
	return nil
}
