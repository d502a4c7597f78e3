package versionstore

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"ckptfs/internal/bytejson"
	"ckptfs/internal/ckpt"
	"ckptfs/internal/crashpoint"
)

// history.go: where history starts, and forgetting its oldest turns.
//
// To rewind to turn T the store needs the events after T's end (and the
// content they name); the events up to T's end serve only the turns
// before T. Forgetting the turns start..K-1 (a prefix of the kept
// history) therefore moves the start of history to K: the state at the
// end of K becomes the oldest one kept, as turn 0's is in a store that
// forgot nothing, and the events up to K's end, the turn records below K
// and their refs are deleted, in one synced batch (so a crash leaves
// either the old start or the new one). Every kept turn still rewinds
// exactly, and its changes (show, diff) are what they were, but for K's
// own: they were K's events. The content only those events named becomes
// garbage, which gc reclaims (gc.go).
//
// Forgetting a turn in the middle merges its changes into the kept turn
// after it (merge.go).

// historyInfo is the value under keyHistory.
type historyInfo struct {
	ckpt.HistoryStart
	// Seq: the events up to Seq (the end of Turn) are not needed any
	// more. Those a saved manifest needs are kept until it is dropped.
	Seq uint64 `json:"seq"`
}

func (s *Store) loadHistory() error {
	v, closer, err := s.db.Get(keyHistory)
	if err == pebble.ErrNotFound {
		s.start = historyInfo{}
		return nil
	}
	if err != nil {
		return fmt.Errorf("versionstore: %w", err)
	}
	defer closer.Close()
	var h historyInfo
	if err := bytejson.Unmarshal(v, &h); err != nil {
		return fmt.Errorf("%w: history start: %v", ErrCorrupt, err)
	}
	s.start = h
	return nil
}

// HistoryStart returns where history starts: the oldest turn whose end
// state is kept (0 in a history that forgot nothing, with Reason "").
func (s *Store) HistoryStart() ckpt.HistoryStart {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.start.HistoryStart
}

// HistoryGen changes (in this process) each time a forget, a merge, a
// pin or an unpin may have changed which turns are kept, what they hold
// or their pins; no turn's beginning or end changes it. Each opening of
// the store starts it anew, at the clock (microseconds): one opening's
// values are not another's.
func (s *Store) HistoryGen() uint64 { return s.histGen.Load() }

// startTurn is HistoryStart().Turn.
func (s *Store) startTurn() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.start.Turn
}

// forgottenErr is the error for turn n, forgotten.
func (s *Store) forgottenErr(n uint64) error {
	h := s.HistoryStart()
	if n >= h.Turn {
		if into, ok, err := s.mergedInto(n); err == nil && ok {
			return detailf(ErrForgotten, "turn %d was forgotten: its changes were merged into turn %d", n, into)
		}
	}
	why := h.By()
	return detailf(ErrForgotten, "turn %d was forgotten %s: history starts at turn %d", n, why, h.Turn)
}

// Forget forgets turns: history can no longer be rewound to their ends.
// Those that are the oldest kept ones (the start of history, the turn
// after it, ...) move the start of history to the turn after the last of
// them; every other run of consecutive turns is merged into the kept turn
// after it (merge.go). A pinned turn, the open turn, and the newest
// closed turn cannot be forgotten, nor one a turn that is open continues
// from; then nothing is forgotten. It is refused while a rewind or a gc
// runs.
func (s *Store) Forget(turns []uint64, reason string) (ckpt.HistoryStart, error) {
	if len(turns) == 0 {
		return ckpt.HistoryStart{}, detailf(ErrBadTurn, "no turn to forget")
	}
	if !s.rewindMu.TryLock() {
		return ckpt.HistoryStart{}, detailf(ErrBusy, "a rewind or gc is running; forget when it is done")
	}
	defer s.rewindMu.Unlock()
	ts := slices.Clone(turns)
	slices.Sort(ts)
	ts = slices.Compact(ts)
	return s.forget(ts, reason)
}

// PlannedMerge is a turn a forget merges into the kept turn Into.
type PlannedMerge struct{ Turn, Into uint64 }

