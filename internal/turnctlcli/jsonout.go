package turnctlcli

import (
	"encoding/json"
	"fmt"
	"time"

	"ckptfs/internal/ckpt"
	"ckptfs/turnctl"
)

// jsonout.go: what --json prints, a contract for scripts (doc/schema/,
// one JSON Schema per output, checked against real outputs in the tests).
// The rules, the same in every output:
//
//   - every key is always there: a text that is empty is "", a list that
//     is empty is [], and a value that does not exist (the end of an open
//     turn, the state before an added path, a number not known) is null;
//   - times are RFC 3339 in UTC ("2026-11-26T11:06:42.123456789Z"), never
//     a zero time;
//   - sizes are bytes, durations seconds, keys snake_case.
//
// These types are apart from the protocol's (turnctl) and the store's
// (ckpt), whose JSON is theirs to change: an output is built from them
// here, and a field added there shows up in --json only once it is added
// here and to its schema.

// JSONTime is a time as --json prints it: RFC 3339 in UTC, or null for
// the zero time. ckptfs status --json prints its times so too.
type JSONTime time.Time

func (t JSONTime) MarshalJSON() ([]byte, error) {
	tt := time.Time(t)
	if tt.IsZero() {
		return []byte("null"), nil
	}
	return json.Marshal(tt.UTC().Format(time.RFC3339Nano))
}

// list is l, or an empty list for nil (so that it prints [], not null).
func list[T any](l []T) []T {
	if l == nil {
		return []T{}
	}
	return l
}

// known is n, or nil (null) when n is negative: the store's "unknown".
func known(n int64) *int64 {
	if n < 0 {
		return nil
	}
	return &n
}

type jTurnOut struct {
	Num   uint64    `json:"num"`
	Kind  ckpt.Kind `json:"kind"`
	Label string    `json:"label"`
	// Prompt is the whole text the turn was opened with (its Label when
	// that says it all); null where the command does not read it (the
	// lists of turns: log, status).
	Prompt   *string  `json:"prompt"`
	Refs     []string `json:"refs"`
	Start    JSONTime `json:"start"`
	End      JSONTime `json:"end"` // null while open
	Open     bool     `json:"open"`
	Programs []string `json:"programs"`
	Target   *uint64  `json:"target"` // rewind and revert turns only
	// TargetStep: the step of Target (rewind to 3.2); null: its end.
	TargetStep *int `json:"target_step"`
	// Parent is the turn this one continued from (ckpt.Turn.Parent): the
	// previous one, or a whole-tree rewind's target; null for turn 0.
	Parent   *uint64 `json:"parent"`
	FirstSeq uint64  `json:"first_seq"`
	LastSeq  uint64  `json:"last_seq"`
	// MergedFrom: the turns MergedFrom..Num-1 were forgotten and their
	// changes merged into this one; null when none were.
	MergedFrom *uint64    `json:"merged_from"`
	Stats      *jStatsOut `json:"stats"` // null until counted (an open turn)
}

// jTurn is t as --json prints it; withPrompt: t was read alone, with its
// Prompt (show, begin).
func jTurn(t ckpt.Turn, withPrompt bool) jTurnOut {
	o := jTurnOut{Num: t.Num, Kind: t.Kind, Label: t.Label, Refs: list(t.Refs),
		Start: JSONTime(t.Start), Open: t.Open, Programs: list(t.Programs),
		Target: t.Target, TargetStep: stepOrNull(t.TargetStep), FirstSeq: t.FirstSeq, LastSeq: t.LastSeq}
	if !t.Open {
		o.End = JSONTime(t.End)
	}
	if p, ok := t.Parent(); ok {
		o.Parent = &p
	}
	if t.MergedFrom > 0 {
		m := t.MergedFrom
		o.MergedFrom = &m
	}
	if withPrompt {
		p := t.Prompt
		if p == "" {
			p = t.Label
		}
		o.Prompt = &p
	}
	if t.Stats != nil {
		s := jStats(*t.Stats)
		o.Stats = &s
	}
	return o
}

