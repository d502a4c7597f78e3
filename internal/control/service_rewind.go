package control

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"ckptfs/internal/ckpt"
	"ckptfs/turnctl"
	"ckptfs/versionstore"
)

// Rewind makes the whole tree equal its state at the end of a turn.
func (s *Service) Rewind(ctx context.Context, req turnctl.RewindRequest) (*turnctl.RewindReply, error) {
	n, err := s.resolve(req.Turn)
	if err != nil {
		return nil, err
	}
	return s.rewind(ctx, func() (uint64, error) { return n, nil }, nil, req.DryRun, false)
}

// Undo undoes the last action: the newest turn that changed something and
// is an agent turn, a rewind or a revert (an open turn included), or, when
// no such turn changed anything, the newest turn that did. When no turn
// after it changed anything, it rewinds to the turn before it; else it
// reverts it, keeping what the later turns (background writers such as
// git status refreshing .git/index) changed, and names them. An undo is
// itself such an action, so a second undo redoes.
func (s *Service) Undo(ctx context.Context, req turnctl.UndoRequest) (*turnctl.RewindReply, error) {
	p, done := s.ops.track(ctx)
	defer done()
	var undone, before uint64 // the turn undone, the turn its changes start from
	var later []uint64
	var rw versionstore.RewindResult
	var rv versionstore.RevertResult
	var m mark
	run := func() error {
		var err error
		if undone, later, err = s.lastAction(); err != nil {
			return err
		}
		t, err := s.store.Turn(undone)
		if err != nil {
			return err
		}
		before = t.Prev()
		if len(later) == 0 {
			rw, m, err = s.rewindStore(before, nil, req.DryRun, true, p)
			return err
		}
		rv, m, err = s.revertStore(undone, req.DryRun, false, fmt.Sprintf("undo turn %d", undone), "undo", p)
		return err
	}
	if err := s.gated(req.DryRun, run); err != nil {
		return nil, s.wrap(err)
	}
	var err error
	var rep *turnctl.RewindReply
	if len(later) == 0 {
		rep, err = s.rewindReply(before, req.DryRun, rw, m, p)
	} else {
		rep, err = s.revertReply(undone, req.DryRun, rv, m, p)
	}
	if err != nil {
		return nil, err
	}
	rep.Undone = &undone
	if len(later) > 0 {
		rep.KeptTurns = later
		if err := s.keptPaths(rep, undone); err != nil {
			return nil, s.wrap(err)
		}
	}
	return rep, nil
}

// keptPaths fills rep.Kept: the paths the turns after n changed (none
// under .git but the count, unless every path is asked for: the reply
// lists them all and the CLI sums .git up).
func (s *Service) keptPaths(rep *turnctl.RewindReply, n uint64) error {
	cs, err := s.store.Changes(n, versionstore.Now, s.tree)
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, c := range versionstore.SplitRenames(cs) {
		if !seen[c.Path] {
			seen[c.Path] = true
			rep.Kept = append(rep.Kept, c.Path)
		}
	}
	// Those the revert itself changed (both names of a rename) are not
	// kept as they were.
	for _, c := range rep.Changes {
		delete(seen, c.Path)
		delete(seen, c.From)
	}
	kept := rep.Kept[:0]
	for _, p := range rep.Kept {
		if seen[p] {
			kept = append(kept, p)
		}
	}
	rep.Kept = kept
	return nil
}

// lastAction finds the turn undo undoes (see Undo) and the later turns
// that changed something.
func (s *Service) lastAction() (uint64, []uint64, error) {
	turns, err := s.store.Turns(0)
	if err != nil {
		return 0, nil, err
	}
	return s.lastActionOf(turns, false)
}

// undoneNow is the closed turn an undo would undo, passing over the open
// one (the store's policy keeps its undo: SetUndoBase). The open turn's
// own undo needs nothing the policy could forget.
func (s *Service) undoneNow() (uint64, bool) {
	key := s.closedTurnsKey()
	m := &s.undone
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.known && m.key == key && (m.sure || time.Since(m.at) < undoRecheck) {
		return m.n, m.ok
	}
	before := s.mark()
	turns, err := s.store.Turns(0)
	if err != nil {
		return 0, false
	}
	n, _, err := s.lastActionOf(turns, true)
	m.key, m.n, m.ok, m.known = key, n, err == nil, true
	m.sure, m.at = s.mark() == before, time.Now()
	m.computed++
	return m.n, m.ok
}

