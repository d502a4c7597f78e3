package turnctl

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"time"

	"ckptfs/internal/ckpt"
)

// MaxRequestBytes bounds a request body (and the error body a client reads).
const MaxRequestBytes = 1 << 20

// Wire types: the JSON bodies of the control protocol (see the package doc
// for the endpoints). Every request is a JSON object; unknown fields are
// rejected, missing fields take their zero value.

// BeginRequest opens a new turn (POST /v1/begin).
type BeginRequest struct {
	// Label is the text the turn is about, of any number of lines (an
	// agent's whole prompt), at most ckpt.MaxText bytes: the turn's Label
	// is its first line, and it is kept whole as the turn's Prompt.
	Label string `json:"label,omitempty"`
	Ref   string `json:"ref,omitempty"`
	// Run, when set, is the id of the turnctl run that begins (unique to
	// the invocation; its EndRequest gives it again): the turn it opens
	// is held by that run while its command runs.
	Run string `json:"run,omitempty"`
	// Join (with Run) does not close the open turn: when runs still
	// running hold it, the run joins it (its label becomes the labels of
	// all, joined by " & "; BeginReply.Joined), and the turn closes when
	// the last of them ends; when a begin opened it (an agent's turn, a
	// script's), the step so far ends there and the run becomes a step
	// of it (BeginReply.InTurn: no turn is opened, the run ends with a
	// StepRequest, not an EndRequest). Otherwise, as without Join.
	Join bool `json:"join,omitempty"`
}

// BeginReply names the new turn and the turn it closed, if one was open.
// For a Run with Join: Joined, the open turn it joined; InTurn, the open
// turn of a begin it runs inside (Turn is that turn; nothing closed).
type BeginReply struct {
	Turn   ckpt.Turn  `json:"turn"`
	Closed *ckpt.Turn `json:"closed,omitempty"`
	Joined bool       `json:"joined,omitempty"`
	InTurn bool       `json:"in_turn,omitempty"`
}

// EndRequest closes the open turn (POST /v1/end).
type EndRequest struct {
	Ref string `json:"ref,omitempty"`
	// IfOpenedBy, when set, closes the open turn only if it was opened
	// for it: OpenedBy(turn, IfOpenedBy) (an agent's session id, Codex's
	// turn_id). Otherwise nothing changes and End fails with
	// CodeConflict: an agent's end must not close another session's
	// turn, nor a manual turn of a person's edits.
	IfOpenedBy string `json:"if_opened_by,omitempty"`
	// Run, when set, is the run whose command ended (BeginRequest.Run):
	// the open turn closes only if that run holds it and no other run
	// still running does (then EndReply.Running says how many, and the
	// turn stays open). If a begin closed the run's turn while it ran,
	// nothing changes and End fails with CodeConflict.
	Run string `json:"run,omitempty"`
}

// OpenedBy reports whether turn t was opened for key (an agent's session
// id, Codex's turn_id): it is an agent turn whose first ref, the one its
// begin gave, is key or starts with key followed by ":" or "."
// (SESSION:DIGEST, and a suffix hook-event adds to a repeated ref).
func OpenedBy(t ckpt.Turn, key string) bool {
	if key == "" || t.Kind != ckpt.KindAgent || len(t.Refs) == 0 {
		return false
	}
	r := t.Refs[0]
	return r == key || len(r) > len(key) && r[:len(key)] == key && (r[len(key)] == ':' || r[len(key)] == '.')
}

// NotOpenedBy says why the open turn t was not opened for key (OpenedBy
// is false), in a phrase: "turn 4 is another session's (ref B:1a2b3c4d)".
func NotOpenedBy(t ckpt.Turn, key string) string {
	switch {
	case t.Kind == ckpt.KindManual:
		return fmt.Sprintf("the open turn %d is a manual turn (changes made while no agent's turn was open), not %s's", t.Num, key)
	case len(t.Refs) == 0:
		return fmt.Sprintf("the open turn %d was opened without a ref, not by %s", t.Num, key)
	}
	return fmt.Sprintf("the open turn %d is another session's (ref %s), not %s's", t.Num, t.Refs[0], key)
}