// JSONTurn is t as --json prints a turn (null for nil), without its
// Prompt: for ckptfs status --json.
func JSONTurn(t *ckpt.Turn) any { return jTurnPtr(t, false) }

func jTurnPtr(t *ckpt.Turn, withPrompt bool) *jTurnOut {
	if t == nil {
		return nil
	}
	o := jTurn(*t, withPrompt)
	return &o
}

type jStatsOut struct {
	Files        int      `json:"files"`
	Added        int      `json:"added"`
	Modified     int      `json:"modified"`
	Deleted      int      `json:"deleted"`
	Renamed      int      `json:"renamed"`
	ModeChanged  int      `json:"mode_changed"`
	LinesAdded   int      `json:"lines_added"`
	LinesDeleted int      `json:"lines_deleted"`
	Bytes        int64    `json:"bytes"`
	LinesSkipped bool     `json:"lines_skipped"`
	Git          *jGitOut `json:"git"` // null: nothing changed in .git
}

type jGitOut struct {
	Files        int    `json:"files"`
	LinesAdded   int    `json:"lines_added"`
	LinesDeleted int    `json:"lines_deleted"`
	Branch       string `json:"branch"`
	PrevBranch   string `json:"prev_branch"`
	Head         string `json:"head"`
	PrevHead     string `json:"prev_head"`
	Commit       bool   `json:"commit"`
	Summary      string `json:"summary"`
}

func jStats(s ckpt.Stats) jStatsOut {
	o := jStatsOut{Files: s.Files, Added: s.Added, Modified: s.Modified, Deleted: s.Deleted,
		Renamed: s.Renamed, ModeChanged: s.ModeChanged, LinesAdded: s.LinesAdded,
		LinesDeleted: s.LinesDeleted, Bytes: s.Bytes, LinesSkipped: s.LinesSkipped}
	if g := s.Git; g != nil {
		o.Git = &jGitOut{Files: g.Files, LinesAdded: g.LinesAdded, LinesDeleted: g.LinesDeleted,
			Branch: g.Branch, PrevBranch: g.PrevBranch, Head: g.Head, PrevHead: g.PrevHead,
			Commit: g.Commit, Summary: g.Summary()}
	}
	return o
}

type jChangeOut struct {
	Path         string          `json:"path"`
	From         *string         `json:"from"` // renamed only
	Kind         ckpt.ChangeKind `json:"kind"`
	Before       *jStateOut      `json:"before"` // null: absent
	After        *jStateOut      `json:"after"`  // null: absent
	LinesAdded   int             `json:"lines_added"`
	LinesDeleted int             `json:"lines_deleted"`
	Binary       bool            `json:"binary"`
	NotCaptured  bool            `json:"not_captured"`
	Patch        string          `json:"patch"` // "" but in show --patch and diff
}

type jStateOut struct {
	Type   string `json:"type"`
	Mode   string `json:"mode"`
	UID    uint32 `json:"uid"`
	GID    uint32 `json:"gid"`
	Size   int64  `json:"size"`
	Target string `json:"target"` // symlinks only
}

func jState(s *turnctl.FileState) *jStateOut {
	if s == nil {
		return nil
	}
	return &jStateOut{Type: s.Type.String(), Mode: s.Mode, UID: s.UID, GID: s.GID, Size: s.Size, Target: s.Target}
}

func jChanges(cs []turnctl.FileChange) []jChangeOut {
	out := make([]jChangeOut, 0, len(cs))
	for _, c := range cs {
		o := jChangeOut{Path: c.Path, Kind: c.Kind, Before: jState(c.Before), After: jState(c.After),
			LinesAdded: c.LinesAdded, LinesDeleted: c.LinesDeleted, Binary: c.Binary,
			NotCaptured: c.NotCaptured, Patch: c.Patch}
		if c.From != "" {
			from := c.From
			o.From = &from
		}
		out = append(out, o)
	}
	return out
}

type jStartOut struct {
	Turn      uint64   `json:"turn"`
	Reason    string   `json:"reason"`
	At        JSONTime `json:"at"`
	Forgotten uint64   `json:"forgotten"`
}