// testHookTurnChanges, in tests, runs before lastActionOf reads a turn's
// changes.
var testHookTurnChanges func(n uint64)

// undoRecheck is how long undoneNow keeps an answer found while captures
// were recorded: the changes it read may have met a write between the
// log and a live file (as the stats cacheStats refuses), so it is found
// anew after a while, not kept until the closed turns change.
const undoRecheck = 30 * time.Second

// undoMemo is undoneNow's last answer. The answer depends on the closed
// turns alone: they change only when a turn closes (turns only ever
// close in order, so the newest closed turn and their count name them)
// and when a forget, a merge or a pin changes history
// (versionstore.Store.HistoryGen). Finding it anew reads the records of
// the newest closed turns whose end counted no stats (lastActionOf), and
// the background gc asks at every 32 MiB a turn keeps: a turn of 17k
// range records took 0.27 s of CPU per question.
type undoMemo struct {
	mu       sync.Mutex
	known    bool // the fields below hold an answer
	key      string
	n        uint64
	ok       bool
	sure     bool      // nothing was recorded while it was found
	at       time.Time // when it was found
	computed int       // how many answers were found anew, not remembered
}

// closedTurnsKey names the closed turns: the history's generation and
// start, and the newest closed turn (the turn before the open one, which
// is always the latest), from the store's counters, without reading a
// turn. It is taken before the turns are read, so an answer is never
// older than its key.
func (s *Service) closedTurnsKey() string {
	newest := s.store.Latest()
	if cur, open := s.store.Current(); open {
		newest = cur.Num - 1
	}
	return fmt.Sprint(s.store.HistoryGen(), "/", s.store.HistoryStart().Turn, "/", newest)
}

// lastActionOf is lastAction over turns (as Store.Turns gives them),
// passing over the open turn if closedOnly.
func (s *Service) lastActionOf(turns []ckpt.Turn, closedOnly bool) (uint64, []uint64, error) {
	var later []uint64
	start := s.store.HistoryStart()
	atStart := false // a turn at or before the start of history was passed
	for _, t := range turns {
		n := t.Num
		if n <= start.Turn {
			atStart = true
			break
		}
		if t.Empty() || closedOnly && t.Open {
			continue
		}
		// Stats counted at its end (cacheStats keeps only those nothing
		// overtook) that name files say it changed something, without
		// reading its changes again: after a mount, the gc's first look
		// took 9.7 s of CPU over a turn of 58k files. Directories are
		// not counted in them: no files is no answer.
		if t.Open || t.Stats == nil || t.Stats.Files == 0 {
			if testHookTurnChanges != nil {
				testHookTurnChanges(n)
			}
			cs, err := s.store.TurnChanges(n, s.tree)
			if err != nil {
				return 0, nil, err
			}
			if len(cs) == 0 {
				continue
			}
		}
		switch t.Kind {
		case ckpt.KindAgent, ckpt.KindRewind, ckpt.KindRevert:
			slices.Reverse(later)
			return n, later, nil
		}
		later = append(later, n)
	}
	if len(later) > 0 {
		// No action: the newest turn that changed something.
		return later[0], nil, nil
	}
	if atStart && start.Turn > 0 {
		// Undoing turn start would need the tree before it, forgotten.
		why := start.By()
		return 0, nil, errorf(turnctl.CodeConflict, "nothing to undo: history starts at turn %d (older turns forgotten %s), and no turn after it changed anything", start.Turn, why)
	}
	return 0, nil, errorf(turnctl.CodeConflict, "nothing to undo: no turn changed anything")
}

// Revert undoes what one past turn changed, keeping the later changes.
func (s *Service) Revert(ctx context.Context, req turnctl.RevertRequest) (*turnctl.RewindReply, error) {
	n, err := s.resolve(req.Turn)
	if err != nil {
		return nil, err
	}
	var markers bool
	switch req.Conflicts {
	case "", turnctl.ConflictsRefuse:
	case turnctl.ConflictsMarkers:
		markers = true
	default:
		return nil, errorf(turnctl.CodeBadRequest, "conflicts must be %s or %s, not %q", turnctl.ConflictsRefuse, turnctl.ConflictsMarkers, req.Conflicts)
	}
	p, done := s.ops.track(ctx)
	defer done()
	var res versionstore.RevertResult
	var m mark
	run := func() error {
		var err error
		res, m, err = s.revertStore(n, req.DryRun, markers, "", "revert", p)
		return err
	}
	if err := s.gated(req.DryRun, run); err != nil {
		return nil, s.wrap(err)
	}
	return s.revertReply(n, req.DryRun, res, m, p)
}

