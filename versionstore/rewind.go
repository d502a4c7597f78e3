package versionstore

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"ckptfs/internal/ckpt"
	"ckptfs/internal/crashpoint"
	"ckptfs/internal/units"
)

// rewind.go: Rewind, which makes the tree (or, as a restore, some paths
// of it) equal its state at the end of a turn: what it checks before it
// changes anything, and how it journals and runs the plan.

// RewindOptions modify Rewind.
type RewindOptions struct {
	DryRun bool     // compute and return the changes; touch nothing
	Paths  []string // restore: only these paths (and everything below them)
	Undo   bool     // the rewind undoes turn target+1: its label says so
	Who    ckpt.Program
	// Progress, if set, is told what the rewind is doing: a phase
	// ("comparing", "rewinding", "restoring", "linking") and done of total
	// steps in it (total 0: not known). It is called on the rewind's
	// goroutine and must be quick.
	Progress Progress
}

// Progress is told how far a long operation has got: done of total steps
// of its phase (total 0: not known).
type Progress func(phase string, done, total int64)

// report calls p if it is set.
func (p Progress) report(phase string, done, total int64) {
	if p != nil {
		p(phase, done, total)
	}
}

// RewindResult says what a rewind did (or would do, with DryRun).
type RewindResult struct {
	Turn ckpt.Turn // the new turn of kind rewind (zero with DryRun or no change)
	// Changes per path: Before the state before the rewind, After the
	// target state (after a rewind, the rewind turn's own changes).
	Changes []Change
	// NotRestored are the paths left as they were because their bytes at
	// the target were never captured (they changed while the project was
	// not mounted).
	NotRestored []string
	// Left are the directories left in place because they hold
	// unversioned paths, though at the target they were not there or
	// not directories (sorted; none of them is in Changes).
	Left []Left
	// SplitLinks: the paths a restore split from names it did not
	// restore (see LinkSplit), by path. A dry run says which it would.
	SplitLinks []LinkSplit
	// Warning, when not "", says what went wrong after the rewind was
	// done ("the store's log could not be synced to disk: …"): its turn
	// closed, but not synced. The rewind stands (the next start neither
	// redoes nor undoes it); a power loss may lose its record.
	Warning string
}

// LinkSplit is a path a restore gave an inode other than the one it
// shared, before the restore, with names outside the restore (Names):
// they stay on that inode, with their bytes, mode and owner as they are.
// A revert says the same of the names it leaves as they are
// (RevertResult.SplitLinks).
// Why a restore splits the link rather than writing the target bytes
// into the shared inode or refusing: it changes only the paths it is
// given (a write into the inode would change the other names too, which
// the user did not name), and refusing would leave no way to bring back
// one name's bytes but a rewind of everything. It says so instead of
// splitting silently, its dry run too; restoring every name of the inode
// together keeps them linked as they were then, and a rewind gives back
// the whole partition.
type LinkSplit struct {
	Path  string
	Names []string // the names it no longer shares its inode with, sorted
}