// EndReply is the closed turn (with its Stats) and a one-line summary.
type EndReply struct {
	Turn    ckpt.Turn `json:"turn"`
	Summary string    `json:"summary"`
	// LinesPending: the turn changed so many paths that end counted them
	// but not their lines (Stats.LinesSkipped; Stats.Lines* are 0).
	LinesPending bool `json:"lines_pending,omitempty"`
	// Running: an EndRequest.Run left the turn open, for so many other
	// runs still running in it (Turn is the open turn).
	Running int `json:"running,omitempty"`
}

// StepRequest ends the open turn's current step (POST /v1/step): the
// changes one tool call made. Tool names the tool, Label says more.
type StepRequest struct {
	Tool  string `json:"tool,omitempty"`
	Label string `json:"label,omitempty"`
	// IfOpenedBy, when set, ends a step only in a turn opened for it
	// (OpenedBy, as EndRequest.IfOpenedBy): an agent's tool call ends a
	// step of its own session's turn, not of another session's or of a
	// manual turn. Otherwise nothing changes and Step fails with
	// CodeConflict.
	IfOpenedBy string `json:"if_opened_by,omitempty"`
	// Turn, when not 0, ends a step only if turn Turn is the open one
	// (else CodeConflict): a turnctl run inside a turn that closed while
	// its command ran records no step in the next.
	Turn uint64 `json:"turn,omitempty"`
	// Run, when set, is a run inside a begin's turn whose command ended
	// (BeginRequest.Run, BeginReply.InTurn): while other runs inside the
	// turn still run, no step ends (StepReply.Running says how many);
	// the last to end ends the step of them all, its label theirs joined
	// by " & ".
	Run string `json:"run,omitempty"`
}

// StepReply is the step ended; Step is nil when it recorded nothing (no
// step is kept then, and numbering goes on from the last kept one), or
// when other runs still running hold the step open (Running).
type StepReply struct {
	Step    *ckpt.Step `json:"step"`
	Running int        `json:"running,omitempty"`
}

// StatusRequest asks for the open turn (POST /v1/status, also GET).
type StatusRequest struct {
	// Brief asks for the latest turn and the open one only, without its
	// Changes and Stats, which cost O(the open turn's changes), nor the
	// store's size and budget (Store.StoreBytes, Store.Budget: a walk of
	// the store's directory): what a poller asks (turnctl ui, twice a
	// second).
	Brief bool `json:"brief,omitempty"`
}

// StatusReply is the open turn, if any, and what it changed so far.
type StatusReply struct {
	Open   bool       `json:"open"`
	Turn   *ckpt.Turn `json:"turn,omitempty"`
	Latest uint64     `json:"latest"` // highest turn number
	// History changes when a forget, merge, pin or unpin changed the
	// kept turns (within one daemon's life; compare for equality only).
	History uint64       `json:"history,omitempty"`
	Changes []FileChange `json:"changes"`
	Stats   ckpt.Stats   `json:"stats"`
	// Store: whether the store accepts captures (full: writes fail with
	// ENOSPC) and the last store error.
	Store ckpt.Health `json:"store"`
	// ChangesError: the open turn's changes could not be listed (a
	// corrupt stored version, say); the rest of the reply still holds.
	ChangesError string `json:"changes_error,omitempty"`
	// Runs are the turnctl runs whose commands are running in the open
	// turn, oldest first.
	Runs []RunStatus `json:"runs,omitempty"`
}

// RunStatus is a turnctl run whose command is running in the open turn.
type RunStatus struct {
	PID   int32  `json:"pid,omitempty"` // the turnctl run process; 0: not known
	Label string `json:"label"`         // its label's first line (the command)
	// Step: it runs inside a turn it did not open (an agent's prompt),
	// as a step of it; else it opened or joined the turn, and the last
	// such run to end closes it.
	Step bool `json:"step,omitempty"`
}

