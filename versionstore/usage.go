package versionstore

import (
	"math"
	"sort"
	"strconv"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"golang.org/x/sys/unix"

	"ckptfs/internal/bytejson"
	"ckptfs/internal/ckpt"
)

// usage.go: what the store holds, by whom (turnctl du), and what the
// policy's trimming would free (policy.go).

// contentUse is what history knows of one chunk or attic file.
type contentUse struct {
	size        int64  // on disk: the stored chunk, or the attic file's blocks
	refs        int    // the events naming it
	lastSeq     uint64 // the newest event naming it
	first, last uint64 // the oldest and newest turn whose events name it
}

// contentScan is one pass over the events and the content.
type contentScan struct {
	chunks  map[[32]byte]*contentUse
	attic   map[string]*contentUse
	largest []ckpt.FileUsage
	// versions: the bytes each turn keeps of each path's prior version
	// (a whole capture, or the sum of its range records).
	versions map[ckpt.FileUsage]int64
	total    int64 // content bytes (referenced or not)
	garbage  int64 // content bytes no event references
	// sealOnly: content bytes only seals (seal.go) reference. They are
	// not history's: the next mount drops them unless their file changed,
	// and no forgetting of turns frees them, so the budget does not
	// count them (budgeted).
	sealOnly int64
	ends     map[uint64]uint64 // turn -> LastSeq, for the kept turns
}

const largestShown = 10

// scanContent reads every event, then the size of every chunk and attic
// file. It costs a read of the whole store.
func (s *Store) scanContent() (*contentScan, error) {
	c := &contentScan{chunks: map[[32]byte]*contentUse{}, attic: map[string]*contentUse{}, ends: map[uint64]uint64{}, versions: map[ckpt.FileUsage]int64{}}
	use := func(u *contentUse, ok bool, r *record) *contentUse {
		if !ok {
			return &contentUse{refs: 1, lastSeq: r.Seq, first: r.Turn, last: r.Turn}
		}
		u.refs++
		u.lastSeq = max(u.lastSeq, r.Seq)
		u.first, u.last = min(u.first, r.Turn), max(u.last, r.Turn)
		return u
	}
	s.mu.Lock()
	end := s.nextSeq
	s.mu.Unlock()
	err := s.scanEvents(0, end, func(r *record) (bool, error) {
		if r.Content == nil {
			return true, nil
		}
		if r.Content.Attic != "" {
			u, ok := c.attic[r.Content.Attic]
			c.attic[r.Content.Attic] = use(u, ok, r)
		}
		for ch := r.Content.Chunks; len(ch) >= 32; ch = ch[32:] {
			k := [32]byte(ch[:32])
			u, ok := c.chunks[k]
			c.chunks[k] = use(u, ok, r)
		}
		c.versions[ckpt.FileUsage{Path: r.Path, Turn: r.Turn}] += r.Content.Size
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	// A seal (seal.go) holds its content as an event would that no
	// forgetting of turns reaches, and no one turn has alone.
	sealUse := &record{Seq: math.MaxUint64, Turn: math.MaxUint64}
	onlySealed := map[*contentUse]bool{}
	err = s.eachSeal(func(_ string, e sealEntry) {
		if e.Ref.Attic != "" {
			u, ok := c.attic[e.Ref.Attic]
			c.attic[e.Ref.Attic] = use(u, ok, sealUse)
			c.attic[e.Ref.Attic].first = 0
			if !ok {
				onlySealed[c.attic[e.Ref.Attic]] = true
			}
		}
		for ch := e.Ref.Chunks; len(ch) >= 32; ch = ch[32:] {
			k := [32]byte(ch[:32])
			u, ok := c.chunks[k]
			c.chunks[k] = use(u, ok, sealUse)
			c.chunks[k].first = 0
			if !ok {
				onlySealed[c.chunks[k]] = true
			}
		}
	})
	if err != nil {
		return nil, err
	}
	for v, n := range c.versions {
		v.Bytes = n
		c.noteLargest(v)
	}
	c.versions = nil
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixChunk}, UpperBound: upper(prefixChunk)})
	if err != nil {
		return nil, err
	}
	for ok := it.First(); ok; ok = it.Next() {
		n := int64(len(it.Key()) + len(it.Value()))
		c.total += n
		if len(it.Key()) != 33 {
			continue
		}
		if u := c.chunks[[32]byte(it.Key()[1:])]; u != nil {
			u.size = n
		} else {
			c.garbage += n
		}
	}
	if err := it.Close(); err != nil {
		return nil, pebbleErr(err)
	}
	if s.attic != nil {
		names, _ := s.atticNames()
		for _, name := range names {
			var st unix.Stat_t
			if unix.Fstatat(int(s.attic.Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
				continue
			}
			n := held(st.Blocks, st.Size, int64(st.Blksize))
			c.total += n
			if u := c.attic[name]; u != nil {
				u.size = n
			} else if _, err := strconv.ParseUint(name, 16, 64); err == nil {
				c.garbage += n
			}
		}
	}
	for u := range onlySealed {
		c.sealOnly += u.size
	}
	turns, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixTurn}, UpperBound: upper(prefixTurn)})
	if err != nil {
		return nil, err
	}
	for ok := turns.First(); ok; ok = turns.Next() {
		var t ckpt.Turn
		if bytejson.Unmarshal(turns.Value(), &t) == nil {
			c.ends[t.Num] = t.LastSeq
		}
	}
	return c, turns.Close()
}

