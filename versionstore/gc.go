package versionstore

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"golang.org/x/sys/unix"

	"ckptfs/internal/bytejson"
	"ckptfs/internal/ckpt"
	"ckptfs/internal/crashpoint"
)

// gc.go: garbage collection. GC applies the policy (policy.go: it may move
// the start of history, history.go), then deletes the content no event
// references: chunks in Pebble and files in the attic, and compacts what
// it deleted so that the store's files really shrink.
//
// It is a mark and sweep that keeps no state of its own: the mark is every
// event (and a rewind journal's plan, if one is left), the sweep deletes
// every chunk key and attic file the mark does not name. A kill at any
// point leaves content that is either referenced or garbage, and the next
// GC finds all garbage again, whatever made it: forgotten turns, a
// capture whose event was never committed, a rename dropped by Recover.
//
// Captures go on while it runs. A capture that keeps bytes holds contentMu
// shared from before it looks for its chunks (hasChunk: a chunk found is
// not written again) until its event is committed; each deleting batch of
// the sweep holds contentMu exclusively, first reads the events committed
// since its last look (their references join the mark), and deletes only
// what no event names. So no event can come to name a chunk a batch
// deletes: a capture that found the chunk before the batch has committed
// its event (the batch sees it), one that looks after finds it gone and
// writes it again. Chunk keys are SHA-256 sums, so garbage lies scattered
// among live keys: each run of garbage keys that no referenced key
// interrupts is one range deletion (one point deletion for a single key).
// Attic files named after the mark began are left to the next GC.
//
// A batch holds contentMu for at most gcBatchKeys keys or gcBatchBytes
// bytes and reads nothing but the new events: the candidates are found
// beforehand without the lock, in a consistent snapshot of the keys. The
// deletions are committed without sync: a deletion lost in a crash leaves
// garbage for the next GC. GC runs with rewindMu held (no rewind, so no
// journal, plans or forget meanwhile), stops early when a rewind asks for
// the store (rewindWaiting) or the store closes, and is refused while a
// rewind runs.

// Sweep batches: keys and stored bytes per deleting batch.
var (
	gcBatchKeys        = 2048
	gcBatchBytes int64 = 16 << 20
)

// GCOptions modify GC.
type GCOptions struct {
	DryRun   bool // report what would be done; change nothing
	NoPolicy bool // only reclaim garbage; forget no turn
	// Pause, if set, runs between batches (the daemon's background GC
	// sleeps there, to stay out of the way).
	Pause func()
	// Progress, if set, is told what GC is doing ("scanning", "marking",
	// "sweeping", "compacting") and how far it has got.
	Progress Progress
	// diskFull: the gc of a capture refused for want of space (reclaim):
	// the undo of the newest turn, which the policy keeps over its
	// budget, gives way to the user's write.
	diskFull bool
}

// GC applies the policy and reclaims the space of content no kept turn
// needs. It is refused (ErrBusy) while a rewind, a forget or another GC
// runs.
func (s *Store) GC(opts GCOptions) (ckpt.GCReport, error) {
	var rep ckpt.GCReport
	if !s.gcMu.TryLock() {
		return rep, detailf(ErrBusy, "a gc is running already")
	}
	defer s.gcMu.Unlock()
	if s.gcStop.Load() {
		return rep, ErrClosed
	}
	if !s.rewindMu.TryLock() {
		return rep, detailf(ErrBusy, "a rewind or forget is running; run gc when it is done")
	}
	s.rewindMu.Unlock()
	pol, err := s.EffectivePolicy()
	if err != nil {
		return rep, err
	}
	rep.Before = s.StoreBytes()
	key := s.gcKey(pol)
	// What forgetting turns would free (a read of the whole store, so
	// only when the budget is passed), before the store is held.
	var scan *contentScan
	if opts.DryRun || (!opts.NoPolicy && (rep.Before > pol.KeepSize || opts.diskFull)) {
		opts.Progress.report("scanning", 0, 0)
		if scan, err = s.scanContent(); err != nil {
			return rep, err
		}
	}
	if opts.DryRun {
		if opts.NoPolicy {
			return ckpt.GCReport{DryRun: true, Before: rep.Before, ChunkBytes: scan.garbage, After: max(rep.Before-scan.garbage, 0)}, nil
		}
		return s.gcPlan(scan, pol, rep.Before)
	}
	lo, hi, err := s.collect(opts, pol, scan, &rep)
	if err != nil {
		return rep, err
	}
	if !opts.NoPolicy && !opts.diskFull && rep.Stopped == "" && len(rep.Forgot) == 0 {
		s.gcIdle.Store(key) // GCDue: nothing to do over the budget until something changes
	}
	// Compact what was deleted, so that the files holding it are
	// rewritten without it (range deletions alone only hide it). Pebble
	// compacts alongside everything else: the store is not held.
	if lo != nil || rep.Start != nil || rep.Merged > 0 {
		opts.Progress.report("compacting", 0, 0)
		if err := s.db.Flush(); err != nil {
			return rep, pebbleErr(err)
		}
		ctx := context.Background()
		if rep.Start != nil || rep.Merged > 0 {
			if err := s.db.Compact(ctx, []byte{prefixEvent}, upper(prefixEvent), false); err != nil {
				return rep, pebbleErr(err)
			}
		}
		if lo != nil {
			if err := s.db.Compact(ctx, lo, hi, false); err != nil {
				return rep, pebbleErr(err)
			}
		}
		crashpoint.Hit("gc.compacted")
		s.awaitObsolete()
	}
	rep.After = s.StoreBytes()
	return rep, nil
}

