package ckpt

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Kind is how a turn came to be.
type Kind string

const (
	KindInitial Kind = "initial" // turn 0
	KindAgent   Kind = "agent"   // opened by `turnctl begin`
	KindManual  Kind = "manual"  // changes made while no turn was open
	KindRewind  Kind = "rewind"  // a rewind or restore
	KindRevert  Kind = "revert"  // a revert of one past turn (turnctl revert, undo)
	KindOffline Kind = "offline" // changes made while the project was not mounted
)

// Turn is one numbered group of changes. Turn 0 is the tree as it was when
// history began; it has no changes of its own.
type Turn struct {
	Num  uint64 `json:"num"`
	Kind Kind   `json:"kind"`
	// Label is one line: LabelOf the text the turn was opened with.
	Label string `json:"label,omitempty"`
	// Prompt is that whole text (an agent's whole prompt, a label of
	// several lines), when it says more than Label; "" otherwise. The
	// store keeps it apart from the turn's record: a single turn read
	// (show, begin) has it, a list of turns (log) does not.
	Prompt   string    `json:"prompt,omitempty"`
	Refs     []string  `json:"refs,omitempty"`
	Start    time.Time `json:"start"`
	End      time.Time `json:"end,omitempty"` // zero while open
	Open     bool      `json:"open,omitempty"`
	Programs []string  `json:"programs,omitempty"` // command names that wrote, sorted
	// Target is the turn a rewind turn rewound to (KindRewind), or the
	// turn a revert turn reverted (KindRevert); TargetStep, when not 0,
	// the step of Target it rewound to or reverted (Step).
	Target     *uint64 `json:"target,omitempty"`
	TargetStep int     `json:"target_step,omitempty"`
	// FirstSeq..LastSeq is the turn's range in the change log (FirstSeq >
	// LastSeq when it recorded nothing).
	FirstSeq uint64 `json:"first_seq"`
	LastSeq  uint64 `json:"last_seq"`
	// MergedFrom, when not 0, says that the turns MergedFrom..Num-1 were
	// forgotten and their changes merged into this one: its range starts
	// where MergedFrom's did, and its changes are those from the end of
	// MergedFrom-1 (Prev) to its own end.
	MergedFrom uint64 `json:"merged_from,omitempty"`
	// Stats is filled in by SetStats (computed by the caller, which has the
	// diff machinery); nil until then.
	Stats *Stats `json:"stats,omitempty"`
}

// Prev is the turn whose end state t's changes start from: Num-1, or
// the turn before those merged into t (MergedFrom-1). Turn 0 has none
// (Prev returns 0).
func (t Turn) Prev() uint64 {
	switch {
	case t.Num == 0:
		return 0
	case t.MergedFrom > 0:
		return t.MergedFrom - 1
	}
	return t.Num - 1
}

// Empty reports whether the turn recorded no change.
func (t Turn) Empty() bool { return t.FirstSeq > t.LastSeq }

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
	// LinesSkipped: the turn changed so many paths that their lines were
	// not counted (Lines* are 0); `turnctl show` counts them.
	LinesSkipped bool `json:"lines_skipped,omitempty"`
	// Git sums up the changes inside the project's .git directory, which
	// are counted in the fields above too; nil when there are none (and
	// in the Stats of turns counted by older versions).
	Git *GitStats `json:"git,omitempty"`
}

// OutsideGit returns s's files and lines less those inside GitDir (which
// s.Git sums up): what log, show and end count.
func (s Stats) OutsideGit() Stats {
	if s.Git != nil {
		s.Files -= s.Git.Files
		s.LinesAdded -= s.Git.LinesAdded
		s.LinesDeleted -= s.Git.LinesDeleted
	}
	return s
}

// GitDir is the directory, root-relative, whose changes GitStats sums up:
// the project's own git repository.
const GitDir = ".git"

// GitStats sums up what changed inside GitDir: git's objects, index, refs
// and logs, which people read as one event ("commit ec90ceb"), not as the
// dozens of files it takes. What happened to HEAD is read from the
// recorded states of .git/HEAD and the ref it names; "" when not known.
type GitStats struct {
	Files        int `json:"files"` // paths changed under .git, directories aside
	LinesAdded   int `json:"lines_added"`
	LinesDeleted int `json:"lines_deleted"`
	// Branch is the branch HEAD is on afterwards, PrevBranch the one it
	// was on before when HEAD moved to another branch.
	Branch     string `json:"branch,omitempty"`
	PrevBranch string `json:"prev_branch,omitempty"`
	// Head and PrevHead are the commit HEAD's branch (or a detached HEAD)
	// named after and before, when that changed (PrevHead "": none, as
	// before a first commit). Commit: Head's object was created by the
	// change (a commit, merge, cherry-pick, rebase step), not only
	// pointed at.
	Head     string `json:"head,omitempty"`
	PrevHead string `json:"prev_head,omitempty"`
	Commit   bool   `json:"commit,omitempty"`
}

