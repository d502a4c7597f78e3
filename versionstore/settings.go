package versionstore

import (
	"fmt"

	"ckptfs/internal/bytejson"

	"github.com/cockroachdb/pebble/v2"
)

// settings.go: what a mount keeps in the store for the next one, so that a
// remount (or an offline command) needs no flags repeated: the exclude
// patterns (keyExcludes), and which project the history is of
// (keyProject). The retention policy is kept the same way (policy.go).

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
	if err := bytejson.Unmarshal(v, &pats); err != nil {
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

// Project is the project directory a store holds the history of: its
// path when it was last mounted and its identity (device and inode
// number), which follows it through a rename.
type Project struct {
	Path string `json:"path"`
	Dev  uint64 `json:"dev"`
	Ino  uint64 `json:"ino"`
}

// Project returns the project the store was last mounted over (false:
// none recorded, a new store or one older than the record).
func (s *Store) Project() (Project, bool, error) {
	var p Project
	v, closer, err := s.db.Get(keyProject)
	if err == pebble.ErrNotFound {
		return p, false, nil
	}
	if err != nil {
		return p, false, fmt.Errorf("versionstore: %w", err)
	}
	defer closer.Close()
	if err := bytejson.Unmarshal(v, &p); err != nil {
		return p, false, fmt.Errorf("%w: project: %v", ErrCorrupt, err)
	}
	return p, true, nil
}

// SetProject records p as the store's project.
func (s *Store) SetProject(p Project) error {
	b := s.db.NewBatch()
	defer b.Close()
	putJSON(b, keyProject, p)
	return s.commit(b, pebble.Sync)
}