// LogRequest lists turns newest first (POST /v1/log, also GET).
type LogRequest struct {
	N int `json:"n,omitempty"` // at most N turns; 0: all
	// Paths (root-relative; "" the whole tree) limit the log to the turns
	// that changed one of them or anything below them; N then counts
	// those turns.
	Paths []string `json:"paths,omitempty"`
	// Pickaxe, if not "", keeps the turns that changed how many times it
	// occurs in some regular file's bytes (git log -S): counted before
	// and after each change the turn made (at or below Paths).
	Pickaxe string `json:"pickaxe,omitempty"`
	// Grep, if not "", is a Go regexp (package regexp) a turn's label or
	// whole prompt must match, in multi-line mode (as git log --grep): ^
	// and $ match at the start and end of each line.
	Grep string `json:"grep,omitempty"`
	// Programs, if not empty, keeps the turns in which one of these
	// command names wrote (Turn.Programs).
	Programs []string `json:"programs,omitempty"`
	// Follow, with one path in Paths, follows it back through renames:
	// past the turn that renamed it (or a directory above it) there, the
	// older turns are those that changed it under the name it had.
	Follow bool `json:"follow,omitempty"`
}

// Filtered reports whether r keeps only some turns.
func (r LogRequest) Filtered() bool {
	return len(r.Paths) > 0 || r.Pickaxe != "" || r.Grep != "" || len(r.Programs) > 0
}

// LogReply lists turns newest first, each with its Stats. With
// LogRequest.Paths, each turn's Stats count only its changes at or below
// those paths (turn 0, which changes nothing, is never listed then). With
// a filter, N counts the turns kept.
type LogReply struct {
	Turns []ckpt.Turn `json:"turns"`
	// Start says where history starts when its oldest turns were
	// forgotten (nil: at turn 0), Pins which turns are pinned.
	Start *ckpt.HistoryStart `json:"start,omitempty"`
	Pins  []ckpt.Pin         `json:"pins,omitempty"`
}

// ShowRequest asks what one turn changed (POST /v1/show).
type ShowRequest struct {
	Turn  string   `json:"turn"`            // "3", "0", "ref:ID"
	Patch bool     `json:"patch,omitempty"` // include unified diffs
	Paths []string `json:"paths,omitempty"` // only the changes at or below these paths, root-relative
}

// ShowReply is one turn and its changes. With ShowRequest.Paths, Changes
// and Stats hold only the changes at or below those paths; Turn.Stats is
// still the whole turn's, when it is known.
type ShowReply struct {
	Turn ckpt.Turn `json:"turn"`
	// Step is the step shown ("show 3.2"); nil for a whole turn.
	Step *ckpt.Step `json:"step,omitempty"`
	// Steps are the turn's steps (one, the turn itself, when no step
	// boundary was marked in it).
	Steps   []ckpt.Step  `json:"steps"`
	Changes []FileChange `json:"changes"`
	Stats   ckpt.Stats   `json:"stats"`
}

// DiffRequest compares two states (POST /v1/diff).
type DiffRequest struct {
	From  string   `json:"from"`            // TURN
	To    string   `json:"to,omitempty"`    // TURN; "" or "now": the live tree
	Paths []string `json:"paths,omitempty"` // limit to these paths (and below), root-relative
}

// DiffReply lists what differs between the two states, with patches.
type DiffReply struct {
	From uint64  `json:"from"`
	To   *uint64 `json:"to,omitempty"` // nil: the live tree
	// FromStep, ToStep: the step of From, To compared (0: the turn's end).
	FromStep int          `json:"from_step,omitempty"`
	ToStep   int          `json:"to_step,omitempty"`
	Changes  []FileChange `json:"changes"`
	Stats    ckpt.Stats   `json:"stats"`
}

// CatRequest asks for a file's bytes at the end of a turn (POST /v1/cat).
// The reply body is the raw bytes, not JSON.
type CatRequest struct {
	Turn string `json:"turn"`
	Path string `json:"path"` // root-relative
}

