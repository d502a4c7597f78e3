package control

import (
	"cmp"
	"context"
	"fmt"
	"iter"
	"slices"
	"strings"
	"sync"

	"ckptfs/internal/ckpt"
	"ckptfs/internal/rundir"
	"ckptfs/turnctl"
	"ckptfs/versionstore"
)

// runs.go: the turnctl runs whose commands are running in the open turn.
//
// Turns are spans of time, so two commands running at once (two
// terminals, an agent's two parallel tools) cannot each have a turn of
// their own: the second's begin would close the first's turn under it,
// the first's end would close the second's, and what the second changed
// after that would fall into a manual turn. Instead the runs share one
// turn: the first opens it, the others join it (its label names them
// all), and it closes when the last of them ends. A run whose turn a
// begin or an end closed while its command ran (an agent's prompt, a
// person's turnctl begin) closes nothing at its end: the turn open then
// is someone else's.

// runHold is one turnctl run while its command runs.
type runHold struct {
	turn uint64 // the turn it opened or joined, or runs inside (inTurn)
	pid  int32  // the turnctl run process (0: unknown): gone, it holds nothing
	// start is the process's start time (rundir.StartTime; 0: unknown):
	// another process given the same pid is not the run.
	start uint64
	// inTurn: it runs inside a begin's turn, as a step of it.
	inTurn bool
	label  string // its label's first line
	seq    uint64 // the order runs began in
}

// runSet is the runs the daemon knows, by their BeginRequest.Run.
type runSet struct {
	mu     sync.Mutex
	holds  map[string]runHold
	opened uint64 // the last turn a run opened
	began  uint64 // runs begun, for runHold.seq
	// The labels of the runs inside turn stepTurn whose commands ran at
	// the same time, since the step the first of them began: the step
	// the last of them ends is named after them all.
	stepTurn   uint64
	stepLabels []string
}

// peerPID is the pid of the process at the other end of the request's
// connection, 0 when not known.
func peerPID(ctx context.Context) int32 {
	if p, ok := ctx.Value(peerKey).(peer); ok && p.err == nil {
		return p.pid
	}
	return 0
}

// alive reports whether the run's turnctl process still runs (a run
// killed with SIGKILL never sends its end): not once it is gone or a
// zombie, nor when its pid names another process since.
func (h runHold) alive() bool {
	if h.pid <= 0 {
		return true
	}
	start, ok := rundir.Running(int(h.pid))
	return ok && (h.start == 0 || start == h.start)
}

// holders returns the runs still running in turn n but skip (r.mu held),
// those inside it as steps (inTurn) or those holding it, and forgets
// those whose process is gone.
func (r *runSet) holders(n uint64, skip string, inTurn bool) []string {
	var ids []string
	for id, h := range r.live() {
		if h.turn == n && id != skip && h.inTurn == inTurn {
			ids = append(ids, id)
		}
	}
	return ids
}

// live yields the runs whose process still runs (r.mu held), forgetting
// the others.
func (r *runSet) live() iter.Seq2[string, runHold] {
	return func(yield func(string, runHold) bool) {
		for id, h := range r.holds {
			if !h.alive() {
				delete(r.holds, id)
			} else if !yield(id, h) {
				return
			}
		}
	}
}

// nested reports whether process pid descends from a run still running
// in turn n (r.mu held).
func (r *runSet) nested(n uint64, pid int32) bool {
	if pid <= 0 {
		return false
	}
	runs := map[int32]bool{}
	for _, h := range r.holds {
		if h.turn == n && h.pid > 0 {
			runs[h.pid] = true
		}
	}
	if len(runs) == 0 {
		return false
	}
	for i := 0; i < 128 && pid > 1; i++ {
		pid = int32(rundir.Parent(int(pid)))
		if runs[pid] {
			return true
		}
	}
	return false
}

