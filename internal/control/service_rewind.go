package control

import (
	"context"

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
	return s.rewind(func() (uint64, error) { return n, nil }, nil, req.DryRun, false)
}

// Undo rewinds to the state before the most recent turn that changed
// something (an open turn included). An undo is itself such a turn, so a
// second undo redoes.
func (s *Service) Undo(ctx context.Context, req turnctl.UndoRequest) (*turnctl.RewindReply, error) {
	var undone uint64
	target := func() (uint64, error) {
		n, err := s.lastChangedTurn()
		undone = n
		return n - 1, err
	}
	rep, err := s.rewind(target, nil, req.DryRun, true)
	if err != nil {
		return nil, err
	}
	rep.Undone = &undone
	return rep, nil
}

// lastChangedTurn finds the newest turn whose end state differs from the
// one before it. It walks back over empty turns only.
func (s *Service) lastChangedTurn() (uint64, error) {
	for n := s.store.Latest(); n > s.store.HistoryStart().Turn; n-- {
		t, err := s.store.Turn(n)
		if err != nil {
			return 0, err
		}
		if t.Empty() {
			continue
		}
		cs, err := s.store.Changes(n-1, n, s.tree)
		if err != nil {
			return 0, err
		}
		if len(cs) > 0 {
			return n, nil
		}
	}
	return 0, errorf(turnctl.CodeConflict, "nothing to undo: no turn changed anything")
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
			return nil, errorf(turnctl.CodeNotFound, "%s did not exist at the end of turn %d and does not exist now", displayPath(c), n)
		}
		paths = append(paths, c)
	}
	return s.rewind(func() (uint64, error) { return n, nil }, paths, req.DryRun, false)
}

func displayPath(p string) string {
	if p == "" {
		return "."
	}
	return p
}

// rewind runs store.Rewind inside the gate (target is evaluated there too,
// so that undo picks its turn with the tree quiet), then counts lines
// outside it. The turn's label is the store's ("rewind to N", "restore P
// from N"), or with undo "undo turn N+1".
func (s *Service) rewind(target func() (uint64, error), paths []string, dry bool, undo bool) (*turnctl.RewindReply, error) {
	var n uint64
	var res versionstore.RewindResult
	var m mark
	run := func() error {
		var err error
		if n, err = target(); err != nil {
			return err
		}
		res, err = s.store.Rewind(n, s.liveTree(), versionstore.RewindOptions{
			DryRun: dry, Paths: paths, Undo: undo, Who: ckpt.Program{Comm: "turnctl"},
		})
		m = s.mark()
		return err
	}
	var err error
	if dry {
		err = run()
	} else {
		err = s.exclusive(run)
	}
	if err != nil {
		return nil, s.wrap(err)
	}
	rep := &turnctl.RewindReply{Target: n, DryRun: dry, Changes: []turnctl.FileChange{}, NotRestored: res.NotRestored}
	// Before is the state before the rewind, After the target state.
	if !dry && res.Turn.Num != 0 {
		t := res.Turn
		rep.Turn = &t
	} else if !dry {
		return rep, nil // nothing differed
	}
	if rep.Changes, rep.Stats, err = s.listChanges(res.Changes, n); err != nil {
		return nil, s.wrap(err)
	}
	if rep.Turn != nil {
		st := rep.Stats
		rep.Turn.Stats = &st
		s.cacheStats(rep.Turn.Num, st, m)
	}
	return rep, nil
}