// CatReply carries the bytes of a file. Body must be closed.
type CatReply struct {
	Turn  uint64        `json:"turn"`
	State FileState     `json:"state"`
	Body  io.ReadCloser `json:"-"`
}

// RewindRequest makes the tree equal its state at the end of a turn
// (POST /v1/rewind).
type RewindRequest struct {
	Turn   string `json:"turn"`
	DryRun bool   `json:"dry_run,omitempty"`
}

// UndoRequest undoes the most recent turn that changed something
// (POST /v1/undo).
type UndoRequest struct {
	DryRun bool `json:"dry_run,omitempty"`
}

// RestoreRequest rewinds only some paths (POST /v1/restore).
type RestoreRequest struct {
	Turn   string   `json:"turn"`
	Paths  []string `json:"paths"` // root-relative; "" is the whole tree
	DryRun bool     `json:"dry_run,omitempty"`
}

// RevertRequest undoes what one past turn changed, keeping the later
// turns' changes (POST /v1/revert). Conflicts: "refuse" (or "") refuses
// the revert on any conflict; "markers" writes text conflicts between
// conflict markers (others still refuse).
type RevertRequest struct {
	Turn      string `json:"turn"`
	DryRun    bool   `json:"dry_run,omitempty"`
	Conflicts string `json:"conflicts,omitempty"`
}

// Conflicts modes of RevertRequest.
const (
	ConflictsRefuse  = "refuse"
	ConflictsMarkers = "markers"
)

// RevertConflict is a path whose changes in the reverted turn were
// changed again later: written with conflict markers (a text file, with
// --conflicts=markers), else the reason the revert refused.
type RevertConflict struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
	Text   bool   `json:"text,omitempty"` // markers can hold it
}

// RewindReply says what a rewind, undo, restore or revert changed (or would
// change, with DryRun): per path, Before is the state now and After the
// target state.
type RewindReply struct {
	Target uint64 `json:"target"`
	// TargetStep: the step of Target rewound to (0: the turn's end);
	// RevertedStep: the step of Reverted reverted (0: the whole turn).
	TargetStep   int          `json:"target_step,omitempty"`
	RevertedStep int          `json:"reverted_step,omitempty"`
	Undone       *uint64      `json:"undone,omitempty"` // undo: the turn it undid
	DryRun       bool         `json:"dry_run,omitempty"`
	Turn         *ckpt.Turn   `json:"turn,omitempty"` // the new rewind turn; nil with DryRun or no change
	Changes      []FileChange `json:"changes"`
	Stats        ckpt.Stats   `json:"stats"`
	// NotRestored are paths left as they were: their bytes at the target
	// were never captured (they changed while the project was not mounted).
	NotRestored []string `json:"not_restored,omitempty"`
	// Left are the directories a rewind, undo, restore or revert left in
	// place though at the target they were not there or not directories:
	// they hold unversioned paths (--exclude, the store of a project
	// inside this one), which it leaves as they are. None of them is in
	// Changes.
	Left []LeftDir `json:"left,omitempty"`
	// SplitLinks: a restore or a revert (an undo made as one too), the
	// paths it gave (with DryRun: would give) an inode apart from names
	// it did not restore or revert, which shared theirs and keep it with
	// their bytes.
	SplitLinks []LinkSplit `json:"split_links,omitempty"`
	// Revert (and an undo made as a revert): the turn it reverted, the
	// paths whose later changes were merged with the revert, the paths
	// written with conflict markers.
	Reverted  *uint64          `json:"reverted,omitempty"`
	Merged    []string         `json:"merged,omitempty"`
	Conflicts []RevertConflict `json:"conflicts,omitempty"`
	// Undo as a revert: the later turns whose changes it kept, and the
	// paths they changed.
	KeptTurns []uint64 `json:"kept_turns,omitempty"`
	Kept      []string `json:"kept,omitempty"`
	// Warning, when not "", says what went wrong once the change was
	// done: its turn closed, but the store's log could not be synced to
	// disk (a power loss may lose its record). The change stands.
	Warning string `json:"warning,omitempty"`
}

