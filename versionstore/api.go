package versionstore

import (
	"errors"
	"fmt"

	"ckptfs/internal/fsstate"
	"ckptfs/internal/history"
)

// Re-exported vocabulary, so callers of the store need only this package.
type (
	State   = fsstate.State
	Type    = fsstate.Type
	Capture = fsstate.Capture
	Program = fsstate.Program
	Tree    = fsstate.Tree
)

// Sentinel errors. Wrapped errors keep these as their cause (errors.Is).
var (
	ErrTurnNotFound = errors.New("versionstore: turn not found")
	ErrBadTurn      = errors.New("versionstore: not a turn") // a TURN argument that is neither a number nor ref:ID
	ErrBadRef       = errors.New("versionstore: bad ref")    // a ref with a NUL or newline, or too long
	ErrNoOpenTurn   = errors.New("versionstore: no turn is open")
	ErrRefTaken     = errors.New("versionstore: ref already names another turn")
	ErrStoreFull    = errors.New("versionstore: store full")
	ErrNoSpace      = errors.New("versionstore: not enough space") // a rewind's files would not fit
	// ErrNotCaptured: the bytes asked for were never recorded (the file
	// changed while the project was not mounted).
	ErrNotCaptured = errors.New("versionstore: never captured")
	ErrCorrupt     = errors.New("versionstore: corrupt")
	ErrNewerFormat = errors.New("versionstore: store was written by a newer ckptfs")
	ErrLocked      = errors.New("versionstore: store is in use by another process")
	ErrBadPath     = errors.New("versionstore: path outside the tree")
	ErrClosed      = errors.New("versionstore: store is closed")
)

// detailError is an error whose message is its detail alone, written for
// the person who gave the argument, and whose cause is a sentinel.
type detailError struct {
	cause error
	msg   string
}

func (e *detailError) Error() string { return e.msg }
func (e *detailError) Unwrap() error { return e.cause }

func detailf(cause error, format string, args ...any) error {
	return &detailError{cause, fmt.Sprintf(format, args...)}
}

// The vocabulary shared with turnctl's protocol lives in internal/history
// (which does not import Pebble); these are its names here.
type (
	Kind         = history.Kind
	Turn         = history.Turn
	Stats        = history.Stats
	ChangeKind   = history.ChangeKind
	Health       = history.Health
	VerifyReport = history.VerifyReport
)

// Kinds of turn.
const (
	KindInitial = history.KindInitial // turn 0
	KindAgent   = history.KindAgent   // opened by `turnctl begin`
	KindManual  = history.KindManual  // changes made while no turn was open
	KindOffline = history.KindOffline // changes made while the project was not mounted
	KindRewind  = history.KindRewind  // a rewind or restore
)

// How one path differs between two states.
const (
	Added    = history.Added
	Modified = history.Modified // bytes (and maybe mode) changed
	Deleted  = history.Deleted
	Renamed  = history.Renamed  // From holds the old path
	ModeOnly = history.ModeOnly // only mode/owner changed
	TypeChg  = history.TypeChg  // e.g. file became symlink
	Relinked = history.Relinked // shares its inode with other paths than before
)

// Change is one path that differs between two states.
type Change struct {
	Path   string     `json:"path"`
	From   string     `json:"from,omitempty"` // Renamed only
	Kind   ChangeKind `json:"kind"`
	Before State      `json:"-"`
	After  State      `json:"-"`

	before, after resolved // where the two versions' bytes are (OpenChange)
}

// Now stands for the live tree wherever a turn number is expected as the
// second state of a comparison.
const Now = ^uint64(0)
