package versionstore

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"ckptfs/internal/ckpt"
	"ckptfs/internal/crashpoint"
	"ckptfs/internal/merge3"
)

// revert.go: Revert, which undoes what one past turn changed while keeping
// what later turns changed. It plans per path, three ways, then runs the
// plan as a restore's journaled actions (rewind_journal.go): the same
// journal, the same Recover.

// ErrConflict: a revert would have to undo a change that later turns
// changed again, and cannot merge the two (or was not asked to write
// conflict markers). Nothing was changed.
var ErrConflict = errors.New("versionstore: conflict")

// RevertOptions modify Revert.
type RevertOptions struct {
	DryRun bool
	// Markers: a text file whose later changes and the undoing of the
	// turn's changes overlap gets both versions between conflict markers
	// (as git merge-file writes them), instead of the revert refusing.
	Markers bool
	// Label of the revert turn ("revert of turn N" when empty).
	Label string
	Who   ckpt.Program
	// Progress, if set, is told what the revert is doing ("comparing",
	// "storing", then the restore's "restoring"), as RewindOptions.Progress.
	Progress Progress
}

// Conflict is a path whose revert conflicts with later changes.
type Conflict struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
	// Text: the bytes of a text file conflict, and nothing else: conflict
	// markers can hold it (Markers). Any other conflict refuses the revert.
	Text bool `json:"text,omitempty"`
}

// RevertResult says what a revert did (or would do, with DryRun).
type RevertResult struct {
	Turn    ckpt.Turn // the new turn of kind revert (zero with DryRun or no change)
	Changes []Change  // per path: Before now, After what the revert makes it
	// Merged are the paths the turn changed that later turns changed too,
	// whose later changes the revert keeps (a clean merge of their lines,
	// or of their mode and bytes).
	Merged []string
	// Conflicts: with ErrConflict, why the revert refused; else the paths
	// written with conflict markers (Markers).
	Conflicts []Conflict
	// NotRestored: paths whose bytes before the turn were never captured;
	// left as they are.
	NotRestored []string
	// Left: the directories left in place because they hold unversioned
	// paths, as a rewind leaves them (RewindResult.Left).
	Left []Left
	// SplitLinks: the paths the revert gave an inode apart from names
	// that shared theirs and that it left as they are (not among its
	// changes), by path, as a restore says (RewindResult.SplitLinks). A
	// dry run says which it would.
	SplitLinks []LinkSplit
	// Warning: as RewindResult.Warning.
	Warning string
}

// revertItem is what the revert makes of one path.
type revertItem struct {
	path   string
	cur    resolved // the path now
	target resolved // what it becomes (its bytes: Content or Live)
	merged []byte   // or these bytes (a merge)
	hasMrg bool
	from   string   // a rename undone: the name the object leaves
	atFrom resolved // the object at from now
}

