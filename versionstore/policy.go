package versionstore

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"ckptfs/internal/bytejson"
	"ckptfs/internal/ckpt"
)

// policy.go: the retention policy, kept in the store (keyPolicy), and the
// plan it makes: how far the start of history moves.
//
// The policy keeps every turn of two windows (the last KeepTurns turns,
// those that ended less than KeepAge ago), thins the older ones to the
// last turn of each hour and then of each day (merge.go merges the
// others into it), forgets those older still from the start of history,
// and, while the store is over its budget (KeepSize), more of the oldest
// turns. Pinned turns are always kept; the start of history stops at the
// first one (which may become the start: its end state is kept) and
// before the newest closed turn that changed something, whose undo it
// keeps. See policyPlan.

// Policy returns the policy as stored (zero fields: the defaults).
func (s *Store) Policy() (ckpt.Policy, error) {
	var p ckpt.Policy
	v, closer, err := s.db.Get(keyPolicy)
	if err == pebble.ErrNotFound {
		return p, nil
	}
	if err != nil {
		return p, fmt.Errorf("versionstore: %w", err)
	}
	defer closer.Close()
	if err := bytejson.Unmarshal(v, &p); err != nil {
		return p, fmt.Errorf("%w: policy: %v", ErrCorrupt, err)
	}
	return p, nil
}

// SetPolicy stores p (zero fields: the defaults).
func (s *Store) SetPolicy(p ckpt.Policy) error {
	if p.KeepSize < 0 || p.KeepTurns < 0 || p.KeepAge < 0 || p.KeepHourly < -1 || p.KeepDaily < -1 {
		return fmt.Errorf("versionstore: BUG: negative policy %+v", p)
	}
	b := s.db.NewBatch()
	defer b.Close()
	putJSON(b, keyPolicy, p)
	return s.commit(b, pebble.Sync)
}

// EffectivePolicy returns the stored policy with its defaults filled in
// for the store's disk.
func (s *Store) EffectivePolicy() (ckpt.Policy, error) {
	p, err := s.Policy()
	if err != nil {
		return p, err
	}
	var total int64
	if s.dirf != nil {
		if _, t, err := s.statfs(); err == nil {
			total = t
		}
	}
	return p.Effective(total), nil
}

// StoreBytes returns the bytes the store occupies on disk, its ballast
// (space.go) aside: what the budget is compared with. It is the store's
// settled size:
//   - Pebble's tables and blob files count as the live set of its latest
//     version, not as the files in its directory: a compaction keeps its
//     input on disk until its output is installed, and an open iterator
//     keeps the tables it reads (zombies) until it closes; both go a
//     moment later, and a gc that counted them would forget history for
//     space that is about to be free.
//   - Pebble's logs count what the live ones hold: not the space
//     preallocated ahead of their writes (35 MiB for a new one, which a
//     flush makes: a gc that freed space would report the store grown),
//     nor the obsolete ones Pebble keeps to reuse (up to three of 32 MiB,
//     which no gc can free: a small budget would forget history for them).
func (s *Store) StoreBytes() int64 {
	m := s.db.Metrics()
	pebbleBytes := int64(m.Table.Local.LiveSize + m.BlobFiles.Local.LiveSize + m.WAL.Size)
	if s.dirf == nil {
		return pebbleBytes
	}
	root := fmt.Sprintf("/proc/self/fd/%d/", s.dirf.Fd()) // the slash: walk the directory, not the link
	total := pebbleBytes + otherBytes(root)
	if names, err := s.atticNames(); err == nil {
		total += s.atticSizes.bytes(root+"attic/", names, s.spanInUse)
	}
	return total
}

// SetUndoBase has the policy keep what an undo needs: fn returns the
// closed turn an undo now undoes (false: none); the policy keeps the
// kept turn before it whole, and never merges that turn, as it does for
// the newest closed turn that recorded anything. fn may read the store
// but must take none of its locks.
func (s *Store) SetUndoBase(fn func() (uint64, bool)) { s.undoBase.Store(&fn) }

// isPebbleData reports whether name is one of Pebble's tables or blob
// files, whose live set its metrics give.
func isPebbleData(name string) bool {
	return strings.HasSuffix(name, ".sst") || strings.HasSuffix(name, ".blob")
}

// retention is what the policy does now: move the start of history to
// turn to (the current start: not at all), and merge the turns of merge
// (after to, oldest first) into the kept turns after them.
type retention struct {
	to    uint64
	merge []uint64
}

