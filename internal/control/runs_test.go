package control

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"ckptfs/internal/rundir"
	"ckptfs/turnctl"
)

// Runs at the same time share one turn: the second joins the first's
// (its label names both), the first's end leaves it open for the second,
// the last closes it with both runs' changes. A begin that closed a run's
// turn makes that run's end a conflict that changes nothing.
func TestRunsShareATurn(t *testing.T) {
	f := newFixture(t)
	a, err := f.svc.Begin(f.ctx, turnctl.BeginRequest{Label: "make", Run: "A", Join: true})
	if err != nil || a.Joined || a.InTurn || a.Turn.Num != 1 {
		t.Fatalf("begin A: %+v %v", a, err)
	}
	f.ov.Write("a.txt", "a\n")
	b, err := f.svc.Begin(f.ctx, turnctl.BeginRequest{Label: "npm test\n\nall of it", Run: "B", Join: true})
	if err != nil || !b.Joined || b.Turn.Num != 1 || b.Turn.Label != "make & npm test" || b.Turn.Prompt != "make & npm test\n\nmake\n\nnpm test\n\nall of it" {
		t.Fatalf("begin B: %+v %v", b, err)
	}
	f.ov.Write("b.txt", "b\n")
	ea, err := f.svc.End(f.ctx, turnctl.EndRequest{Run: "A"})
	if err != nil || ea.Running != 1 || !ea.Turn.Open || ea.Summary != "turn 1 stays open: 1 other turnctl run is still running in it (the last to end closes it)" {
		t.Fatalf("end A: %+v %v", ea, err)
	}
	f.ov.Write("b2.txt", "b\n")
	eb, err := f.svc.End(f.ctx, turnctl.EndRequest{Run: "B"})
	if err != nil || eb.Running != 0 || eb.Turn.Open || eb.Turn.Stats == nil || eb.Turn.Stats.Files != 3 {
		t.Fatalf("end B: %+v %v", eb, err)
	}
	if _, ok := f.svc.store.Current(); ok {
		t.Fatal("a turn is open after the last run's end")
	}

	// A begin (an agent's prompt) closes run C's turn: C's end leaves
	// the agent's turn open.
	if _, err := f.svc.Begin(f.ctx, turnctl.BeginRequest{Label: "build", Run: "C", Join: true}); err != nil {
		t.Fatal(err)
	}
	agent := f.begin("agent")
	_, err = f.svc.End(f.ctx, turnctl.EndRequest{Run: "C"})
	if !isCode(err, turnctl.CodeConflict) || !strings.HasPrefix(err.Error(), "turn 2 was closed while the command ran") {
		t.Fatalf("end C: %v", err)
	}
	if cur, ok := f.svc.store.Current(); !ok || cur.Num != agent {
		t.Fatalf("the agent's turn %d: %+v %v", agent, cur, ok)
	}
	// Inside the agent's turn a run is a step of it: no turn of its own.
	d, err := f.svc.Begin(f.ctx, turnctl.BeginRequest{Label: "test", Run: "D", Join: true})
	if err != nil || !d.InTurn || d.Turn.Num != agent {
		t.Fatalf("begin D: %+v %v", d, err)
	}
	// The step of a turn that is not open any more is refused.
	f.ov.Write("d.txt", "d\n")
	f.end()
	f.ov.Write("m.txt", "m\n")
	if _, err := f.svc.Step(f.ctx, turnctl.StepRequest{Tool: "run", Turn: agent}); !isCode(err, turnctl.CodeConflict) {
		t.Fatalf("step in turn %d after its end: %v", agent, err)
	}
}

// Runs at the same time inside a begin's turn make one step, named after
// both, that the last to end records.
func TestRunsInsideATurnShareAStep(t *testing.T) {
	f := newFixture(t)
	n := f.begin("agent")
	f.ov.Write("e.txt", "e\n")
	for _, id := range []string{"A", "B"} {
		r, err := f.svc.Begin(f.ctx, turnctl.BeginRequest{Label: id, Run: id, Join: true})
		if err != nil || !r.InTurn || r.Turn.Num != n {
			t.Fatalf("begin %s: %+v %v", id, r, err)
		}
		f.ov.Write(id+".txt", id+"\n")
	}
	ra, err := f.svc.Step(f.ctx, turnctl.StepRequest{Tool: "run", Label: "A", Turn: n, Run: "A"})
	if err != nil || ra.Running != 1 || ra.Step != nil {
		t.Fatalf("step A: %+v %v", ra, err)
	}
	rb, err := f.svc.Step(f.ctx, turnctl.StepRequest{Tool: "run", Label: "B", Turn: n, Run: "B"})
	if err != nil || rb.Running != 0 || rb.Step == nil || rb.Step.Num != 2 || rb.Step.Label != "A & B" {
		t.Fatalf("step B: %+v %v", rb, err)
	}
	steps, err := f.svc.store.Steps(n)
	if err != nil || len(steps) != 2 || steps[0].Label != "" {
		t.Fatalf("steps: %+v %v", steps, err)
	}
}

// A run's hold names its process by pid and start time: gone, a zombie,
// or its pid given to another process since, it holds nothing.
func TestRunHoldAliveByPIDAndStart(t *testing.T) {
	self := int32(os.Getpid())
	start := rundir.StartTime(int(self))
	if start == 0 {
		t.Fatal("no start time of this process")
	}
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	// A child that exited and is not waited for yet: a zombie.
	zombie := exec.Command("true")
	if err := zombie.Start(); err != nil {
		t.Fatal(err)
	}
	defer zombie.Wait()
	zpid := zombie.Process.Pid
	zstart := rundir.StartTime(zpid)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		stat, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", zpid))
		if _, rest, ok := strings.Cut(string(stat), ") "); ok && strings.HasPrefix(rest, "Z") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pid %d did not become a zombie: %q", zpid, stat)
		}
	}
	for _, c := range []struct {
		h    runHold
		want bool
	}{
		{runHold{pid: self, start: start}, true},
		{runHold{pid: self}, true},                    // start not known: the pid decides
		{runHold{pid: self, start: start + 1}, false}, // another process got the pid
		{runHold{pid: int32(cmd.Process.Pid), start: start}, false},
		{runHold{pid: int32(zpid), start: zstart}, false}, // a zombie
		{runHold{}, true},                                 // pid not known
	} {
		if got := c.h.alive(); got != c.want {
			t.Errorf("%+v alive = %v, want %v", c.h, got, c.want)
		}
	}
}