// Revert undoes what turn n changed, keeping what later turns changed.
// For each path n changed (a renamed path followed to the name it has now
// through later renames; a rename n made is undone where nothing later
// renamed the path again), three states: base its state at the end of n,
// ours its state now, theirs its state at the end of n-1. If ours is base,
// the path becomes theirs; if theirs is base or ours is theirs, it stays
// as it is; else its mode, owner and content are merged field by field (a
// text file's lines by merge3, base empty if the path did not exist at the
// end of n), and what cannot be merged is a Conflict. A directory the
// revert removes or replaces must hold nothing the revert keeps.
//
// With any conflict but text ones written with markers (opts.Markers),
// Revert changes nothing and returns ErrConflict with the conflicts in the
// result. Else it is recorded as a new turn of kind revert (Target n),
// journaled as a restore is: Recover finishes it after a crash. The caller
// must keep other writers out of the tree meanwhile.
func (s *Store) Revert(n uint64, live ckpt.Tree, opts RevertOptions) (RevertResult, error) {
	defer s.lockRewind()()
	var res RevertResult
	if _, err := s.endSeq(n); err != nil {
		return res, err
	}
	if turn, _ := SplitPoint(n); turn == 0 || turn <= s.startTurn() {
		return res, detailf(ErrTurnNotFound, "turn %d has no changes of its own to revert (history starts with it)", turn)
	}
	if r, ok, err := s.wentBackPast(n); err != nil {
		return res, err
	} else if ok {
		return res, detailf(ErrNotOnLine, "%s is not in the tree's history: turn %d (%s) went back past it, so nothing of it is left to revert (turnctl log --graph shows the branch it is on)",
			PointWord(n), r.Num, r.Label)
	}
	opts.Progress.report("comparing", 0, 0)
	items, err := s.planRevert(n, live, opts.Markers, &res)
	if err != nil {
		return res, err
	}
	var hard []string
	for _, c := range res.Conflicts {
		if !c.Text || !opts.Markers {
			hard = append(hard, c.Path)
		}
	}
	if len(hard) > 0 {
		return res, detailf(ErrConflict, "revert of %s conflicts with later changes of %s", PointWord(n), strings.Join(hard, ", "))
	}
	planned, err := s.revertChanges(items, live)
	if err != nil {
		return res, err
	}
	// A directory that holds unversioned paths stays, as in a rewind:
	// neither listed nor acted on.
	if planned, res.Left, err = s.leaveHolders(planned, live); err != nil {
		return res, err
	}
	if len(res.Left) > 0 {
		keep := map[string]bool{}
		for _, c := range planned {
			keep[c.Path] = true
		}
		items = slices.DeleteFunc(items, func(it *revertItem) bool { return !keep[it.path] })
	}
	res.Changes = planned
	label := opts.Label
	if label == "" {
		label = "revert of " + PointWord(n)
	}
	op := label // what it calls itself in an error ("undo turn 4")
	// A change the tree's user may not make refuses it now, its dry run
	// too, rather than half-way.
	if err := s.checkPermitted(op, planned, live); err != nil {
		return res, err
	}
	if len(items) == 0 {
		return res, nil
	}
	if opts.DryRun {
		// The actions' kinds, without their bytes: which paths leave
		// an inode they share.
		actions, err := s.revertActions(items, live, nil, false)
		if err != nil {
			return res, err
		}
		linked, err := s.revertLinked(actions, live)
		if err != nil {
			return res, err
		}
		for _, p := range slices.Sorted(maps.Keys(linked)) {
			res.SplitLinks = append(res.SplitLinks, LinkSplit{Path: p, Names: linked[p].outside})
		}
		return res, nil
	}
	if err := s.checkRewindSpace(planned, live); err != nil {
		return res, err
	}
	actions, err := s.revertActions(items, live, opts.Progress, true)
	if err != nil {
		return res, err
	}
	// The links it splits, as they are before it runs: the report says
	// which of them it did split.
	linked, err := s.revertLinked(actions, live)
	if err != nil {
		return res, err
	}
	// Renames back first: another action may remove or replace what
	// holds the name the object leaves (a directory the turn put in place
	// of a file), and the object with it. Then parents before children,
	// then removals, children before parents.
	sort.SliceStable(actions, func(i, j int) bool {
		ai, aj := actions[i].State.Exists(), actions[j].State.Exists()
		if ai != aj {
			return ai
		}
		if mi, mj := actions[i].Op == actMove, actions[j].Op == actMove; mi != mj {
			return mi
		}
		if ai {
			return actions[i].Path < actions[j].Path
		}
		return actions[i].Path > actions[j].Path
	})
	stop, err := s.endSeq(n)
	if err != nil {
		return res, err
	}
	if err := s.checkActions(actions); err != nil {
		return res, err
	}
	t, err := s.Begin(ckpt.KindRevert, label, "")
	if err != nil && t.Num == 0 {
		return res, err
	}
	crashpoint.Hit("rewind.begun")
	j := &rewindJournal{Target: n, Turn: t.Num, Stop: stop, Actions: actions, Restore: true, Lost: res.NotRestored, Op: op, progress: opts.Progress}
	if err != nil {
		// Opened but not synced: it ends as one whose journal could
		// not be saved.
		return res, s.rollBackUnsaved(j, err, live, opts.Who)
	}
	if err := s.journalAndRun(j, t.Num, n, live, opts.Who); err != nil {
		return res, err
	}
	var unsynced error
	if res.Turn, unsynced, err = s.finishJournal(j); err != nil {
		return res, err
	}
	res.Warning = unsyncedWarning(res.Turn.Num, unsynced)
	if res.SplitLinks, err = foundSplits(linked, live); err != nil {
		return res, err
	}
	done, err := s.Changes(res.Turn.Num-1, res.Turn.Num, live)
	res.Changes = PairLike(done, planned)
	return res, err
}

