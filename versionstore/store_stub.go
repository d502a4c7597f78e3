package versionstore

import (
	"errors"
	"io"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TEMPORARY stubs: the signatures are the contract; bodies are being written.

var errTODO = errors.New("versionstore: not implemented yet")

// Options configure Open.
type Options struct {
	// FS is the filesystem Pebble and the attic live on; nil means the real
	// one. Tests pass vfs.NewMem() or a crashable filesystem.
	FS vfs.FS
}

// Store is the history of one tree. Its methods are safe for concurrent use.
type Store struct{}

// Open opens (creating if needed) the store in dir, takes its lock, and
// checks its format version.
func Open(dir string, opts Options) (*Store, error) { return nil, errTODO }

// NewTestStore returns a store on an in-memory filesystem, closed when t ends.
func NewTestStore(t testing.TB) *Store { t.Fatal(errTODO); return nil }

func (s *Store) Close() error                                     { return errTODO }
func (s *Store) Dir() string                                      { return "" }
func (s *Store) DiskUsage() (int64, error)                        { return 0, errTODO }
func (s *Store) Begin(kind Kind, label, ref string) (Turn, error) { return Turn{}, errTODO }
func (s *Store) End(ref string) (Turn, error)                     { return Turn{}, errTODO }
func (s *Store) Current() (Turn, bool)                            { return Turn{}, false }
func (s *Store) Turn(n uint64) (Turn, error)                      { return Turn{}, errTODO }
func (s *Store) Turns(limit int) ([]Turn, error)                  { return nil, errTODO }
func (s *Store) Latest() uint64                                   { return 0 }
func (s *Store) Resolve(spec string) (uint64, error)              { return 0, errTODO }
func (s *Store) NeedsCapture(path string, metaOnly bool) bool     { return true }
func (s *Store) Record(c Capture, who Program) error              { return errTODO }

// RecordRename records a rename (or, with exchange, a RENAME_EXCHANGE) before
// it is carried out. The caller must first Record the prior state of `to`
// if something is there (and it is not an exchange). After the syscall the
// caller calls commit(true) if it succeeded, commit(false) if it failed, which
// drops the record again.
func (s *Store) RecordRename(from, to string, exchange bool, who Program) (commit func(ok bool), err error) {
	return nil, errTODO
}

// SetStats stores the statistics of a closed turn.
func (s *Store) SetStats(n uint64, st Stats) error                       { return errTODO }
func (s *Store) StateAt(n uint64, path string, live Tree) (State, error) { return State{}, errTODO }
func (s *Store) OpenAt(n uint64, path string, live Tree) (io.ReadCloser, State, error) {
	return nil, State{}, errTODO
}
func (s *Store) Changes(from, to uint64, live Tree) ([]Change, error) { return nil, errTODO }
func (s *Store) Rewind(target uint64, live Tree, opts RewindOptions) (RewindResult, error) {
	return RewindResult{}, errTODO
}
func (s *Store) Recover(live Tree) (bool, error) { return false, errTODO }
func (s *Store) Verify() (VerifyReport, error)   { return VerifyReport{}, errTODO }

// RewindOptions modify Rewind.
type RewindOptions struct {
	DryRun bool     // compute and return the changes; touch nothing
	Paths  []string // restore: only these paths (and everything below them)
	Label  string   // label of the rewind turn
	Who    Program
}

// RewindResult says what a rewind did (or would do, with DryRun).
type RewindResult struct {
	Turn    Turn     // the new turn of kind rewind (zero with DryRun or no change)
	Changes []Change // per path: Before = now, After = the target state
}

// VerifyReport is the outcome of checking every stored chunk.
type VerifyReport struct {
	Chunks  int      `json:"chunks"`
	Bytes   int64    `json:"bytes"`
	Corrupt []string `json:"corrupt,omitempty"` // what is damaged, one line each
}