// revertStore runs store.Revert (the caller holds the gate unless dry),
// telling p how far it has got; what names the command in a refusal,
// which lists the conflicts.
func (s *Service) revertStore(n uint64, dry, markers bool, label, what string, p *progress) (versionstore.RevertResult, mark, error) {
	res, err := s.store.Revert(n, s.liveTree(), versionstore.RevertOptions{
		DryRun: dry, Markers: markers, Label: label, Who: ckpt.Program{Comm: "turnctl"},
		Progress: p.reporter(),
	})
	m := s.mark()
	if errors.Is(err, versionstore.ErrNotOnLine) {
		msg := strings.ReplaceAll(err.Error(), "versionstore: ", "")
		err = errorf(turnctl.CodeConflict, "%s of %s refused, nothing changed: %s", what, versionstore.PointWord(n), msg)
	}
	if errors.Is(err, versionstore.ErrConflict) {
		var list []string
		text := false // a conflict markers would write
		for _, c := range res.Conflicts {
			if !c.Text || !markers {
				list = append(list, fmt.Sprintf("%s (%s)", displayPath(c.Path), c.Reason))
			}
			text = text || c.Text
		}
		hint := ""
		if what == "revert" && !markers && text {
			hint = "; --conflicts=markers writes conflicting lines of text files between markers"
		}
		if prev, perr := s.store.PrevPoint(n); what == "undo" && perr == nil {
			hint = fmt.Sprintf("; turnctl rewind %s goes back to just before %s, dropping the later changes", versionstore.PointName(prev), versionstore.PointWord(n))
		}
		err = errorf(turnctl.CodeConflict, "%s of %s refused, nothing changed: later changes conflict in %s%s",
			what, versionstore.PointWord(n), strings.Join(list, "; "), hint)
	}
	return res, m, err
}

// leftDirs is the wire form of the directories a rewind or a revert
// left for the unversioned paths they hold.
func leftDirs(ls []versionstore.Left) []turnctl.LeftDir {
	var out []turnctl.LeftDir
	for _, l := range ls {
		out = append(out, turnctl.LeftDir{Path: l.Path, Then: l.Then.String(), Unversioned: l.Unversioned, More: l.More})
	}
	return out
}

// revertReply says what a revert of turn n did, counting lines (a phase
// of p).
func (s *Service) revertReply(n uint64, dry bool, res versionstore.RevertResult, m mark, p *progress) (*turnctl.RewindReply, error) {
	prev, err := s.store.PrevPoint(n)
	if err != nil {
		return nil, s.wrap(err)
	}
	turn, k := versionstore.SplitPoint(n)
	rep := &turnctl.RewindReply{Reverted: &turn, RevertedStep: k, DryRun: dry, Changes: []turnctl.FileChange{},
		NotRestored: res.NotRestored, Merged: res.Merged, Warning: res.Warning}
	rep.Target, rep.TargetStep = versionstore.SplitPoint(prev)
	for _, c := range res.Conflicts {
		rep.Conflicts = append(rep.Conflicts, turnctl.RevertConflict{Path: c.Path, Reason: c.Reason, Text: c.Text})
	}
	rep.Left = leftDirs(res.Left)
	for _, l := range res.SplitLinks {
		rep.SplitLinks = append(rep.SplitLinks, turnctl.LinkSplit{Path: l.Path, Names: l.Names})
	}
	to := versionstore.Now
	if !dry && res.Turn.Num != 0 {
		t := res.Turn
		rep.Turn = &t
		to = t.Num
	} else if !dry {
		return rep, nil // nothing differed
	}
	return s.listReplyChanges(rep, res.Changes, to, m, p)
}

