package versionstore

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"ckptfs/internal/ckpt"
)

// policy.go: the retention policy, kept in the store (keyPolicy), and the
// plan it makes: how far the start of history moves.
//
// With only the oldest turns forgettable (history.go), the policy forgets
// the oldest unpinned turns:
//
//   - every turn older than both windows: not among the last KeepTurns
//     turns, and ended more than KeepAge ago;
//   - and, while the store is over its budget (KeepSize), more of the
//     oldest turns, also inside the windows, until what they alone hold
//     brings it back within the budget.
//
// It stops at the first pinned turn (which may become the start of
// history: its end state is kept) and at the newest closed turn. Thinning
// the middle of history (keeping one turn an hour, a day) is not done.

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
	if err := json.Unmarshal(v, &p); err != nil {
		return p, fmt.Errorf("%w: policy: %v", ErrCorrupt, err)
	}
	return p, nil
}

// SetPolicy stores p (zero fields: the defaults).
func (s *Store) SetPolicy(p ckpt.Policy) error {
	if p.KeepSize < 0 || p.KeepTurns < 0 || p.KeepAge < 0 {
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
// (space.go) aside: what the budget is compared with.
func (s *Store) StoreBytes() int64 {
	if s.dirf == nil {
		return int64(s.db.Metrics().DiskSpaceUsage())
	}
	root := fmt.Sprintf("/proc/self/fd/%d/", s.dirf.Fd()) // the slash: walk the directory, not the link
	var total int64
	filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil || !fi.Mode().IsRegular() || p == root+"ballast" {
			return nil
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			total += st.Blocks * 512
		} else {
			total += fi.Size()
		}
		return nil
	})
	return total
}

// policyPlan returns the turn history should start at under the policy
// (the current start: nothing to forget). size is the store's bytes now,
// freedBy(to) what forgetting the turns before to would free.
func (s *Store) policyPlan(pol ckpt.Policy, now time.Time, size int64, freedBy func(to uint64) int64) (uint64, error) {
	turns, err := s.Turns(0)
	if err != nil {
		return 0, err
	}
	sort.Slice(turns, func(i, j int) bool { return turns[i].Num < turns[j].Num })
	pins, err := s.pinned()
	if err != nil {
		return 0, err
	}
	start := s.startTurn()
	latest := s.Latest()
	// The furthest history may start: the newest closed turn, the first
	// pinned one.
	limit := start
	for _, t := range turns {
		if t.Num < start {
			continue
		}
		if t.Open {
			break
		}
		limit = t.Num
		if pins[t.Num] {
			break
		}
	}
	to := limit
	for _, t := range turns {
		if t.Num < start {
			continue
		}
		inCount := latest-t.Num < uint64(pol.KeepTurns)
		inAge := t.Open || t.End.IsZero() || now.Sub(t.End) < pol.KeepAge
		if inCount || inAge || pins[t.Num] {
			to = min(t.Num, limit)
			break
		}
	}
	if pol.KeepSize > 0 && size > pol.KeepSize && freedBy != nil {
		need := size - pol.KeepSize
		for to < limit && freedBy(to) < need {
			to++
		}
	}
	return max(to, start), nil
}

// GCDue reports whether the policy has work now: the store is over its
// budget, or turns are older than both windows. It reads the turn records
// and the store directory, not the content.
func (s *Store) GCDue() (bool, string, error) {
	pol, err := s.EffectivePolicy()
	if err != nil {
		return false, "", err
	}
	if size := s.StoreBytes(); size > pol.KeepSize {
		return true, fmt.Sprintf("the store holds %d bytes, over its budget of %d", size, pol.KeepSize), nil
	}
	to, err := s.policyPlan(pol, time.Now(), 0, nil)
	if err != nil {
		return false, "", err
	}
	if start := s.startTurn(); to > start {
		return true, fmt.Sprintf("turns %d-%d are older than the policy keeps", start, to-1), nil
	}
	return false, "", nil
}
