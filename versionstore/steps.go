package versionstore

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"ckptfs/internal/bytejson"
	"ckptfs/internal/ckpt"
	"ckptfs/internal/crashpoint"
)

// steps.go: steps inside a turn, and points in history.
//
// A step boundary (Step) ends the open turn's current step: it records
// the step's last event, and empties the open turn's touched set, as a
// turn boundary does, so that the next step records the prior state of
// whatever it changes first again. The state at the end of step N.K is
// then the state right after its last event, found by the same forward
// resolution as a turn's end: every argument of doc.go for turns holds
// for steps (a step boundary is a turn boundary that opens no new turn).
// Resolution from any turn's end is unchanged: the records a boundary
// causes come after the first record of their path in the turn, which
// answers first.
//
// A point in history is the end of a turn or of a step. Everything that
// takes a turn number (Changes, StateAt, OpenAt, TreeAt, Rewind, Revert)
// takes a point: a turn number, Now, or StepPoint(turn, k). A step that
// recorded nothing ends no step (Step keeps no empty one), and the last
// step of a turn ends where the turn does. It is a point of its own all
// the same: what it changed starts from the step before (Resolve gives
// the turn's number only for a turn's only step).

// stepBit marks a point that is the end of a step: stepBit | turn<<16 | k.
const stepBit = 1 << 62

// maxSteps is the most steps one turn keeps; later boundaries of the turn
// are not kept (its last step then holds the rest).
const maxSteps = 1<<16 - 1

// StepPoint is the point at the end of step k (from 1) of turn n.
func StepPoint(n uint64, k int) uint64 { return stepBit | n<<16 | uint64(k) }

// SplitPoint returns the turn and step (0: the turn's end) of point p.
func SplitPoint(p uint64) (uint64, int) {
	if p == Now || p&stepBit == 0 {
		return p, 0
	}
	return (p &^ stepBit) >> 16, int(p & 0xffff)
}

// PointName is p as people write it: "3", "3.2".
func PointName(p uint64) string {
	n, k := SplitPoint(p)
	if k == 0 {
		return strconv.FormatUint(n, 10)
	}
	return fmt.Sprintf("%d.%d", n, k)
}

// PointWord names point p in a sentence: "turn 3", "step 3.2".
func PointWord(p uint64) string {
	if _, k := SplitPoint(p); k > 0 {
		return "step " + PointName(p)
	}
	return "turn " + PointName(p)
}

// stepKey is the key of step k of turn n ('s' num[8] k[2]).
func stepKey(n uint64, k int) []byte {
	key := binary.BigEndian.AppendUint64([]byte{prefixStep}, n)
	return binary.BigEndian.AppendUint16(key, uint16(k))
}

// Step ends the open turn's current step (tool and label describe it) and
// starts the next. A step that recorded nothing is not kept: ok is false
// and nothing changes. The boundary is durable (fsynced) when Step
// returns, as a turn boundary is.
func (s *Store) Step(tool, label string) (st ckpt.Step, ok bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return st, false, ErrClosed
	}
	if s.cur == nil {
		return st, false, ErrNoOpenTurn
	}
	steps, err := s.stepsOf(s.cur.Num)
	if err != nil {
		return st, false, err
	}
	since := s.cur.FirstSeq - 1
	if len(steps) > 0 {
		since = steps[len(steps)-1].LastSeq
	}
	if s.nextSeq-1 == since || len(steps) >= maxSteps {
		return st, false, nil
	}
	st = ckpt.Step{Turn: s.cur.Num, Num: len(steps) + 1, Tool: ckpt.LabelOf(tool), Label: ckpt.LabelOf(label),
		End: time.Now().UTC(), LastSeq: s.nextSeq - 1}
	b := s.db.NewBatch()
	defer b.Close()
	putJSON(b, stepKey(st.Turn, st.Num), st)
	if err := s.commit(b, pebble.Sync); err != nil {
		s.lastErr, s.lastErrAt = err, time.Now().UTC()
		return st, false, err
	}
	crashpoint.Hit("step.committed")
	s.resetTouched()
	if err := s.syncWAL(); err != nil {
		err = fmt.Errorf("versionstore: step %d.%d ended, but the log could not be synced to disk: %w", st.Turn, st.Num, err)
		s.lastErr, s.lastErrAt = err, time.Now().UTC()
		return st, true, err
	}
	return st, true, nil
}