// revertActions makes the actions that carry out items, one each
// (actions[i] is items[i]'s), telling progress how far it has got. Every
// action carries its bytes in the store (or, patching a file in place,
// the layers that tell the only bytes it writes), so that no action
// depends on a path an earlier one changed (and a redo after a crash
// stands on its own); without store (a dry run) they are not put there,
// and the actions are only of the kinds the revert's would be.
func (s *Store) revertActions(items []*revertItem, live ckpt.Tree, progress Progress, store bool) ([]action, error) {
	actions := make([]action, 0, len(items))
	for i, it := range items {
		progress.report("storing", int64(i), int64(len(items)))
		a := action{Path: it.path, State: it.target.State, Content: it.target.Content}
		if !it.hasMrg && patchesLive(it.target, it.path, it.cur.State) {
			// Range records over the file as it is at the same path (no
			// later turn changed it): patched in place, as a restore does.
			a = action{Op: actPatch, Path: it.path, State: it.target.State, Layers: it.target.Patch.Layers}
		} else if it.target.State.Type == ckpt.Regular && !it.hasMrg && a.Content == nil && it.target.Live == it.path {
			a.Live = it.path // the same file: its mode or owner changes
		} else if it.target.State.Type == ckpt.Regular && store {
			if err := s.storeTarget(it, &a, live); err != nil {
				return nil, err
			}
		}
		if a.Op == "" && a.Live == "" {
			move, err := s.movesBack(it, live)
			if err != nil {
				return nil, err
			}
			if move {
				ino := it.atFrom.Inode
				a.Op, a.From, a.Expect = actMove, it.from, &ino
			}
		}
		actions = append(actions, a)
	}
	keepLinks(items, actions)
	return actions, nil
}

// storeTarget puts the bytes a regular file's action a writes into the
// store, where they are not there yet (a merge, or a live file's).
func (s *Store) storeTarget(it *revertItem, a *action, live ckpt.Tree) (err error) {
	var src io.Reader
	switch {
	case it.hasMrg:
		src = bytes.NewReader(it.merged)
	case a.Content == nil:
		rc, err := s.open(it.target, live)
		if err != nil {
			return err
		}
		defer rc.Close()
		src = rc
	default:
		return nil
	}
	a.Content, err = s.putContent(src, a.State.Size)
	return err
}

// revertLinked returns the paths the actions of a revert take off an
// inode they share now with names the revert leaves as they are (no
// action of it), and those names: the links it splits (LinkSplit).
// Names with actions of their own are the revert's to set; what they
// share after it is not a split it reports.
func (s *Store) revertLinked(actions []action, live ckpt.Tree) (map[string]linkedPath, error) {
	acted := make(map[string]bool, len(actions))
	for _, a := range actions {
		acted[a.Path] = true
	}
	out := map[string]linkedPath{}
	for _, a := range actions {
		// A move keeps the object's inode, and so its names; a removal
		// or a directory is no link split.
		if a.Op == actMove || !a.State.Type.Linkable() {
			continue
		}
		cur, ino, err := live.LstatInode(a.Path)
		if err != nil {
			return nil, err
		}
		if !cur.Type.Linkable() || ino.Nlink < 2 || keepsSharedInode(a, cur) {
			continue
		}
		names, err := s.otherNames(live, a.Path, ino)
		if err != nil {
			return nil, err
		}
		l := linkedPath{names: names}
		for _, q := range names {
			if !acted[q] {
				l.outside = append(l.outside, q)
			}
		}
		if len(l.outside) > 0 {
			out[a.Path] = l
		}
	}
	return out, nil
}

