package versionstore

import (
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"ckptfs/internal/ckpt"
	"ckptfs/internal/crashpoint"
)

// rewind_rollback.go: a rewind, restore or revert that meets bytes it
// cannot read half-way is undone.
//
// Before changing anything, a rewind checks the bytes of span files and
// attic files it will read (checkKept); chunks are found damaged or
// missing only as they are read, maybe half-way. Stopping there would
// leave the tree half-restored and the journal behind, which Recover
// would run again, and fail again, at every start: the project could not
// be mounted. Instead, the turn's own records, which hold the prior state
// of every path the rewind changed so far, are undone by a second journal
// in the same turn: a rollback, a whole-tree rewind to the point just
// before the turn's first record. Those records are readable: while a
// rewind runs, a capture that would reuse a stored chunk checks it and
// stores the bytes again if it is damaged (checkReused). The turn then
// ends, relabelled and without a Target, and the caller gets a
// *RolledBackError. A rollback that a crash cuts short is finished by the
// next Recover; one that meets unreadable bytes in turn ends the turn as
// it is (Incomplete), since no later start could do better.

// RolledBackError says that a rewind, restore or revert stopped half-way
// on bytes it could not read, and that what it had changed was undone:
// the tree is as it was before it; or, with Incomplete, that undoing it
// failed too (bytes lost twice over), so the tree is left partly
// rewound and the turn ended rather than leave a journal no start could
// finish. It matches ErrCorrupt.
type RolledBackError struct {
	Turn       uint64 // the rewind's turn, ended
	Cause      error  // what stopped it
	Incomplete error  // what stopped the rollback; nil if it ran to its end
}

func (e *RolledBackError) Error() string {
	if e.Incomplete != nil {
		return fmt.Sprintf("%v; it stopped half-way, and undoing what it had changed failed too (%v): the tree is left partly rewound (turn %d)", e.Cause, e.Incomplete, e.Turn)
	}
	return fmt.Sprintf("%v; it stopped half-way, and what it had changed is undone (turn %d)", e.Cause, e.Turn)
}

func (e *RolledBackError) Unwrap() error { return e.Cause }

// journaledCause is the cause a rollback journal keeps (its Rollback), as
// an error: the one that stopped the rewind, before a crash.
type journaledCause string

func (c journaledCause) Error() string        { return string(c) }
func (c journaledCause) Is(target error) bool { return target == ErrCorrupt }

// runJournalOrRollBack runs j. If j fails on bytes it cannot read
// (ErrCorrupt), it rolls back what j's turn changed and returns a
// *RolledBackError once the rollback has ended (the turn ended, the
// journal dropped). A rollback journal (one Recover found) is run to its
// end the same way. While it runs, captures check the chunks they reuse
// (checkReused), so that the rollback does not meet the same damage.
func (s *Store) runJournalOrRollBack(j *rewindJournal, live ckpt.Tree, who ckpt.Program) error {
	s.checkReused.Store(true)
	defer s.checkReused.Store(false)
	err := s.runJournal(j, live, who)
	switch {
	case err == nil && j.Rollback == "":
		return nil
	case err != nil && j.Rollback == "" && !errors.Is(err, ErrCorrupt):
		return err
	case err != nil && j.Rollback == "":
		r, jerr := s.rollbackJournal(j, err)
		if jerr != nil {
			return fmt.Errorf("%w; undoing what it had changed could not start: %v", err, jerr)
		}
		j, err = r, s.runJournal(r, live, who)
	}
	rb := &RolledBackError{Turn: j.Turn, Cause: journaledCause(j.Rollback)}
	if err != nil {
		if !errors.Is(err, ErrCorrupt) {
			return fmt.Errorf("%w; undoing what it had changed failed too: %v", rb.Cause, err)
		}
		// Bytes the rollback needs are lost as well: nothing a later
		// start could do would differ. End the turn as it is.
		rb.Incomplete = err
		if cur, ok := s.Current(); ok && cur.Num == j.Turn {
			if err := s.relabel(j.Turn, cur.Label+", not all undone"); err != nil {
				return err
			}
		}
	}
	if _, err := s.finishJournal(j); err != nil {
		return err
	}
	return rb
}

// rollbackJournal journals, in place of j, the rollback of j's turn (the
// open one): every record the turn made is undone. The same batch
// relabels the turn and drops its Target: the tree does not end as
// there.
func (s *Store) rollbackJournal(j *rewindJournal, cause error) (*rewindJournal, error) {
	b := s.db.NewBatch()
	defer b.Close()
	s.mu.Lock()
	if s.cur == nil || s.cur.Num != j.Turn {
		s.mu.Unlock()
		return nil, fmt.Errorf("versionstore: turn %d is not open", j.Turn)
	}
	t := *s.cur
	r := &rewindJournal{Target: j.Target, Turn: j.Turn, Next: s.nextSeq - 1, Stop: t.FirstSeq - 1,
		LinkPass: true, Rollback: cause.Error(), Mark: s.nextSeq, progress: j.progress}
	t.Label = ckpt.LabelOf(t.Label + ": stopped half-way on unreadable bytes, undone")
	t.Target, t.TargetStep = nil, 0
	putJournal(b, r, true)
	putJSON(b, turnKey(t.Num), t)
	err := s.commit(b, pebble.Sync)
	if err == nil {
		s.cur = &t
	}
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if err := s.syncWAL(); err != nil {
		return nil, fmt.Errorf("versionstore: %w", err)
	}
	crashpoint.Hit("rewind.rollback")
	return r, nil
}

// relabel gives the open turn n the label text.
func (s *Store) relabel(n uint64, text string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == nil || s.cur.Num != n {
		return nil
	}
	t := *s.cur
	t.Label = ckpt.LabelOf(text)
	b := s.db.NewBatch()
	defer b.Close()
	putJSON(b, turnKey(n), t)
	if err := s.commit(b, pebble.Sync); err != nil {
		return err
	}
	s.cur = &t
	return nil
}