// forgets lists the turns r forgets, oldest first: the kept turns from
// start up to to, then those it merges.
func (r retention) forgets(kept []ckpt.Turn, start uint64) []uint64 {
	var out []uint64
	for _, t := range kept {
		if t.Num >= start && t.Num < r.to {
			out = append(out, t.Num)
		}
	}
	return append(out, r.merge...)
}

// planFreed estimates, from a scan of the store's content, what a plan
// would free: start(to) what moving the start of history to the kept
// turn to frees, merges(to, merge) what merging the turns of merge (after
// to, oldest first) into the kept turns after them drops besides.
type planFreed struct {
	start  func(to uint64) int64
	merges func(to uint64, merge []uint64) int64
}

// policyPlan returns what the policy does now. size is the store's bytes
// now, freed what plans would free (nil, or size within the budget:
// nothing for the budget).
//
// Each kept turn falls in one class: kept whole (among the last
// KeepTurns, ended less than KeepAge ago, pinned, open, or the newest
// closed turn), an hour (ended less than KeepHourly ago), a day (less
// than KeepDaily), or old. The start of history moves to the first turn
// that is not old (never past a pinned turn, nor to the newest closed
// turn that changed something: its undo is kept).
// After it, a turn is merged into the next kept turn when that one is
// closed and in the same class (the same hour, the same day, both old),
// so that what stays of each hour or day is its last turn. Over the
// budget, the start then moves on over the oldest turns until what they
// alone hold brings the store back within it; stopped by a pin, the
// oldest turns after the pin that the policy may forget are merged into
// the kept turns after them instead, as few as bring it back within.
func (s *Store) policyPlan(pol ckpt.Policy, now time.Time, size int64, freed *planFreed, keepUndo bool) (retention, error) {
	all, err := s.Turns(0)
	if err != nil {
		return retention{}, err
	}
	start := s.startTurn()
	var turns []ckpt.Turn
	for _, t := range all {
		if t.Num >= start {
			turns = append(turns, t)
		}
	}
	sort.Slice(turns, func(i, j int) bool { return turns[i].Num < turns[j].Num })
	pins, err := s.pinned()
	if err != nil {
		return retention{}, err
	}
	latest := s.Latest()
	newestClosed := start
	for _, t := range turns {
		if !t.Open {
			newestClosed = t.Num
		}
	}
	// The undo of the newest closed turn that changed something goes
	// back to the kept turn before it (undoTo), which the policy keeps
	// whole: neither forgotten nor merged.
	undoTo, prev, undoable := start, start, false
	for _, t := range turns {
		if !keepUndo {
			break
		}
		if t.Open {
			break
		}
		if !t.Empty() {
			undoTo, undoable = prev, true
		}
		prev = t.Num
	}
	// What an undo undoes may be older (turnctl undo passes over the
	// manual turns after the newest action, and over turns that changed
	// nothing in the end): its owner says (SetUndoBase).
	var undone uint64 // the turn an undo undoes, if the owner said
	if fn := s.undoBase.Load(); fn != nil && keepUndo {
		if n, ok := (*fn)(); ok {
			for i := 1; i < len(turns); i++ {
				if turns[i].Num == n && !turns[i].Open {
					undone = n
					if !undoable || turns[i-1].Num < undoTo {
						undoTo, undoable = turns[i-1].Num, true
					}
				}
			}
		}
	}
	// protected: kept whatever the budget.
	protected := func(t ckpt.Turn) bool {
		return t.Open || t.End.IsZero() || pins[t.Num] || t.Num >= newestClosed || undoable && t.Num == undoTo || undone != 0 && t.Num == undone
	}
	class := func(t ckpt.Turn) string {
		age := now.Sub(t.End)
		switch {
		case protected(t), latest-t.Num < uint64(pol.KeepTurns), age < pol.KeepAge:
			return fmt.Sprint("keep ", t.Num)
		case age < pol.KeepHourly:
			return "hour " + t.End.UTC().Truncate(time.Hour).Format(time.RFC3339)
		case age < pol.KeepDaily:
			return "day " + t.End.UTC().Truncate(24*time.Hour).Format(time.RFC3339)
		}
		return "old"
	}
	classes := make([]string, len(turns))
	for i, t := range turns {
		classes[i] = class(t)
	}
	// The furthest history may start: the first pinned turn, and undoTo
	// (with no turn that changed something, the newest closed one).
	limit := newestClosed
	if undoable {
		limit = undoTo
	}
	for _, t := range turns {
		if t.Num >= limit {
			break
		}
		if pins[t.Num] {
			limit = t.Num
			break
		}
	}
	r := retention{to: limit}
	first := len(turns) // the index of the turn history starts at
	for i, t := range turns {
		if classes[i] != "old" || t.Num >= limit {
			r.to, first = min(t.Num, limit), i
			break
		}
	}
	overBudget := pol.KeepSize > 0 && size > pol.KeepSize && freed != nil
	need := size - pol.KeepSize
	if overBudget {
		for first+1 < len(turns) && turns[first].Num < limit && freed.start(turns[first].Num) < need {
			first++
			r.to = turns[first].Num
		}
	}
	for i := first + 1; i+1 < len(turns); i++ {
		if !turns[i+1].Open && classes[i] == classes[i+1] && !strings.HasPrefix(classes[i], "keep ") {
			r.merge = append(r.merge, turns[i].Num)
		}
	}
	if overBudget && freed.merges != nil && pins[r.to] {
		r.merge = budgetMerges(r, turns, first, protected, need, func(m []uint64) int64 {
			return freed.start(r.to) + freed.merges(r.to, m)
		})
	}
	return r, nil
}