func jStart(h *ckpt.HistoryStart) *jStartOut {
	if h == nil {
		return nil
	}
	return &jStartOut{Turn: h.Turn, Reason: h.Reason, At: JSONTime(h.At), Forgotten: h.Forgotten}
}

type jPinOut struct {
	Turn uint64   `json:"turn"`
	Note string   `json:"note"`
	At   JSONTime `json:"at"`
}

func jPin(p ckpt.Pin) jPinOut { return jPinOut{Turn: p.Turn, Note: p.Note, At: JSONTime(p.At)} }

type jPolicyOut struct {
	KeepSize       int64   `json:"keep_size"` // bytes
	KeepTurns      int     `json:"keep_turns"`
	KeepAgeSeconds float64 `json:"keep_age_seconds"`
	// The thinning windows; negative: none.
	KeepHourlySeconds float64 `json:"keep_hourly_seconds"`
	KeepDailySeconds  float64 `json:"keep_daily_seconds"`
}

func jPolicy(p ckpt.Policy) jPolicyOut {
	return jPolicyOut{KeepSize: p.KeepSize, KeepTurns: p.KeepTurns, KeepAgeSeconds: p.KeepAge.Seconds(),
		KeepHourlySeconds: p.KeepHourly.Seconds(), KeepDailySeconds: p.KeepDaily.Seconds()}
}

type jGCOut struct {
	DryRun      bool       `json:"dry_run"`
	Forgot      []uint64   `json:"forgot"`
	Merged      int        `json:"merged"` // how many of Forgot were merged (thinning)
	Start       *jStartOut `json:"start"`  // null: history starts at turn 0
	Chunks      int        `json:"chunks"`
	ChunkBytes  int64      `json:"chunk_bytes"`
	AtticFiles  int        `json:"attic_files"`
	AtticBytes  int64      `json:"attic_bytes"`
	BeforeBytes int64      `json:"before_bytes"`
	AfterBytes  int64      `json:"after_bytes"`
	Stopped     string     `json:"stopped"`
}

func jGC(r ckpt.GCReport) jGCOut {
	return jGCOut{DryRun: r.DryRun, Forgot: list(r.Forgot), Merged: r.Merged, Start: jStart(r.Start), Chunks: r.Chunks,
		ChunkBytes: r.ChunkBytes, AtticFiles: r.Attic, AtticBytes: r.AtticBytes,
		BeforeBytes: r.Before, AfterBytes: r.After, Stopped: r.Stopped}
}

// The outputs, one per command (doc/schema/turnctl-COMMAND.json).

type jBeginOut struct {
	Turn   jTurnOut  `json:"turn"`
	Closed *jTurnOut `json:"closed"` // the turn begin closed, null if none was open
}

func jBegin(r *turnctl.BeginReply) jBeginOut {
	return jBeginOut{Turn: jTurn(r.Turn, true), Closed: jTurnPtr(r.Closed, true)}
}

type jEndOut struct {
	Turn         jTurnOut `json:"turn"`
	Summary      string   `json:"summary"`
	LinesPending bool     `json:"lines_pending"`
}

func jEnd(r *turnctl.EndReply) jEndOut {
	return jEndOut{Turn: jTurn(r.Turn, false), Summary: r.Summary, LinesPending: r.LinesPending}
}

type jHealthOut struct {
	Full        bool     `json:"full"`
	AvailBytes  *int64   `json:"avail_bytes"` // null: unknown
	LastError   string   `json:"last_error"`
	LastErrorAt JSONTime `json:"last_error_at"` // null: no error
	StoreBytes  int64    `json:"store_bytes"`
	BudgetBytes int64    `json:"budget_bytes"`
}

type jStatusOut struct {
	Open         bool          `json:"open"`
	Turn         *jTurnOut     `json:"turn"` // the open turn, null if none
	Latest       uint64        `json:"latest"`
	Changes      []jChangeOut  `json:"changes"`
	Stats        jStatsOut     `json:"stats"`
	Store        jHealthOut    `json:"store"`
	ChangesError string        `json:"changes_error"`
	Runs         []jRunningOut `json:"runs"`
}

