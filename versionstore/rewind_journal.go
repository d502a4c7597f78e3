package versionstore

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"ckptfs/internal/ckpt"
	"ckptfs/internal/crashpoint"
)

// rewind_journal.go: the rewind journal, kept in the store while a rewind
// runs so that Recover can finish it, and the passes that run it: the
// reverse pass (replay), a restore's actions, the link pass.

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
	// Whole: a rewind of the whole tree (not a restore); once it has
	// finished, later rewinds may skip its turn (noteRewound). False in
	// journals written before it was kept: no such note.
	Whole bool `json:"whole,omitempty"`
	// Rollback, when not "", makes this journal the rollback of its
	// turn's own records, and says what stopped the rewind it undoes
	// (rewind_rollback.go).
	Rollback string `json:"rollback,omitempty"`
	// Why says what Rollback is: "" (whyUnreadable, and every journal
	// of older versions) the error of bytes the rewind could not read,
	// else (whyFull, whyFailed) a one-line reason the rewind failed.
	Why string `json:"why,omitempty"`
	// Op is what the rewind calls itself in an error ("rewind to turn
	// 3", "revert of turn 4"); "" in journals of older versions.
	Op string `json:"op,omitempty"`
	// Jumps are the reverse pass's shortcuts over earlier rewinds
	// (rewindJumps), newest first: when Next reaches a jump's At, the
	// pass goes on from its To. They are planned once, before the first
	// step, and kept here, so that Recover follows the same path. None
	// in older journals: the pass undoes every event.
	Jumps []jump `json:"jumps,omitempty"`

	// written: what the reverse pass wrote where (not persisted: after a
	// crash the fix-up pass compares bytes instead).
	written map[string]*contentRef
	// progress: who is told how far the rewind has got (not persisted;
	// nil after a crash).
	progress Progress
	// lostMax: the newest Lost record after Stop, 0 for none (not
	// persisted: found again after a crash); lostKnown: it was looked
	// for.
	lostMax   uint64
	lostKnown bool
}

// jump is one shortcut of the reverse pass: once the events after At are
// undone, the tree is as it was right after event To (To < At), and the
// pass goes on from there.
type jump struct {
	At uint64 `json:"at"`
	To uint64 `json:"to"`
}

// action makes Path have State, with bytes from Content or the live path
// Live (restore only); or, in the link pass (Op), gives Path an inode of
// its own (actSplit, if it still has inode Expect) or makes it a name of
// the inode at From (actLink); or, in a revert, moves the object at From
// back to Path (actMove).
type action struct {
	Path    string      `json:"p"`
	State   ckpt.State  `json:"s"`
	Content *contentRef `json:"c,omitempty"`
	Live    string      `json:"l,omitempty"`
	Op      string      `json:"o,omitempty"`
	From    string      `json:"f,omitempty"`
	Expect  *ckpt.Inode `json:"e,omitempty"`
	// Layers: an actPatch's range records, put over the file at Path.
	Layers []layer `json:"ly,omitempty"`
}

func (s *Store) putJournal(j *rewindJournal, turn, target uint64) error {
	b := s.db.NewBatch()
	defer b.Close()
	s.mu.Lock()
	j.Mark = s.nextSeq
	putJournal(b, j, true)
	if s.cur != nil && s.cur.Num == turn {
		t := *s.cur
		tg, k := SplitPoint(target)
		t.Target, t.TargetStep = &tg, k
		putJSON(b, turnKey(turn), t)
		s.cur = &t
	}
	s.mu.Unlock()
	return s.commit(b, pebble.Sync)
}