// stepsOf lists the step boundaries turn n recorded, in order.
func (s *Store) stepsOf(n uint64) ([]ckpt.Step, error) {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: stepKey(n, 0), UpperBound: stepKey(n+1, 0)})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []ckpt.Step
	for ok := it.First(); ok; ok = it.Next() {
		var st ckpt.Step
		if err := bytejson.Unmarshal(it.Value(), &st); err != nil {
			return nil, fmt.Errorf("%w: step: %v", ErrCorrupt, err)
		}
		out = append(out, st)
	}
	return out, it.Error()
}

// Steps lists turn n's steps: those a boundary ended, and the last one,
// which ends with the turn (while the turn is open: goes on), if it
// recorded anything or is the only one. A turn with no boundary has one
// step, itself.
func (s *Store) Steps(n uint64) ([]ckpt.Step, error) {
	t, err := s.turnRecord(n)
	if err != nil {
		return nil, err
	}
	steps, err := s.stepsOf(n)
	if err != nil {
		return nil, err
	}
	since := t.FirstSeq - 1
	if len(steps) > 0 {
		since = steps[len(steps)-1].LastSeq
	}
	if t.LastSeq > since || len(steps) == 0 {
		steps = append(steps, ckpt.Step{Turn: n, Num: len(steps) + 1, End: t.End, LastSeq: t.LastSeq})
	}
	return steps, nil
}

// resolveStep checks "N.K" (N resolved to n already) and returns its
// point: the turn itself when it has no other step.
func (s *Store) resolveStep(n uint64, spec, k string) (uint64, error) {
	num, err := strconv.Atoi(k)
	if err != nil || num < 1 || k[0] == '+' || strings.TrimLeft(k, "0123456789") != "" {
		return 0, detailf(ErrBadTurn, "%q is not a step: use TURN.STEP, steps counted from 1 (3.2)", spec)
	}
	steps, err := s.Steps(n)
	if err != nil {
		return 0, err
	}
	if num > len(steps) {
		if len(steps) == 1 {
			return 0, detailf(ErrBadTurn, "turn %d has no step %d (it is one step, %d.1: no step boundary was marked in it)", n, num, n).also(ErrTurnNotFound)
		}
		return 0, detailf(ErrBadTurn, "turn %d has no step %d (its steps are %d.1-%d.%d; turnctl show %d lists them)", n, num, n, n, len(steps), n).also(ErrTurnNotFound)
	}
	if len(steps) == 1 {
		return n, nil // the turn's only step is the turn
	}
	// The last step too is a point of its own (it ends where the turn
	// does, but its changes, and a revert of it, are its alone).
	return StepPoint(n, num), nil
}

// stepEnd is the last event of the step at point p (a step point).
func (s *Store) stepEnd(p uint64) (uint64, error) {
	n, k := SplitPoint(p)
	t, err := s.turnRecord(n)
	if err != nil {
		return 0, err
	}
	v, closer, err := s.db.Get(stepKey(n, k))
	if err == pebble.ErrNotFound {
		// The last step, which no boundary ended, ends with the turn.
		if steps, err := s.Steps(n); err == nil && k > 1 && k == len(steps) {
			return t.LastSeq, nil // (an open turn's: now)
		}
		return 0, detailf(ErrTurnNotFound, "turn %d has no step %d", n, k)
	}
	if err != nil {
		return 0, fmt.Errorf("versionstore: %w", err)
	}
	defer closer.Close()
	var st ckpt.Step
	if err := bytejson.Unmarshal(v, &st); err != nil {
		return 0, fmt.Errorf("%w: step: %v", ErrCorrupt, err)
	}
	return st.LastSeq, nil
}

// PrevPoint is the point whose end the changes of point p start from
// (prevPoint).
func (s *Store) PrevPoint(p uint64) (uint64, error) { return s.prevPoint(p) }

// prevPoint is the point whose end the changes of point p start from: the
// step before, or for a turn (all its steps) and its first step the turn
// before it (Turn.Prev).
func (s *Store) prevPoint(p uint64) (uint64, error) {
	n, k := SplitPoint(p)
	if k > 1 {
		return StepPoint(n, k-1), nil
	}
	t, err := s.turnRecord(n)
	if err != nil {
		return 0, err
	}
	return t.Prev(), nil
}
