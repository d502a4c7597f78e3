package versionstore

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"ckptfs/internal/bytejson"
	"ckptfs/internal/ckpt"
)

// pins.go: pinned turns. A pinned turn always rewinds exactly, whatever
// the policy: Forget refuses it, and the policy's trimming stops at it
// (it may become the start of history: its end state is what is kept).
// A pin is one key, pinKey(turn), written with a synced commit; pins and
// moves of the history start are ordered by histMu, so that no pin names
// a turn being forgotten.

// Pin pins turn n (a kept turn; the open one too) with an optional note.
// Pinning a pinned turn replaces its note.
func (s *Store) Pin(n uint64, note string) (ckpt.Pin, error) {
	s.histMu.Lock()
	defer s.histMu.Unlock()
	defer s.histGen.Add(1)
	if n < s.startTurn() {
		return ckpt.Pin{}, s.forgottenErr(n)
	}
	if n > s.Latest() {
		return ckpt.Pin{}, detailf(ErrTurnNotFound, "no turn %d (turns are %d-%d)", n, s.startTurn(), s.Latest())
	}
	if _, err := s.turnRecord(n); errors.Is(err, ErrTurnNotFound) {
		return ckpt.Pin{}, s.forgottenErr(n)
	} else if err != nil {
		return ckpt.Pin{}, err
	}
	p := ckpt.Pin{Turn: n, Note: note, At: time.Now().UTC()}
	b := s.db.NewBatch()
	defer b.Close()
	putJSON(b, pinKey(n), p)
	return p, s.commit(b, pebble.Sync)
}

// Unpin removes the pin of turn n.
func (s *Store) Unpin(n uint64) error {
	s.histMu.Lock()
	defer s.histMu.Unlock()
	defer s.histGen.Add(1)
	if _, closer, err := s.db.Get(pinKey(n)); err == pebble.ErrNotFound {
		return detailf(ErrNotPinned, "turn %d is not pinned", n)
	} else if err != nil {
		return fmt.Errorf("versionstore: %w", err)
	} else {
		closer.Close()
	}
	return s.db.Delete(pinKey(n), pebble.Sync)
}

// Pins lists the pinned turns, oldest first.
func (s *Store) Pins() ([]ckpt.Pin, error) {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixPin}, UpperBound: upper(prefixPin)})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []ckpt.Pin
	for ok := it.First(); ok; ok = it.Next() {
		var p ckpt.Pin
		if err := bytejson.Unmarshal(it.Value(), &p); err != nil {
			return nil, fmt.Errorf("%w: pin: %v", ErrCorrupt, err)
		}
		out = append(out, p)
	}
	return out, it.Error()
}

// pinned returns the pinned turn numbers as a set, with the held ones.
func (s *Store) pinned() (map[uint64]bool, error) {
	s.histMu.Lock()
	defer s.histMu.Unlock()
	return s.pinnedLocked()
}

// pinnedLocked is pinned with histMu held.
func (s *Store) pinnedLocked() (map[uint64]bool, error) {
	pins, err := s.Pins()
	if err != nil {
		return nil, err
	}
	m := map[uint64]bool{}
	for _, p := range pins {
		m[p.Turn] = true
	}
	for n := range s.holds {
		m[n] = true
	}
	return m, nil
}

// Hold keeps turn n from being forgotten, as a pin does but in memory
// only, until release is called: a view of it is mounted (ckptfs mount
// --at), whose files the store may have to read at any time.
func (s *Store) Hold(n uint64) (release func(), err error) {
	s.histMu.Lock()
	defer s.histMu.Unlock()
	if n < s.startTurn() {
		return nil, s.forgottenErr(n)
	}
	if n > s.Latest() {
		return nil, detailf(ErrTurnNotFound, "no turn %d (turns are %d-%d)", n, s.startTurn(), s.Latest())
	}
	if s.holds == nil {
		s.holds = map[uint64]int{}
	}
	s.holds[n]++
	var once sync.Once
	return func() {
		once.Do(func() {
			s.histMu.Lock()
			defer s.histMu.Unlock()
			if s.holds[n]--; s.holds[n] <= 0 {
				delete(s.holds, n)
			}
		})
	}, nil
}