// beginRun is Begin for a turnctl run (req.Run), inside the exclusive
// section: join the open turn while other runs hold it; with Join, run
// inside a begin's agent turn as a step of it; else open a turn (begin).
func (s *Service) beginRun(ctx context.Context, req turnctl.BeginRequest, rep *turnctl.BeginReply) error {
	s.runs.mu.Lock()
	defer s.runs.mu.Unlock()
	if s.runs.holds == nil {
		s.runs.holds = map[string]runHold{}
	}
	if _, dup := s.runs.holds[req.Run]; dup {
		return errorf(turnctl.CodeConflict, "run %q has begun already", req.Run)
	}
	s.runs.began++
	hold := runHold{pid: peerPID(ctx), label: ckpt.LabelOf(req.Label), seq: s.runs.began}
	hold.start = rundir.StartTime(int(hold.pid))
	cur, ok := s.store.Current()
	if req.Join && ok && cur.Kind == ckpt.KindAgent && s.runs.nested(cur.Num, hold.pid) {
		// Run by the command of a run in the turn (an agent wrapped in
		// turnctl run, whose tool runs turnctl run): part of that
		// command, so a step of the turn of its own, as inside an
		// agent's turn, and not one of the runs at the same time.
		if _, _, err := s.store.Step("", ""); err != nil {
			return err
		}
		rep.Turn, rep.InTurn = cur, true
		return nil
	}
	if req.Join && ok && cur.Kind == ckpt.KindAgent {
		if len(s.runs.holders(cur.Num, "", false)) > 0 {
			t, err := s.store.Turn(cur.Num)
			if err != nil {
				return err
			}
			t, err = s.store.Retext(joinedText(t, req.Label))
			if err != nil {
				return err
			}
			hold.turn = t.Num
			s.runs.holds[req.Run] = hold
			rep.Turn, rep.Joined = t, true
			return nil
		}
		if s.runs.opened != cur.Num {
			// A begin's turn (an agent's, a script's): the step so far
			// (its own edits) ends here, so that the run's step holds
			// only what its command changes; unless other runs inside
			// it still run: then their step is this run's too.
			if len(s.runs.holders(cur.Num, "", true)) == 0 {
				if _, _, err := s.store.Step("", ""); err != nil {
					return err
				}
				s.runs.stepLabels = nil
			}
			if s.runs.stepTurn != cur.Num {
				s.runs.stepTurn, s.runs.stepLabels = cur.Num, nil
			}
			s.runs.stepLabels = append(s.runs.stepLabels, ckpt.LabelOf(req.Label))
			hold.turn, hold.inTurn = cur.Num, true
			s.runs.holds[req.Run] = hold
			rep.Turn, rep.InTurn = cur, true
			return nil
		}
		// A run's turn whose runs are all gone (killed): begin closes it.
	}
	if err := s.begin(req, rep); err != nil {
		return err
	}
	hold.turn = rep.Turn.Num
	s.runs.holds[req.Run] = hold
	s.runs.opened = rep.Turn.Num
	return nil
}

// running lists the runs still running in turn n, oldest first, and
// forgets those whose process is gone.
func (r *runSet) running(n uint64) []turnctl.RunStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	var hs []runHold
	for _, h := range r.live() {
		if h.turn == n {
			hs = append(hs, h)
		}
	}
	slices.SortFunc(hs, func(a, b runHold) int { return cmp.Compare(a.seq, b.seq) })
	out := make([]turnctl.RunStatus, len(hs))
	for i, h := range hs {
		out[i] = turnctl.RunStatus{PID: h.pid, Label: h.label, Step: h.inTurn}
	}
	return out
}

// joinedText is the text of turn t once a run with label joins it: the
// labels of both on the first line, joined by " & " (as a shell's & runs
// two commands at once), and when either says more, both texts below it.
func joinedText(t ckpt.Turn, label string) string {
	line := t.Label + " & " + ckpt.LabelOf(label)
	if t.Prompt == "" && ckpt.PromptOf(label) == "" {
		return line
	}
	first := t.Prompt
	if first == "" {
		first = t.Label
	}
	first = strings.TrimPrefix(first, t.Label+"\n\n") // joined before
	return ckpt.CutText(line + "\n\n" + first + "\n\n" + label)
}