// budgetMerges returns r's merges with, past a pin at r.to (turns[first])
// that stopped the start of history over the budget, the fewest of the
// oldest turns after it that are not protected and have a closed turn
// after them to merge into such that what the plan frees (frees) reaches
// need, or else as much as all of them free; none where they free nothing
// more than r alone.
func budgetMerges(r retention, turns []ckpt.Turn, first int, protected func(ckpt.Turn) bool, need int64, frees func([]uint64) int64) []uint64 {
	var cands []uint64
	for i := first + 1; i+1 < len(turns); i++ {
		if !protected(turns[i]) && !turns[i+1].Open {
			cands = append(cands, turns[i].Num)
		}
	}
	with := func(k int) []uint64 {
		m := append(slices.Clone(r.merge), cands[:k]...)
		slices.Sort(m)
		return slices.Compact(m)
	}
	base, all := frees(r.merge), frees(with(len(cands)))
	if base >= need || all <= base {
		return r.merge
	}
	target := min(need, all)
	k := sort.Search(len(cands), func(k int) bool { return frees(with(k+1)) >= target }) + 1
	return with(min(k, len(cands)))
}

// GCDue reports whether the policy has work now: the store is over its
// budget, or turns are older than both windows. It reads the turn records
// and the store directory, not the content.
func (s *Store) GCDue() (bool, string, error) {
	pol, err := s.EffectivePolicy()
	if err != nil {
		return false, "", err
	}
	// Over the budget, unless a gc found nothing to forget since anything
	// changed (what the policy keeps whatever the budget, the undo of the
	// newest turn, may hold more than it): it would read the whole store
	// again for nothing.
	if size := s.StoreBytes(); size > pol.KeepSize && !s.NothingToForget(pol) {
		return true, fmt.Sprintf("the store holds %d bytes, over its budget of %d", size, pol.KeepSize), nil
	}
	r, err := s.policyPlan(pol, time.Now(), 0, nil, true)
	if err != nil {
		return false, "", err
	}
	if start := s.startTurn(); r.to > start {
		return true, fmt.Sprintf("turns %d-%d are older than the policy keeps", start, r.to-1), nil
	}
	if len(r.merge) > 0 {
		return true, fmt.Sprintf("%d turns are to be merged into the kept turns after them", len(r.merge)), nil
	}
	return false, "", nil
}

// NothingToForget reports whether the last gc over the budget found
// nothing policy pol (EffectivePolicy) lets it forget, and nothing it
// depends on changed since (ckpt.Health.AllKept).
func (s *Store) NothingToForget(pol ckpt.Policy) bool {
	return s.gcIdle.Load() == s.gcKey(pol)
}

// gcKey names what a gc's plan over the budget depends on but the clock:
// the events, the turns, the open one, the pins and forgets, the budget.
func (s *Store) gcKey(pol ckpt.Policy) string {
	s.mu.Lock()
	seq := s.nextSeq
	s.mu.Unlock()
	cur, open := s.Current()
	return fmt.Sprint(seq, "/", s.Latest(), "/", open, cur.Num, "/", s.HistoryGen(), "/", pol.KeepSize)
}
