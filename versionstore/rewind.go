package versionstore

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"

	"ckptfs/internal/ckpt"
	"ckptfs/internal/crashpoint"
	"ckptfs/internal/units"
)

// RewindOptions modify Rewind.
type RewindOptions struct {
	DryRun bool     // compute and return the changes; touch nothing
	Paths  []string // restore: only these paths (and everything below them)
	Undo   bool     // the rewind undoes turn target+1: its label says so
	Who    ckpt.Program
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
}

// rewindJournal is kept under keyJournal while a rewind runs, so that a
// crash half-way is finished on the next Recover.
//
// A whole-tree rewind undoes the change log backwards: event seq Next, then
// Next-1, … down to Stop+1. Every undo step is idempotent ("make the path
// be this state", "rename back if not yet renamed back"), so after a crash
// the step at Next is simply done again.
//
// A restore (Paths) is a list of Actions computed up front; Next is the
// index of the next one to do.
type rewindJournal struct {
	Target  uint64   `json:"target"`
	Turn    uint64   `json:"turn"`
	Next    uint64   `json:"next"`
	Stop    uint64   `json:"stop"`
	Actions []action `json:"actions,omitempty"`
	Restore bool     `json:"restore,omitempty"`
	Lost    []string `json:"lost,omitempty"` // paths left as they are: bytes never captured
	// Mark is the first event seq the step in progress may have recorded
	// (the store's next seq when the journal was last saved): what a redo
	// of the step after a crash finds of its own earlier run. 0 in
	// journals written before it was kept.
	Mark uint64 `json:"mark,omitempty"`
	// Plan: Actions are kept apart, under keyJournalPlan (journals of
	// older versions hold them here).
	Plan bool `json:"plan,omitempty"`
	// LinkPass: the rewind ends with a link pass (journals written before
	// there was one have not), restricted to Paths for a restore; Links:
	// it is planned (Actions are its, planLinks), or has nothing to do.
	LinkPass bool     `json:"linkpass,omitempty"`
	Paths    []string `json:"paths,omitempty"`
	Links    bool     `json:"links,omitempty"`

	// written: what the reverse pass wrote where (not persisted: after a
	// crash the fix-up pass compares bytes instead).
	written map[string]*contentRef
}

// action makes Path have State, with bytes from Content or the live path
// Live (restore only); or, in the link pass (Op), gives Path an inode of
// its own (actSplit, if it still has inode Expect) or makes it a name of
// the inode at From (actLink).
type action struct {
	Path    string      `json:"p"`
	State   ckpt.State  `json:"s"`
	Content *contentRef `json:"c,omitempty"`
	Live    string      `json:"l,omitempty"`
	Op      string      `json:"o,omitempty"`
	From    string      `json:"f,omitempty"`
	Expect  *ckpt.Inode `json:"e,omitempty"`
}