// noteLargest keeps f among the largest versions; of equal sizes, the
// newest turn's first, then by path (the versions come in map order).
func (c *contentScan) noteLargest(f ckpt.FileUsage) {
	less := func(a, b ckpt.FileUsage) bool {
		if a.Bytes != b.Bytes {
			return a.Bytes > b.Bytes
		}
		if a.Turn != b.Turn {
			return a.Turn > b.Turn
		}
		return a.Path < b.Path
	}
	if len(c.largest) == largestShown && !less(f, c.largest[len(c.largest)-1]) {
		return
	}
	c.largest = append(c.largest, f)
	sort.Slice(c.largest, func(i, j int) bool { return less(c.largest[i], c.largest[j]) })
	if len(c.largest) > largestShown {
		c.largest = c.largest[:largestShown]
	}
}

// budgeted is the part of size, the store's, that the budget counts: all
// but the content only seals hold (forgetting turns cannot free it).
func (c *contentScan) budgeted(size int64) int64 { return max(size-c.sealOnly, 0) }

// freedBy returns what forgetting the turns before to would free: the
// garbage, and the content no event after to's end names. The open turn
// (no end yet) frees nothing.
func (c *contentScan) freedBy() func(to uint64) int64 {
	type su struct {
		seq  uint64
		size int64
	}
	var all []su
	for _, u := range c.chunks {
		all = append(all, su{u.lastSeq, u.size})
	}
	for _, u := range c.attic {
		all = append(all, su{u.lastSeq, u.size})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].seq < all[j].seq })
	cum := make([]int64, len(all)+1)
	for i, x := range all {
		cum[i+1] = cum[i] + x.size
	}
	return func(to uint64) int64 {
		end, ok := c.ends[to]
		if !ok {
			return c.garbage
		}
		i := sort.Search(len(all), func(i int) bool { return all[i].seq > end })
		return c.garbage + cum[i]
	}
}

// Usage reports what the store holds: its size against the budget, the
// bytes only one turn's records reference, the largest stored versions,
// and what gc would do now. It reads the whole store.
func (s *Store) Usage() (ckpt.Usage, error) {
	var u ckpt.Usage
	pol, err := s.Policy()
	if err != nil {
		return u, err
	}
	eff, err := s.EffectivePolicy()
	if err != nil {
		return u, err
	}
	u.Policy, u.Effective, u.Budget = pol, eff, eff.KeepSize
	u.StoreBytes = s.StoreBytes()
	if h := s.HistoryStart(); h.Turn > 0 {
		u.Start = &h
	}
	c, err := s.scanContent()
	if err != nil {
		return u, err
	}
	u.ContentBytes, u.Garbage = c.total, c.garbage
	pins, err := s.pinned()
	if err != nil {
		return u, err
	}
	per := map[uint64]int64{}
	for _, x := range c.chunks {
		if x.first == x.last {
			per[x.first] += x.size
		}
	}
	for _, x := range c.attic {
		if x.first == x.last {
			per[x.first] += x.size
		}
	}
	for t, n := range per {
		u.Turns = append(u.Turns, ckpt.TurnUsage{Turn: t, Bytes: n, Pinned: pins[t]})
	}
	sort.Slice(u.Turns, func(i, j int) bool { return u.Turns[i].Turn < u.Turns[j].Turn })
	if u.Turns == nil {
		u.Turns = []ckpt.TurnUsage{}
	}
	u.Largest = c.largest
	if u.Largest == nil {
		u.Largest = []ckpt.FileUsage{}
	}
	u.GC, err = s.gcPlan(c, eff, u.StoreBytes)
	return u, err
}

