package control

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"ckptfs/turnctl"
)

// watchingGate asks the Service how far the command "op" has got each
// time a rewind changes a path, as a client polling /v1/progress would.
type watchingGate struct {
	fakeGate
	svc  *Service
	mu   sync.Mutex
	seen []turnctl.ProgressReply
}

func (g *watchingGate) Invalidate(p string) {
	rep, err := g.svc.Progress(context.Background(), turnctl.ProgressRequest{ID: "op"})
	if err == nil {
		g.mu.Lock()
		g.seen = append(g.seen, *rep)
		g.mu.Unlock()
	}
}

// watchedFixture is a fixture whose gate watches the progress of "op",
// with turn 1 writing 20 files f00 to f19.
func watchedFixture(t *testing.T) (*fixture, *watchingGate) {
	t.Helper()
	f := newFixture(t)
	g := &watchingGate{svc: f.svc}
	f.svc.gate = g
	f.begin("many")
	for i := range 20 {
		f.ov.Write(fmt.Sprintf("f%02d", i), "x\n")
	}
	f.end()
	return f, g
}

func TestRewindReportsProgress(t *testing.T) {
	f, g := watchedFixture(t)
	ctx := turnctl.WithOp(context.Background(), "op")
	if _, err := f.svc.Rewind(ctx, turnctl.RewindRequest{Turn: "0"}); err != nil {
		t.Fatal(err)
	}
	var steps int
	for _, r := range g.seen {
		if !r.Running || r.Phase == "" || r.Done > r.Total {
			t.Errorf("progress during the rewind: %+v", r)
		}
		if r.Phase == "rewinding" && r.Total >= 20 {
			steps++
		}
	}
	if steps < 20 {
		t.Errorf("%d progress replies of the rewinding phase, want one per file: %+v", steps, g.seen)
	}
	rep, err := f.svc.Progress(context.Background(), turnctl.ProgressRequest{ID: "op"})
	if err != nil || rep.Running {
		t.Errorf("progress after the rewind: %+v %v", rep, err)
	}
	// A command without an ID is not tracked.
	g.seen = nil
	if _, err := f.svc.Rewind(context.Background(), turnctl.RewindRequest{Turn: "1"}); err != nil {
		t.Fatal(err)
	}
	for _, r := range g.seen {
		if r.Running {
			t.Errorf("an untracked rewind reported progress: %+v", r)
		}
	}
}

// TestRevertAndUndoReportProgress: a revert and an undo (here made as a
// rewind: nothing changed after the revert) report how far they have got
// as a rewind does.
func TestRevertAndUndoReportProgress(t *testing.T) {
	f, g := watchedFixture(t)
	f.begin("other")
	f.ov.Write("other", "y\n")
	f.end()
	phases := func(what string) map[string]int {
		t.Helper()
		seen := map[string]int{}
		for _, r := range g.seen {
			if !r.Running || r.Phase == "" || r.Done > r.Total && r.Total > 0 {
				t.Errorf("progress during the %s: %+v", what, r)
			}
			if r.Total >= 20 {
				seen[r.Phase]++
			}
		}
		g.seen = nil
		return seen
	}
	ctx := turnctl.WithOp(context.Background(), "op")
	if _, err := f.svc.Revert(ctx, turnctl.RevertRequest{Turn: "1"}); err != nil {
		t.Fatal(err)
	}
	if seen := phases("revert"); seen["restoring"] < 20 {
		t.Errorf("revert: progress replies with 20 steps per phase: %v; want one per file restoring", seen)
	}
	if _, err := f.svc.Undo(ctx, turnctl.UndoRequest{}); err != nil {
		t.Fatal(err)
	}
	if seen := phases("undo"); seen["rewinding"] < 20 {
		t.Errorf("undo: progress replies with 20 steps per phase: %v; want one per file rewinding", seen)
	}
	rep, err := f.svc.Progress(context.Background(), turnctl.ProgressRequest{ID: "op"})
	if err != nil || rep.Running {
		t.Errorf("progress after the undo: %+v %v", rep, err)
	}
}

// opRecorder records the command ID each request arrived with.
type opRecorder struct {
	*Service
	mu  sync.Mutex
	ops []string
}

func (o *opRecorder) GC(ctx context.Context, req turnctl.GCRequest) (*turnctl.GCReply, error) {
	o.mu.Lock()
	o.ops = append(o.ops, turnctl.Op(ctx))
	o.mu.Unlock()
	return o.Service.GC(ctx, req)
}

// TestClientSendsOp: the command ID travels from the client's context to
// the Service's, and /v1/progress answers over the socket.
func TestClientSendsOp(t *testing.T) {
	f := newFixture(t)
	h := &opRecorder{Service: f.svc}
	c := turnctl.NewClient(serve(t, h))
	if _, err := c.GC(turnctl.WithOp(context.Background(), "abc-123"), turnctl.GCRequest{DryRun: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GC(context.Background(), turnctl.GCRequest{DryRun: true}); err != nil {
		t.Fatal(err)
	}
	if len(h.ops) != 2 || h.ops[0] != "abc-123" || h.ops[1] != "" {
		t.Errorf("command IDs the server saw: %q", h.ops)
	}
	rep, err := c.Progress(context.Background(), turnctl.ProgressRequest{ID: "abc-123"})
	if err != nil || rep.Running {
		t.Errorf("progress of a finished command: %+v %v", rep, err)
	}
}
