package versionstore

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"ckptfs/internal/bytejson"
	"ckptfs/internal/ckpt"
	"ckptfs/internal/crashpoint"
)

// turns.go: the turns: opening and closing them (Begin, Adopt, End), the
// open turn as it is now (Current), reading them back (Turn, Turns,
// Resolve), and the statistics kept with a closed one.

// Begin opens a new turn, closing the open one first. Its label is
// ckpt.LabelOf(text), and the whole text is kept as its Prompt when it
// says more. ref, if not empty, is attached to the new turn.
func (s *Store) Begin(kind ckpt.Kind, text, ref string) (ckpt.Turn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ckpt.Turn{}, ErrClosed
	}
	b := s.db.NewBatch()
	defer b.Close()
	if ref != "" {
		if err := s.checkRef(ref, s.latest+1); err != nil {
			return ckpt.Turn{}, err
		}
	}
	if s.cur != nil {
		s.closeTurn(b, s.cur)
	}
	t := s.newTurn(b, kind, ckpt.LabelOf(text))
	if ref != "" {
		t.Refs = []string{ref}
		b.Set(refKey(ref), turnKey(t.Num)[1:], nil)
		putJSON(b, turnKey(t.Num), t)
	}
	prompt := setText(b, t.Num, text)
	if err := s.commit(b, pebble.Sync); err != nil {
		s.lastErr, s.lastErrAt = err, time.Now().UTC()
		return ckpt.Turn{}, err
	}
	crashpoint.Hit("turn.committed")
	// The turn is open from here on, whether or not the fsync works: the
	// in-memory state must follow what is committed.
	s.cur = t
	s.latest = t.Num
	s.resetTouched()
	s.programs = map[string]bool{}
	opened := *t
	opened.Prompt = prompt
	if err := s.rotateSyncWAL(); err != nil {
		err = fmt.Errorf("versionstore: turn %d opened, but the log could not be synced to disk: %w", t.Num, err)
		s.lastErr, s.lastErrAt = err, time.Now().UTC()
		return opened, err
	}
	return opened, nil
}

// setText keeps in b the text turn n is opened with, if it says more than
// its label (else deletes what an earlier text left), and returns the
// turn's Prompt. The turn's record never holds it: records are rewritten
// often (programs, stats) and read in bulk (log).
func setText(b *pebble.Batch, n uint64, text string) string {
	prompt := ckpt.PromptOf(text)
	if prompt == "" {
		b.Delete(textKey(n), nil)
	} else {
		b.Set(textKey(n), []byte(prompt), nil)
	}
	return prompt
}

// withPrompt adds turn t's Prompt from the store.
func (s *Store) withPrompt(t ckpt.Turn) (ckpt.Turn, error) {
	v, closer, err := s.db.Get(textKey(t.Num))
	if err == pebble.ErrNotFound {
		return t, nil
	}
	if err != nil {
		return t, fmt.Errorf("versionstore: %w", err)
	}
	defer closer.Close()
	t.Prompt = string(v)
	return t, nil
}

// Adopt turns the open turn, an unlabelled manual one, into the turn a
// Begin(kind, label, ref) would open, keeping its number and its records
// but not its programs.
// The caller has checked that the open turn changed nothing (its Changes
// are empty), so every prior state it recorded is also the state at this
// moment: the records serve the new turn as they are. It saves a turn
// that only records that nothing happened (a boundary's capture of a file
// still open for writing, say) from showing up in the history.
func (s *Store) Adopt(kind ckpt.Kind, text, ref string) (ckpt.Turn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ckpt.Turn{}, ErrClosed
	}
	if s.cur == nil || s.cur.Kind != ckpt.KindManual || s.cur.Label != "" {
		return ckpt.Turn{}, fmt.Errorf("versionstore: BUG: Adopt needs an open unlabelled manual turn")
	}
	t := *s.cur
	if ref != "" {
		if err := s.checkRef(ref, t.Num); err != nil {
			return ckpt.Turn{}, err
		}
	}
	b := s.db.NewBatch()
	defer b.Close()
	t.Kind, t.Label, t.Start = kind, ckpt.LabelOf(text), time.Now().UTC()
	t.Programs = nil // theirs came to nothing; the new turn credits its own
	if ref != "" && !contains(t.Refs, ref) {
		t.Refs = append(t.Refs, ref)
		b.Set(refKey(ref), turnKey(t.Num)[1:], nil)
	}
	putJSON(b, turnKey(t.Num), t)
	prompt := setText(b, t.Num, text)
	if err := s.commit(b, pebble.Sync); err != nil {
		s.lastErr, s.lastErrAt = err, time.Now().UTC()
		return ckpt.Turn{}, err
	}
	s.cur = &t
	s.programs = map[string]bool{}
	adopted := t
	adopted.Prompt = prompt
	return adopted, nil
}