// collect is GC's part that holds rewindMu: the policy's forget, the mark
// and the sweeps. It returns the span of chunk keys it deleted in.
func (s *Store) collect(opts GCOptions, pol ckpt.Policy, scan *contentScan, rep *ckpt.GCReport) (lo, hi []byte, err error) {
	if !s.rewindMu.TryLock() {
		return nil, nil, detailf(ErrBusy, "a rewind or forget is running; run gc when it is done")
	}
	defer s.rewindMu.Unlock()
	if !opts.NoPolicy {
		kept, err := s.keptTurns()
		if err != nil {
			return nil, nil, err
		}
		var freed *planFreed
		size := rep.Before
		if scan != nil {
			freed, size = s.planFreedBy(scan, kept), scan.budgeted(size)
		}
		now := time.Now()
		r, err := s.policyPlan(pol, now, size, freed, !opts.diskFull)
		if err != nil {
			return nil, nil, err
		}
		if opts.diskFull && scan != nil {
			// The undo gives way only for the refused write: when all
			// this gc could free would not make room for it, the
			// write fails anyway, and the undo stays.
			f, _ := s.planFrees(scan, r, kept, s.startTurn(), freed.start)
			if !s.roomWith(f) {
				if r, err = s.policyPlan(pol, now, size, freed, true); err != nil {
					return nil, nil, err
				}
			}
		}
		start := s.startTurn()
		if ts := r.forgets(kept, start); len(ts) > 0 {
			h, err := s.forget(ts, ckpt.ReasonPolicy)
			if err != nil {
				return nil, nil, err
			}
			rep.Forgot = ts
			if h.Turn > start {
				rep.Start = &h
			}
			rep.Merged = len(r.merge)
		}
	}
	crashpoint.Hit("gc.forgotten")
	stop := func() bool {
		if s.gcStop.Load() {
			rep.Stopped = "the store is closing"
		} else if s.rewindWaiting.Load() > 0 {
			rep.Stopped = "a rewind wanted the store"
		}
		return rep.Stopped != ""
	}
	pause := func() {
		if opts.Pause != nil {
			opts.Pause()
		}
	}
	m, err := s.mark(stop, opts.Progress)
	if err != nil || m == nil {
		return nil, nil, err
	}
	crashpoint.Hit("gc.marked")
	opts.Progress.report("sweeping", 0, 0)
	if lo, hi, err = s.sweepChunks(m, rep, stop, pause); err != nil || rep.Stopped != "" {
		return lo, hi, err
	}
	return lo, hi, s.sweepAttic(m, rep, stop, pause)
}