// keepLinks keeps one inode for the names the revert gives the same
// file: regular files that shared an inode before the turn (their
// targets are one inode then, or their merges are of one inode's bytes)
// and share one now. Writing each name's
// bytes anew would split them, changing which names share an inode,
// which a revert does not do. The first of them (by path) is made as
// planned; each other one becomes a name of it (actLink). Even where the
// first's action changes the file in place (its mode or owner only, or a
// patch), it leaves the shared inode for one of its own (setFileMeta and
// patchTo do not write into a file with other names): the others must
// follow it, or they keep the turn's bytes and mode. actions[i] is
// items[i]'s, and stays so.
func keepLinks(items []*revertItem, actions []action) {
	// merged: for names merged apart, their bytes and state (they share an
	// inode only where they are given the same: merged from one inode's);
	// "" for the others.
	type key struct {
		now, then ckpt.Inode
		merged    string
	}
	keyOf := func(it *revertItem) (key, bool) {
		now, then := it.cur.Inode, it.target.Inode
		now.Nlink, then.Nlink = 0, 0
		ok := it.from == "" && it.cur.State.Type == ckpt.Regular && it.target.State.Type == ckpt.Regular &&
			now.Ino != 0 && then.Ino != 0
		k := key{now: now, then: then}
		if it.hasMrg {
			sum := sha256.Sum256(it.merged)
			k.merged = fmt.Sprintf("%x %+v", sum, it.target.State)
		}
		return k, ok
	}
	order := make([]int, len(items))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(x, y int) bool { return items[order[x]].path < items[order[y]].path })
	first := map[key]int{}
	for _, i := range order {
		k, ok := keyOf(items[i])
		if !ok || actions[i].Op == actMove {
			continue
		}
		f, seen := first[k]
		if !seen {
			first[k] = i
			continue
		}
		actions[i] = action{Op: actLink, Path: items[i].path, From: items[f].path, State: items[i].target.State}
	}
}

// planRevert computes what Revert makes of each path, filling res's
// Merged, Conflicts and NotRestored.
func (s *Store) planRevert(n uint64, live ckpt.Tree, markers bool, res *RevertResult) ([]*revertItem, error) {
	cs, err := s.TurnChanges(n, live)
	if err != nil {
		return nil, err
	}
	stop, err := s.endSeq(n)
	if err != nil {
		return nil, err
	}
	// Where what was at a path at the end of n is now: later renames.
	ml := moveLog{born: map[string]uint64{}}
	s.mu.Lock()
	end := s.nextSeq
	s.mu.Unlock()
	if err := s.scanEvents(stop+1, end, func(r *record) (bool, error) {
		ml.note(r)
		return true, nil
	}); err != nil {
		return nil, err
	}
	forward := func(p string) string {
		best, out := -1, p
		for _, m := range ml.moves {
			if rest, ok := ckpt.Under(p, m.orig); ok && len(m.orig) > best {
				best, out = len(m.orig), join(m.cur, rest)
			}
		}
		return out
	}
	labels := merge3.Labels{Ours: "now", Theirs: fmt.Sprintf("before turn %d", n)}
	items := map[string]*revertItem{}
	conflict := func(p, why string, text bool) {
		for _, c := range res.Conflicts {
			if c.Path == p {
				return
			}
		}
		res.Conflicts = append(res.Conflicts, Conflict{Path: p, Reason: why, Text: text})
	}
	curOf := func(p string) (resolved, error) {
		st, ino, err := live.LstatInode(p)
		if !st.Type.Linkable() {
			ino = ckpt.Inode{}
		}
		return resolved{State: st, Live: p, Inode: ino}, err
	}
	put := func(it *revertItem) {
		if old, ok := items[it.path]; ok && !sameTarget(old, it) {
			conflict(it.path, fmt.Sprintf("turn %d moved two paths here", n), false)
			return
		}
		items[it.path] = it
	}
	for _, c := range cs {
		if c.Kind == ckpt.Relinked {
			continue // which names share an inode: not reverted
		}
		eName, bName := c.Path, c.Path
		if c.Kind == ckpt.Renamed {
			bName = c.From
		}
		lName := eName
		if c.after.State.Exists() {
			lName = forward(eName)
		}
		r := lName
		if c.Kind == ckpt.Renamed && lName == eName {
			r = bName // undo the rename: nothing later renamed it again
		}
		if c.before.Lost {
			res.NotRestored = append(res.NotRestored, bName)
			continue
		}
		ours, err := curOf(lName)
		if err != nil {
			return nil, err
		}
		it, why, text, merged, err := s.mergeStates(r, c.after, ours, c.before, live, labels, markers)
		if err != nil {
			return nil, err
		}
		if why != "" {
			// Where the markers go; else the name it has now, at the
			// end of n, or before n, the first that exists.
			at := r
			if !text {
				at = bName
				if ours.State.Exists() {
					at = lName
				} else if c.after.State.Exists() {
					at = eName
				}
			}
			conflict(at, why, text)
			if !text {
				continue
			}
		}
		if merged {
			res.Merged = append(res.Merged, r)
		}
		if r != lName {
			// The object moves back to r: its name now goes, and r must
			// be free (it was at the end of n).
			atR, err := curOf(r)
			if err != nil {
				return nil, err
			}
			if atR.State.Exists() {
				conflict(r, fmt.Sprintf("turn %d renamed it to %s, and a later turn made %s again", n, eName, r), false)
				continue
			}
			if ours.State.Exists() {
				put(&revertItem{path: lName, cur: ours, target: resolved{}})
			}
			if ours.State.Exists() {
				it.from, it.atFrom = lName, ours
			}
			it.path, it.cur = r, atR
			put(it)
			continue
		}
		it.path, it.cur = r, ours
		put(it)
	}
	// A directory removed or replaced goes with all it holds: everything
	// below it must go too, but for the unversioned paths, which stay with
	// the directories that hold them (RevertResult.Left).
	for p, it := range items {
		if it.cur.State.Type != ckpt.Dir || it.target.State.Type == ckpt.Dir {
			continue
		}
		if err := walkLive(live, p, s.unversionedFunc(), func(rel string) {
			below := join(p, rel)
			if o, ok := items[below]; !ok || o.target.State.Exists() {
				conflict(p, fmt.Sprintf("a later turn put %s in it", below), false)
			}
		}); err != nil {
			return nil, err
		}
	}
	// Drop what is already as it should be.
	out := make([]*revertItem, 0, len(items))
	for _, it := range items {
		if !it.hasMrg {
			k, err := s.compare(it.cur, it.target, live)
			if err != nil {
				return nil, err
			}
			if k == "" {
				continue
			}
		}
		out = append(out, it)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].path < out[j].path })
	sort.Strings(res.Merged)
	sort.Strings(res.NotRestored)
	sort.Slice(res.Conflicts, func(i, j int) bool { return res.Conflicts[i].Path < res.Conflicts[j].Path })
	return out, nil
}