// endRun decides, inside End's exclusive section, whether run id's end
// closes the open turn: close is false when other runs still running
// hold it (running says how many; cur is the open turn), and an error
// when the run's turn is not the open one any more.
func (s *Service) endRun(id string) (close bool, running int, cur ckpt.Turn, err error) {
	s.runs.mu.Lock()
	defer s.runs.mu.Unlock()
	h, held := s.runs.holds[id]
	delete(s.runs.holds, id)
	cur, ok := s.store.Current()
	switch {
	case !held && !ok:
		return false, 0, cur, versionstore.ErrNoOpenTurn
	case !held:
		// The daemon started after the run began (a remount, which
		// closed the run's turn).
		return false, 0, cur, errorf(turnctl.CodeConflict, "this run's turn is not known to the daemon (was the project remounted while the command ran?); left turn %d open", cur.Num)
	case !ok:
		return false, 0, cur, errorf(turnctl.CodeConflict, "turn %d was closed while the command ran; no turn is open", h.turn)
	case cur.Num != h.turn:
		return false, 0, cur, errorf(turnctl.CodeConflict, "turn %d was closed while the command ran; what it changed after that is in turn %d, left open", h.turn, cur.Num)
	}
	if others := s.runs.holders(cur.Num, id, false); len(others) > 0 {
		return false, len(others), cur, nil
	}
	return true, 0, cur, nil
}

// stepRun decides, inside Step's exclusive section, whether the end of
// run id's command (inside the open turn) ends a step: not while other
// runs inside the turn still run (running says how many); else label is
// the step's, naming every run whose command ran in it.
func (s *Service) stepRun(id, label string) (running int, stepLabel string) {
	s.runs.mu.Lock()
	defer s.runs.mu.Unlock()
	h, held := s.runs.holds[id]
	delete(s.runs.holds, id)
	if !held || !h.inTurn {
		return 0, label
	}
	if others := s.runs.holders(h.turn, id, true); len(others) > 0 {
		return len(others), ""
	}
	if s.runs.stepTurn == h.turn && len(s.runs.stepLabels) > 1 {
		label = strings.Join(s.runs.stepLabels, " & ")
	}
	s.runs.stepLabels = nil
	return 0, label
}

// dropRun forgets run id (if not ""): its turn is not open any more.
func (s *Service) dropRun(id string) {
	if id == "" {
		return
	}
	s.runs.mu.Lock()
	delete(s.runs.holds, id)
	s.runs.mu.Unlock()
}

// runningSummary is End's summary when a run leaves its turn open for
// others still running in it.
func runningSummary(n uint64, running int) string {
	if running == 1 {
		return fmt.Sprintf("turn %d stays open: 1 other turnctl run is still running in it (the last to end closes it)", n)
	}
	return fmt.Sprintf("turn %d stays open: %d other turnctl runs are still running in it (the last to end closes it)", n, running)
}

// checkStepTurn refuses a step that req says must not be ended in the
// open turn: not opened for req.IfOpenedBy, not turn req.Turn.
func (s *Service) checkStepTurn(req turnctl.StepRequest) error {
	if req.IfOpenedBy == "" && req.Turn == 0 {
		return nil
	}
	cur, ok := s.store.Current()
	if !ok {
		return versionstore.ErrNoOpenTurn
	}
	if req.Turn != 0 && cur.Num != req.Turn {
		return errorf(turnctl.CodeConflict, "turn %d was closed; the open turn is %d: no step", req.Turn, cur.Num)
	}
	if req.IfOpenedBy != "" && !turnctl.OpenedBy(cur, req.IfOpenedBy) {
		return errorf(turnctl.CodeConflict, "%s: no step", turnctl.NotOpenedBy(cur, req.IfOpenedBy))
	}
	return nil
}
