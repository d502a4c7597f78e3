package versionstore

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/cockroachdb/pebble/v2"

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
// Forgetting a turn in the middle (merging its changes into its kept
// neighbours) is not done yet: Forget refuses it (ErrNotPrefix).

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
	if err := json.Unmarshal(v, &h); err != nil {
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

// startTurn is HistoryStart().Turn.
func (s *Store) startTurn() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.start.Turn
}

// forgottenErr is the error for turn n, forgotten.
func (s *Store) forgottenErr(n uint64) error {
	h := s.HistoryStart()
	why := "by forget"
	if h.Reason == ckpt.ReasonPolicy {
		why = "by the retention policy"
	}
	return detailf(ErrForgotten, "turn %d was forgotten %s: history starts at turn %d", n, why, h.Turn)
}

// Forget forgets turns, which must be the oldest kept ones (the start of
// history, the turn after it, ...): history then starts at the turn after
// the last of them. A pinned turn, the open turn, and the newest closed
// turn (history must start at a closed turn) cannot be forgotten. It is
// refused while a rewind or a gc runs.
func (s *Store) Forget(turns []uint64, reason string) (ckpt.HistoryStart, error) {
	if len(turns) == 0 {
		return ckpt.HistoryStart{}, detailf(ErrNotPrefix, "no turn to forget")
	}
	if !s.rewindMu.TryLock() {
		return ckpt.HistoryStart{}, detailf(ErrBusy, "a rewind or gc is running; forget when it is done")
	}
	defer s.rewindMu.Unlock()
	ts := slices.Clone(turns)
	slices.Sort(ts)
	ts = slices.Compact(ts)
	start := s.startTurn()
	for _, n := range ts {
		if n < start {
			return ckpt.HistoryStart{}, s.forgottenErr(n)
		}
	}
	if ts[0] != start || ts[len(ts)-1] != start+uint64(len(ts))-1 {
		gap := start
		for _, n := range ts {
			if n != gap {
				break
			}
			gap++
		}
		return ckpt.HistoryStart{}, detailf(ErrNotPrefix,
			"cannot forget turn %d alone: only the oldest kept turns can be forgotten (history starts at turn %d; turn %d is kept), merging a turn into its neighbours is not done yet; try: turnctl forget --before TURN",
			firstNotIn(ts, start), start, gap)
	}
	return s.forgetTo(ts[len(ts)-1]+1, reason)
}

func firstNotIn(ts []uint64, start uint64) uint64 {
	for i, n := range ts {
		if n != start+uint64(i) {
			return n
		}
	}
	return ts[len(ts)-1]
}

// forgetTo moves the start of history to turn to (rewindMu held).
func (s *Store) forgetTo(to uint64, reason string) (ckpt.HistoryStart, error) {
	s.histMu.Lock()
	defer s.histMu.Unlock()
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
	for ok := it.First(); ok; ok = it.Next() {
		var ft ckpt.Turn
		if err := json.Unmarshal(it.Value(), &ft); err != nil {
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
	h := historyInfo{HistoryStart: ckpt.HistoryStart{Turn: to, Reason: reason, At: time.Now().UTC(), Forgotten: old.Forgotten + (to - old.Turn)}, Seq: t.LastSeq}
	putJSON(b, keyHistory, h)
	if err := s.commit(b, pebble.Sync); err != nil {
		return old.HistoryStart, err
	}
	s.mu.Lock()
	s.start = h
	s.mu.Unlock()
	crashpoint.Hit("forget.committed")
	if err := s.wal.SyncWAL(); err != nil {
		return h.HistoryStart, fmt.Errorf("versionstore: history start moved, but the log could not be synced to disk: %w", err)
	}
	return h.HistoryStart, nil
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
	if err := json.Unmarshal(v, &info); err != nil {
		return info, false, fmt.Errorf("%w: manifest: %v", ErrCorrupt, err)
	}
	return info, true, nil
}