type jRunningOut struct {
	PID   *int64 `json:"pid"` // null: not known
	Label string `json:"label"`
	Step  bool   `json:"step"`
}

func jStatus(r *turnctl.StatusReply) jStatusOut {
	h := r.Store
	o := jStatusOut{Open: r.Open, Turn: jTurnPtr(r.Turn, false), Latest: r.Latest,
		Changes: jChanges(r.Changes), Stats: jStats(r.Stats), ChangesError: r.ChangesError,
		Store: jHealthOut{Full: h.Full, AvailBytes: known(h.Avail), LastError: h.LastError,
			LastErrorAt: JSONTime(h.LastErrorAt), StoreBytes: h.StoreBytes, BudgetBytes: h.Budget},
		Runs: make([]jRunningOut, len(r.Runs))}
	for i, run := range r.Runs {
		o.Runs[i] = jRunningOut{Label: run.Label, Step: run.Step}
		if run.PID > 0 {
			o.Runs[i].PID = known(int64(run.PID))
		}
	}
	return o
}

type jLogOut struct {
	Turns []jTurnOut `json:"turns"`
	Start *jStartOut `json:"start"` // null: history starts at turn 0
	Pins  []jPinOut  `json:"pins"`
}

func jLog(r *turnctl.LogReply) jLogOut {
	o := jLogOut{Turns: make([]jTurnOut, 0, len(r.Turns)), Start: jStart(r.Start), Pins: make([]jPinOut, 0, len(r.Pins))}
	for _, t := range r.Turns {
		o.Turns = append(o.Turns, jTurn(t, false))
	}
	for _, p := range r.Pins {
		o.Pins = append(o.Pins, jPin(p))
	}
	return o
}

type jShowOut struct {
	Turn    jTurnOut     `json:"turn"`
	Step    *jStepOut    `json:"step"` // the step shown; null for a whole turn
	Steps   []jStepOut   `json:"steps"`
	Changes []jChangeOut `json:"changes"`
	Stats   jStatsOut    `json:"stats"`
}

func jShow(r *turnctl.ShowReply) jShowOut {
	o := jShowOut{Turn: jTurn(r.Turn, true), Steps: []jStepOut{}, Changes: jChanges(r.Changes), Stats: jStats(r.Stats)}
	if r.Step != nil {
		st := jStep(*r.Step)
		o.Step = &st
	}
	for _, st := range r.Steps {
		o.Steps = append(o.Steps, jStep(st))
	}
	return o
}

// jStepOut is a step of a turn (ckpt.Step).
type jStepOut struct {
	Turn  uint64   `json:"turn"`
	Num   int      `json:"num"`
	Name  string   `json:"name"` // "3.2", as TURN arguments take it
	Tool  string   `json:"tool"`
	Label string   `json:"label"`
	End   JSONTime `json:"end"` // null while it goes on (the open turn's last)
}

func jStep(st ckpt.Step) jStepOut {
	return jStepOut{Turn: st.Turn, Num: st.Num, Name: fmt.Sprintf("%d.%d", st.Turn, st.Num), Tool: st.Tool, Label: st.Label, End: JSONTime(st.End)}
}

type jStepReplyOut struct {
	Step *jStepOut `json:"step"` // null: the step changed nothing and is not kept
}

func jStepReply(r *turnctl.StepReply) jStepReplyOut {
	var o jStepReplyOut
	if r.Step != nil {
		st := jStep(*r.Step)
		o.Step = &st
	}
	return o
}

type jDiffOut struct {
	From     uint64       `json:"from"`
	To       *uint64      `json:"to"`        // null: the tree now
	FromStep *int         `json:"from_step"` // the step of from compared; null: its end
	ToStep   *int         `json:"to_step"`
	Changes  []jChangeOut `json:"changes"`
	Stats    jStatsOut    `json:"stats"`
}