// PlanForget says what Forget(turns) would do, changing nothing: where
// history would start (the start now if it does not move) and which
// turns it would merge into which; or the error Forget would return.
func (s *Store) PlanForget(turns []uint64) (uint64, []PlannedMerge, error) {
	if len(turns) == 0 {
		return 0, nil, detailf(ErrBadTurn, "no turn to forget")
	}
	ts := slices.Clone(turns)
	slices.Sort(ts)
	ts = slices.Compact(ts)
	s.histMu.Lock()
	defer s.histMu.Unlock()
	to, runs, err := s.planForgetLocked(ts)
	if err != nil {
		return 0, nil, err
	}
	var merged []PlannedMerge
	for _, r := range runs {
		for _, n := range ts {
			if n >= r.first && n <= r.last {
				merged = append(merged, PlannedMerge{n, r.into.Num})
			}
		}
	}
	return to, merged, nil
}

// planForgetLocked checks that the turns ts (sorted, unique) can be
// forgotten and returns where history then starts and the runs merged
// (histMu held).
func (s *Store) planForgetLocked(ts []uint64) (uint64, []mergePlan, error) {
	start := s.startTurn()
	open, hasOpen := s.Current()
	pins, err := s.pinnedLocked()
	if err != nil {
		return 0, nil, err
	}
	for _, n := range ts {
		if n < start {
			return 0, nil, s.forgottenErr(n)
		}
		if hasOpen && open.Num == n {
			return 0, nil, detailf(ErrOpenTurn, "cannot forget turn %d: it is open (turnctl end closes it)", n)
		}
		if n > s.Latest() {
			return 0, nil, detailf(ErrTurnNotFound, "no turn %d", n)
		}
		if _, err := s.storedTurn(n); errors.Is(err, ErrTurnNotFound) {
			return 0, nil, s.forgottenErr(n)
		} else if err != nil {
			return 0, nil, err
		}
		if s.holds[n] > 0 {
			return 0, nil, detailf(ErrPinned, "cannot forget turn %d: a view of it is mounted (ckptfs mount --at; ckptfs umount it first)", n)
		}
		if pins[n] {
			return 0, nil, detailf(ErrPinned, "cannot forget turn %d: it is pinned (turnctl unpin %d first)", n, n)
		}
	}
	kept, err := s.keptTurns()
	if err != nil {
		return 0, nil, err
	}
	// The oldest kept turns move the start; the others are merged.
	i := 0
	for i < len(ts) && i < len(kept) && ts[i] == kept[i].Num {
		i++
	}
	to := start
	if i > 0 {
		if i == len(kept) {
			return 0, nil, detailf(ErrOpenTurn, "cannot forget turn %d: it is the newest turn, and history must start at a turn", ts[i-1])
		}
		if kept[i].Open {
			return 0, nil, detailf(ErrOpenTurn, "cannot forget turn %d: it is the newest closed turn, and history must start at a closed turn", ts[i-1])
		}
		to = kept[i].Num
	}
	runs, err := s.mergeRuns(ts[i:], kept)
	if err != nil {
		return 0, nil, err
	}
	return to, runs, nil
}

// forget is Forget with ts sorted and unique (rewindMu held). It holds
// histMu throughout, so that no pin comes to name a turn it forgets.
func (s *Store) forget(ts []uint64, reason string) (ckpt.HistoryStart, error) {
	s.histMu.Lock()
	defer s.histMu.Unlock()
	defer s.histGen.Add(1)
	start := s.startTurn()
	to, runs, err := s.planForgetLocked(ts)
	if err != nil {
		return ckpt.HistoryStart{}, err
	}
	h := s.HistoryStart()
	if to > start {
		if h, err = s.forgetToLocked(to, reason); err != nil {
			return h, err
		}
	}
	if len(runs) > 0 {
		for _, r := range runs {
			if _, err := s.merge(r); err != nil {
				return h, err
			}
		}
		if err := s.syncWAL(); err != nil {
			return h, fmt.Errorf("versionstore: turns merged, but the log could not be synced to disk: %w", err)
		}
	}
	return h, nil
}

// forgetTo moves the start of history to turn to (rewindMu held).
func (s *Store) forgetTo(to uint64, reason string) (ckpt.HistoryStart, error) {
	s.histMu.Lock()
	defer s.histMu.Unlock()
	defer s.histGen.Add(1)
	return s.forgetToLocked(to, reason)
}