// Rewind makes the tree equal its state at the end of turn target, or with
// opts.Paths only those paths and what lies below them. The change is
// recorded as a new turn of kind rewind, which can itself be rewound. The
// plan is journaled before anything changes: Recover finishes it after a
// crash. The caller must keep other writers out of the tree meanwhile.
func (s *Store) Rewind(target uint64, live ckpt.Tree, opts RewindOptions) (RewindResult, error) {
	s.rewindMu.Lock()
	defer s.rewindMu.Unlock()
	s.dropLinkIndex()
	defer s.dropLinkIndex()
	var res RewindResult
	if _, err := s.Turn(target); err != nil {
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
	changes, err := s.Changes(Now, target, live)
	if err != nil {
		return res, err
	}
	if opts.Paths != nil {
		changes = filterChanges(changes, prefixes)
	}
	// A path whose target bytes were never captured stays as it is.
	kept := changes[:0:0]
	for _, c := range changes {
		if c.after.Lost {
			res.NotRestored = append(res.NotRestored, c.Path)
			continue
		}
		kept = append(kept, c)
	}
	changes = kept
	res.Changes = changes
	if opts.DryRun || len(changes) == 0 {
		return res, nil
	}
	if err := s.checkRewindSpace(changes, live); err != nil {
		return res, err
	}
	stop, err := s.endSeq(target)
	if err != nil {
		return res, err
	}
	var actions []action
	var lost []string
	shared := false
	if opts.Paths != nil {
		if actions, lost, shared, err = s.planRestore(stop, prefixes, live, nil); err != nil {
			return res, err
		}
	}
	label := fmt.Sprintf("rewind to %d", target)
	switch {
	case opts.Undo:
		label = fmt.Sprintf("undo turn %d", target+1)
	case opts.Paths != nil:
		label = fmt.Sprintf("restore %s from %d", strings.Join(prefixes, " "), target)
	}
	t, err := s.Begin(ckpt.KindRewind, label, "")
	if err != nil {
		return res, err
	}
	crashpoint.Hit("rewind.begun")
	j := &rewindJournal{Target: target, Turn: t.Num, Next: t.FirstSeq - 1, Stop: stop, Actions: actions, Restore: opts.Paths != nil, Lost: lost, LinkPass: true}
	if j.Restore {
		j.Next = 0
		j.Paths, j.Links = prefixes, !shared
	} else if j.Next-j.Stop > replayLimit(len(changes)) {
		// The journey is much longer than the way: the events since the
		// target go round in circles (renames back and forth, earlier
		// rewinds undone and redone). Undoing them one by one would cost
		// time in proportion to all of them, and record as many again
		// in this turn, so that the next rewind over it costs twice as
		// much. Go straight to the fix-up pass: it sets every path that
		// differs to its target state, at the cost of copying what a
		// replay would have renamed back.
		j.Next = j.Stop
	}
	if err := s.putJournal(j, t.Num, target); err != nil {
		return res, err
	}
	// The journal survives a power loss too: a half-done rewind is always
	// found again.
	if err := s.wal.SyncWAL(); err != nil {
		return res, fmt.Errorf("versionstore: %w", err)
	}
	crashpoint.Hit("rewind.journaled")
	if err := s.runJournal(j, live, opts.Who); err != nil {
		return res, err
	}
	if res.Turn, err = s.finishJournal(j); err != nil {
		return res, err
	}
	for _, p := range j.Lost {
		if !slices.Contains(res.NotRestored, p) {
			res.NotRestored = append(res.NotRestored, p)
		}
	}
	sort.Strings(res.NotRestored)
	// The changes as they are now recorded: "before" from the rewind turn's
	// own captures, not from live paths the rewind has just changed.
	res.Changes, err = s.Changes(res.Turn.Num-1, res.Turn.Num, live)
	return res, err
}

// checkRewindSpace refuses, before anything changes, a rewind whose bytes
// cannot fit: it writes the target bytes of every regular file it adds or
// changes into the live tree, and first copies the current bytes of every
// regular file it changes or removes into the store (twice: its log and a
// table), and a rewind that ran out of space half-way would leave the tree
// neither where it was nor where it was going until space came back.
func (s *Store) checkRewindSpace(changes []Change, live ckpt.Tree) error {
	var tree, store int64
	for _, c := range changes {
		if c.Kind == ckpt.Renamed || c.Kind == ckpt.ModeOnly || c.Kind == ckpt.Relinked {
			continue
		}
		if c.After.Type == ckpt.Regular {
			tree += c.After.Size
		}
		if c.Before.Type == ckpt.Regular {
			store += storedSize(c.Before.Size)
		}
	}
	if tree == 0 && store == 0 {
		return nil
	}
	treeFree, treeDev, err := live.Avail()
	if err != nil {
		return nil // cannot tell: let the rewind try
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

func filterChanges(cs []Change, prefixes []string) []Change {
	var out []Change
	for _, c := range cs {
		for _, p := range prefixes {
			_, a := ckpt.Under(c.Path, p)
			_, b := ckpt.Under(c.From, p)
			if a || (c.From != "" && b) {
				out = append(out, c)
				break
			}
		}
	}
	return out
}

func sameRef(a, b *contentRef) bool {
	return a.Size == b.Size && a.Attic == b.Attic && string(a.Chunks) == string(b.Chunks)
}

// underAny reports whether some prefix lies below p (p is an ancestor).
func underAny(prefixes []string, p string) bool {
	for _, pre := range prefixes {
		if _, ok := ckpt.Under(pre, p); ok {
			return true
		}
	}
	return false
}

// walkLive calls fn with the relative path of everything below dir.
func walkLive(live ckpt.Tree, dir string, fn func(rel string)) error {
	st, err := live.Lstat(dir)
	if err != nil || st.Type != ckpt.Dir {
		return err
	}
	var walk func(rel string) error
	walk = func(rel string) error {
		names, err := live.ReadDir(join(dir, rel))
		if err != nil {
			return err
		}
		for _, n := range names {
			r := join(rel, n)
			fn(r)
			st, err := live.Lstat(join(dir, r))
			if err != nil {
				return err
			}
			if st.Type == ckpt.Dir {
				if err := walk(r); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return walk("")
}

// candidates returns every path under prefixes whose state may differ
// from what it was right after event stop: the paths the events since
// name, as they were named then (renames followed back), and what lies
// below a directory moved since, under both its names.
func (s *Store) candidates(stop uint64, prefixes []string, live ckpt.Tree) ([]string, error) {
	seen := map[string]bool{}
	var cands []string
	under := func(p string) bool {
		for _, pre := range prefixes {
			if _, ok := ckpt.Under(p, pre); ok {
				return true
			}
		}
		return false
	}
	add := func(p string) {
		if under(p) && !seen[p] {
			seen[p] = true
			cands = append(cands, p)
		}
	}
	var ml moveLog
	s.mu.Lock()
	end := s.nextSeq
	s.mu.Unlock()
	err := s.scanEvents(stop+1, end, func(r *record) (bool, error) {
		add(ml.back(r.Path))
		if r.To != "" {
			add(ml.back(r.To))
		}
		ml.note(r)
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	// What lies below a moved directory's live location: under the name it
	// had then (to bring back) and under the name it has now (to remove,
	// if nothing else was there then).
	for _, m := range ml.moves {
		back, now := under(m.orig) || underAny(prefixes, m.orig), under(m.cur) || underAny(prefixes, m.cur)
		if !back && !now {
			continue
		}
		if err := walkLive(live, m.cur, func(p string) {
			add(join(m.orig, p))
			add(join(m.cur, p))
		}); err != nil {
			return nil, err
		}
	}
	return cands, nil
}

// moveLog maps the current name of every subtree renamed since some
// moment back to the name it had then, event by event, so that events
// under the new name (and what still lies there) are found for the old
// one.
type moveLog struct{ moves []*move }

type move struct{ orig, cur string }

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

// note follows the event r, if it is a rename or an exchange.
func (l *moveLog) note(r *record) {
	if r.To == "" {
		return
	}
	from, to := l.back(r.Path), l.back(r.To)
	var kept []*move
	for _, m := range l.moves {
		if rest, ok := ckpt.Under(m.cur, r.Path); ok {
			m.cur = join(r.To, rest) // carried along
		} else if rest, ok := ckpt.Under(m.cur, r.To); ok {
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
	l.moves = append(kept, &move{orig: from, cur: r.To})
	if r.Op == opExchange {
		l.moves = append(l.moves, &move{orig: to, cur: r.Path})
	}
}

// planRestore computes the actions that give every path under prefixes its
// state right after event stop: existing things first, parents before
// children, then removals, children before parents.
//
// written, if not nil, maps paths to the stored version the caller just
// wrote there: when the target is that same version and type, mode and size
// match, the bytes are not read again to compare.
//
// A path whose target bytes were never captured (Lost) gets no action: it
// is returned in lost instead, to be named to the user. shared reports
// whether any path looked at shares (or shared at the target) its inode
// with another: only then has the link pass anything to do.
func (s *Store) planRestore(stop uint64, prefixes []string, live ckpt.Tree, written map[string]*contentRef) (actions []action, lost []string, shared bool, err error) {
	cands, err := s.candidates(stop, prefixes, live)
	if err != nil {
		return nil, nil, false, err
	}
	rs, err := s.resolveMany(stop, cands, live)
	if err != nil {
		return nil, nil, false, err
	}
	var mk, rm []action
	for i, p := range cands {
		r := rs[i]
		a := action{Path: p, State: r.State, Content: r.Content}
		cur, ino, err := live.LstatInode(p)
		if err != nil {
			return nil, nil, false, err
		}
		if r.State.Type == ckpt.Regular && (r.Inode.Nlink > 1 || len(r.Links) > 0) || cur.Type == ckpt.Regular && ino.Nlink > 1 {
			shared = true
		}
		if r.Lost {
			lost = append(lost, p)
			continue
		}
		if !r.FromLog {
			a.Live = r.Live // r.Live == p: the same file, its mode maybe changed
		}
		if w := written[p]; w != nil && r.Content != nil && sameRef(w, r.Content) &&
			cur.Type == r.State.Type && cur.Size == r.State.Size && cur.Mode == r.State.Mode {
			continue // just written from exactly this version
		}
		if k, err := s.compare(resolved{State: cur, Live: p}, r, live); err != nil {
			return nil, nil, false, err
		} else if k == "" {
			continue // already as it was
		}
		if a.Live != "" && a.Live != p && a.State.Type == ckpt.Regular {
			// The bytes lie at another live path, which an earlier action
			// may change: keep them in the store first, so that every
			// action (and its redo after a crash) stands on its own.
			f, err := live.Open(a.Live)
			if err != nil {
				return nil, nil, false, err
			}
			a.Content, err = s.putContent(f, a.State.Size)
			f.Close()
			if err != nil {
				return nil, nil, false, err
			}
			a.Live = ""
		}
		if r.State.Type == ckpt.Absent {
			rm = append(rm, a)
		} else {
			mk = append(mk, a)
		}
	}
	sort.Slice(mk, func(i, j int) bool { return mk[i].Path < mk[j].Path })
	sort.Slice(rm, func(i, j int) bool { return rm[i].Path > rm[j].Path })
	return append(mk, rm...), lost, shared, nil
}

func (s *Store) putJournal(j *rewindJournal, turn, target uint64) error {
	b := s.db.NewBatch()
	defer b.Close()
	s.mu.Lock()
	j.Mark = s.nextSeq
	putJournal(b, j, true)
	if s.cur != nil && s.cur.Num == turn {
		t := *s.cur
		tg := target
		t.Target = &tg
		putJSON(b, turnKey(turn), t)
		s.cur = &t
	}
	s.mu.Unlock()
	return s.commit(b, pebble.Sync)
}

// saveProgress saves the journal but for its plan, which is unchanged.
func (s *Store) saveProgress(j *rewindJournal) error {
	b := s.db.NewBatch()
	defer b.Close()
	s.mu.Lock()
	j.Mark = s.nextSeq
	s.mu.Unlock()
	putJournal(b, j, false)
	return s.commit(b, pebble.Sync)
}

// savePlan saves the journal with a new plan (Actions).
func (s *Store) savePlan(j *rewindJournal) error {
	b := s.db.NewBatch()
	defer b.Close()
	s.mu.Lock()
	j.Mark = s.nextSeq
	s.mu.Unlock()
	putJournal(b, j, true)
	return s.commit(b, pebble.Sync)
}

// putJournal writes j into b and, with plan, its Actions apart
// (keyJournalPlan): the progress saved after every action does not
// write the whole plan again, which made a plan of n actions cost n²
// (a link pass relinking 5000 names took 10 s more).
func putJournal(b *pebble.Batch, j *rewindJournal, plan bool) {
	c := *j
	c.Actions, c.Plan = nil, true
	putJSON(b, keyJournal, c)
	if plan {
		putJSON(b, keyJournalPlan, j.Actions)
	}
}

// runJournal carries out a journaled rewind from j.Next on.
func (s *Store) runJournal(j *rewindJournal, live ckpt.Tree, who ckpt.Program) error {
	if !j.Restore {
		if err := s.replay(j, live, who); err != nil {
			return err
		}
		// Fix-up pass: compare every path the log mentions with its
		// target state (forward resolution, which does not depend on
		// intermediate states) and set whatever still differs. Normally
		// there is nothing to do; the model tests count it.
		actions, lost, shared, err := s.planRestore(j.Stop, []string{""}, live, j.written)
		if err != nil {
			return err
		}
		fixups.Add(int64(len(actions)))
		crashpoint.Hit("rewind.planned")
		j.Restore, j.Actions, j.Next, j.Lost = true, actions, 0, lost
		j.Links = !shared // no link pass to do
		if err := s.savePlan(j); err != nil {
			return err
		}
	}
	if err := s.runActions(j, live, who); err != nil {
		return err
	}
	if !j.LinkPass || j.Links {
		return nil
	}
	// Link pass: every path has its target bytes and mode; now the
	// regular files get their target partition into inodes (links.go).
	actions, err := s.planLinks(j.Stop, j.Paths, live)
	if err != nil {
		return err
	}
	crashpoint.Hit("rewind.links.planned")
	j.Links, j.Actions, j.Next = true, actions, 0
	if err := s.savePlan(j); err != nil {
		return err
	}
	return s.runActions(j, live, who)
}

// runActions carries out j.Actions from j.Next on, saving the progress
// after each.
func (s *Store) runActions(j *rewindJournal, live ckpt.Tree, who ckpt.Program) error {
	for j.Next < uint64(len(j.Actions)) {
		a := j.Actions[j.Next]
		var err error
		switch a.Op {
		case "":
			crashpoint.Hit("rewind.fixup")
			if err = s.ensure(live, a.Path, a.State, a.Content, a.Live, who); err == nil {
				crashpoint.Hit("rewind.fixup.done")
			}
		case actSplit:
			crashpoint.Hit("rewind.links")
			if err = s.split(live, a.Path, a.State, a.Expect, who); err == nil {
				crashpoint.Hit("rewind.links.done")
			}
		case actLink:
			crashpoint.Hit("rewind.links")
			if err = s.relink(live, a.From, a.Path, who); err == nil {
				crashpoint.Hit("rewind.links.done")
			}
		default:
			err = fmt.Errorf("%w: unknown rewind action %q", ErrCorrupt, a.Op)
		}
		if err != nil {
			return fmt.Errorf("versionstore: restore %s: %w", a.Path, err)
		}
		j.Next++
		if err := s.saveProgress(j); err != nil {
			return err
		}
	}
	return nil
}

// replay undoes the events from j.Next down to j.Stop+1, newest first.
func (s *Store) replay(j *rewindJournal, live ckpt.Tree, who ckpt.Program) error {
	for j.Next > j.Stop {
		var rec *record
		err := s.scanEventsReverse(j.Stop+1, j.Next+1, func(r *record) (bool, error) {
			rec = r
			return false, nil
		})
		if err != nil {
			return err
		}
		if rec == nil {
			j.Next = j.Stop
			break
		}
		if rec.Lost {
			// Nothing to put back: an older record of the path, or
			// else the fix-up pass, decides what the path becomes.
			j.Next = rec.Seq - 1
			if err := s.saveProgress(j); err != nil {
				return err
			}
			continue
		}
		if rec.Op == opPrior && rec.Content != nil {
			if j.written == nil {
				j.written = map[string]*contentRef{}
			}
			j.written[rec.Path] = rec.Content
		} else if rec.Op == opRename || rec.Op == opExchange {
			j.written = nil // paths moved: trust nothing written so far
		}
		crashpoint.Hit("rewind.step")
		if err := s.undo(rec, live, who, j.Mark); err != nil {
			return fmt.Errorf("versionstore: rewind: undo event %d (%s %s): %w", rec.Seq, rec.Op, rec.Path, err)
		}
		crashpoint.Hit("rewind.step.done")
		j.Next = rec.Seq - 1
		if err := s.saveProgress(j); err != nil {
			return err
		}
	}
	return nil
}

// split gives the regular file at path an inode of its own, with its
// bytes and st's mode and owner, if it still has inode expect (else it
// was done before a crash).
func (s *Store) split(live ckpt.Tree, path string, st ckpt.State, expect *ckpt.Inode, who ckpt.Program) error {
	cur, ino, err := live.LstatInode(path)
	if err != nil || cur.Type != ckpt.Regular || expect == nil || !ino.Same(*expect) {
		return err
	}
	if err := s.capture(live, path, cur, who); err != nil {
		return err
	}
	f, err := live.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return live.WriteFile(path, st, f)
}

// relink makes path a name of the regular file at from (recording what
// path was first), unless it is one already.
func (s *Store) relink(live ckpt.Tree, from, path string, who ckpt.Program) error {
	fst, fino, err := live.LstatInode(from)
	if err != nil {
		return err
	}
	if fst.Type != ckpt.Regular {
		// Not what the pass planned (a crash, then a change before
		// Recover): path keeps its bytes, in an inode of its own.
		return nil
	}
	cur, ino, err := live.LstatInode(path)
	if err != nil || ino.Same(fino) {
		return err
	}
	if cur.Type == ckpt.Dir {
		if err := s.replace(live, path, cur, who); err != nil {
			return err
		}
	} else if err := s.capture(live, path, cur, who); err != nil {
		return err
	}
	if err := s.mkdirParents(live, path, who); err != nil {
		return err
	}
	if err := live.Hardlink(from, path); err != nil {
		return err
	}
	s.nameAdded(fino.Ino, path)
	s.nameAdded(fino.Ino, from)
	return nil
}

// replayLimit is how many events a whole-tree rewind undoes one by one
// when changes paths differ from the target; past it, the fix-up pass does
// the rewind alone. A variable for the tests.
var replayLimit = func(changes int) uint64 { return 16*uint64(changes) + 4096 }

// fixups counts the actions the fix-up pass of rewinds had to take.
var fixups atomic.Int64

// finishJournal closes the rewind turn and drops the journal.
func (s *Store) finishJournal(j *rewindJournal) (ckpt.Turn, error) {
	var t ckpt.Turn
	var err error
	if cur, ok := s.Current(); ok && cur.Num == j.Turn {
		t, err = s.End("")
	} else {
		t, err = s.Turn(j.Turn)
	}
	if err != nil {
		return t, err
	}
	crashpoint.Hit("rewind.ended")
	b := s.db.NewBatch()
	defer b.Close()
	b.Delete(keyJournal, nil)
	b.Delete(keyJournalPlan, nil)
	if err := s.commit(b, pebble.Sync); err != nil {
		return t, fmt.Errorf("versionstore: %w", err)
	}
	crashpoint.Hit("rewind.finished")
	return t, s.wal.SyncWAL()
}

// Recover finishes a rewind that a crash interrupted. It reports whether
// there was one. Call it before the tree is served again.
func (s *Store) Recover(live ckpt.Tree) (bool, error) {
	crashpoint.Hit("recover.start")
	s.dropLinkIndex()
	defer s.dropLinkIndex()
	if err := s.dropPhantomRenames(live); err != nil {
		return false, err
	}
	crashpoint.Hit("recover.marks")
	v, closer, err := s.db.Get(keyJournal)
	if err == pebble.ErrNotFound {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("versionstore: %w", err)
	}
	j := &rewindJournal{}
	jerr := json.Unmarshal(v, j)
	closer.Close()
	if jerr == nil && j.Plan {
		if v, closer, err := s.db.Get(keyJournalPlan); err == nil {
			jerr = json.Unmarshal(v, &j.Actions)
			closer.Close()
		} else if err != pebble.ErrNotFound {
			return false, fmt.Errorf("versionstore: %w", err)
		}
	}
	if jerr != nil {
		return false, fmt.Errorf("%w: rewind journal: %v", ErrCorrupt, jerr)
	}
	// The rewind turn must be the open one; reopen it if a crash left it
	// closed (End ran but the journal was not yet deleted).
	if cur, ok := s.Current(); !ok || cur.Num != j.Turn {
		if _, err := s.finishJournal(j); err != nil {
			return true, err
		}
		return true, nil
	}
	if err := s.runJournal(j, live, ckpt.Program{Comm: "ckptfs-recover"}); err != nil {
		return true, err
	}
	if _, err = s.finishJournal(j); err != nil {
		return true, err
	}
	crashpoint.Hit("recover.done")
	return true, nil
}

// undo reverses one event on the live tree, recording what it changes in
// the open (rewind) turn. since is the journal's Mark: the events from
// there on are this step's own, recorded by an earlier run of it that a
// crash cut short (0: unknown).
func (s *Store) undo(r *record, live ckpt.Tree, who ckpt.Program, since uint64) error {
	switch r.Op {
	case opPrior:
		return s.ensure(live, r.Path, r.State, r.Content, "", who)
	case opMeta:
		cur, err := live.Lstat(r.Path)
		if err != nil || cur.Type != ckpt.Regular {
			return err
		}
		return s.setFileMeta(live, r.Path, cur, r.State, who)
	case opRename, opExchange:
		// Undo by renaming back. First-touch capture means the tree between
		// two events of one turn is not always exactly reconstructed (a path
		// deleted after being renamed within the turn has no record of its
		// own), so this step is lenient: a side that is missing has an older
		// record that will set it anyway, and the fix-up pass that follows
		// the reverse pass (see runJournal) settles any remaining difference.
		to, err := live.Lstat(r.To)
		if err != nil {
			return err
		}
		from, err := live.Lstat(r.Path)
		if err != nil {
			return err
		}
		// An exchange back, or a rename that stands for one, cannot be
		// told done from the names alone: a redo after a crash looks
		// for the record of its earlier run (which Recover kept only if
		// it was made) and does not make it twice.
		if r.Op == opExchange && to.Exists() && from.Exists() {
			if done, err := s.movedSince(since, opExchange, r.To, r.Path); err != nil || done {
				return err
			}
			return s.rename(live, r.To, r.Path, true, who)
		}
		if r.Op == opExchange {
			if done, err := s.movedSince(since, opRename, r.Path, r.To); err != nil || done {
				return err
			}
		}
		if !to.Exists() {
			if r.Op == opExchange && from.Exists() {
				if err := s.mkdirParents(live, r.To, who); err != nil {
					return err
				}
				return s.rename(live, r.Path, r.To, false, who)
			}
			return nil // already renamed back (a crash-interrupted run)
		}
		if from.Exists() {
			if err := s.replace(live, r.Path, from, who); err != nil {
				return err
			}
		}
		if err := s.mkdirParents(live, r.Path, who); err != nil {
			return err
		}
		return s.rename(live, r.To, r.Path, false, who)
	}
	return fmt.Errorf("%w: unknown event op %q", ErrCorrupt, r.Op)
}

// mkdirParents creates the missing parents of path (mode 0755; an older
// record sets their real state).
func (s *Store) mkdirParents(live ckpt.Tree, path string, who ckpt.Program) error {
	els := strings.Split(path, "/")
	for i := 1; i < len(els); i++ {
		p := strings.Join(els[:i], "/")
		st, err := live.Lstat(p)
		if err != nil {
			return err
		}
		if st.Type == ckpt.Dir {
			continue
		}
		if err := s.replace(live, p, st, who); err != nil {
			return err
		}
		if err := live.Mkdir(p, 0o755); err != nil {
			return err
		}
	}
	return nil
}

// movedSince reports whether an event op(from, to) was recorded at seq
// since or later (since 0: unknown, false).
func (s *Store) movedSince(since uint64, op, from, to string) (bool, error) {
	if since == 0 {
		return false, nil
	}
	s.mu.Lock()
	end := s.nextSeq
	s.mu.Unlock()
	found := false
	err := s.scanEvents(since, end, func(r *record) (bool, error) {
		found = r.Op == op && r.Path == from && r.To == to
		return !found, nil
	})
	return found, err
}

func (s *Store) rename(live ckpt.Tree, from, to string, exchange bool, who ckpt.Program) error {
	if exchange {
		ia, err := live.Ident(from)
		if err != nil {
			return err
		}
		ib, err := live.Ident(to)
		if err != nil {
			return err
		}
		commit, err := s.RecordExchange(from, to, ia, ib, who)
		if err != nil {
			return err
		}
		s.namesMoved()
		crashpoint.Hit("rewind.exchange.recorded")
		err = live.Exchange(from, to)
		crashpoint.Hit("rewind.exchange.done")
		commit(err == nil)
		return err
	}
	commit, err := s.RecordRename(from, to, false, who)
	if err != nil {
		return err
	}
	s.namesMoved()
	crashpoint.Hit("rewind.rename.recorded")
	err = live.Rename(from, to)
	crashpoint.Hit("rewind.rename.done")
	commit(err == nil)
	return err
}

// ensure makes path have state st (bytes from content, or from the live
// path src), recording its current state in the open turn first.
func (s *Store) ensure(live ckpt.Tree, path string, st ckpt.State, content *contentRef, src string, who ckpt.Program) error {
	if st.Type != ckpt.Absent && st.Type != ckpt.Special {
		if err := s.mkdirParents(live, path, who); err != nil {
			return err
		}
	}
	cur, ino, err := live.LstatInode(path)
	if err != nil {
		return err
	}
	switch st.Type {
	case ckpt.Absent:
		if !cur.Exists() {
			return nil
		}
		if err := s.captureTree(live, path, cur, who); err != nil {
			return err
		}
		return live.RemoveAll(path)
	case ckpt.Dir:
		if cur.Type == ckpt.Dir {
			return s.ensureMeta(live, path, cur, st, who)
		}
		if err := s.replace(live, path, cur, who); err != nil {
			return err
		}
		if err := live.Mkdir(path, st.Mode); err != nil {
			return err
		}
		return setMeta(live, path, ckpt.State{Mode: st.Mode}, st)
	case ckpt.Symlink:
		if cur.Type == ckpt.Symlink && cur.Target == st.Target {
			return nil
		}
		if err := s.replace(live, path, cur, who); err != nil {
			return err
		}
		if err := live.Symlink(st.Target, path); err != nil {
			return err
		}
		if cur.UID != st.UID || cur.GID != st.GID {
			live.Lchown(path, st.UID, st.GID) // best effort
		}
		return nil
	case ckpt.Regular:
		if src == path && cur.Type == ckpt.Regular {
			// The same file: only its mode or owner differs.
			return s.setFileMeta(live, path, cur, st, who)
		}
		var rc io.ReadCloser
		if content != nil {
			rc, err = s.openContent(content)
		} else if src != "" {
			rc, err = live.Open(src)
		} else {
			err = fmt.Errorf("%w: no bytes for %q", ErrCorrupt, path)
		}
		if err != nil {
			return err
		}
		defer rc.Close()
		if cur.Type == ckpt.Dir {
			if err := s.replace(live, path, cur, who); err != nil {
				return err
			}
		} else if err := s.captureIno(live, path, cur, ino, who); err != nil {
			return err
		}
		// WriteFile replaces atomically with a new inode: fresh mtime, and
		// processes holding the old file keep the old bytes.
		return live.WriteFile(path, st, rc)
	case ckpt.FIFO, ckpt.Socket, ckpt.CharDevice, ckpt.BlockDevice:
		if cur.Type == st.Type && cur.Rdev == st.Rdev {
			return s.ensureMeta(live, path, cur, st, who)
		}
		if err := s.replace(live, path, cur, who); err != nil {
			return err
		}
		if err := live.Mknod(path, st); err != nil {
			return err
		}
		return setMeta(live, path, ckpt.State{Mode: st.Mode}, st)
	}
	return nil // Special (recorded by an older ckptfs): its kind is unknown
}

// ensureMeta gives path, a directory or node of the right type already,
// st's mode and owner, recording its current state first.
func (s *Store) ensureMeta(live ckpt.Tree, path string, cur, st ckpt.State, who ckpt.Program) error {
	if sameMeta(cur, st) {
		return nil
	}
	if err := s.capture(live, path, cur, who); err != nil {
		return err
	}
	return setMeta(live, path, cur, st)
}

// replace records and removes whatever is at path.
func (s *Store) replace(live ckpt.Tree, path string, cur ckpt.State, who ckpt.Program) error {
	if err := s.captureTree(live, path, cur, who); err != nil {
		return err
	}
	if cur.Exists() {
		return live.RemoveAll(path)
	}
	return nil
}

// setFileMeta gives the regular file at path st's mode and owner,
// recording its current state first. A file with other names gets an
// inode of its own instead: a chmod would change the other names too.
// (The link pass then joins it again to the names it had at the target.)
func (s *Store) setFileMeta(live ckpt.Tree, path string, cur, st ckpt.State, who ckpt.Program) error {
	if sameMeta(cur, st) {
		return nil
	}
	_, ino, err := live.LstatInode(path)
	if err != nil {
		return err
	}
	if ino.Nlink > 1 {
		want := cur
		want.Mode, want.UID, want.GID = st.Mode, st.UID, st.GID
		return s.split(live, path, want, &ino, who)
	}
	if err := s.Record(ckpt.Capture{Path: path, Prior: cur, MetaOnly: true}, who); err != nil {
		return err
	}
	return setMeta(live, path, cur, st)
}

func setMeta(live ckpt.Tree, path string, cur, st ckpt.State) error {
	if cur.UID != st.UID || cur.GID != st.GID {
		if err := live.Lchown(path, st.UID, st.GID); err != nil && os.Geteuid() == 0 {
			return err
		}
	}
	return live.Chmod(path, st.Mode) // after chown, which clears setuid bits
}

// capture records path's current state in the open turn. Bytes are
// copied, not linked: a process may still hold the file open for writing.
// A regular file's record names its inode and that inode's other names.
func (s *Store) capture(live ckpt.Tree, path string, cur ckpt.State, who ckpt.Program) error {
	return s.captureIno(live, path, cur, ckpt.Inode{}, who)
}

// captureIno is capture, with the inode at path if the caller has it.
func (s *Store) captureIno(live ckpt.Tree, path string, cur ckpt.State, ino ckpt.Inode, who ckpt.Program) error {
	c := ckpt.Capture{Path: path, Prior: cur}
	if cur.Type == ckpt.Regular {
		c.Open = func() (*os.File, error) { return live.Open(path) }
		if s.NeedsCapture(path, false) {
			if !ino.Known() {
				var err error
				if _, ino, err = live.LstatInode(path); err != nil {
					return err
				}
			}
			c.Inode = ino
			var err error
			if c.Links, err = s.otherNames(live, path, ino); err != nil {
				return err
			}
		}
	}
	return s.Record(c, who)
}

// captureTree records path and, for a directory, everything below it,
// children first, so that undoing the records (newest first) recreates the
// directory before its children.
func (s *Store) captureTree(live ckpt.Tree, path string, cur ckpt.State, who ckpt.Program) error {
	if cur.Type == ckpt.Dir {
		names, err := live.ReadDir(path)
		if err != nil {
			return err
		}
		sort.Strings(names)
		for _, n := range names {
			p := ckpt.Join(path, n)
			st, err := live.Lstat(p)
			if err != nil {
				return err
			}
			if err := s.captureTree(live, p, st, who); err != nil {
				return err
			}
		}
	}
	return s.capture(live, path, cur, who)
}

// dropPhantomRenames settles the renames and exchanges recorded but never
// confirmed (RecordRename's pending marks): the process died between
// recording one and the syscall, or between the syscall and its
// confirmation. A record of one that did not happen is dropped: history
// would otherwise have later captures of the names stand for the other
// name's state. While a rename runs, the kernel holds the locks of both
// parent directories, the overlay runs no other rename (fusefs: Root.ns;
// a rewind runs alone), and from the kill until this runs nothing else
// serves the tree, so the names are as the kill left them:
//
//   - a rename whose source still exists did not happen (nothing can have
//     created the source name again); one whose source is gone did.
//   - an exchange leaves both names in place either way; its mark holds
//     the inode numbers the two names had just before (RecordExchange).
//     Each name still on its own inode: it did not happen; the two
//     swapped: it did; a name gone: it did not (an exchange leaves both).
//     An exchange whose inode numbers are unknown (a mark written before
//     they were kept, a caller that had none) or are one inode (two hard
//     links: either way the tree is the same) is kept.
//
// A name that cannot be looked at keeps its record, as before marks
// existed. (A caller that renamed an ancestor at the same time, which the
// overlay does not, could mislead this: the kernel does not lock the
// parents' ancestors.)
func (s *Store) dropPhantomRenames(live ckpt.Tree) error {
	if live == nil {
		return nil // the marks wait for a Recover that can look
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: pendingRenamePrefix, UpperBound: upperBytes(pendingRenamePrefix)})
	if err != nil {
		return err
	}
	type mark struct {
		seq uint64
		ids []byte
	}
	var marks []mark
	for ok := it.First(); ok; ok = it.Next() {
		if k := it.Key(); len(k) == len(pendingRenamePrefix)+8 {
			marks = append(marks, mark{binary.BigEndian.Uint64(k[len(pendingRenamePrefix):]), append([]byte(nil), it.Value()...)})
		}
	}
	if err := it.Close(); err != nil {
		return err
	}
	if len(marks) == 0 {
		return nil
	}
	b := s.db.NewBatch()
	defer b.Close()
	dropped := false
	for _, m := range marks {
		b.SingleDelete(pendingRenameKey(m.seq), nil)
		var r *record
		err := s.scanEvents(m.seq, m.seq+1, func(x *record) (bool, error) { r = x; return false, nil })
		if err != nil {
			return err
		}
		if r == nil {
			continue
		}
		happened, known := true, false
		switch r.Op {
		case opRename:
			st, err := live.Lstat(r.Path)
			if known = err == nil; known {
				happened = !st.Exists()
			}
		case opExchange:
			happened, known = exchangeHappened(live, r, m.ids)
		}
		if known && !happened {
			b.Delete(eventKey(m.seq), nil)
			dropped = true
		}
	}
	if err := s.commit(b, pebble.Sync); err != nil {
		return err
	}
	if dropped {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.rebuildTouched()
	}
	return nil
}

// exchangeHappened tells by the inode numbers ids (RecordExchange's mark)
// whether the exchange r was made; known is false when it cannot tell.
func exchangeHappened(live ckpt.Tree, r *record, ids []byte) (happened, known bool) {
	if len(ids) != 16 {
		return true, false
	}
	ia, ib := binary.BigEndian.Uint64(ids), binary.BigEndian.Uint64(ids[8:])
	if ia == 0 || ib == 0 || ia == ib {
		return true, false
	}
	na, err := live.Ident(r.Path)
	if err != nil {
		return true, false
	}
	nb, err := live.Ident(r.To)
	if err != nil {
		return true, false
	}
	switch {
	case na == ia && nb == ib, na == 0 || nb == 0:
		return false, true
	case na == ib && nb == ia:
		return true, true
	}
	return true, false
}

// upperBytes is the exclusive upper bound of all keys starting with p.
func upperBytes(p []byte) []byte {
	u := append([]byte(nil), p...)
	u[len(u)-1]++
	return u
}