// Rewind makes the tree equal its state at the end of turn target, or with
// opts.Paths only those paths and what lies below them, but for the
// unversioned paths, which it leaves as they are, and the directories
// that hold them (RewindResult.Left): a rewind with nothing else to do
// changes nothing and records no turn. The change is
// recorded as a new turn of kind rewind, which can itself be rewound. The
// plan is journaled before anything changes: Recover finishes it after a
// crash. The caller must keep other writers out of the tree meanwhile.
func (s *Store) Rewind(target uint64, live ckpt.Tree, opts RewindOptions) (RewindResult, error) {
	defer s.lockRewind()()
	var res RewindResult
	stop, err := s.endSeq(target)
	if err != nil {
		return res, err
	}
	var prefixes []string
	for _, p := range opts.Paths {
		c, ok := ckpt.Clean(p)
		if !ok {
			return res, fmt.Errorf("%w: %q", ErrBadPath, p)
		}
		prefixes = append(prefixes, c)
	}
	opts.Progress.report("comparing", 0, 0)
	all, err := s.Changes(Now, target, live)
	if err != nil {
		return res, err
	}
	changes := all
	if opts.Paths != nil {
		changes = RestrictChanges(all, prefixes)
	}
	// A path whose target bytes were never captured keeps its bytes,
	// mode and owner; it is only parted from names that were not names of
	// its inode at the target (the link pass: planLinks), as a change of
	// its links alone.
	kept := changes[:0:0]
	for _, c := range changes {
		if c.after.Lost {
			res.NotRestored = append(res.NotRestored, c.Path)
			if c.parted {
				kept = append(kept, Change{Path: c.Path, Kind: ckpt.Relinked, Before: c.Before, After: c.Before, before: c.before, after: c.before})
			}
			continue
		}
		kept = append(kept, c)
	}
	changes = kept
	if opts.Paths != nil {
		changes = withParents(changes, all, prefixes)
	}
	// A directory that holds unversioned paths stays: no change the
	// rewind makes, and none left to do when it is the only difference.
	planned := changes
	if changes, res.Left, err = s.leaveHolders(changes, live); err != nil {
		return res, err
	}
	// A restore lists only the changes of links alone its link pass
	// makes.
	if opts.Paths != nil {
		if changes, err = s.linksMade(stop, prefixes, changes, live); err != nil {
			return res, err
		}
	}
	res.Changes = changes
	label := fmt.Sprintf("rewind to %s", PointName(target))
	op := "rewind to " + PointWord(target)
	switch {
	case opts.Undo:
		label = fmt.Sprintf("undo turn %d", target+1)
		op = label
	case opts.Paths != nil:
		label = fmt.Sprintf("%s%s from %s", ckpt.RestoreLabelPrefix, strings.Join(prefixes, " "), PointName(target))
		op = fmt.Sprintf("restore of %s from %s", strings.Join(prefixes, " "), PointWord(target))
	}
	// A change the tree's user may not make refuses it now, its dry run
	// too, rather than half-way.
	if err := s.checkPermitted(op, changes, live); err != nil {
		return res, err
	}
	// A restore names the links it splits (LinkSplit); the dry run says
	// what the link pass will do, the restore what it did.
	var linked map[string]linkedPath
	if opts.Paths != nil {
		if linked, err = s.linkedOutside(changes, prefixes, live); err != nil {
			return res, err
		}
		if opts.DryRun {
			res.SplitLinks, err = s.predictSplits(stop, linked, live)
			return res, err
		}
	}
	if opts.DryRun || len(changes) == 0 {
		return res, nil
	}
	if err := s.checkRewindSpace(changes, live); err != nil {
		return res, err
	}
	var actions []action
	var lost []string
	shared := false
	if opts.Paths != nil {
		if actions, lost, shared, err = s.planRestore(stop, prefixes, live, nil, 0); err != nil {
			return res, err
		}
		err = s.checkActions(actions)
	} else {
		err = s.checkEvents(stop)
	}
	if err != nil {
		return res, err
	}
	t, err := s.Begin(ckpt.KindRewind, label, "")
	if err != nil && t.Num == 0 {
		return res, err
	}
	// From here on, a failure before the journal is saved ends the
	// turn too (rollBackUnsaved): err, a Begin that opened it but could
	// not sync, is one.
	crashpoint.Hit("rewind.begun")
	j := &rewindJournal{Target: target, Turn: t.Num, Next: t.FirstSeq - 1, Stop: stop, Actions: actions, Restore: opts.Paths != nil, Lost: lost, LinkPass: true, Op: op, progress: opts.Progress}
	if j.Restore {
		j.Next = 0
		j.Paths, j.Links = prefixes, !shared
	} else {
		j.Whole = true
		// The reverse pass skips the earlier rewinds it can (each one
		// left the tree as at its target), so that it undoes what
		// differs and not every rewind since again.
		jumps, span, jerr := s.rewindJumps(j.Stop, j.Next)
		if err == nil {
			err = jerr
		}
		moves := 0
		for _, c := range changes {
			if c.Kind == ckpt.Renamed {
				moves++
			}
		}
		if span > replayLimit(len(changes), moves) {
			// The journey is still much longer than the way: the
			// events since the target go round in circles (renames
			// back and forth). Undoing them one by one would cost
			// time in proportion to all of them, and record as many
			// again in this turn. Go straight to the fix-up pass: it
			// sets every path that differs to its target state, at
			// the cost of copying what a replay would have renamed
			// back.
			j.Next = j.Stop
		} else {
			j.Jumps = jumps
		}
	}
	if err != nil {
		return res, s.rollBackUnsaved(j, err, live, opts.Who)
	}
	if err := s.journalAndRun(j, t.Num, target, live, opts.Who); err != nil {
		return res, err
	}
	if err := s.noteRewound(j); err != nil {
		return res, err
	}
	var unsynced error
	if res.Turn, unsynced, err = s.finishJournal(j); err != nil {
		return res, err
	}
	res.Warning = unsyncedWarning(res.Turn.Num, unsynced)
	for _, p := range j.Lost {
		if !slices.Contains(res.NotRestored, p) {
			res.NotRestored = append(res.NotRestored, p)
		}
	}
	sort.Strings(res.NotRestored)
	// What it left, as it is now (a renamed directory the fix-up pass
	// alone took back leaves its old name).
	if _, res.Left, err = s.leaveHolders(planned, live); err != nil {
		return res, err
	}
	if res.SplitLinks, err = foundSplits(linked, live); err != nil {
		return res, err
	}
	// The changes as they are now recorded: "before" from the rewind turn's
	// own captures, not from live paths the rewind has just changed. The
	// renames are the plan's, whether the rewind renamed or copied: the
	// dry run's list and this one then differ only where the rewind did
	// not do what it planned.
	done, err := s.Changes(res.Turn.Num-1, res.Turn.Num, live)
	res.Changes = PairLike(done, changes)
	return res, err
}

