package control

import (
	"context"
	"sync"
	"sync/atomic"

	"ckptfs/turnctl"
	"ckptfs/versionstore"
)

// progress is how far one running command has got, for /v1/progress. Its
// methods do nothing on a nil *progress (a command nobody watches).
type progress struct {
	phase       atomic.Pointer[string]
	done, total atomic.Int64
}

// report says the command is in phase, done of total steps through it
// (total 0: not known).
func (p *progress) report(phase string, done, total int64) {
	if p == nil {
		return
	}
	if cur := p.phase.Load(); cur == nil || *cur != phase {
		p.phase.Store(&phase)
	}
	p.total.Store(total)
	p.done.Store(done)
}

// reporter returns p.report as the store's progress callback (nil for a
// nil p: the store then does not call it).
func (p *progress) reporter() versionstore.Progress {
	if p == nil {
		return nil
	}
	return p.report
}

// ops holds the progress of the commands running with a command ID.
type ops struct{ m sync.Map } // ID -> *progress

// track registers the command of ctx (turnctl.Op) and returns its
// progress, nil when it has no ID, and a func that ends it.
func (o *ops) track(ctx context.Context) (*progress, func()) {
	id := turnctl.Op(ctx)
	if id == "" {
		return nil, func() {}
	}
	p := &progress{}
	o.m.Store(id, p)
	return p, func() { o.m.CompareAndDelete(id, p) }
}

// Progress says how far the command sent with req.ID has got.
func (s *Service) Progress(ctx context.Context, req turnctl.ProgressRequest) (*turnctl.ProgressReply, error) {
	v, ok := s.ops.m.Load(req.ID)
	if !ok || req.ID == "" {
		return &turnctl.ProgressReply{}, nil
	}
	p := v.(*progress)
	rep := &turnctl.ProgressReply{Running: true, Done: p.done.Load(), Total: p.total.Load()}
	if ph := p.phase.Load(); ph != nil {
		rep.Phase = *ph
	}
	return rep, nil
}