// LeftDir is a directory a rewind left in place because it holds
// unversioned paths.
type LeftDir struct {
	Path string `json:"path"`
	// Then is what the path was at the target: "absent" (not there) or
	// its type (FileState's: file, symlink, ...).
	Then string `json:"then"`
	// Unversioned are the first unversioned paths below it (sorted, at
	// most 10), More how many others there are.
	Unversioned []string `json:"unversioned"`
	More        int      `json:"more,omitempty"`
}

// LinkSplit is a restored path split from hard links of it that the
// restore left alone (Names).
type LinkSplit struct {
	Path  string   `json:"path"`
	Names []string `json:"names"`
}

// VerifyRequest checks the store's integrity (POST /v1/verify, also GET).
type VerifyRequest struct{}

// VerifyReply is the store's verify report; OK is false when anything is
// corrupt.
type VerifyReply struct {
	ckpt.VerifyReport
	OK bool `json:"ok"`
}

// ForgetRequest forgets the oldest kept turns (POST /v1/forget): Turns,
// or with Before every kept turn before it.
type ForgetRequest struct {
	Turns  []string `json:"turns,omitempty"`
	Before string   `json:"before,omitempty"`
	// DryRun: say what the forget would do (or refuse as it would), and
	// change nothing.
	DryRun bool `json:"dry_run,omitempty"`
}

// ForgetReply lists the turns forgotten and where history starts now
// (with DryRun: would be, and would start).
type ForgetReply struct {
	DryRun bool              `json:"dry_run"`
	Forgot []uint64          `json:"forgot"`
	Start  ckpt.HistoryStart `json:"start"`
	// Merged: for each forgotten turn in the middle of history, the kept
	// turn whose changes now include its own.
	Merged []MergedTurn `json:"merged"`
}

// MergedTurn says that turn Turn was forgotten and merged into Into.
type MergedTurn struct {
	Turn uint64 `json:"turn"`
	Into uint64 `json:"into"`
}

// PinRequest pins a turn (POST /v1/pin).
type PinRequest struct {
	Turn string `json:"turn"`
	Note string `json:"note,omitempty"`
}

// PinReply is the pin made.
type PinReply struct {
	Pin ckpt.Pin `json:"pin"`
}

// UnpinRequest removes a turn's pin (POST /v1/unpin).
type UnpinRequest struct {
	Turn string `json:"turn"`
}

// UnpinReply names the turn unpinned.
type UnpinReply struct {
	Turn uint64 `json:"turn"`
}

// GCRequest applies the retention policy and reclaims space (POST /v1/gc).
type GCRequest struct {
	DryRun bool `json:"dry_run,omitempty"`
}

// GCReply says what the gc did (or would do).
type GCReply struct {
	ckpt.GCReport
}

// PolicyRequest shows the retention policy, and changes the fields given
// (POST /v1/policy; also GET). A zero value means the default.
type PolicyRequest struct {
	KeepSize  *int64         `json:"keep_size,omitempty"`
	KeepTurns *int           `json:"keep_turns,omitempty"`
	KeepAge   *time.Duration `json:"keep_age,omitempty"` // nanoseconds
	// The thinning windows (ckpt.Policy), nanoseconds; negative: none.
	KeepHourly *time.Duration `json:"keep_hourly,omitempty"`
	KeepDaily  *time.Duration `json:"keep_daily,omitempty"`
}

// PolicyReply is the policy as stored and with its defaults filled in.
type PolicyReply struct {
	Policy    ckpt.Policy `json:"policy"`
	Effective ckpt.Policy `json:"effective"`
	// StoreBytes is the store's size on disk now (its ballast aside).
	StoreBytes int64 `json:"store_bytes"`
}

// DuRequest asks what the store holds (POST /v1/du; also GET).
type DuRequest struct{}