// lockRewind takes rewindMu for a rewind or a revert (a running gc stops
// at its next batch to let it in) and drops the link index; the unlock it
// returns drops the index again and releases rewindMu.
func (s *Store) lockRewind() (unlock func()) {
	s.rewindWaiting.Add(1) // a running gc stops at its next batch
	s.rewindMu.Lock()
	s.rewindWaiting.Add(-1)
	s.dropLinkIndex()
	return func() {
		s.dropLinkIndex()
		s.rewindMu.Unlock()
	}
}

// checkRewindSpace refuses, before anything changes, a rewind whose bytes
// cannot fit: it writes the target bytes of every regular file it adds or
// changes into the live tree, and first copies the current bytes of every
// regular file it changes or removes into the store (twice: its log and a
// table), and a rewind that ran out of space half-way would leave the tree
// neither where it was nor where it was going until space came back. What
// a clone writes (see below) is not counted.
func (s *Store) checkRewindSpace(changes []Change, live ckpt.Tree) error {
	treeFree, treeDev, err := live.Avail()
	if err != nil {
		return nil // cannot tell: let the rewind try
	}
	// Where the store clones, bytes kept in its attic on the tree's
	// filesystem are written back by a clone (copy_file_range), and the
	// rewind's own capture of a big file is a clone: neither needs room.
	atticClones := s.atticOn(treeDev) && s.capturesByClone(treeDev, cloneMin)
	var tree, store int64
	for _, c := range changes {
		if c.Kind == ckpt.Renamed || c.Kind == ckpt.ModeOnly || c.Kind == ckpt.Relinked {
			continue
		}
		if w, ok := patchedBytes(c); ok {
			// Patched in place (patchTo): the layers' bytes are
			// written, and kept first.
			tree += w + max(0, c.After.Size-c.Before.Size)
			store += storedSize(w)
			continue
		}
		if c.After.Type == ckpt.Regular && !(atticClones && c.after.Content != nil && c.after.Content.Attic != "") {
			tree += c.After.Size
		}
		if c.Before.Type == ckpt.Regular && !s.capturesByClone(treeDev, c.Before.Size) {
			store += storedSize(c.Before.Size)
		}
	}
	if tree == 0 && store == 0 {
		return nil
	}
	storeFree, storeDev, known := s.storeSpace()
	fail := func(what string, free int64) error {
		return fmt.Errorf("%w: the rewind writes %s and its disk has %s free; free some space and try again",
			ErrNoSpace, what, units.Bytes(free))
	}
	if known && storeDev == treeDev {
		if treeFree < tree+store+headroom {
			return fail(fmt.Sprintf("%s into the tree and keeps %s in the store", units.Bytes(tree), units.Bytes(store)), treeFree)
		}
		return nil
	}
	if treeFree < tree+headroom {
		return fail(units.Bytes(tree)+" into the tree", treeFree)
	}
	if known && storeFree < store+headroom {
		return fail(units.Bytes(store)+" into the store", storeFree)
	}
	return nil
}

// patchedBytes is how many bytes a rewind writes into a regular file it
// patches in place (range records over the same file: patchTo), ok false
// for any other change. (A file patchTo must replace after all, one with
// several names, is counted as patched.)
func patchedBytes(c Change) (n int64, ok bool) {
	if !patchesLive(c.after, c.Path, c.Before) {
		return 0, false
	}
	pt := c.after.Patch
	w := changedBy(pt.BaseSize, c.After.Size, pt.Layers)
	for i := 1; i < len(w); i += 2 {
		n += w[i]
	}
	return n, true
}