// Retext gives the open turn a new text: its label is ckpt.LabelOf(text),
// and the whole text is kept as its Prompt when it says more (as Begin
// keeps it). Concurrent turnctl runs that share a turn name it after all
// of them.
func (s *Store) Retext(text string) (ckpt.Turn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ckpt.Turn{}, ErrClosed
	}
	if s.cur == nil {
		return ckpt.Turn{}, ErrNoOpenTurn
	}
	return s.retext(text)
}

// retext is Retext with s.mu held and a turn open.
func (s *Store) retext(text string) (ckpt.Turn, error) {
	t := *s.cur
	t.Label = ckpt.LabelOf(text)
	b := s.db.NewBatch()
	defer b.Close()
	putJSON(b, turnKey(t.Num), t)
	prompt := setText(b, t.Num, text)
	if err := s.commit(b, pebble.Sync); err != nil {
		s.lastErr, s.lastErrAt = err, time.Now().UTC()
		return ckpt.Turn{}, err
	}
	s.cur = &t
	t.Prompt = prompt
	return t, nil
}

// newTurn writes a new open turn into b (s.mu held).
func (s *Store) newTurn(b *pebble.Batch, kind ckpt.Kind, label string) *ckpt.Turn {
	t := &ckpt.Turn{Num: s.latest + 1, Kind: kind, Label: label, Start: time.Now().UTC(),
		Open: true, FirstSeq: s.nextSeq, LastSeq: s.nextSeq - 1}
	putJSON(b, turnKey(t.Num), t)
	return t
}

func (s *Store) closeTurn(b *pebble.Batch, t *ckpt.Turn) {
	t.Open = false
	t.End = time.Now().UTC()
	t.LastSeq = s.nextSeq - 1
	putJSON(b, turnKey(t.Num), t)
}

func (s *Store) checkRef(ref string, num uint64) error {
	if strings.ContainsAny(ref, "\x00\n") || len(ref) > 512 {
		return fmt.Errorf("%w %q", ErrBadRef, ref)
	}
	v, closer, err := s.db.Get(refKey(ref))
	if err == pebble.ErrNotFound {
		return nil
	}
	if err != nil {
		return err
	}
	defer closer.Close()
	if n, _ := decodeU64Key(prefixTurn, append([]byte{prefixTurn}, v...)); n != num {
		return fmt.Errorf("%w: ref %q names turn %d", ErrRefTaken, ref, n)
	}
	return nil
}

// End closes the open turn, adding ref to it if not empty. The closed turn
// is durable (fsynced) when End returns.
func (s *Store) End(ref string) (ckpt.Turn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ckpt.Turn{}, ErrClosed
	}
	if s.cur == nil {
		return ckpt.Turn{}, ErrNoOpenTurn
	}
	if ref != "" {
		if err := s.checkRef(ref, s.cur.Num); err != nil {
			return ckpt.Turn{}, err
		}
	}
	b := s.db.NewBatch()
	defer b.Close()
	t := *s.cur
	if ref != "" && !contains(t.Refs, ref) {
		t.Refs = append(t.Refs, ref)
		b.Set(refKey(ref), turnKey(t.Num)[1:], nil)
	}
	s.closeTurn(b, &t)
	if err := s.commit(b, pebble.Sync); err != nil {
		s.lastErr, s.lastErrAt = err, time.Now().UTC()
		return ckpt.Turn{}, err
	}
	crashpoint.Hit("turn.committed")
	// Closed from here on, whether or not the fsync works (as in Begin).
	s.cur = nil
	s.resetTouched()
	s.programs = map[string]bool{}
	if s.keptInTurn.Swap(false) {
		s.signalGrowth()
	}
	if err := s.rotateSyncWAL(); err != nil {
		err = fmt.Errorf("versionstore: turn %d closed, but the log could not be synced to disk: %w", t.Num, err)
		s.lastErr, s.lastErrAt = err, time.Now().UTC()
		return t, err
	}
	return t, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Current returns the open turn, if any.
func (s *Store) Current() (ckpt.Turn, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == nil {
		return ckpt.Turn{}, false
	}
	t := *s.cur
	t.LastSeq = s.nextSeq - 1
	return t, true
}

// Events returns how many events were ever recorded (the sequence number
// the next one gets): it changes with every record.
func (s *Store) Events() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.nextSeq
}

// Latest returns the highest turn number (0 when only turn 0 exists).
func (s *Store) Latest() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.latest
}

// Turn returns turn n, with its Prompt; the open turn as it is now (as
// Current).
func (s *Store) Turn(n uint64) (ckpt.Turn, error) {
	t, err := s.turnRecord(n)
	if err != nil {
		return t, err
	}
	return s.withPrompt(t)
}

// turnRecord is Turn without the Prompt. A turn forgotten by a merge
// (merge.go) is ErrForgotten.
func (s *Store) turnRecord(n uint64) (ckpt.Turn, error) {
	if cur, ok := s.Current(); ok && cur.Num == n {
		return cur, nil
	}
	t, err := s.storedTurn(n)
	if errors.Is(err, ErrTurnNotFound) && n <= s.Latest() {
		if _, ok, merr := s.mergedInto(n); merr == nil && ok {
			return t, s.forgottenErr(n)
		}
	}
	return t, err
}