// awaitObsolete waits a little for Pebble to delete the files compaction
// made obsolete (it does so in the background), so that the size GC
// reports is the size on disk.
func (s *Store) awaitObsolete() {
	for i := 0; i < 200; i++ {
		m := s.db.Metrics()
		if m.Table.ObsoleteCount == 0 && m.Table.ZombieCount == 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// StopGC makes a running GC stop at its next batch, and every later one
// refused (the daemon, before it closes the store).
func (s *Store) StopGC() { s.gcStop.Store(true) }

// gcMark is the content history names: every event's, up to seq (the
// first event not yet looked at).
type gcMark struct {
	chunks map[[32]byte]bool
	attic  map[string]bool
	seq    uint64
	// atticSeq: attic names from here on were given after the mark began
	// and are left alone.
	atticSeq uint64
	// late: the chunks named by events committed after the mark began
	// (catchUp). A key among them may have been written after the sweep's
	// snapshot, which does not show it: no range deletion may cover one.
	late map[[32]byte]bool
}

func (m *gcMark) add(r *record) {
	m.addRef(r.Content)
}

func (m *gcMark) addRef(c *contentRef) {
	if c == nil {
		return
	}
	if c.Attic != "" {
		m.attic[c.Attic] = true
	}
	for ch := c.Chunks; len(ch) >= 32; ch = ch[32:] {
		m.chunks[[32]byte(ch[:32])] = true
	}
}

// mark reads every event, the seals of the last unmount (seal.go), and a
// rewind journal's plan if one is left; nil when stop said to stop.
func (s *Store) mark(stop func() bool, progress Progress) (*gcMark, error) {
	m := &gcMark{chunks: map[[32]byte]bool{}, attic: map[string]bool{}, late: map[[32]byte]bool{}}
	s.mu.Lock()
	m.seq, m.atticSeq = s.nextSeq, s.atticSeq
	s.mu.Unlock()
	n, stopped := 0, false
	err := s.scanEvents(0, m.seq, func(r *record) (bool, error) {
		m.add(r)
		if n++; n%4096 == 0 {
			progress.report("marking", int64(n), 0)
			if stop() {
				stopped = true
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil || stopped {
		return nil, err
	}
	if err := s.eachSeal(func(_ string, e sealEntry) { m.addRef(e.Ref) }); err != nil {
		return nil, err
	}
	v, closer, err := s.db.Get(keyJournalPlan)
	if err == nil {
		var plan []action
		jerr := bytejson.Unmarshal(v, &plan)
		closer.Close()
		if jerr != nil {
			return nil, fmt.Errorf("%w: rewind journal: %v", ErrCorrupt, jerr)
		}
		for _, a := range plan {
			m.addRef(a.Content)
			for _, l := range a.Layers {
				m.addRef(l.Bytes)
			}
		}
	} else if err != pebble.ErrNotFound {
		return nil, pebbleErr(err)
	}
	return m, nil
}

// catchUp adds the references of the events committed since the mark
// last looked (contentMu held).
func (s *Store) catchUp(m *gcMark) error {
	s.mu.Lock()
	end := s.nextSeq
	s.mu.Unlock()
	err := s.scanEvents(m.seq, end, func(r *record) (bool, error) {
		m.add(r)
		if r.Content != nil {
			for ch := r.Content.Chunks; len(ch) >= 32; ch = ch[32:] {
				m.late[[32]byte(ch[:32])] = true
			}
		}
		return true, nil
	})
	m.seq = end
	if err != nil {
		return err
	}
	// Seals saved since the mark began (an unmount's, with the gc of an
	// offline command: not at once, but cheap to ask).
	return s.eachSeal(func(_ string, e sealEntry) {
		m.addRef(e.Ref)
		if e.Ref != nil {
			for ch := e.Ref.Chunks; len(ch) >= 32; ch = ch[32:] {
				m.late[[32]byte(ch[:32])] = true
			}
		}
	})
}

// gcRun is a run of garbage chunk keys, in key order, with no referenced
// key between them in the snapshot the sweep reads.
type gcRun [][]byte

// sweepChunks deletes the chunks m does not name, in batches. It returns
// the key span it deleted in (nil: nothing).
func (s *Store) sweepChunks(m *gcMark, rep *ckpt.GCReport, stop func() bool, pause func()) (lo, hi []byte, err error) {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixChunk}, UpperBound: upper(prefixChunk)})
	if err != nil {
		return nil, nil, err
	}
	defer it.Close()
	var runs []gcRun
	var cur gcRun
	var keys int
	var size, scanned int64
	var sizes = map[string]int64{}
	flush := func() error {
		if cur != nil {
			runs = append(runs, cur)
			cur = nil
		}
		if len(runs) == 0 {
			return nil
		}
		n, freed, err := s.deleteRuns(m, runs, sizes)
		if err != nil {
			return err
		}
		if n > 0 {
			if lo == nil || bytes.Compare(runs[0][0], lo) < 0 {
				lo = runs[0][0]
			}
			last := runs[len(runs)-1]
			hi = append(append([]byte(nil), last[len(last)-1]...), 0)
		}
		rep.Chunks += n
		rep.ChunkBytes += freed
		runs, keys, size, sizes = nil, 0, 0, map[string]int64{}
		crashpoint.Hit("gc.batch")
		pause()
		return nil
	}
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		// Reading the live chunks takes time too: look whether to stop
		// every gcBatchBytes read.
		if scanned += int64(len(k) + len(it.Value())); scanned >= gcBatchBytes {
			scanned = 0
			if err := flush(); err != nil {
				return lo, hi, err
			}
			if stop() {
				return lo, hi, nil
			}
		}
		if len(k) == 33 && m.chunks[[32]byte(k[1:])] {
			if cur != nil {
				runs = append(runs, cur)
				cur = nil
			}
			continue
		}
		kc := append([]byte(nil), k...)
		cur = append(cur, kc)
		n := int64(len(k) + len(it.Value()))
		sizes[string(kc)] = n
		keys++
		size += n
		if keys >= gcBatchKeys || size >= gcBatchBytes {
			scanned = 0
			if err := flush(); err != nil {
				return lo, hi, err
			}
			if stop() {
				return lo, hi, nil
			}
		}
	}
	if err := it.Error(); err != nil {
		return lo, hi, pebbleErr(err)
	}
	return lo, hi, flush()
}

// deleteRuns deletes the runs' keys that no event names, holding contentMu
// while it looks at the events committed since the mark and commits.
func (s *Store) deleteRuns(m *gcMark, runs []gcRun, sizes map[string]int64) (n int, freed int64, err error) {
	s.contentMu.Lock()
	defer s.contentMu.Unlock()
	if err := s.catchUp(m); err != nil {
		return 0, 0, err
	}
	// The chunks named since the mark, in order: one inside a run
	// (written again after the snapshot, or found by a capture) turns
	// it into point deletions.
	var newKeys [][]byte
	for k := range m.late {
		newKeys = append(newKeys, chunkKey(k))
	}
	sort.Slice(newKeys, func(i, j int) bool { return bytes.Compare(newKeys[i], newKeys[j]) < 0 })
	inside := func(a, b []byte) bool {
		i := sort.Search(len(newKeys), func(i int) bool { return bytes.Compare(newKeys[i], a) >= 0 })
		return i < len(newKeys) && bytes.Compare(newKeys[i], b) <= 0
	}
	b := s.db.NewBatch()
	defer b.Close()
	for _, run := range runs {
		a, z := run[0], run[len(run)-1]
		if len(run) > 1 && !inside(a, z) {
			b.DeleteRange(a, append(append([]byte(nil), z...), 0), nil)
			n += len(run)
			for _, k := range run {
				freed += sizes[string(k)]
			}
			continue
		}
		for _, k := range run {
			if len(k) == 33 && m.chunks[[32]byte(k[1:])] {
				continue
			}
			b.Delete(k, nil)
			n++
			freed += sizes[string(k)]
		}
	}
	if err := s.commit(b, pebble.NoSync); err != nil {
		return 0, 0, err
	}
	return n, freed, nil
}

// sweepAttic deletes the attic files no event names that were in the attic
// before the mark began.
func (s *Store) sweepAttic(m *gcMark, rep *ckpt.GCReport, stop func() bool, pause func()) error {
	if s.attic == nil {
		return nil
	}
	names, err := s.atticNames()
	if err != nil {
		return err
	}
	var cands []string
	for _, name := range names {
		if v, err := strconv.ParseUint(name, 16, 64); err == nil && v < m.atticSeq && !m.attic[name] {
			cands = append(cands, name)
		}
	}
	const per = 256
	for len(cands) > 0 {
		batch := cands[:min(per, len(cands))]
		cands = cands[len(batch):]
		err := func() error {
			s.contentMu.Lock()
			defer s.contentMu.Unlock()
			if err := s.catchUp(m); err != nil {
				return err
			}
			for _, name := range batch {
				if m.attic[name] || s.spanInUse(name) {
					continue
				}
				var st unix.Stat_t
				if unix.Fstatat(int(s.attic.Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
					continue
				}
				if err := unix.Unlinkat(int(s.attic.Fd()), name, 0); err != nil {
					return fmt.Errorf("versionstore: attic: remove %s: %w", name, err)
				}
				rep.Attic++
				if st.Nlink <= 1 {
					rep.AtticBytes += held(st.Blocks, st.Size, int64(st.Blksize))
				}
			}
			return nil
		}()
		if err != nil {
			return err
		}
		crashpoint.Hit("gc.attic")
		if stop() {
			return nil
		}
		pause()
	}
	return nil
}