func sameTarget(a, b *revertItem) bool {
	return a.target.State == b.target.State && !a.hasMrg && !b.hasMrg &&
		(a.target.FromLog == b.target.FromLog && a.target.Seq == b.target.Seq && a.target.Live == b.target.Live)
}

// wentBackPast returns the whole-tree rewind that took the tree back past
// point n, if one did: walking the timeline from the newest turn to its
// parents, a rewind to a turn before n's (or to a step of n's turn
// before n's step) before reaching n's turn. The turns it went back over
// are a branch the tree no longer continues: none of their changes is
// in it, and reverting one would merge against states that are not the
// tree's history (a path the branch rewrote reads as deleted since).
// Where the walk meets a forgotten turn it cannot tell, and says no.
func (s *Store) wentBackPast(n uint64) (ckpt.Turn, bool, error) {
	turn, k := SplitPoint(n)
	for cur := s.Latest(); cur > turn; {
		t, err := s.turnRecord(cur)
		if errors.Is(err, ErrTurnNotFound) || errors.Is(err, ErrForgotten) {
			return ckpt.Turn{}, false, nil
		}
		if err != nil {
			return ckpt.Turn{}, false, err
		}
		if t.Rewound() {
			if to := *t.Target; to < turn || to == turn && k > 0 && t.TargetStep > 0 && k > t.TargetStep {
				return t, true, nil
			}
		}
		p, ok := t.Parent()
		if !ok || p >= cur {
			break
		}
		cur = p
	}
	return ckpt.Turn{}, false, nil
}

