package versionstore

import (
	"encoding/json"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// settings.go: what a mount keeps in the store for the next one, so that a
// remount (or an offline command) needs no flags repeated: the exclude
// patterns (keyExcludes). The retention policy is kept the same way
// (policy.go).

// Excludes returns the exclude patterns the last mount that gave any
// kept, and whether any were kept.
func (s *Store) Excludes() ([]string, bool, error) {
	v, closer, err := s.db.Get(keyExcludes)
	if err == pebble.ErrNotFound {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("versionstore: %w", err)
	}
	defer closer.Close()
	var pats []string
	if err := json.Unmarshal(v, &pats); err != nil {
		return nil, false, fmt.Errorf("%w: excludes: %v", ErrCorrupt, err)
	}
	return pats, true, nil
}

// SetExcludes keeps pats (none: nothing excluded) for the next mounts.
func (s *Store) SetExcludes(pats []string) error {
	if pats == nil {
		pats = []string{}
	}
	b := s.db.NewBatch()
	defer b.Close()
	putJSON(b, keyExcludes, pats)
	return s.commit(b, pebble.Sync)
}
