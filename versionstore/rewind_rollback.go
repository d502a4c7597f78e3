package versionstore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"syscall"

	"github.com/cockroachdb/pebble/v2"

	"ckptfs/internal/ckpt"
	"ckptfs/internal/crashpoint"
	"ckptfs/internal/units"
)

// rewind_rollback.go: a rewind, restore or revert that fails half-way
// is undone.
//
// Before changing anything, a rewind checks the bytes of span files and
// attic files it will read (checkKept) and the space it needs
// (checkRewindSpace); chunks are found damaged or missing only as they
// are read, and the disk may fill up or a write fail, maybe half-way.
// Stopping there would leave the tree half-restored, the journal behind
// and the rewind's turn open, with the target as its parent: the user's
// next edits would go into it, drawn as a fork that never happened, and
// Recover would run it again at the next start (after unreadable bytes,
// fail again at every start: the project could not be mounted). Instead,
// the turn's own records, which hold the prior state of every path the
// rewind changed so far, are undone by a second journal in the same
// turn: a rollback, a whole-tree rewind to the point just before the
// turn's first record. Those records are readable: while a rewind runs,
// a capture that would reuse a stored chunk checks it and stores the
// bytes again if it is damaged (checkReused). A rollback needs no room
// in the store either: every path it changes was recorded in the turn
// already. The turn then ends, relabelled and without a Target (the tree
// ends where the turn before left it: no fork), and the caller gets a
// *RolledBackError. The turn is kept rather than dropped, even if the
// rewind failed before recording anything: its number may have been
// shown already (progress, the error), the records it holds are changes
// the tree did go through, and a later turn never reuses a number.
//
// A rollback that a crash cuts short is finished by the next Recover;
// one that fails in turn (unreadable bytes, a change it cannot make)
// ends the turn as it is (Incomplete), since no later start could do
// better, but for want of space (wantsSpace), which a later start may
// have back: that one keeps its journal and the turn open. Recover itself
// rolls back only a rewind it cannot finish for unreadable bytes: one
// that fails otherwise (a full disk) keeps its journal for a later
// start, as a crash left it.

// The Why of a rollback journal: what stopped the rewind it undoes.
const (
	whyUnreadable = ""       // bytes it could not read (ErrCorrupt); journals of older versions
	whyFull       = "full"   // the store's disk was full (ckpt.ErrStoreFull)
	whyFailed     = "failed" // any other error
)

// RolledBackError says that a rewind, restore or revert stopped half-way,
// and that what it had changed was undone: the tree is as it was before
// it; or, with Incomplete, that undoing it failed too (bytes lost twice
// over, a change refused), so the tree is left partly rewound and the
// turn ended rather than leave a journal no start could finish. It matches what stopped
// it: ErrCorrupt for unreadable bytes, ckpt.ErrStoreFull for a full
// store (and, unless it was found by Recover, the error itself).
type RolledBackError struct {
	Turn       uint64 // the rewind's turn, ended
	Cause      error  // what stopped it
	Incomplete error  // what stopped the rollback; nil if it ran to its end
	// Op and Reason, for a rewind that stopped on anything but unreadable
	// bytes: what it calls itself ("rewind to turn 3") and, in one line,
	// what failed ("the store is full (4.0 MiB free)").
	Op, Reason string
}

func (e *RolledBackError) Error() string {
	switch {
	case e.Op != "" && e.Incomplete != nil:
		return fmt.Sprintf("%s failed: %s; undoing what it had changed failed too (%v): the tree is left partly rewound (turn %d)", e.Op, e.Reason, e.Incomplete, e.Turn)
	case e.Op != "":
		return fmt.Sprintf("%s failed: %s; nothing changed", e.Op, e.Reason)
	case e.Incomplete != nil:
		return fmt.Sprintf("%v; it stopped half-way, and undoing what it had changed failed too (%v): the tree is left partly rewound (turn %d)", e.Cause, e.Incomplete, e.Turn)
	}
	return fmt.Sprintf("%v; it stopped half-way, and what it had changed is undone (turn %d)", e.Cause, e.Turn)
}

func (e *RolledBackError) Unwrap() error { return e.Cause }

// journaledCause is the cause a rollback journal keeps (its Rollback and
// Why), as an error: the one that stopped the rewind, before a crash.
type journaledCause struct{ text, why string }

func (c journaledCause) Error() string { return c.text }
func (c journaledCause) Is(target error) bool {
	switch c.why {
	case whyUnreadable:
		return target == ErrCorrupt
	case whyFull:
		return target == ckpt.ErrStoreFull
	}
	return false
}

// journaledRollback is the error of the rollback journal j once it has
// run: cause is what stopped the rewind, or nil for the one j keeps.
func journaledRollback(j *rewindJournal, cause error) *RolledBackError {
	if cause == nil {
		cause = journaledCause{j.Rollback, j.Why}
	}
	rb := &RolledBackError{Turn: j.Turn, Cause: cause}
	if j.Why != whyUnreadable {
		rb.Op, rb.Reason = j.Op, j.Rollback
		if rb.Op == "" {
			rb.Op = fmt.Sprintf("the rewind of turn %d", j.Turn)
		}
	}
	return rb
}

