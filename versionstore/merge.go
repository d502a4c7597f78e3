package versionstore

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"

	"ckptfs/internal/bytejson"
	"ckptfs/internal/ckpt"
	"ckptfs/internal/crashpoint"
)

// merge.go: forgetting turns in the middle of history by merging them
// into the next kept turn.
//
// To rewind to turn T the store needs T's end: the boundary between T's
// events and the next turn's. Forgetting the run of turns K..M (K after
// the start of history, M+1 a kept closed turn) removes the boundaries
// at their ends: their events and M+1's become one turn, numbered M+1,
// whose range starts at K's first event (Turn.MergedFrom = K, or the
// MergedFrom K already had). No other turn's end moves, and resolution
// from any kept end reads the same events as before, so every kept turn
// rewinds as it did.
//
// What it frees: a turn records a path's prior state only at its first
// change in the turn (the touched set, capture.go). In the merged turn
// the later of two such records of one path (following renames as the
// touched set does) is one the forward scan never reaches: the earlier
// one answers first. Those records are deleted, and their content is
// garbage for the next gc. Exactly the records a capture made in one
// turn from K's start would have skipped are dropped, by replaying the
// merged events through the same touch rules; renames and exchanges
// are always kept. The kept records of K..M are rewritten with turn
// M+1's number (du and verify name turns by it).
//
// One merge is one synced batch: the turn records, prompts and refs of
// K..M, the dropped records, the rewritten ones, M+1's record, and the
// rewind notes that named K..M (a note needs its rewind's end and its
// target's end, both boundaries). A crash leaves the merge done or not
// (crash point forget.merged after its commit).

// mergePlan is one run of turns to merge: first..last into into.
type mergePlan struct {
	first, last uint64
	into        ckpt.Turn
}

// mergeRuns splits the turns to forget in the middle (sorted, all kept
// and after the start of history) into runs of turns that follow each
// other among the kept ones, each with the kept turn after it, which it
// merges into. It refuses a run that no closed turn follows.
func (s *Store) mergeRuns(ts []uint64, kept []ckpt.Turn) ([]mergePlan, error) {
	idx := map[uint64]int{}
	for i, t := range kept {
		idx[t.Num] = i
	}
	var runs []mergePlan
	for i := 0; i < len(ts); {
		j := i
		for j+1 < len(ts) && idx[ts[j+1]] == idx[ts[j]]+1 {
			j++
		}
		k := idx[ts[j]] + 1
		if k >= len(kept) {
			return nil, detailf(ErrOpenTurn, "cannot forget turn %d: it is the newest turn, and its end is where the tree is now", ts[j])
		}
		if kept[k].Open {
			return nil, detailf(ErrOpenTurn, "cannot forget turn %d yet: the open turn %d continues from its end (turnctl end closes it)", ts[j], kept[k].Num)
		}
		runs = append(runs, mergePlan{first: ts[i], last: ts[j], into: kept[k]})
		i = j + 1
	}
	return runs, nil
}

// keptTurns lists the turns from the start of history on, oldest first
// (the open one as it is now).
func (s *Store) keptTurns() ([]ckpt.Turn, error) {
	all, err := s.Turns(0)
	if err != nil {
		return nil, err
	}
	start := s.startTurn()
	var out []ckpt.Turn
	for i := len(all) - 1; i >= 0; i-- {
		if all[i].Num >= start {
			out = append(out, all[i])
		}
	}
	return out, nil
}

