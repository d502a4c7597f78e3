package versionstore

import (
	"errors"
	"time"

	"ckptfs/internal/fsstate"
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
	ErrNoOpenTurn   = errors.New("versionstore: no turn is open")
	ErrRefTaken     = errors.New("versionstore: ref already names another turn")
	ErrStoreFull    = errors.New("versionstore: store full")
	ErrCorrupt      = errors.New("versionstore: corrupt")
	ErrNewerFormat  = errors.New("versionstore: store was written by a newer ckptfs")
	ErrLocked       = errors.New("versionstore: store is in use by another process")
	ErrBadPath      = errors.New("versionstore: path outside the tree")
	ErrClosed       = errors.New("versionstore: store is closed")
)

// Kind is how a turn came to be.
type Kind string

const (
	KindAgent  Kind = "agent"  // opened by `turnctl begin`
	KindManual Kind = "manual" // changes made while no turn was open
	KindRewind Kind = "rewind" // a rewind or restore
)

// Turn is one numbered group of changes. Turn 0 is the tree as it was when
// history began; it has no changes of its own.
type Turn struct {
	Num      uint64    `json:"num"`
	Kind     Kind      `json:"kind"`
	Label    string    `json:"label,omitempty"`
	Refs     []string  `json:"refs,omitempty"`
	Start    time.Time `json:"start"`
	End      time.Time `json:"end,omitempty"` // zero while open
	Open     bool      `json:"open,omitempty"`
	Programs []string  `json:"programs,omitempty"` // command names that wrote, sorted
	// Target is the turn a rewind turn rewound to (KindRewind only).
	Target *uint64 `json:"target,omitempty"`
	// FirstSeq..LastSeq is the turn's range in the change log (FirstSeq >
	// LastSeq when it recorded nothing).
	FirstSeq uint64 `json:"first_seq"`
	LastSeq  uint64 `json:"last_seq"`
	// Stats is filled in by SetStats (computed by the caller, which has the
	// diff machinery); nil until then.
	Stats *Stats `json:"stats,omitempty"`
}

// Stats summarises what a turn changed.
type Stats struct {
	Files        int   `json:"files"`
	Added        int   `json:"added"`
	Modified     int   `json:"modified"`
	Deleted      int   `json:"deleted"`
	Renamed      int   `json:"renamed"`
	ModeChanged  int   `json:"mode_changed"`
	LinesAdded   int   `json:"lines_added"`
	LinesDeleted int   `json:"lines_deleted"`
	Bytes        int64 `json:"bytes"` // bytes of the changed files after the turn
}

// Empty reports whether the turn recorded no change.
func (t Turn) Empty() bool { return t.FirstSeq > t.LastSeq }

// ChangeKind classifies how one path differs between two states.
type ChangeKind string

const (
	Added    ChangeKind = "added"
	Modified ChangeKind = "modified" // bytes (and maybe mode) changed
	Deleted  ChangeKind = "deleted"
	Renamed  ChangeKind = "renamed" // From holds the old path
	ModeOnly ChangeKind = "mode"    // only mode/owner changed
	TypeChg  ChangeKind = "type"    // e.g. file became symlink
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