func jDiff(r *turnctl.DiffReply) jDiffOut {
	return jDiffOut{From: r.From, To: r.To, FromStep: stepOrNull(r.FromStep), ToStep: stepOrNull(r.ToStep),
		Changes: jChanges(r.Changes), Stats: jStats(r.Stats)}
}

func stepOrNull(k int) *int {
	if k == 0 {
		return nil
	}
	return &k
}

type jRewindOut struct {
	Target      uint64       `json:"target"`
	TargetStep  *int         `json:"target_step"` // the step of target; null: its end
	Undone      *uint64      `json:"undone"`      // undo only: the turn it undid
	DryRun      bool         `json:"dry_run"`
	Turn        *jTurnOut    `json:"turn"` // null with --dry-run or no change
	Changes     []jChangeOut `json:"changes"`
	Stats       jStatsOut    `json:"stats"`
	NotRestored []string     `json:"not_restored"`
	Left        []jLeftOut   `json:"left"` // directories left: they hold unversioned paths
	// A restore or a revert: the paths it split from hard links it did
	// not restore or revert.
	SplitLinks []jLinkSplitOut `json:"split_links"`
	// A revert, and an undo made as one: the turn reverted (else null),
	// the paths merged with later changes, those written with conflict
	// markers; for an undo the later turns and paths it kept.
	Reverted     *uint64        `json:"reverted"`
	RevertedStep *int           `json:"reverted_step"` // the step of reverted; null: the whole turn
	Merged       []string       `json:"merged"`
	Conflicts    []jConflictOut `json:"conflicts"`
	KeptTurns    []uint64       `json:"kept_turns"`
	Kept         []string       `json:"kept"`
	// Done, but the store's log could not be synced to disk: what went
	// wrong (also on stderr); else null.
	Warning *string `json:"warning"`
}

type jLeftOut struct {
	Path        string   `json:"path"`
	Then        string   `json:"then"`        // at the target: "absent" or its type
	Unversioned []string `json:"unversioned"` // the first (at most 10) below it
	More        int      `json:"more"`        // how many more there are
}

type jLinkSplitOut struct {
	Path  string   `json:"path"`
	Names []string `json:"names"`
}

type jConflictOut struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

func jRewind(r *turnctl.RewindReply) jRewindOut {
	o := jRewindOut{Target: r.Target, TargetStep: stepOrNull(r.TargetStep), RevertedStep: stepOrNull(r.RevertedStep),
		Undone: r.Undone, DryRun: r.DryRun, Turn: jTurnPtr(r.Turn, false),
		Changes: jChanges(r.Changes), Stats: jStats(r.Stats), NotRestored: list(r.NotRestored),
		Reverted: r.Reverted, Merged: list(r.Merged), Conflicts: []jConflictOut{},
		KeptTurns: list(r.KeptTurns), Kept: list(r.Kept), Left: []jLeftOut{}, SplitLinks: []jLinkSplitOut{}}
	for _, l := range r.Left {
		o.Left = append(o.Left, jLeftOut{Path: l.Path, Then: l.Then, Unversioned: list(l.Unversioned), More: l.More})
	}
	for _, l := range r.SplitLinks {
		o.SplitLinks = append(o.SplitLinks, jLinkSplitOut{Path: l.Path, Names: list(l.Names)})
	}
	for _, c := range r.Conflicts {
		o.Conflicts = append(o.Conflicts, jConflictOut{Path: c.Path, Reason: c.Reason})
	}
	if r.Warning != "" {
		w := r.Warning
		o.Warning = &w
	}
	return o
}

// jRunOut is run's output: begin and end of its turn; or, inside an open
// agent turn, that turn (in_turn) and the step it recorded (null when the
// command changed nothing). The other keys are null.
//
// Runs at the same time share a turn: joined, this run joined the turn of
// another run still running; running, other runs were still running in
// it when this one ended (end.turn is then still open). note says why
// the run closed no turn or recorded no step ("" when all went as usual).
type jRunOut struct {
	Begin    *jBeginOut `json:"begin"`
	End      *jEndOut   `json:"end"`
	InTurn   *uint64    `json:"in_turn"`
	Step     *jStepOut  `json:"step"`
	Joined   bool       `json:"joined"`
	Running  int        `json:"running"`
	Note     string     `json:"note"`
	ExitCode int        `json:"exit_code"`
}