// Restore rewinds only the given paths (and everything below them).
func (s *Service) Restore(ctx context.Context, req turnctl.RestoreRequest) (*turnctl.RewindReply, error) {
	n, err := s.resolve(req.Turn)
	if err != nil {
		return nil, err
	}
	if len(req.Paths) == 0 {
		return nil, errorf(turnctl.CodeBadRequest, "restore needs at least one path (rewind restores everything)")
	}
	paths := make([]string, 0, len(req.Paths))
	for _, p := range req.Paths {
		c, err := cleanPath(p)
		if err != nil {
			return nil, err
		}
		// A path that is absent both then and now names nothing: most
		// likely a typo, which a silent "nothing to do" would hide.
		then, err := s.store.StateAt(n, c, s.tree)
		if err != nil {
			return nil, s.wrap(err)
		}
		now, err := s.tree.Lstat(c)
		if err != nil {
			return nil, s.wrap(err)
		}
		if !then.Exists() && !now.Exists() {
			return nil, errorf(turnctl.CodeNotFound, "%s did not exist at the end of %s and does not exist now", displayPath(c), versionstore.PointWord(n))
		}
		paths = append(paths, c)
	}
	return s.rewind(ctx, func() (uint64, error) { return n, nil }, paths, req.DryRun, false)
}

func displayPath(p string) string {
	if p == "" {
		return "."
	}
	return p
}

// rewind runs store.Rewind inside the gate (target is evaluated there too),
// then counts lines outside it, reporting its progress for /v1/progress
// when ctx names the command (turnctl.Op). The turn's label is the
// store's ("rewind to N", "restore P from N"), or with undo "undo turn
// N+1".
func (s *Service) rewind(ctx context.Context, target func() (uint64, error), paths []string, dry bool, undo bool) (*turnctl.RewindReply, error) {
	p, done := s.ops.track(ctx)
	defer done()
	var n uint64
	var res versionstore.RewindResult
	var m mark
	run := func() error {
		var err error
		if n, err = target(); err != nil {
			return err
		}
		res, m, err = s.rewindStore(n, paths, dry, undo, p)
		return err
	}
	if err := s.gated(dry, run); err != nil {
		return nil, s.wrap(err)
	}
	return s.rewindReply(n, dry, res, m, p)
}

// gated runs run inside the gate (s.exclusive), or without it for a dry
// run, which changes nothing.
func (s *Service) gated(dry bool, run func() error) error {
	if dry {
		return run()
	}
	return s.exclusive(run)
}

// rewindStore runs store.Rewind (the caller holds the gate unless dry),
// telling p how far it has got.
func (s *Service) rewindStore(n uint64, paths []string, dry, undo bool, p *progress) (versionstore.RewindResult, mark, error) {
	res, err := s.store.Rewind(n, s.liveTree(), versionstore.RewindOptions{
		DryRun: dry, Paths: paths, Undo: undo, Who: ckpt.Program{Comm: "turnctl"},
		Progress: p.reporter(),
	})
	return res, s.mark(), err
}

// rewindReply says what a rewind to n did, counting lines (a phase of p).
func (s *Service) rewindReply(n uint64, dry bool, res versionstore.RewindResult, m mark, p *progress) (*turnctl.RewindReply, error) {
	rep := &turnctl.RewindReply{DryRun: dry, Changes: []turnctl.FileChange{}, NotRestored: res.NotRestored, Warning: res.Warning}
	rep.Target, rep.TargetStep = versionstore.SplitPoint(n)
	rep.Left = leftDirs(res.Left)
	for _, l := range res.SplitLinks {
		rep.SplitLinks = append(rep.SplitLinks, turnctl.LinkSplit{Path: l.Path, Names: l.Names})
	}
	// Before is the state before the rewind, After the target state.
	if !dry && res.Turn.Num != 0 {
		t := res.Turn
		rep.Turn = &t
	} else if !dry {
		return rep, nil // nothing differed
	}
	return s.listReplyChanges(rep, res.Changes, n, m, p)
}

// listReplyChanges fills rep's Changes and Stats from cs, counting lines
// as of turn to (a phase of p), and gives rep's new turn, if any, those
// Stats, cached under m.
func (s *Service) listReplyChanges(rep *turnctl.RewindReply, cs []versionstore.Change, to uint64, m mark, p *progress) (*turnctl.RewindReply, error) {
	p.report("listing changes", 0, 0)
	var err error
	if rep.Changes, rep.Stats, err = s.listChanges(cs, to); err != nil {
		return nil, s.wrap(err)
	}
	if g := rep.Stats.Git; g != nil {
		g.Commit = false // as gitStats says of a rewind's turn
	}
	if rep.Turn != nil {
		st := rep.Stats
		rep.Turn.Stats = &st
		s.cacheStats(rep.Turn.Num, st, m)
	}
	return rep, nil
}