// journalAndRun saves j, the journal of turn, which takes the tree to
// target, and runs it. The journal survives a power loss too: a
// half-done rewind or revert is always found again. One that cannot be
// saved is rolled back (rollBackUnsaved): nothing changed, the turn ends.
func (s *Store) journalAndRun(j *rewindJournal, turn, target uint64, live ckpt.Tree, who ckpt.Program) error {
	if err := s.putJournal(j, turn, target); err != nil {
		return s.rollBackUnsaved(j, fmt.Errorf("versionstore: its plan could not be saved: %w", err), live, who)
	}
	if err := s.syncWAL(); err != nil {
		return s.rollBackUnsaved(j, fmt.Errorf("versionstore: its plan could not be saved: %w", err), live, who)
	}
	crashpoint.Hit("rewind.journaled")
	return s.runJournalOrRollBack(j, live, who, true)
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

// savePlan saves the journal with a new plan (Actions), synced to disk
// (once a plan, as journalAndRun does): a power loss may lose the open
// turn's records and the progress, but the tree keeps what the actions
// did. Recover must then redo this plan, whose actions are idempotent,
// and not plan again from the log, which no longer tells the changed
// paths (a file the rewind wrote at a name the log follows a rename to).
func (s *Store) savePlan(j *rewindJournal) error {
	b := s.db.NewBatch()
	defer b.Close()
	s.mu.Lock()
	j.Mark = s.nextSeq
	s.mu.Unlock()
	putJournal(b, j, true)
	if err := s.commit(b, pebble.Sync); err != nil {
		return err
	}
	if err := s.syncWAL(); err != nil {
		return fmt.Errorf("versionstore: %w", err)
	}
	return nil
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
		// there is nothing to do; the model tests count it. A path
		// whose target bytes were never captured is put back as it was
		// before the rewind, whatever the reverse pass made of it.
		t, err := s.turnRecord(j.Turn)
		if err != nil {
			return err
		}
		actions, lost, shared, err := s.planRestore(j.Stop, []string{""}, live, j.written, t.FirstSeq-1)
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
	phase := "restoring"
	if j.Links {
		phase = "linking"
	}
	total := int64(len(j.Actions))
	for j.Next < uint64(len(j.Actions)) {
		j.progress.report(phase, int64(j.Next), total)
		a := j.Actions[j.Next]
		var err error
		switch a.Op {
		case "":
			crashpoint.Hit("rewind.fixup")
			if err = s.ensure(live, a.Path, a.State, a.Content, a.Live, who); err == nil {
				crashpoint.Hit("rewind.fixup.done")
			}
		case actPatch:
			crashpoint.Hit("rewind.fixup")
			// A file that is no longer the base the layers were planned
			// over (changed while unmounted, after a crash cut the
			// rewind) is left as it is, as a version never seen is: a
			// refusal here would stop every later mount.
			if _, err = s.patchTo(live, a.Path, a.State, a.Layers, who); err == nil {
				crashpoint.Hit("rewind.fixup.done")
			}
		case actMove:
			crashpoint.Hit("rewind.fixup")
			if err = s.moveBack(live, a, who); err == nil {
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

// replay undoes the events from j.Next down to j.Stop+1, newest first,
// but for those j.Jumps skip.
func (s *Store) replay(j *rewindJournal, live ckpt.Tree, who ckpt.Program) error {
	// The progress counts the events to undo, not those the jumps skip.
	from, skip, skipped := j.Next, uint64(0), uint64(0)
	var steps stepPaths
	for _, jp := range j.Jumps {
		if jp.At <= from && jp.To >= j.Stop {
			skip += jp.At - jp.To
		}
	}
	for j.Next > j.Stop {
		j.progress.report("rewinding", int64(from-j.Next-skipped), int64(from-j.Stop-skip))
		// The events to undo next lie in (lo, j.Next]; at a jump's At,
		// the pass goes on from its To (no need to save that: a redo
		// jumps again).
		lo, jumped := j.Stop, false
		for _, jp := range j.Jumps {
			if jp.At == j.Next {
				j.Next, jumped = jp.To, true
				skipped += jp.At - jp.To
				break
			}
			if jp.At < j.Next && jp.At > lo {
				lo = jp.At
			}
		}
		if jumped {
			continue
		}
		var rec *record
		err := s.scanEventsReverse(lo+1, j.Next+1, func(r *record) (bool, error) {
			rec = r
			return false, nil
		})
		if err != nil {
			return err
		}
		if rec == nil {
			j.Next = lo
			continue
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
		if rec.Op == opRange {
			lost, err := s.rangeBaseLost(j, rec, live)
			if err != nil {
				return err
			}
			if lost {
				// Its base was never seen: the live file is not it, and
				// putting the spans back into it would make bytes the
				// path never had. Left, as the Lost record was.
				j.Next = rec.Seq - 1
				if err := s.saveProgress(j); err != nil {
					return err
				}
				continue
			}
		}
		if rec.Op == opPrior && rec.Content != nil {
			if j.written == nil {
				j.written = map[string]*contentRef{}
			}
			j.written[rec.Path] = rec.Content
		} else if rec.Op == opRename || rec.Op == opExchange {
			j.written = nil // paths moved: trust nothing written so far
		}
		if steps.touch(rec) {
			if err := s.syncWAL(); err != nil {
				return fmt.Errorf("versionstore: %w", err)
			}
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

// stepPaths tells when the reverse pass must sync its progress. A power
// loss may keep the tree's changes and lose the log's tail, progress
// included, so that Recover redoes steps over a tree they already
// changed. One step redone over its own result leaves it (each is
// idempotent), and steps on unrelated paths do not interfere; but a step
// redone after a later one changed the same path (or one above or below
// it) may undo that one's work: undoing the create of a new e, after the
// undo of an older rename put the first e back, would remove it. So
// before a step touches a path related to one a step touched since the
// last sync, the progress so far goes to the disk.
type stepPaths struct {
	touched map[string]bool // paths the steps since the last sync touched
	above   map[string]bool // and every directory above them
}

// touch notes the paths of the step about to run (rec's path, and its
// destination for a move) and reports whether the progress must be
// synced first.
func (sp *stepPaths) touch(rec *record) (sync bool) {
	paths := []string{rec.Path}
	if rec.To != "" {
		paths = append(paths, rec.To)
	}
	for _, p := range paths {
		if sp.touched[p] || sp.above[p] {
			sync = true
		}
		for d := p; !sync && d != ""; {
			d = parentOf(d)
			sync = sp.touched[d]
		}
	}
	if sync || sp.touched == nil {
		sp.touched, sp.above = map[string]bool{}, map[string]bool{}
	}
	for _, p := range paths {
		sp.touched[p] = true
		for d := p; d != ""; {
			d = parentOf(d)
			sp.above[d] = true
		}
	}
	return sync
}

// rangeBaseLost reports whether range record rec resolves to bytes
// never seen: its base is a Lost record (a change made while unmounted,
// which the reverse pass skipped) and its spans do not tell every byte.
// Only a rewind across a Lost record resolves, once per range record.
func (s *Store) rangeBaseLost(j *rewindJournal, rec *record, live ckpt.Tree) (bool, error) {
	if !j.lostKnown {
		s.mu.Lock()
		end := s.nextSeq
		s.mu.Unlock()
		err := s.scanEvents(j.Stop+1, end, func(r *record) (bool, error) {
			if r.Lost {
				j.lostMax = r.Seq
			}
			return true, nil
		})
		if err != nil {
			return false, err
		}
		j.lostKnown = true
	}
	if j.lostMax <= rec.Seq {
		return false, nil
	}
	rs, err := s.resolveMany(rec.Seq-1, []string{rec.Path}, live)
	if err != nil {
		return false, err
	}
	return rs[0].Lost, nil
}

// split gives the file at path (anything but a directory) an inode of its
// own, with its bytes, symlink target or device number and st's mode and
// owner, if it still has inode expect (else it was done before a crash).
func (s *Store) split(live ckpt.Tree, path string, st ckpt.State, expect *ckpt.Inode, who ckpt.Program) error {
	cur, ino, err := live.LstatInode(path)
	if err != nil || !cur.Type.Linkable() || expect == nil || !ino.Same(*expect) {
		return err
	}
	if err := s.captureIno(live, path, cur, ino, who); err != nil {
		return err
	}
	if cur.Type != ckpt.Regular {
		want := cur
		want.Mode, want.UID, want.GID = st.Mode, st.UID, st.GID
		return remake(live, path, want)
	}
	f, err := live.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return live.WriteFile(path, st, f)
}

// moveBack carries out an actMove: a rename that a revert undoes, done
// as a rename, so that the object keeps its inode (and the names it
// shares it with). If the object at a.From is no longer inode a.Expect (or
// a.Path is taken), a.Path is made from a.State and a.Content as a plain
// action makes it, and the removal planned for a.From deals with that
// name. A redo after the rename finds a.Path on inode a.Expect, and only
// sets its mode and owner.
func (s *Store) moveBack(live ckpt.Tree, a action, who ckpt.Program) error {
	cur, ino, err := live.LstatInode(a.Path)
	if err != nil {
		return err
	}
	moved := cur.Type == a.State.Type && a.Expect != nil && ino.Same(*a.Expect)
	if !moved && !cur.Exists() && a.Expect != nil {
		fst, fino, err := live.LstatInode(a.From)
		if err != nil {
			return err
		}
		if fst.Type == a.State.Type && fino.Same(*a.Expect) {
			if err := s.mkdirParents(live, a.Path, who); err != nil {
				return err
			}
			if err := s.rename(live, a.From, a.Path, false, who); err != nil {
				return err
			}
			moved = true
		}
	}
	if moved {
		return s.ensure(live, a.Path, a.State, nil, a.Path, who)
	}
	return s.ensure(live, a.Path, a.State, a.Content, "", who)
}

// remake replaces the symlink or node at path with a new one in state st,
// atomically: made under a temporary name beside it (a leftover of a
// crash there is removed first), then renamed over it.
func remake(live ckpt.Tree, path string, st ckpt.State) error {
	dir, name := "", path
	if i := strings.LastIndexByte(path, '/'); i >= 0 {
		dir, name = path[:i], path[i+1:]
	}
	sum := sha256.Sum256([]byte(name))
	tmp := ckpt.Join(dir, remakePrefix+hex.EncodeToString(sum[:8]))
	if err := live.RemoveAll(tmp); err != nil {
		return err
	}
	switch {
	case st.Type == ckpt.Symlink:
		if err := live.Symlink(st.Target, tmp); err != nil {
			return err
		}
		live.Lchown(tmp, st.UID, st.GID) // best effort, as ensure does
	case st.Type.IsNode():
		if err := live.Mknod(tmp, st); err != nil {
			return err
		}
		if err := setMeta(live, tmp, ckpt.State{Mode: st.Mode}, st); err != nil {
			live.RemoveAll(tmp)
			return err
		}
	default:
		return fmt.Errorf("versionstore: BUG: remake of a %v", st.Type)
	}
	if err := live.Rename(tmp, path); err != nil {
		live.RemoveAll(tmp)
		return err
	}
	return nil
}

// remakePrefix starts the temporary names remake uses: the prefix of
// internal/backing's own temporary names.
const remakePrefix = ".ckptfs-tmp-r"

// relink makes path a name of the file at from (anything but a directory;
// recording what path was first), unless it is one already.
func (s *Store) relink(live ckpt.Tree, from, path string, who ckpt.Program) error {
	fst, fino, err := live.LstatInode(from)
	if err != nil {
		return err
	}
	if !fst.Type.Linkable() {
		// Not what the pass planned (a crash, then a change before
		// Recover): path keeps its bytes, in an inode of its own.
		return nil
	}
	cur, ino, err := live.LstatInode(path)
	if err != nil || ino.Same(fino) {
		return err
	}
	if cur.Type == ckpt.Dir {
		if left, err := s.replace(live, path, cur, who); err != nil || left {
			return err // left: a directory holding unversioned paths stays
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
// when changes paths differ from the target, moves of them renamed;
// past it, the fix-up pass does the rewind alone. What the replay saves
// over the fix-up pass is the copy of what it renames back: with no
// rename among the changes it saves nothing, and every event it undoes
// beyond the changes is work the fix-up pass would not do (a rm -rf of a
// tree and a reinstall of the same files: twice the tree's events for a
// handful of changes), so it is allowed only a margin. A variable for
// the tests.
var replayLimit = func(changes, moves int) uint64 {
	if moves == 0 {
		return uint64(changes) + 4096
	}
	return 16*uint64(changes) + 4096
}

// fixups counts the actions the fix-up pass of rewinds had to take.
var fixups atomic.Int64

// rewindJumps plans the shortcuts of the reverse pass of a whole-tree
// rewind that undoes the events from next down to stop+1 (stop: the
// target's end), and returns them with the number of events the pass
// then spans at most.
//
// A whole-tree rewind turn R to turn T that finished with every path as
// at T's end (noteRewound) left the tree as it was right after event
// T.LastSeq. So once the pass has undone the events after R, the tree is
// as at T's end, and the pass goes on from there: R's own events and
// those between T and R are skipped, and with them every earlier rewind
// that R undid. Among the rewinds whose target ends at or after stop, the
// newest is taken, and the next one is looked for at or below T. The
// cost of the planning grows with the rewind turns it looks at outside
// the skipped spans, the cost of the pass with the events inside none.
//
// The shortcut only spares work: the fix-up and link passes that follow
// resolve every path by the whole log (planRestore, planLinks), so a
// rewind R that left a path otherwise than at T (an owner it could not
// set) costs a fix-up, never a wrong tree.
func (s *Store) rewindJumps(stop, next uint64) ([]jump, uint64, error) {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: rewoundPrefix, UpperBound: upperBytes(rewoundPrefix)})
	if err != nil {
		return nil, 0, err
	}
	defer it.Close()
	start := s.startTurn()
	var jumps []jump
	var span uint64
	cur := next
	for ok := it.Last(); ok; {
		k, v := it.Key(), it.Value()
		if len(k) != len(rewoundPrefix)+8 || len(v) != 8 {
			ok = it.Prev()
			continue
		}
		rn, tn := binary.BigEndian.Uint64(k[len(rewoundPrefix):]), binary.BigEndian.Uint64(v)
		if rn < start {
			break // forgotten with the turns before the start
		}
		r, err := s.storedTurn(rn)
		if err != nil {
			return nil, 0, err
		}
		if r.LastSeq <= stop {
			break // at or before the target
		}
		if r.Open || r.LastSeq > cur || tn < start || tn >= rn {
			ok = it.Prev()
			continue
		}
		t, err := s.storedTurn(tn)
		if err != nil {
			return nil, 0, err
		}
		if t.Open || t.LastSeq < stop || t.LastSeq >= r.LastSeq {
			ok = it.Prev() // its target lies before ours
			continue
		}
		jumps = append(jumps, jump{At: r.LastSeq, To: t.LastSeq})
		span += cur - r.LastSeq
		cur = t.LastSeq
		ok = it.SeekLT(rewoundKey(tn + 1)) // the rewinds at or below T
	}
	if err := it.Error(); err != nil {
		return nil, 0, err
	}
	return jumps, span + cur - stop, nil
}

// noteRewound notes, once j has run to its end, that its turn left every
// path as at the end of its target, for the reverse pass of later rewinds
// to skip it (rewindJumps): only a whole-tree rewind that restored every
// path's bytes (none Lost).
func (s *Store) noteRewound(j *rewindJournal) error {
	if _, k := SplitPoint(j.Target); !j.Whole || len(j.Lost) > 0 || k > 0 {
		return nil // (a step's end is no turn's: rewindJumps knows turns)
	}
	b := s.db.NewBatch()
	defer b.Close()
	b.Set(rewoundKey(j.Turn), binary.BigEndian.AppendUint64(nil, j.Target), nil)
	if err := s.commit(b, pebble.Sync); err != nil {
		return fmt.Errorf("versionstore: %w", err)
	}
	crashpoint.Hit("rewind.noted")
	return nil
}

// finishJournal closes the rewind turn and drops the journal. Once the
// turn is closed the rewind is done, whether or not the log can then be
// synced to disk (End's fsync, or the one after the journal is dropped):
// such a failure is returned as unsynced, a warning for the user, and
// the journal is dropped all the same, so that the next start neither
// redoes nor undoes a rewind the user was told is done. (Left, the
// journal made the rewind answer an error while the tree had changed
// and the turn was closed.) err is a failure to close the turn or drop
// the journal: the journal is kept, for Recover to finish.
func (s *Store) finishJournal(j *rewindJournal) (t ckpt.Turn, unsynced error, err error) {
	if cur, ok := s.Current(); ok && cur.Num == j.Turn {
		if t, err = s.End(""); err != nil && t.Num != 0 {
			unsynced, err = err, nil // closed (End says so), not synced
			if u := errors.Unwrap(unsynced); u != nil {
				unsynced = u // what failed, without "turn N closed"
			}
		}
	} else {
		t, err = s.Turn(j.Turn)
	}
	if err != nil {
		return t, nil, err
	}
	crashpoint.Hit("rewind.ended")
	b := s.db.NewBatch()
	defer b.Close()
	b.Delete(keyJournal, nil)
	b.Delete(keyJournalPlan, nil)
	if err := s.commit(b, pebble.Sync); err != nil {
		return t, unsynced, fmt.Errorf("versionstore: %w", err)
	}
	crashpoint.Hit("rewind.finished")
	if err := s.syncWAL(); err != nil && unsynced == nil {
		unsynced = err
		s.mu.Lock()
		s.lastErr = fmt.Errorf("versionstore: turn %d closed, but the log could not be synced to disk: %w", t.Num, err)
		s.lastErrAt = time.Now().UTC()
		s.mu.Unlock()
	}
	return t, unsynced, nil
}

// unsyncedWarning is what a rewind done as turn n whose log could not be
// synced (finishJournal's unsynced) tells the user, after "it is done,
// but", or "" for nil.
func unsyncedWarning(n uint64, unsynced error) string {
	if unsynced == nil {
		return ""
	}
	return fmt.Sprintf("the store's log could not be synced to disk: %s; a power loss may lose the record of turn %d",
		strings.ReplaceAll(unsynced.Error(), "versionstore: ", ""), n)
}