// runJournalOrRollBack runs j. If j fails on bytes it cannot read
// (ErrCorrupt), or with any (all) on any error, it rolls back what j's
// turn changed and returns a *RolledBackError once the rollback has
// ended (the turn ended, the journal dropped). A rollback journal (one
// Recover found) is run to its end the same way. While it runs, captures
// check the chunks they reuse (checkReused), so that the rollback does
// not meet the same damage. A rollback that fails ends the turn as it
// is, unless for want of space (endRollback); one that cannot start
// leaves its journal and the turn open, for Recover.
func (s *Store) runJournalOrRollBack(j *rewindJournal, live ckpt.Tree, who ckpt.Program, all bool) error {
	s.checkReused.Store(true)
	defer s.checkReused.Store(false)
	err := s.runJournal(j, live, who)
	switch {
	case err == nil && j.Rollback == "":
		return nil
	case err != nil && j.Rollback == "" && !errors.Is(err, ErrCorrupt) && !all:
		return err
	case err != nil && j.Rollback == "":
		return s.rollBack(j, err, live, who)
	}
	return s.endRollback(j, nil, err)
}

// rollBackUnsaved rolls back the rewind j, whose turn is open but whose
// journal could not be saved, or not synced (cause; maybe half there: a
// commit whose sync fails is applied all the same). Nothing has changed
// yet, but it ends as a rewind that failed half-way does, through a
// rollback with nothing to undo: the turn relabelled, without a Target,
// and closed, and a *RolledBackError saying nothing changed. Left open,
// the user's next edits would go into a "rewind" turn forked at the
// target, and a journal that did reach the disk would make the next
// start run the rewind the user was told had failed.
func (s *Store) rollBackUnsaved(j *rewindJournal, cause error, live ckpt.Tree, who ckpt.Program) error {
	s.checkReused.Store(true)
	defer s.checkReused.Store(false)
	return s.rollBack(j, cause, live, who)
}

// rollBack journals and runs the rollback of j's turn, which cause
// stopped, and ends it (endRollback).
func (s *Store) rollBack(j *rewindJournal, cause error, live ckpt.Tree, who ckpt.Program) error {
	r, jerr := s.rollbackJournal(j, cause)
	if jerr != nil {
		return fmt.Errorf("%w; undoing what it had changed could not start: %v", cause, jerr)
	}
	if r.Why == whyUnreadable {
		cause = nil // the journal keeps it
	}
	return s.endRollback(r, cause, s.runJournal(r, live, who))
}

// endRollback ends the rollback journal j, which ran with err: the turn
// ended and the journal dropped, it returns the *RolledBackError; cause
// is what stopped the rewind j undoes, or nil for the one j keeps.
func (s *Store) endRollback(j *rewindJournal, cause, err error) error {
	rb := journaledRollback(j, cause)
	if err != nil && wantsSpace(err) && rb.Op != "" {
		// Space a later start may have back: the journal stays, the
		// turn open, and the next start finishes undoing.
		return fmt.Errorf("%s failed: %s; undoing what it had changed failed too, the next start finishes it: %w", rb.Op, rb.Reason, err)
	}
	if err != nil {
		// Bytes the rollback needs are lost as well, or a change it
		// must make fails (a permission the daemon lacks): nothing a
		// later start could do would differ. End the turn as it is.
		// Left open with its journal, the user's next edits went into
		// the "rewind" turn, and the next start ran the rollback again
		// over them, or failed to mount.
		rb.Incomplete = err
		if cur, ok := s.Current(); ok && cur.Num == j.Turn {
			if err := s.relabel(j.Turn, cur.Label+", not all undone"); err != nil {
				return err
			}
		}
	}
	// Undone and its turn closed: a log that then cannot be synced
	// (kept as the store's last error, see Health) changes nothing of
	// what rb says.
	if _, _, err := s.finishJournal(j); err != nil {
		return err
	}
	return rb
}

// wantsSpace reports whether err is a want of space (the store's or the
// tree's disk full, a quota), which may be gone at a later start.
func wantsSpace(err error) bool {
	return errors.Is(err, ckpt.ErrStoreFull) || errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// failure is what stopped a rewind (err, not unreadable bytes) as a
// rollback journal keeps it: its Why, and a reason in one line for the
// user, without the inner workings (which event, which pass).
func (s *Store) failure(err error) (why, reason string) {
	if errors.Is(err, ckpt.ErrStoreFull) {
		if free, _, ok := s.storeSpace(); ok {
			return whyFull, fmt.Sprintf("the store is full (%s free)", units.Bytes(free))
		}
		return whyFull, "the store is full"
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return whyFailed, fmt.Sprintf("%s %s: %v", pe.Op, pe.Path, pe.Err)
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return whyFailed, fmt.Sprintf("%s %s %s: %v", le.Op, le.Old, le.New, le.Err)
	}
	return whyFailed, strings.ReplaceAll(err.Error(), "versionstore: ", "")
}

// rollbackJournal journals, in place of j, the rollback of j's turn (the
// open one), which cause stopped: every record the turn made is undone.
// The same batch relabels the turn and drops its Target: the tree does
// not end as there.
func (s *Store) rollbackJournal(j *rewindJournal, cause error) (*rewindJournal, error) {
	why, text := whyUnreadable, cause.Error()
	suffix := ": stopped half-way on unreadable bytes, undone"
	if !errors.Is(cause, ErrCorrupt) {
		why, text = s.failure(cause)
		suffix = ": failed half-way, undone"
		if why == whyFull {
			suffix = ": failed half-way, the store full; undone"
		}
	}
	b := s.db.NewBatch()
	defer b.Close()
	s.mu.Lock()
	if s.cur == nil || s.cur.Num != j.Turn {
		s.mu.Unlock()
		return nil, fmt.Errorf("versionstore: turn %d is not open", j.Turn)
	}
	t := *s.cur
	r := &rewindJournal{Target: j.Target, Turn: j.Turn, Next: s.nextSeq - 1, Stop: t.FirstSeq - 1,
		LinkPass: true, Rollback: text, Why: why, Op: j.Op, Mark: s.nextSeq, progress: j.progress}
	t.Label = ckpt.LabelOf(t.Label + suffix)
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
	_, err := s.retext(text)
	return err
}