// checkKept refuses, before a rewind, restore or revert changes anything,
// bytes it would fail to read half-way: a part of a span file that fails
// its check, an attic file that is gone or not the one recorded (after a
// power loss, see spans.go). Chunks live in Pebble with their events and
// are checked as they are read.
func (s *Store) checkKept(ref *contentRef) error {
	switch {
	case ref == nil:
	case ref.Part:
		_, err := s.readPart(ref)
		return err
	case ref.Attic != "":
		f, err := s.openAttic(ref)
		if err != nil {
			return err
		}
		f.Close()
	}
	return nil
}

// checkEvents runs checkKept on the bytes of every event after seq: a
// rewind undoes each of them (also some whose bytes the fix-up pass turns
// out not to need).
func (s *Store) checkEvents(seq uint64) error {
	s.mu.Lock()
	end := s.nextSeq
	s.mu.Unlock()
	return s.scanEvents(seq+1, end, func(r *record) (bool, error) {
		if err := s.checkKept(r.Content); err != nil {
			return false, fmt.Errorf("turn %d's record of %s: %w", r.Turn, r.Path, err)
		}
		return true, nil
	})
}

// checkActions runs checkKept on the bytes a plan's actions carry.
func (s *Store) checkActions(actions []action) error {
	for _, a := range actions {
		if err := s.checkKept(a.Content); err != nil {
			return fmt.Errorf("%s: %w", a.Path, err)
		}
		for _, l := range a.Layers {
			if err := s.checkKept(l.Bytes); err != nil {
				return fmt.Errorf("%s: %w", a.Path, err)
			}
		}
	}
	return nil
}

func sameRef(a, b *contentRef) bool {
	return a.Size == b.Size && a.Attic == b.Attic && a.Off == b.Off && string(a.Chunks) == string(b.Chunks)
}

// back returns the name p had at the start (the longest, innermost move
// wins).
func (l *moveLog) back(p string) string {
	best, orig := -1, p
	for _, m := range l.moves {
		if rest, ok := ckpt.Under(p, m.cur); ok && len(m.cur) > best {
			best, orig = len(m.cur), join(m.orig, rest)
		}
	}
	return orig
}

// isBorn reports whether the object at name was made since the log's
// start (born), no directory above the name renamed since it was known
// to be there.
func (l *moveLog) isBorn(name string) bool {
	at, ok := l.born[name]
	if !ok {
		return false
	}
	i := sort.Search(len(l.renames), func(i int) bool { return l.renames[i].seq > at })
	for _, e := range l.renames[i:] {
		for _, p := range []string{e.from, e.to} {
			if rest, ok := ckpt.Under(name, p); ok && rest != "" {
				return false
			}
		}
	}
	return true
}

// note follows the event r, if it is a rename or an exchange.
func (l *moveLog) note(r *record) {
	if r.To == "" {
		if l.born != nil && r.Op == opPrior && !r.State.Exists() {
			l.born[r.Path] = r.Seq
		}
		return
	}
	// replaces: a thing made since renamed over a path that held what
	// was there before (not one made since either: its record then said
	// nothing was there, and a move that ended there is over).
	var replaces bool
	if l.born != nil {
		from, to := l.isBorn(r.Path), l.isBorn(r.To)
		replaces = r.Op == opRename && from && !to
		delete(l.born, r.Path)
		delete(l.born, r.To)
		switch {
		case r.Op == opExchange:
			if to {
				l.born[r.Path] = r.Seq
			}
			if from {
				l.born[r.To] = r.Seq
			}
		case from && !replaces:
			l.born[r.To] = r.Seq
		}
		l.renames = append(l.renames, renameEvent{seq: r.Seq, from: r.Path, to: r.To})
	}
	from, to := l.back(r.Path), l.back(r.To)
	var kept []*move
	for _, m := range l.moves {
		if rest, ok := ckpt.Under(m.cur, r.Path); ok {
			m.cur = join(r.To, rest) // carried along
		} else if rest, ok := ckpt.Under(m.cur, r.To); ok {
			if replaces && m.cur == r.To {
				kept = append(kept, m) // its bytes replaced
				continue
			}
			if r.Op == opRename {
				continue // renamed over
			}
			m.cur = join(r.Path, rest)
		}
		// A move that now ends where a new one below ends is that
		// move again (back gave its orig for from or to): keep one,
		// or a name renamed back and forth adds a move per rename
		// and every event costs O(renames so far).
		if m.cur == r.To || (r.Op == opExchange && m.cur == r.Path) {
			continue
		}
		kept = append(kept, m)
	}
	l.moves = kept
	if replaces {
		return
	}
	l.moves = append(l.moves, &move{orig: from, cur: r.To})
	if r.Op == opExchange {
		l.moves = append(l.moves, &move{orig: to, cur: r.Path})
	}
}
