package versionstore

import (
	"errors"
	"fmt"

	"ckptfs/internal/ckpt"
)

// Sentinel errors. Wrapped errors keep these as their cause (errors.Is).
var (
	ErrTurnNotFound = errors.New("versionstore: turn not found")
	ErrBadTurn      = errors.New("versionstore: not a turn") // a TURN argument that is neither a number nor ref:ID
	ErrBadRef       = errors.New("versionstore: bad ref")    // a ref with a NUL or newline, or too long
	ErrNoOpenTurn   = errors.New("versionstore: no turn is open")
	ErrRefTaken     = errors.New("versionstore: ref already names another turn")
	ErrNoSpace      = errors.New("versionstore: not enough space") // a rewind's files would not fit
	// ErrDenied: a rewind, restore or revert would make a change the
	// permissions it runs with do not allow (rewind_perms.go).
	ErrDenied = errors.New("versionstore: not permitted")
	// ErrNotCaptured: the bytes asked for were never recorded (the file
	// changed while the project was not mounted).
	ErrNotCaptured = errors.New("versionstore: never captured")
	ErrCorrupt     = errors.New("versionstore: corrupt")
	ErrNewerFormat = errors.New("versionstore: store was written by a newer ckptfs")
	ErrLocked      = errors.New("versionstore: store is in use by another process")
	ErrBadPath     = errors.New("versionstore: path outside the tree")
	ErrClosed      = errors.New("versionstore: store is closed")
	// Bounded history (history.go, pins.go, gc.go).
	ErrForgotten = errors.New("versionstore: turn forgotten") // below the start of history
	ErrPinned    = errors.New("versionstore: turn is pinned")
	ErrNotPinned = errors.New("versionstore: turn is not pinned")
	ErrOpenTurn  = errors.New("versionstore: turn is open")
	ErrBusy      = errors.New("versionstore: busy") // a rewind, gc or forget runs
	// ErrNotOnLine: a revert of a turn that a later whole-tree rewind
	// went back past, so that nothing of it is in the tree now.
	ErrNotOnLine = errors.New("versionstore: turn is not on the current line")
)

// detailError is an error whose message is its detail alone, written for
// the person who gave the argument, and whose causes are sentinels.
type detailError struct {
	causes []error
	msg    string
}

func (e *detailError) Error() string   { return e.msg }
func (e *detailError) Unwrap() []error { return e.causes }

// also adds a cause.
func (e *detailError) also(cause error) *detailError {
	e.causes = append(e.causes, cause)
	return e
}

func detailf(cause error, format string, args ...any) *detailError {
	return &detailError{[]error{cause}, fmt.Sprintf(format, args...)}
}

// Change is one path that differs between two states.
type Change struct {
	Path   string          `json:"path"`
	From   string          `json:"from,omitempty"` // Renamed only
	Kind   ckpt.ChangeKind `json:"kind"`
	Before ckpt.State      `json:"-"`
	After  ckpt.State      `json:"-"`

	before, after resolved // where the two versions' bytes are (OpenChange)
	// parted: the later side's bytes were never captured, and names that
	// share the path's inode at the earlier end were not names of its
	// inode at the later end (linkChanges). A rewind leaves the path's
	// bytes as they are, but parts it from those names.
	parted bool
}

// Now stands for the live tree wherever a turn number is expected as the
// second state of a comparison.
const Now = ^uint64(0)