// mergeStates merges one path three ways: base (its state at the end of
// the turn), ours (now), theirs (before the turn). It returns the item
// (its target), or why it conflicts (text: the conflict is in a text
// file's lines only, and the item holds them with markers when markers),
// and whether the result keeps later changes by merging. A git index
// whose later change only refreshed the stat data it caches (git status
// after a rewind) is taken as before the turn: git refreshes it again.
func (s *Store) mergeStates(path string, base, ours, theirs resolved, live ckpt.Tree, l merge3.Labels, markers bool) (it *revertItem, why string, text, merged bool, err error) {
	eq := func(x, y resolved) (bool, error) {
		k, err := s.compare(x, y, live)
		return k == "", err
	}
	if same, err := eq(ours, base); err != nil || same {
		return &revertItem{target: theirs}, "", false, false, err
	}
	if same, err := eq(theirs, base); err != nil || same {
		return &revertItem{target: ours}, "", false, false, err
	}
	if same, err := eq(ours, theirs); err != nil || same {
		return &revertItem{target: ours}, "", false, false, err
	}
	o, b, t := ours.State, base.State, theirs.State
	switch {
	case !o.Exists():
		return nil, "deleted by a later turn, changed by the turn", false, false, nil
	case !t.Exists():
		return nil, "made by the turn, changed by a later turn", false, false, nil
	case o.Type != t.Type || b.Exists() && b.Type != o.Type:
		return nil, "its type changed both by the turn and later", false, false, nil
	}
	// Mode and owner, as one.
	meta := func(x ckpt.State) [3]uint32 { return [3]uint32{x.Mode, x.UID, x.GID} }
	mo, mt := meta(o), meta(t)
	want := o
	switch {
	case b.Exists() && meta(b) == mo:
		want.Mode, want.UID, want.GID = t.Mode, t.UID, t.GID
	case b.Exists() && meta(b) == mt, mo == mt:
	default:
		return nil, "its mode (or owner) changed both by the turn and later", false, false, nil
	}
	it = &revertItem{target: resolved{State: want}}
	switch o.Type {
	case ckpt.Dir:
		return it, "", false, true, nil
	case ckpt.Symlink, ckpt.FIFO, ckpt.Socket, ckpt.CharDevice, ckpt.BlockDevice:
		oo, tt := o, t
		oo.Mode, oo.UID, oo.GID = 0, 0, 0
		tt.Mode, tt.UID, tt.GID = 0, 0, 0
		bb := b
		bb.Mode, bb.UID, bb.GID = 0, 0, 0
		switch {
		case b.Exists() && bb == oo:
			want.Target, want.Rdev = t.Target, t.Rdev
		case b.Exists() && bb == tt, oo == tt:
		default:
			return nil, "changed both by the turn and later", false, false, nil
		}
		it.target.State = want
		return it, "", false, true, nil
	case ckpt.Regular:
	default:
		return nil, "changed both by the turn and later", false, false, nil
	}
	// Bytes.
	bytesEq := func(x, y resolved) (bool, error) {
		if !x.State.Exists() || !y.State.Exists() {
			return false, nil
		}
		return s.sameBytes(x, y, live)
	}
	src, refresh := ours, false
	if same, err := bytesEq(ours, base); err != nil {
		return nil, "", false, false, err
	} else if same {
		src = theirs
	} else if refresh, err = s.gitIndexRefreshed(path, base, ours, live); err != nil {
		return nil, "", false, false, err
	} else if refresh {
		src = theirs
	} else if same, err := bytesEq(theirs, base); err != nil {
		return nil, "", false, false, err
	} else if !same {
		if same, err := bytesEq(ours, theirs); err != nil || !same {
			if err != nil {
				return nil, "", false, false, err
			}
			return s.mergeText(base, ours, theirs, want, live, l, markers)
		}
	}
	it.target = src
	it.target.State.Mode, it.target.State.UID, it.target.State.GID = want.Mode, want.UID, want.GID
	return it, "", false, !refresh, nil
}

// mergeText merges a regular file's bytes line by line (base may be
// absent: empty).
func (s *Store) mergeText(base, ours, theirs resolved, want ckpt.State, live ckpt.Tree, l merge3.Labels, markers bool) (*revertItem, string, bool, bool, error) {
	var texts [3][]byte
	for i, r := range []resolved{base, ours, theirs} {
		if r.State.Type != ckpt.Regular {
			continue
		}
		if r.State.Size > merge3.MaxSize {
			return nil, "a binary (or very large) file changed both by the turn and later", false, false, nil
		}
		var err error
		if texts[i], err = s.readAll(r, live); err != nil {
			return nil, "", false, false, err
		}
		if merge3.Binary(texts[i]) {
			return nil, "a binary file changed both by the turn and later", false, false, nil
		}
	}
	m := merge3.Merge(texts[0], texts[1], texts[2], l)
	if m.Text == nil {
		m.Text = []byte{} // Data: empty, not none
	}
	want.Size = int64(len(m.Text))
	// The inode theirs had tells which names shared one then (keepLinks).
	it := &revertItem{target: resolved{State: want, Data: m.Text, Inode: theirs.Inode}, merged: m.Text, hasMrg: true}
	if m.Conflicts > 0 {
		return it, fmt.Sprintf("%d of its changed regions changed both by the turn and later", m.Conflicts), true, false, nil
	}
	return it, "", false, true, nil
}