// mergeFrees is what merging r.merge would free: the content every event
// naming which the merges drop (content the move of the start frees too
// is counted there, not here).
func (s *Store) mergeFrees(c *contentScan, r retention, kept []ckpt.Turn) (int64, error) {
	runs, err := s.mergeRuns(r.merge, kept)
	if err != nil {
		return 0, err
	}
	end, ok := c.ends[r.to]
	if !ok {
		end = 0
	}
	drops := map[*contentUse]int{}
	for _, p := range runs {
		err := s.scanMerge(p, func(rec *record, redundant bool) {
			if !redundant || rec.Content == nil {
				return
			}
			if u := c.attic[rec.Content.Attic]; rec.Content.Attic != "" && u != nil {
				drops[u]++
			}
			for ch := rec.Content.Chunks; len(ch) >= 32; ch = ch[32:] {
				if u := c.chunks[[32]byte(ch[:32])]; u != nil {
					drops[u]++
				}
			}
		})
		if err != nil {
			return 0, err
		}
	}
	var n int64
	for u, d := range drops {
		if d >= u.refs && u.lastSeq > end {
			n += u.size
		}
	}
	return n, nil
}

// planFreedBy is what plans would free by scan c, kept the kept turns.
func (s *Store) planFreedBy(c *contentScan, kept []ckpt.Turn) *planFreed {
	return &planFreed{
		start: c.freedBy(),
		merges: func(to uint64, merge []uint64) int64 {
			n, err := s.mergeFrees(c, retention{to: to, merge: merge}, kept)
			if err != nil {
				return 0 // (the gc's own plan reads them again, and fails)
			}
			return n
		},
	}
}

// planFrees is what plan r frees by scan c: the garbage, the content only
// the turns it forgets (those before r.to, past start) hold, and what its
// merges drop. freed is c.freedBy().
func (s *Store) planFrees(c *contentScan, r retention, kept []ckpt.Turn, start uint64, freed func(uint64) int64) (int64, error) {
	f := c.garbage
	if r.to > start {
		f = freed(r.to)
	}
	if len(r.merge) > 0 {
		m, err := s.mergeFrees(c, r, kept)
		if err != nil {
			return f, err
		}
		f += m
	}
	return f, nil
}

// gcPlan is what a gc would do now (a dry run), from a scan.
func (s *Store) gcPlan(c *contentScan, pol ckpt.Policy, size int64) (ckpt.GCReport, error) {
	rep := ckpt.GCReport{DryRun: true, Before: size}
	kept, err := s.keptTurns()
	if err != nil {
		return rep, err
	}
	freed := s.planFreedBy(c, kept)
	r, err := s.policyPlan(pol, time.Now(), c.budgeted(size), freed, true)
	if err != nil {
		return rep, err
	}
	start := s.HistoryStart()
	to := r.to
	rep.Forgot = r.forgets(kept, start.Turn)
	rep.Merged = len(r.merge)
	if to > start.Turn {
		n := uint64(len(rep.Forgot) - rep.Merged)
		rep.Start = &ckpt.HistoryStart{Turn: to, Reason: ckpt.ReasonPolicy, At: time.Now().UTC(), Forgotten: start.Forgotten + n}
	}
	f, err := s.planFrees(c, r, kept, start.Turn, freed.start)
	if err != nil {
		return rep, err
	}
	rep.ChunkBytes = f // chunks and attic files together: a dry run does not tell them apart
	rep.After = max(size-f, 0)
	return rep, nil
}
