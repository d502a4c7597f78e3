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
// of every path the rewind changed so far (captured as it went, so
// readable), are undone by a second journal in the same turn: a rollback,
// a whole-tree rewind to the point just before the turn's first record.
// The turn then ends, its label saying so, and the caller gets a
// *RolledBackError. A rollback that fails in turn keeps its journal: the
// next Recover tries it again.

// RolledBackError says that a rewind, restore or revert stopped half-way
// on bytes it could not read, and that what it had changed was undone:
// the tree is as it was before it. It matches ErrCorrupt.
type RolledBackError struct {
	Turn  uint64 // the rewind's turn, ended with nothing changed
	Cause error  // what stopped it
}

func (e *RolledBackError) Error() string {
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
// *RolledBackError once the rollback has run to its end (the turn ended,
// the journal dropped). A rollback journal (one Recover found) is run to
// its end the same way.
func (s *Store) runJournalOrRollBack(j *rewindJournal, live ckpt.Tree, who ckpt.Program) error {
	err := s.runJournal(j, live, who)
	var cause error = journaledCause(j.Rollback)
	switch {
	case err == nil && j.Rollback == "":
		return nil
	case err != nil && (j.Rollback != "" || !errors.Is(err, ErrCorrupt)):
		return err
	case err != nil:
		cause = err
		r, jerr := s.rollbackJournal(j, err)
		if jerr != nil {
			return fmt.Errorf("%w; undoing what it had changed could not start: %v", err, jerr)
		}
		if rerr := s.runJournal(r, live, who); rerr != nil {
			return fmt.Errorf("%w; undoing what it had changed failed too: %v", err, rerr)
		}
		j = r
	}
	if cur, ok := s.Current(); ok && cur.Num == j.Turn {
		if err := s.relabel(j.Turn, cur.Label+": stopped half-way on unreadable bytes, undone"); err != nil {
			return err
		}
	}
	if _, err := s.finishJournal(j); err != nil {
		return err
	}
	return &RolledBackError{Turn: j.Turn, Cause: cause}
}

// rollbackJournal journals, in place of j, the rollback of j's turn (the
// open one): every record the turn made is undone.
func (s *Store) rollbackJournal(j *rewindJournal, cause error) (*rewindJournal, error) {
	cur, ok := s.Current()
	if !ok || cur.Num != j.Turn {
		return nil, fmt.Errorf("versionstore: turn %d is not open", j.Turn)
	}
	s.mu.Lock()
	last := s.nextSeq - 1
	s.mu.Unlock()
	r := &rewindJournal{Target: j.Target, Turn: j.Turn, Next: last, Stop: cur.FirstSeq - 1,
		LinkPass: true, Rollback: cause.Error(), progress: j.progress}
	if err := s.putJournal(r, r.Turn, r.Target); err != nil {
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