type jVerifyOut struct {
	Chunks     int      `json:"chunks"`
	Bytes      int64    `json:"bytes"`
	AtticFiles int      `json:"attic_files"`
	Corrupt    []string `json:"corrupt"`
	OK         bool     `json:"ok"`
}

func jVerify(r *turnctl.VerifyReply) jVerifyOut {
	return jVerifyOut{Chunks: r.Chunks, Bytes: r.Bytes, AtticFiles: r.Attic, Corrupt: list(r.Corrupt), OK: r.OK}
}

type jForgetOut struct {
	DryRun bool         `json:"dry_run"`
	Forgot []uint64     `json:"forgot"`
	Start  *jStartOut   `json:"start"` // null: history still starts at turn 0
	Merged []jMergedOut `json:"merged"`
}

type jMergedOut struct {
	Turn uint64 `json:"turn"`
	Into uint64 `json:"into"`
}

func jForget(r *turnctl.ForgetReply) jForgetOut {
	o := jForgetOut{DryRun: r.DryRun, Forgot: list(r.Forgot), Merged: []jMergedOut{}}
	if r.Start.Turn > 0 || r.Start.Reason != "" {
		o.Start = jStart(&r.Start)
	}
	for _, m := range r.Merged {
		o.Merged = append(o.Merged, jMergedOut{Turn: m.Turn, Into: m.Into})
	}
	return o
}

type jPinReplyOut struct {
	Pin jPinOut `json:"pin"`
}

type jUnpinOut struct {
	Turn uint64 `json:"turn"`
}

type jPolicyReplyOut struct {
	Policy     jPolicyOut `json:"policy"`    // as stored: 0 is the default
	Effective  jPolicyOut `json:"effective"` // the defaults filled in
	StoreBytes int64      `json:"store_bytes"`
}

func jPolicyReply(r *turnctl.PolicyReply) jPolicyReplyOut {
	return jPolicyReplyOut{Policy: jPolicy(r.Policy), Effective: jPolicy(r.Effective), StoreBytes: r.StoreBytes}
}

type jTurnUsageOut struct {
	Turn   uint64 `json:"turn"`
	Bytes  int64  `json:"bytes"`
	Pinned bool   `json:"pinned"`
}

type jFileUsageOut struct {
	Path  string `json:"path"`
	Turn  uint64 `json:"turn"`
	Bytes int64  `json:"bytes"`
}

type jDuOut struct {
	StoreBytes   int64           `json:"store_bytes"`
	BudgetBytes  int64           `json:"budget_bytes"`
	Policy       jPolicyOut      `json:"policy"`
	Effective    jPolicyOut      `json:"effective"`
	Start        *jStartOut      `json:"start"`
	ContentBytes int64           `json:"content_bytes"`
	GarbageBytes int64           `json:"garbage_bytes"`
	Turns        []jTurnUsageOut `json:"turns"`
	Largest      []jFileUsageOut `json:"largest"`
	GC           jGCOut          `json:"gc"`
}

func jDu(r *turnctl.DuReply) jDuOut {
	u := r.Usage
	o := jDuOut{StoreBytes: u.StoreBytes, BudgetBytes: u.Budget, Policy: jPolicy(u.Policy),
		Effective: jPolicy(u.Effective), Start: jStart(u.Start), ContentBytes: u.ContentBytes,
		GarbageBytes: u.Garbage, Turns: make([]jTurnUsageOut, 0, len(u.Turns)),
		Largest: make([]jFileUsageOut, 0, len(u.Largest)), GC: jGC(u.GC)}
	for _, t := range u.Turns {
		o.Turns = append(o.Turns, jTurnUsageOut(t))
	}
	for _, f := range u.Largest {
		o.Largest = append(o.Largest, jFileUsageOut(f))
	}
	return o
}