// movesBack reports whether it undoes a rename by renaming the object
// back: a directory's rename is not (its contents are planned path by
// path), nor one whose bytes the revert changes (a merge, or later writes
// undone).
func (s *Store) movesBack(it *revertItem, live ckpt.Tree) (bool, error) {
	t := it.target.State.Type
	if it.from == "" || it.hasMrg || !t.Linkable() || it.atFrom.State.Type != t || !it.atFrom.Inode.Known() {
		return false, nil
	}
	k, err := s.compare(it.atFrom, it.target, live)
	return k == "" || k == ckpt.ModeOnly, err
}

// revertChanges lists what the items change, path by path, a rename undone
// as one rename.
func (s *Store) revertChanges(items []*revertItem, live ckpt.Tree) ([]Change, error) {
	var out []Change
	for _, it := range items {
		var k ckpt.ChangeKind
		if it.hasMrg {
			k = ckpt.Modified
			if it.cur.State.Type == ckpt.Regular {
				b, err := s.readAll(it.cur, live)
				if err != nil {
					return nil, err
				}
				if bytes.Equal(b, it.merged) {
					k = ckpt.ModeOnly
				}
			} else if !it.cur.State.Exists() {
				k = ckpt.Added
			}
		} else {
			var err error
			if k, err = s.compare(it.cur, it.target, live); err != nil {
				return nil, err
			}
		}
		out = append(out, Change{Path: it.path, Kind: k, Before: it.cur.State, After: it.target.State, before: it.cur, after: it.target})
	}
	// A path the revert removes and one it makes with what the first
	// holds, by renaming it back (movesBack): a rename, as its turn then
	// records it. A directory is made again, its files moved back one by
	// one: its turn records it added and the other name deleted, and so
	// does this list.
	byLive := map[string]int{}
	for i, c := range out {
		if c.Kind == ckpt.Deleted {
			byLive[c.Path] = i
		}
	}
	drop := map[int]bool{}
	for j, c := range out {
		from := items[j].from
		if c.Kind != ckpt.Added || from == "" {
			continue
		}
		i, ok := byLive[from]
		if !ok || drop[i] || out[i].Before.Type != c.After.Type {
			continue
		}
		if move, err := s.movesBack(items[j], live); err != nil {
			return nil, err
		} else if move {
			out[j] = Change{Path: c.Path, From: out[i].Path, Kind: ckpt.Renamed, Before: out[i].Before, After: c.After, before: out[i].before, after: c.after}
			drop[i] = true
		}
	}
	kept := out[:0:0]
	for i, c := range out {
		if !drop[i] {
			kept = append(kept, c)
		}
	}
	parents, err := missingParents(items, live)
	if err != nil {
		return nil, err
	}
	kept = append(kept, parents...)
	sortChanges(kept)
	return kept, nil
}

// missingParents lists the directories a revert makes because a path it
// puts back lies in one that is gone now (mkdirParents: mode 0755, in
// place of whatever else is there, in a set-group-ID directory's group),
// as its turn then records them.
func missingParents(items []*revertItem, live ckpt.Tree) ([]Change, error) {
	planned := make(map[string]ckpt.State, len(items))
	for _, it := range items {
		planned[it.path] = it.target.State
	}
	var out []Change
	for _, it := range items {
		if !it.target.State.Exists() {
			continue
		}
		// The missing directories above it, innermost first, and the
		// state of the directory they are made in.
		var chain []string
		var cur []ckpt.State
		var above ckpt.State
		for d := parentOf(it.path); ; d = parentOf(d) {
			if st, ok := planned[d]; ok {
				above = st
				break
			}
			st, err := live.Lstat(d)
			if err != nil {
				return nil, err
			}
			if st.Type == ckpt.Dir || d == "" {
				above = st
				break
			}
			chain, cur = append(chain, d), append(cur, st)
		}
		for i := len(chain) - 1; i >= 0; i-- {
			d := chain[i]
			after := ckpt.State{Type: ckpt.Dir, Mode: 0o755, UID: uint32(os.Geteuid()), GID: uint32(os.Getegid())}
			if above.Mode&unix.S_ISGID != 0 {
				after.GID = above.GID // (Mkdir sets the mode exactly: no bit)
			}
			k := ckpt.Added
			if cur[i].Exists() {
				k = ckpt.TypeChg
			}
			out = append(out, Change{Path: d, Kind: k, Before: cur[i], After: after, before: resolved{State: cur[i], Live: d}, after: resolved{State: after}})
			planned[d], above = after, after
		}
	}
	return out, nil
}