// merge merges the turns p.first..p.last into p.into (rewindMu and
// histMu held; none of them pinned or open). It returns how many
// records it dropped.
func (s *Store) merge(p mergePlan) (int, error) {
	first, err := s.storedTurn(p.first)
	if err != nil {
		return 0, err
	}
	into := p.into
	from := first.FirstSeq
	if first.MergedFrom > 0 {
		into.MergedFrom = first.MergedFrom
	} else {
		into.MergedFrom = p.first
	}
	b := s.db.NewBatch()
	defer b.Close()
	dropped := 0
	err = s.scanMerge(p, func(r *record, redundant bool) {
		switch {
		case redundant:
			b.Delete(eventKey(r.Seq), nil)
			dropped++
		case r.Turn != into.Num:
			r.Turn = into.Num
			putEvent(b, r)
		}
	})
	if err != nil {
		return 0, err
	}
	// The forgotten turns' records, prompts and refs.
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: turnKey(p.first), UpperBound: turnKey(p.last + 1)})
	if err != nil {
		return 0, err
	}
	for ok := it.First(); ok; ok = it.Next() {
		var ft ckpt.Turn
		if err := bytejson.Unmarshal(it.Value(), &ft); err != nil {
			it.Close()
			return 0, fmt.Errorf("%w: turn: %v", ErrCorrupt, err)
		}
		for _, r := range ft.Refs {
			b.Delete(refKey(r), nil)
		}
		into.Programs = append(into.Programs, ft.Programs...)
	}
	if err := it.Close(); err != nil {
		return 0, err
	}
	b.DeleteRange(turnKey(p.first), turnKey(p.last+1), nil)
	b.DeleteRange(textKey(p.first), textKey(p.last+1), nil)
	b.DeleteRange(rewoundKey(p.first), rewoundKey(p.last+1), nil)
	// The steps of the merged turns, and of the turn they merge into: a
	// record a step boundary caused may be one the merge drops.
	b.DeleteRange(stepKey(p.first, 0), stepKey(p.into.Num+1, 0), nil)
	if err := s.dropNotesTo(b, p.first, p.last); err != nil {
		return 0, err
	}
	// The record of into is read again and written under s.mu, as
	// SetStats does: no stats counted before the merge are kept.
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, err := s.storedTurn(into.Num)
	if err != nil {
		return 0, err
	}
	cur.MergedFrom, cur.FirstSeq, cur.Start = into.MergedFrom, from, first.Start
	cur.Programs = mergeNames(cur.Programs, into.Programs)
	cur.Stats = nil // counted again from the merged changes (control: log)
	putJSON(b, turnKey(cur.Num), cur)
	if err := s.commit(b, pebble.Sync); err != nil {
		return 0, err
	}
	s.merges.Add(1)
	crashpoint.Hit("forget.merged")
	return dropped, nil
}

// mergeNames returns the sorted union of a and b.
func mergeNames(a, b []string) []string {
	out := append(slices.Clone(a), b...)
	slices.Sort(out)
	return slices.Compact(out)
}

// Merges counts the merges of turns (forget, the policy's thinning) since
// the store was opened: a caller that computed something of a turn can
// tell whether the turn may have absorbed others meanwhile.
func (s *Store) Merges() uint64 { return s.merges.Load() }

// scanMerge calls fn with every event of the turns p merges (p.first's
// range to p.into's end), saying whether the merge drops it.
func (s *Store) scanMerge(p mergePlan, fn func(r *record, redundant bool)) error {
	first, err := s.storedTurn(p.first)
	if err != nil {
		return err
	}
	// Records at or after a saved manifest's end are kept as they are:
	// the next mount compares the tree by the paths they name
	// (offline.go).
	keepFrom := uint64(1<<64 - 1)
	if info, ok, err := s.manifestInfo(); err != nil {
		return err
	} else if ok {
		keepFrom = info.Events
	}
	touched := map[string]uint8{}
	return s.scanEvents(first.FirstSeq, p.into.LastSeq+1, func(r *record) (bool, error) {
		redundant := false
		switch r.Op {
		case opPrior, opRange:
			redundant = touched[r.Path]&touchFull != 0
		case opMeta:
			redundant = touched[r.Path]&(touchFull|touchMeta) != 0
		}
		touchSet(touched, r)
		fn(r, redundant && r.Seq < keepFrom)
		return true, nil
	})
}

// dropNotesTo deletes in b the rewind notes whose target is one of
// first..last.
func (s *Store) dropNotesTo(b *pebble.Batch, first, last uint64) error {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: rewoundPrefix, UpperBound: append(bytes.Clone(rewoundPrefix), 0xff)})
	if err != nil {
		return err
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		if len(it.Value()) != 8 {
			continue
		}
		target, err := decodeU64Key(prefixTurn, append([]byte{prefixTurn}, it.Value()...))
		if err != nil {
			return err
		}
		if target >= first && target <= last {
			b.Delete(bytes.Clone(it.Key()), nil)
		}
	}
	return it.Error()
}

// mergedInto reports the kept turn turn n was merged into, if it was.
func (s *Store) mergedInto(n uint64) (uint64, bool, error) {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: turnKey(n), UpperBound: upper(prefixTurn)})
	if err != nil {
		return 0, false, err
	}
	defer it.Close()
	if !it.First() {
		return 0, false, it.Error()
	}
	var t ckpt.Turn
	if err := bytejson.Unmarshal(it.Value(), &t); err != nil {
		return 0, false, fmt.Errorf("%w: turn: %v", ErrCorrupt, err)
	}
	if t.Num > n && t.MergedFrom > 0 && t.MergedFrom <= n {
		return t.Num, true, nil
	}
	return 0, false, nil
}
