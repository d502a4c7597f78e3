package ckpt

import "time"

// history.go: bounded history: where history starts, pins, the retention
// policy, and what the store holds and what a garbage collection freed.

// HistoryStart says where history starts once its oldest turns were
// forgotten: the state at the end of Turn is the oldest one kept (as turn
// 0's is in a history that forgot nothing), and the changes of Turn and of
// every earlier turn are gone.
type HistoryStart struct {
	Turn      uint64    `json:"turn"`
	Reason    string    `json:"reason"`    // "forget" (turnctl forget) or "policy" (gc, automatic or not)
	At        time.Time `json:"at"`        // when it last moved
	Forgotten uint64    `json:"forgotten"` // turns forgotten so far, all reasons
}

// Reasons a history start moved.
const (
	ReasonForget = "forget"
	ReasonPolicy = "policy"
)

// By says who forgot the turns before the start, as people read it:
// "by forget" or "by the retention policy".
func (h HistoryStart) By() string {
	if h.Reason == ReasonPolicy {
		return "by the retention policy"
	}
	return "by forget"
}

// Pin keeps a turn: a pinned turn always rewinds exactly, whatever the
// policy; forgetting it is refused.
type Pin struct {
	Turn uint64    `json:"turn"`
	Note string    `json:"note,omitempty"`
	At   time.Time `json:"at"`
}

// Policy is the retention policy kept in the store. A zero field takes its
// default (DefaultKeepTurns, DefaultKeepAge, the default budget: the
// smaller of DefaultMaxBudget and a tenth of the store's disk).
type Policy struct {
	// KeepSize is the budget in bytes for the store on disk (its ballast
	// aside): above it the oldest unpinned turns are forgotten, also
	// inside the windows below.
	KeepSize int64 `json:"keep_size,omitempty"`
	// KeepTurns and KeepAge are windows: a turn among the last KeepTurns,
	// or that ended less than KeepAge ago, is kept while the store is
	// within its budget. Older turns are forgotten.
	KeepTurns int           `json:"keep_turns,omitempty"`
	KeepAge   time.Duration `json:"keep_age,omitempty"`
	// KeepHourly and KeepDaily thin the turns older than both windows:
	// of those that ended less than KeepHourly ago, the last turn of each
	// hour is kept, then of those that ended less than KeepDaily ago, the
	// last of each day (UTC); the others are merged into the kept turn
	// after them, and the turns older than that are forgotten. A negative
	// value thins none that way.
	KeepHourly time.Duration `json:"keep_hourly,omitempty"`
	KeepDaily  time.Duration `json:"keep_daily,omitempty"`
}

// Policy defaults.
const (
	DefaultKeepTurns            = 100
	DefaultKeepAge              = 24 * time.Hour
	DefaultKeepHourly           = 7 * 24 * time.Hour
	DefaultKeepDaily            = 30 * 24 * time.Hour
	DefaultMaxBudget      int64 = 10 << 30
	DefaultBudgetFraction       = 10 // percent of the store's disk
)

// Effective returns p with its defaults filled in, for a store whose disk
// holds diskBytes (0: unknown, the budget is DefaultMaxBudget).
func (p Policy) Effective(diskBytes int64) Policy {
	if p.KeepTurns == 0 {
		p.KeepTurns = DefaultKeepTurns
	}
	if p.KeepAge == 0 {
		p.KeepAge = DefaultKeepAge
	}
	if p.KeepHourly == 0 {
		p.KeepHourly = DefaultKeepHourly
	}
	if p.KeepDaily == 0 {
		p.KeepDaily = DefaultKeepDaily
	}
	if p.KeepSize == 0 {
		p.KeepSize = DefaultMaxBudget
		if diskBytes > 0 {
			p.KeepSize = min(p.KeepSize, diskBytes*DefaultBudgetFraction/100)
		}
	}
	return p
}

// GCReport says what a garbage collection freed (or would free, DryRun).
type GCReport struct {
	DryRun bool `json:"dry_run,omitempty"`
	// Forgot lists the turns the policy forgot (would forget), oldest
	// first; Start is where history starts after it.
	Forgot []uint64 `json:"forgot,omitempty"`
	// Merged: how many of them were in the middle of history, merged
	// into the kept turn after them (the policy's thinning).
	Merged     int           `json:"merged,omitempty"`
	Start      *HistoryStart `json:"start,omitempty"`
	Chunks     int           `json:"chunks"`      // content chunks deleted
	ChunkBytes int64         `json:"chunk_bytes"` // their stored (compressed) bytes
	Attic      int           `json:"attic_files"` // attic files deleted
	AtticBytes int64         `json:"attic_bytes"`
	// Before and After are the store's bytes on disk (ballast aside)
	// before and after (After: estimated with DryRun).
	Before int64 `json:"before_bytes"`
	After  int64 `json:"after_bytes"`
	// Stopped says why the collection stopped before its end (a rewind
	// wanted the store); what it did is done, a later gc does the rest.
	Stopped string `json:"stopped,omitempty"`
}

// Freed is the content bytes the collection deleted.
func (r GCReport) Freed() int64 { return r.ChunkBytes + r.AtticBytes }

// Usage is what the store holds (turnctl du).
type Usage struct {
	StoreBytes int64         `json:"store_bytes"`  // on disk, ballast aside
	Budget     int64         `json:"budget_bytes"` // the effective KeepSize
	Policy     Policy        `json:"policy"`       // as stored (zero fields: defaults)
	Effective  Policy        `json:"effective"`    // with the defaults filled in
	Start      *HistoryStart `json:"start,omitempty"`
	// ContentBytes is the stored bytes of all content (chunks and attic
	// files); Garbage the part no kept turn needs any more.
	ContentBytes int64 `json:"content_bytes"`
	Garbage      int64 `json:"garbage_bytes"`
	// Turns: per turn that holds content, the bytes only its records
	// reference (forgetting the turn's changes would free them).
	Turns []TurnUsage `json:"turns"`
	// Largest are the largest file versions history keeps.
	Largest []FileUsage `json:"largest"`
	// GC is what `turnctl gc` would do now.
	GC GCReport `json:"gc"`
}

// TurnUsage is the content only one turn's records reference.
type TurnUsage struct {
	Turn   uint64 `json:"turn"`
	Bytes  int64  `json:"bytes"`
	Pinned bool   `json:"pinned,omitempty"`
}

// FileUsage is one stored version of a file: the bytes path had before
// turn Turn changed it.
type FileUsage struct {
	Path  string `json:"path"`
	Turn  uint64 `json:"turn"`
	Bytes int64  `json:"bytes"`
}