// Summary is one line for people: "commit ec90ceb, 24 files in .git",
// "main at 1a2b3c4 (was ec90ceb), 5 files in .git", "on feature (was
// main), 3 files in .git", or just "24 files in .git".
func (g GitStats) Summary() string {
	var parts []string
	short := func(h string) string { return h[:min(len(h), 7)] }
	branch := g.Branch
	if branch == "" {
		branch = "HEAD"
	}
	if g.PrevBranch != "" && g.Branch != "" {
		parts = append(parts, fmt.Sprintf("on %s (was %s)", g.Branch, g.PrevBranch))
	}
	switch {
	case g.Head != "" && g.Commit:
		parts = append(parts, "commit "+short(g.Head))
	case g.Head != "" && g.PrevHead != "":
		parts = append(parts, fmt.Sprintf("%s at %s (was %s)", branch, short(g.Head), short(g.PrevHead)))
	case g.Head != "":
		parts = append(parts, fmt.Sprintf("%s at %s", branch, short(g.Head)))
	}
	if g.Files == 1 {
		parts = append(parts, "1 file in "+GitDir)
	} else {
		parts = append(parts, fmt.Sprintf("%d files in %s", g.Files, GitDir))
	}
	return strings.Join(parts, ", ")
}

// ChangeKind classifies how one path differs between two states.
type ChangeKind string

const (
	Added    ChangeKind = "added"
	Modified ChangeKind = "modified" // bytes (and maybe mode) changed
	Deleted  ChangeKind = "deleted"
	Renamed  ChangeKind = "renamed" // From holds the old path
	ModeOnly ChangeKind = "mode"    // only mode/owner changed
	TypeChg  ChangeKind = "type"    // e.g. file became symlink
	// Relinked: the same type, bytes, mode and owner, but the file shares
	// its inode (hard links) with other paths than before.
	Relinked ChangeKind = "link"
)

// Health says whether the store is accepting captures and what failed last.
type Health struct {
	// Full is set while captures are refused for want of disk space.
	Full bool `json:"full,omitempty"`
	// Avail is the free space under the store in bytes (-1 if unknown).
	Avail int64 `json:"avail_bytes"`
	// LastError is the most recent error of Record, Begin or End, with
	// its time; empty if none happened since Open.
	LastError   string    `json:"last_error,omitempty"`
	LastErrorAt time.Time `json:"last_error_at,omitempty"`
	// StoreBytes is the store's size on disk (its ballast aside), Budget
	// the retention policy's budget for it (0: not reported).
	StoreBytes int64 `json:"store_bytes,omitempty"`
	Budget     int64 `json:"budget_bytes,omitempty"`
	// AllKept: the store is over its budget and the last gc found nothing
	// more the policy lets it forget (what is left is pinned, the newest
	// turn or its undo), until history changes.
	AllKept bool `json:"all_kept,omitempty"`
}

// VerifyReport is the outcome of the store's Verify.
type VerifyReport struct {
	Chunks  int      `json:"chunks"`
	Bytes   int64    `json:"bytes"`       // plain bytes checked
	Attic   int      `json:"attic_files"` // attic files checked
	Corrupt []string `json:"corrupt,omitempty"`
}

// MaxLabel is the longest Label, in runes.
const MaxLabel = 200

// MaxText is the longest text a turn can be opened with (its Prompt), in
// bytes: a request carrying it, JSON-escaped, stays within the control
// protocol's 1 MiB even if every byte is escaped as \u00XX.
const MaxText = 128 << 10

// LabelOf is the label of a turn opened with text: its first line that is
// not blank, trimmed, tabs made spaces, cut to MaxLabel runes (ending in
// "..." when cut). Other control characters stay: whoever prints a label
// escapes them.
func LabelOf(text string) string {
	for line := range strings.SplitSeq(text, "\n") {
		line = strings.TrimSpace(strings.ReplaceAll(line, "\t", " "))
		if line == "" {
			continue
		}
		if utf8.RuneCountInString(line) > MaxLabel {
			r := []rune(line)
			line = string(r[:MaxLabel-3]) + "..."
		}
		return line
	}
	return ""
}

// PromptOf is what a turn opened with text keeps as its Prompt: text,
// unless LabelOf says it all.
func PromptOf(text string) string {
	if strings.TrimSpace(text) == LabelOf(text) {
		return ""
	}
	return text
}

// CutText cuts text to at most MaxText bytes, at a character boundary,
// ending with a line that says how much was left out.
func CutText(text string) string {
	if len(text) <= MaxText {
		return text
	}
	return CutTextOf(text, len(text))
}

// CutTextOf is CutText of a text of total bytes of which only a prefix,
// of at least MaxText bytes, was read (hook-event streams a huge prompt).
func CutTextOf(prefix string, total int) string {
	note := fmt.Sprintf("\n[... %d more bytes not kept]", total)
	n := min(MaxText-len(note), len(prefix))
	for n > 0 && n < len(prefix) && !utf8.RuneStart(prefix[n]) {
		n--
	}
	return prefix[:n] + fmt.Sprintf("\n[... %d more bytes not kept]", total-n)
}

// Step is one step of a turn: the changes one tool call of an agent made
// (a step boundary inside the open turn ends it: turnctl step, or an
// agent's hook after each tool call). Steps are numbered from 1 within
// their turn; step N.K ends where step N.K+1 begins, the last one where
// the turn ends. Only steps that recorded something are kept.
type Step struct {
	Turn uint64 `json:"turn"`
	Num  int    `json:"num"`
	// Tool is the tool that ran (an agent's name for it: Edit, Bash);
	// Label says more when the caller gave it. Both may be "".
	Tool  string    `json:"tool,omitempty"`
	Label string    `json:"label,omitempty"`
	End   time.Time `json:"end"`
	// LastSeq is the step's last event: the state "at the end of step
	// N.K" is the state right after it.
	LastSeq uint64 `json:"last_seq"`
}