// forgetToLocked is forgetTo with histMu held.
func (s *Store) forgetToLocked(to uint64, reason string) (ckpt.HistoryStart, error) {
	s.mu.Lock()
	old := s.start
	latest := s.latest
	var open *ckpt.Turn
	if s.cur != nil {
		c := *s.cur
		open = &c
	}
	s.mu.Unlock()
	if to <= old.Turn {
		return old.HistoryStart, nil
	}
	if open != nil && open.Num < to {
		return old.HistoryStart, detailf(ErrOpenTurn, "cannot forget turn %d: it is open (turnctl end closes it)", open.Num)
	}
	if to > latest || (open != nil && open.Num == to) {
		return old.HistoryStart, detailf(ErrOpenTurn, "cannot forget turn %d: it is the newest closed turn, and history must start at a closed turn", to-1)
	}
	pins, err := s.Pins()
	if err != nil {
		return old.HistoryStart, err
	}
	for _, p := range pins {
		if p.Turn >= old.Turn && p.Turn < to {
			return old.HistoryStart, detailf(ErrPinned, "cannot forget turn %d: it is pinned (turnctl unpin %d first)", p.Turn, p.Turn)
		}
	}
	held := to
	for n := range s.holds {
		if n >= old.Turn && n < held {
			held = n
		}
	}
	if held < to {
		return old.HistoryStart, detailf(ErrPinned, "cannot forget turn %d: a view of it is mounted (ckptfs mount --at; ckptfs umount it first)", held)
	}
	t, err := s.storedTurn(to)
	if err != nil {
		return old.HistoryStart, err
	}
	b := s.db.NewBatch()
	defer b.Close()
	// The refs of the forgotten turns.
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: turnKey(old.Turn), UpperBound: turnKey(to)})
	if err != nil {
		return old.HistoryStart, err
	}
	forgotten := uint64(0)
	for ok := it.First(); ok; ok = it.Next() {
		forgotten++
		var ft ckpt.Turn
		if err := bytejson.Unmarshal(it.Value(), &ft); err != nil {
			it.Close()
			return old.HistoryStart, fmt.Errorf("%w: turn: %v", ErrCorrupt, err)
		}
		for _, r := range ft.Refs {
			b.Delete(refKey(r), nil)
		}
	}
	if err := it.Close(); err != nil {
		return old.HistoryStart, err
	}
	b.DeleteRange(turnKey(0), turnKey(to), nil)
	b.DeleteRange(textKey(0), textKey(to), nil)
	b.DeleteRange(rewoundKey(0), rewoundKey(to), nil)
	b.DeleteRange(stepKey(0, 0), stepKey(to+1, 0), nil) // the new start's too: its events go
	// The events up to the new start's end; those a saved manifest still
	// names the paths of (recorded after it: a rewind with no daemon) are
	// kept until the next mount drops the manifest (offline.go).
	last := t.LastSeq
	if info, ok, err := s.manifestInfo(); err != nil {
		return old.HistoryStart, err
	} else if ok && info.Events > 0 && info.Events-1 < last {
		last = info.Events - 1
	}
	b.DeleteRange(eventKey(0), eventKey(last+1), nil)
	h := historyInfo{HistoryStart: ckpt.HistoryStart{Turn: to, Reason: reason, At: time.Now().UTC(), Forgotten: old.Forgotten + forgotten}, Seq: t.LastSeq}
	putJSON(b, keyHistory, h)
	// The new start's own changes go with the turns before it: so do the
	// counts cached for it. Under s.mu, as SetStats writes them, which
	// refuses a turn at or before the start from then on.
	s.mu.Lock()
	err = s.commitStart(b, h, to)
	s.mu.Unlock()
	if err != nil {
		return old.HistoryStart, err
	}
	crashpoint.Hit("forget.committed")
	if err := s.syncWAL(); err != nil {
		return h.HistoryStart, fmt.Errorf("versionstore: history start moved, but the log could not be synced to disk: %w", err)
	}
	return h.HistoryStart, nil
}

// commitStart commits b, which moves history's start to h at turn to,
// with turn to's cached counts emptied (s.mu held).
func (s *Store) commitStart(b *pebble.Batch, h historyInfo, to uint64) error {
	t, err := s.storedTurn(to)
	if err != nil {
		return err
	}
	t.Stats = &ckpt.Stats{}
	putJSON(b, turnKey(to), t)
	if err := s.commit(b, pebble.Sync); err != nil {
		return err
	}
	s.start = h
	return nil
}

// manifestInfo reads the saved manifest's header, if there is one.
func (s *Store) manifestInfo() (manifestInfo, bool, error) {
	var info manifestInfo
	v, closer, err := s.db.Get(keyManifest)
	if err == pebble.ErrNotFound {
		return info, false, nil
	}
	if err != nil {
		return info, false, fmt.Errorf("versionstore: %w", err)
	}
	defer closer.Close()
	if err := bytejson.Unmarshal(v, &info); err != nil {
		return info, false, fmt.Errorf("%w: manifest: %v", ErrCorrupt, err)
	}
	return info, true, nil
}
