package control

import (
	"context"
	"slices"
	"time"

	"ckptfs/internal/ckpt"
	"ckptfs/turnctl"
	"ckptfs/versionstore"
)

// service_history.go: bounded history: forget, pins, gc, the policy, du.
// None of them changes the tree, so none blocks the mount.

// Forget forgets turns: the oldest move the start of history, the others
// are merged into the kept turn after them.
func (s *Service) Forget(ctx context.Context, req turnctl.ForgetRequest) (*turnctl.ForgetReply, error) {
	var turns []uint64
	for _, spec := range req.Turns {
		n, err := s.resolveTurn(spec)
		if err != nil {
			return nil, err
		}
		turns = append(turns, n)
	}
	if req.Before != "" {
		n, err := s.resolveTurn(req.Before)
		if err != nil {
			return nil, err
		}
		all, err := s.store.Turns(0)
		if err != nil {
			return nil, s.wrap(err)
		}
		for _, t := range all {
			if t.Num >= s.store.HistoryStart().Turn && t.Num < n {
				turns = append(turns, t.Num)
			}
		}
		if len(turns) == 0 {
			return nil, errorf(turnctl.CodeBadRequest, "nothing to forget: history starts at turn %d", n)
		}
	}
	if len(turns) == 0 {
		return nil, errorf(turnctl.CodeBadRequest, "forget needs turns (or before)")
	}
	slices.Sort(turns)
	turns = slices.Compact(turns)
	if req.DryRun {
		to, merged, err := s.store.PlanForget(turns)
		if err != nil {
			return nil, s.wrap(err)
		}
		rep := &turnctl.ForgetReply{DryRun: true, Forgot: turns, Start: s.store.HistoryStart(), Merged: []turnctl.MergedTurn{}}
		if to > rep.Start.Turn { // as the forget would leave it
			moved := uint64(0)
			for _, n := range turns {
				if n < to {
					moved++
				}
			}
			rep.Start = ckpt.HistoryStart{Turn: to, Reason: ckpt.ReasonForget, At: time.Now().UTC(), Forgotten: rep.Start.Forgotten + moved}
		}
		for _, m := range merged {
			rep.Merged = append(rep.Merged, turnctl.MergedTurn{Turn: m.Turn, Into: m.Into})
		}
		return rep, nil
	}
	h, err := s.store.Forget(turns, ckpt.ReasonForget)
	if err != nil {
		return nil, s.wrap(err)
	}
	rep := &turnctl.ForgetReply{Forgot: turns, Start: h, Merged: []turnctl.MergedTurn{}}
	kept, err := s.store.Turns(0)
	if err != nil {
		return nil, s.wrap(err)
	}
	for _, n := range rep.Forgot {
		if n < h.Turn {
			continue
		}
		for _, t := range kept { // newest first: the last one at or after n holds it
			if t.Num > n && t.MergedFrom > 0 && t.MergedFrom <= n {
				rep.Merged = append(rep.Merged, turnctl.MergedTurn{Turn: n, Into: t.Num})
				break
			}
		}
	}
	return rep, nil
}

// Pin pins a turn.
func (s *Service) Pin(ctx context.Context, req turnctl.PinRequest) (*turnctl.PinReply, error) {
	if err := checkText("note", req.Note); err != nil {
		return nil, err
	}
	n, err := s.resolveTurn(req.Turn)
	if err != nil {
		return nil, err
	}
	p, err := s.store.Pin(n, req.Note)
	if err != nil {
		return nil, s.wrap(err)
	}
	return &turnctl.PinReply{Pin: p}, nil
}

// Unpin removes a turn's pin.
func (s *Service) Unpin(ctx context.Context, req turnctl.UnpinRequest) (*turnctl.UnpinReply, error) {
	n, err := s.resolveTurn(req.Turn)
	if err != nil {
		return nil, err
	}
	if err := s.store.Unpin(n); err != nil {
		return nil, s.wrap(err)
	}
	return &turnctl.UnpinReply{Turn: n}, nil
}

// GC applies the policy and reclaims space.
func (s *Service) GC(ctx context.Context, req turnctl.GCRequest) (*turnctl.GCReply, error) {
	p, done := s.ops.track(ctx)
	defer done()
	var rep ckpt.GCReport
	var err error
	if req.DryRun {
		rep, err = s.store.GC(versionstore.GCOptions{DryRun: true, Progress: p.reporter()})
	} else {
		// As the background gc runs (autogc.go): the work on the mount
		// goes first.
		ch := make(chan struct{})
		go func() {
			defer close(ch)
			lowPriority()
			rep, err = s.store.GC(versionstore.GCOptions{Progress: p.reporter(), Pause: func() { time.Sleep(autoGCPause) }})
		}()
		<-ch
	}
	if err != nil {
		return nil, s.wrap(err)
	}
	return &turnctl.GCReply{GCReport: rep}, nil
}

// Policy shows the retention policy and sets the fields given.
func (s *Service) Policy(ctx context.Context, req turnctl.PolicyRequest) (*turnctl.PolicyReply, error) {
	p, err := s.store.Policy()
	if err != nil {
		return nil, s.wrap(err)
	}
	if req.KeepSize != nil || req.KeepTurns != nil || req.KeepAge != nil || req.KeepHourly != nil || req.KeepDaily != nil {
		switch {
		case req.KeepSize != nil && *req.KeepSize < 0:
			return nil, errorf(turnctl.CodeBadRequest, "keep_size must not be negative")
		case req.KeepTurns != nil && *req.KeepTurns < 0:
			return nil, errorf(turnctl.CodeBadRequest, "keep_turns must not be negative")
		case req.KeepAge != nil && *req.KeepAge < 0:
			return nil, errorf(turnctl.CodeBadRequest, "keep_age must not be negative")
		}
		if req.KeepSize != nil {
			p.KeepSize = *req.KeepSize
		}
		if req.KeepTurns != nil {
			p.KeepTurns = *req.KeepTurns
		}
		if req.KeepAge != nil {
			p.KeepAge = *req.KeepAge
		}
		if req.KeepHourly != nil {
			p.KeepHourly = max(*req.KeepHourly, -1)
		}
		if req.KeepDaily != nil {
			p.KeepDaily = max(*req.KeepDaily, -1)
		}
		if err := s.store.SetPolicy(p); err != nil {
			return nil, s.wrap(err)
		}
	}
	eff, err := s.store.EffectivePolicy()
	if err != nil {
		return nil, s.wrap(err)
	}
	return &turnctl.PolicyReply{Policy: p, Effective: eff, StoreBytes: s.store.StoreBytes()}, nil
}

// Du reports what the store holds.
func (s *Service) Du(ctx context.Context, req turnctl.DuRequest) (*turnctl.DuReply, error) {
	u, err := s.store.Usage()
	if err != nil {
		return nil, s.wrap(err)
	}
	return &turnctl.DuReply{Usage: u}, nil
}