// DuReply is the store's usage.
type DuReply struct {
	ckpt.Usage
}

// FileChange is one path that differs between two states. Before is the
// state at the earlier side of the comparison (at From for a rename), After
// the state at the later side (at Path); nil means absent.
type FileChange struct {
	Path         string          `json:"path"`
	From         string          `json:"from,omitempty"` // renamed only
	Kind         ckpt.ChangeKind `json:"kind"`
	Before       *FileState      `json:"before,omitempty"`
	After        *FileState      `json:"after,omitempty"`
	LinesAdded   int             `json:"lines_added"`
	LinesDeleted int             `json:"lines_deleted"`
	// Binary says the bytes differ but are not text (a NUL byte) or are
	// too large to diff: no line counts, no patch hunks.
	Binary bool `json:"binary,omitempty"`
	// NotCaptured says the bytes of one side were never captured (the file
	// changed while the project was not mounted): no line counts, no hunks.
	NotCaptured bool `json:"not_captured,omitempty"`
	// Patch is the unified diff (show --patch, diff), in git's format.
	Patch string `json:"patch,omitempty"`
}

// InGitDir reports whether c is a change inside the project's .git
// (ckpt.GitDir): its path is there or, for a rename, the path it left.
// These are the changes ckpt.GitStats sums up.
func (c FileChange) InGitDir() bool {
	_, in := ckpt.Under(c.Path, ckpt.GitDir)
	_, left := ckpt.Under(c.From, ckpt.GitDir)
	return in || c.From != "" && left
}

// FileState is the wire form of one side of a FileChange (a ckpt.State
// as people read it): the type by name, the mode in octal.
type FileState struct {
	Type   ckpt.Type `json:"-"`    // on the wire "type": Type.String(): file, dir, symlink, fifo, socket, chardev, blockdev (special: of an older store)
	Mode   string    `json:"mode"` // octal permission bits, "0644"
	UID    uint32    `json:"uid"`
	GID    uint32    `json:"gid"`
	Size   int64     `json:"size,omitempty"`
	Target string    `json:"target,omitempty"` // symlink only
}

// fileStateJSON is FileState with the type by name.
type fileStateJSON struct {
	Type string `json:"type"`
	fileStateFields
}

type fileStateFields FileState

func (fs FileState) MarshalJSON() ([]byte, error) {
	return json.Marshal(fileStateJSON{fs.Type.String(), fileStateFields(fs)})
}

func (fs *FileState) UnmarshalJSON(b []byte) error {
	var w fileStateJSON
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	t, ok := ckpt.ParseType(w.Type)
	if !ok {
		return fmt.Errorf("unknown file type %q", w.Type)
	}
	*fs = FileState(w.fileStateFields)
	fs.Type = t
	return nil
}

// ModeBits parses Mode ("0644"); 0 if malformed.
func (fs *FileState) ModeBits() uint32 {
	if fs == nil {
		return 0
	}
	m, _ := strconv.ParseUint(fs.Mode, 8, 32)
	return uint32(m)
}

// Error is the JSON body of every error reply, and the error type the
// Service and the Client return for errors the user should see.
type Error struct {
	Code    string `json:"code"`  // one of the Code* constants
	Message string `json:"error"` // one line, no "turnctl:" prefix
}

func (e *Error) Error() string { return e.Message }

// Error codes, each with its HTTP status.
const (
	CodeBadRequest = "bad_request" // 400: malformed request or argument
	CodeForbidden  = "forbidden"   // 403: peer is not the daemon's user
	CodeNotFound   = "not_found"   // 404: unknown endpoint, turn or path
	CodeMethod     = "method"      // 405: not POST (GET allowed for log, status and verify)
	CodeConflict   = "conflict"    // 409: no open turn, ref taken, store busy
	CodeTooLarge   = "too_large"   // 413: request body over 1 MiB
	CodeCorrupt    = "corrupt"     // 500: the store detected corruption
	CodeInternal   = "internal"    // 500: anything else
)