// storedTurn reads turn n's record. That of the open turn lags behind
// (its LastSeq and Programs are kept in memory until it closes).
func (s *Store) storedTurn(n uint64) (ckpt.Turn, error) {
	var t ckpt.Turn
	v, closer, err := s.db.Get(turnKey(n))
	if err == pebble.ErrNotFound {
		return t, fmt.Errorf("%w: %d", ErrTurnNotFound, n)
	}
	if err != nil {
		return t, fmt.Errorf("versionstore: %w", err)
	}
	defer closer.Close()
	if err := bytejson.Unmarshal(v, &t); err != nil {
		return t, fmt.Errorf("%w: turn %d: %v", ErrCorrupt, n, err)
	}
	return t, nil
}

// Turns returns up to limit turns (all if limit <= 0), newest first,
// without their Prompts.
func (s *Store) Turns(limit int) ([]ckpt.Turn, error) {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixTurn}, UpperBound: upper(prefixTurn)})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []ckpt.Turn
	for ok := it.Last(); ok && (limit <= 0 || len(out) < limit); ok = it.Prev() {
		var t ckpt.Turn
		if err := bytejson.Unmarshal(it.Value(), &t); err != nil {
			return nil, fmt.Errorf("%w: turn: %v", ErrCorrupt, err)
		}
		if t.Open {
			if cur, ok := s.Current(); ok && cur.Num == t.Num {
				t = cur
			}
		}
		out = append(out, t)
	}
	return out, it.Error()
}

// SetStats stores the statistics of turn n, counted when Merges was
// merges. Those of a turn at or before history's start are not stored:
// its own changes are forgotten (a count made before the forget would be
// stale); nor are they if a merge came since. The check is made under the
// lock a merge commits under, so a merge between a caller's own check and
// this call cannot get its merged turn the stats counted before it
// (changes that may cancel out in the merge, counted as files changed:
// what undo undoes is found from them).
func (s *Store) SetStats(n uint64, st ckpt.Stats, merges uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.start.Turn > 0 && n <= s.start.Turn || s.merges.Load() != merges {
		return nil
	}
	t, err := s.storedTurn(n)
	if err != nil {
		return err
	}
	if t.Open {
		return fmt.Errorf("versionstore: turn %d is still open", n)
	}
	t.Stats = &st
	b := s.db.NewBatch()
	defer b.Close()
	putJSON(b, turnKey(n), t)
	return s.commit(b, pebble.NoSync)
}

// NamesStep reports whether spec names a step ("3.1"), which Resolve
// turns into the whole turn when that turn has one step only: commands
// that take whole turns refuse such a spec by its form.
func NamesStep(spec string) bool {
	return !strings.HasPrefix(spec, "ref:") && strings.Contains(spec, ".")
}

// Resolve turns a TURN argument ("3", "0", "ref:ID") into a turn number,
// and a step of one ("3.2": steps.go) into its point.
// Its errors are for people and name what is accepted and the turns that
// exist. Each is ErrBadTurn (the argument is wrong, whoever gave it); one
// that names no turn there is is ErrTurnNotFound too.
func (s *Store) Resolve(spec string) (uint64, error) {
	start := s.startTurn()
	turns := fmt.Sprintf("turns are %d-%d", start, s.Latest())
	switch spec {
	case "":
		return 0, detailf(ErrBadTurn, "missing turn: use a number, 0, or ref:ID (%s)", turns)
	case "ref:":
		return 0, detailf(ErrBadTurn, "%q names no ref: use ref:ID (%s)", spec, turns)
	}
	if ref, ok := strings.CutPrefix(spec, "ref:"); ok {
		v, closer, err := s.db.Get(refKey(ref))
		if err == pebble.ErrNotFound {
			return 0, detailf(ErrBadTurn, "no turn has ref %q (%s)", ref, turns).also(ErrTurnNotFound)
		}
		if err != nil {
			return 0, fmt.Errorf("versionstore: %w", err)
		}
		defer closer.Close()
		n, err := decodeU64Key(prefixTurn, append([]byte{prefixTurn}, v...))
		if err == nil && n < start {
			return 0, s.forgottenErr(n)
		}
		return n, err
	}
	if t, k, ok := strings.Cut(spec, "."); ok {
		n, err := s.Resolve(t)
		if err != nil {
			return 0, err
		}
		return s.resolveStep(n, spec, k)
	}
	n, err := strconv.ParseUint(spec, 10, 64)
	if err != nil || spec[0] == '+' {
		return 0, detailf(ErrBadTurn, "%q is not a turn: use a number, 0, or ref:ID (%s)", spec, turns)
	}
	if n > s.Latest() {
		return 0, detailf(ErrBadTurn, "no turn %d (%s)", n, turns).also(ErrTurnNotFound)
	}
	if n < start {
		return 0, s.forgottenErr(n)
	}
	if _, ok, err := s.mergedInto(n); err != nil {
		return 0, err
	} else if ok {
		return 0, s.forgottenErr(n)
	}
	return n, nil
}
