package control

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"reflect"
	"strings"

	"ckptfs/internal/ckpt"
	"ckptfs/turnctl"
	"ckptfs/versionstore"
)

// Gate is what the mounted overlay offers the Service (implemented by
// *fusefs.Root; server does not import fusefs).
type Gate interface {
	// Exclusive flushes the kernel's dirty pages and blocks all mutations
	// through the mount while fn runs.
	Exclusive(fn func() error) error
	// Invalidate tells the overlay that the backing tree changed at path
	// (root-relative), so it drops the kernel's caches for it.
	Invalidate(path string)
	// Moved tells the overlay that a rename (or, with exchange, an
	// exchange) moved from to to in the backing tree: what it remembers
	// by path moves along (before the paths are invalidated).
	Moved(from, to string, exchange bool)
	// NoteLink tells the overlay that the file at path has inode number
	// ino and more than one link (a rewind linked it), and LinkNames
	// returns the names it knows of inode ino (ckpt.LinkNamer).
	NoteLink(ino uint64, path string)
	LinkNames(ino uint64) []string
	// WritesPast reports whether the file at path is open for writing
	// through FUSE passthrough, whose writes bypass the overlay.
	WritesPast(path string) bool
}

// Service implements the control commands on top of the history store. It
// is safe for concurrent use: the store is, and every command that changes
// the tree or a turn boundary runs inside gate.Exclusive.
type Service struct {
	store *versionstore.Store
	tree  ckpt.Tree
	gate  Gate // nil: the project is not mounted (offline)
	ops   ops  // the progress of the commands running with an ID
	// viewer mounts views (nil: MountAt refuses); set before serving.
	viewer Viewer
	runs   runSet   // the turnctl runs running (runs.go)
	undone undoMemo // undoneNow's last answer (service_rewind.go)
}

var _ turnctl.Handler = (*Service)(nil)

// NewService returns a Service on store and the backing tree. gate may be
// nil when the project is not mounted: then nothing else can write the tree
// and the commands run without exclusion.
func NewService(store *versionstore.Store, tree ckpt.Tree, gate Gate) *Service {
	if v := reflect.ValueOf(gate); gate != nil && v.Kind() == reflect.Pointer && v.IsNil() {
		gate = nil // a nil *fusefs.Root: not mounted
	}
	s := &Service{store: store, tree: tree, gate: gate}
	if store != nil {
		store.SetUndoBase(s.undoneNow)
	}
	return s
}

// exclusive runs fn with all mutations through the mount blocked.
func (s *Service) exclusive(fn func() error) error {
	if s.gate == nil {
		return fn()
	}
	return s.gate.Exclusive(fn)
}

// liveTree is the tree the store changes in a rewind: with a gate, every
// change also invalidates the kernel's caches for the paths it touched.
func (s *Service) liveTree() ckpt.Tree {
	if s.gate == nil {
		return s.tree
	}
	return invalidatingTree{Tree: s.tree, gate: s.gate}
}

// resolve turns a TURN argument into a turn number, with an error that
// names the turns that exist.
func (s *Service) resolve(spec string) (uint64, error) {
	n, err := s.store.Resolve(spec)
	return n, s.wrap(err)
}

// resolveTurn is resolve for the commands that take whole turns only
// (forget, pin, unpin): a step is refused.
func (s *Service) resolveTurn(spec string) (uint64, error) {
	n, err := s.resolve(spec)
	if err != nil {
		return 0, err
	}
	if versionstore.NamesStep(spec) {
		return 0, errorf(turnctl.CodeBadRequest, "%q is a step: this command takes a whole turn", spec)
	}
	return n, nil
}

// wrap turns a store error into an *Error with a code and a message
// without the "versionstore:" prefix.
func (s *Service) wrap(err error) error {
	if err == nil {
		return nil
	}
	var e *turnctl.Error
	if errors.As(err, &e) {
		return e
	}
	msg := strings.ReplaceAll(err.Error(), "versionstore: ", "")
	code := turnctl.CodeInternal
	switch {
	case errors.Is(err, versionstore.ErrBadTurn):
		code = turnctl.CodeBadRequest // before ErrTurnNotFound: the argument is what is wrong
	case errors.Is(err, versionstore.ErrTurnNotFound), errors.Is(err, versionstore.ErrNotCaptured), errors.Is(err, versionstore.ErrForgotten):
		code = turnctl.CodeNotFound
	case errors.Is(err, versionstore.ErrPinned), errors.Is(err, versionstore.ErrNotPinned),
		errors.Is(err, versionstore.ErrOpenTurn), errors.Is(err, versionstore.ErrBusy),
		errors.Is(err, versionstore.ErrNotOnLine):
		code = turnctl.CodeConflict
	case errors.Is(err, versionstore.ErrNoOpenTurn):
		code, msg = turnctl.CodeConflict, "no turn is open (turnctl begin opens one)"
	case errors.Is(err, versionstore.ErrRefTaken), errors.Is(err, versionstore.ErrLocked):
		code = turnctl.CodeConflict
	case errors.Is(err, versionstore.ErrBadPath), errors.Is(err, versionstore.ErrBadRef):
		code = turnctl.CodeBadRequest
	case errors.Is(err, versionstore.ErrCorrupt):
		code = turnctl.CodeCorrupt
	case errors.Is(err, ckpt.ErrStoreFull), errors.Is(err, versionstore.ErrNoSpace), errors.Is(err, versionstore.ErrDenied):
		code = turnctl.CodeConflict
	}
	return &turnctl.Error{Code: code, Message: msg}
}

// maxAdoptEvents bounds the implicit turns Begin checks for being empty.
const maxAdoptEvents = 4096

// Begin opens a new turn, closing the open one.
func (s *Service) Begin(ctx context.Context, req turnctl.BeginRequest) (*turnctl.BeginReply, error) {
	if len(req.Label) > ckpt.MaxText {
		return nil, errorf(turnctl.CodeBadRequest, "label is too long (%d bytes; at most %d)", len(req.Label), ckpt.MaxText)
	}
	var rep turnctl.BeginReply
	err := s.exclusive(func() error {
		if req.Run != "" {
			return s.beginRun(ctx, req, &rep)
		}
		return s.begin(req, &rep)
	})
	if err != nil {
		return nil, s.wrap(err)
	}
	if rep.Closed != nil {
		if t, err := s.store.Turn(rep.Closed.Num); err == nil {
			rep.Closed = &t
		}
	}
	return &rep, nil
}

// begin opens a new turn, closing the open one (in Begin's exclusive
// section).
func (s *Service) begin(req turnctl.BeginRequest, rep *turnctl.BeginReply) error {
	cur, ok := s.store.Current()
	if ok && cur.Kind == ckpt.KindManual && cur.Label == "" && (cur.Empty() || cur.LastSeq-cur.FirstSeq < maxAdoptEvents) {
		// An implicit turn that changed nothing (a boundary's capture
		// of a file still open for writing, a file put back as it
		// was) becomes the new turn rather than an empty entry in
		// the log. Only a small one is checked: listing the changes
		// of a big one (100k files created between turns) took
		// seconds, and its turn is kept even if it nets out empty.
		if cs, err := s.store.Changes(cur.Num-1, cur.Num, s.tree); err == nil && len(cs) == 0 {
			t, err := s.store.Adopt(ckpt.KindAgent, req.Label, req.Ref)
			rep.Turn = t
			return err
		}
	}
	if ok {
		rep.Closed = &cur
	}
	t, err := s.store.Begin(ckpt.KindAgent, req.Label, req.Ref)
	rep.Turn = t
	return err
}

// Step ends the open turn's current step. Like a turn boundary it holds
// the mount exclusively, so that files open for writing (passthrough) are
// captured again for the next step.
func (s *Service) Step(ctx context.Context, req turnctl.StepRequest) (*turnctl.StepReply, error) {
	if err := checkText("tool", req.Tool); err != nil {
		return nil, err
	}
	if err := checkText("label", req.Label); err != nil {
		return nil, err
	}
	rep := &turnctl.StepReply{}
	err := s.exclusive(func() error {
		if err := s.checkStepTurn(req); err != nil {
			s.dropRun(req.Run)
			return err
		}
		label := req.Label
		if req.Run != "" {
			if rep.Running, label = s.stepRun(req.Run, label); rep.Running > 0 {
				return nil
			}
		}
		st, ok, err := s.store.Step(req.Tool, label)
		if ok {
			rep.Step = &st
		}
		return err
	})
	if err != nil {
		return nil, s.wrap(err)
	}
	return rep, nil
}

// End closes the open turn and records its Stats; with IfOpenedBy, only
// a turn opened for it (turnctl.OpenedBy).
func (s *Service) End(ctx context.Context, req turnctl.EndRequest) (*turnctl.EndReply, error) {
	var t ckpt.Turn
	var m mark
	running := 0
	err := s.exclusive(func() error {
		if req.Run != "" {
			close, n, cur, err := s.endRun(req.Run)
			if err != nil || !close {
				t, running = cur, n
				return err
			}
		}
		if req.IfOpenedBy != "" {
			cur, ok := s.store.Current()
			if !ok {
				return versionstore.ErrNoOpenTurn
			}
			if !turnctl.OpenedBy(cur, req.IfOpenedBy) {
				return errorf(turnctl.CodeConflict, "%s; left open", turnctl.NotOpenedBy(cur, req.IfOpenedBy))
			}
		}
		var err error
		t, err = s.store.End(req.Ref)
		m = s.mark()
		return err
	})
	if err != nil {
		return nil, s.wrap(err)
	}
	if running > 0 {
		return &turnctl.EndReply{Turn: t, Running: running, Summary: runningSummary(t.Num, running)}, nil
	}
	// The turn is closed: its end state is fixed, so the stats can be
	// computed with the mount open again.
	rep := &turnctl.EndReply{Turn: t}
	if t.Num > 0 && !t.Empty() {
		if st, err := s.turnStats(t); err == nil {
			rep.Turn.Stats, rep.LinesPending = &st, st.LinesSkipped
			s.cacheStats(t.Num, st, m)
		}
	} else {
		rep.Turn.Stats = &ckpt.Stats{}
		s.cacheStats(t.Num, ckpt.Stats{}, m)
	}
	rep.Summary = summary(rep.Turn, rep.LinesPending)
	return rep, nil
}

// mark says how far history has gone: it moves whenever anything is
// recorded.
type mark struct{ latest, lastSeq, merges uint64 }

func (s *Service) mark() mark {
	m := mark{latest: s.store.Latest(), merges: s.store.Merges()}
	if cur, ok := s.store.Current(); ok {
		m.lastSeq = cur.LastSeq
	}
	return m
}

// cacheStats stores st as turn n's Stats, unless anything was recorded
// (or turns were merged: n may have more changes now) since m: then a live file the computation read may already hold later
// bytes than the turn's, and the next log counts again. (The store reads
// a path from the live tree only when no event since the turn names it,
// and records an event before any change lands.) Best effort: a lost
// cache entry is recomputed.
func (s *Service) cacheStats(n uint64, st ckpt.Stats, m mark) {
	if s.mark() == m {
		if testHookCacheStats != nil {
			testHookCacheStats()
		}
		// A merge between the check and the store's write is refused
		// there (the stats' files are what undo undoes).
		s.store.SetStats(n, st, m.merges)
	}
}

// testHookCacheStats, in tests, runs between cacheStats' check and its
// write.
var testHookCacheStats func()

// maxLineCountedFiles: end, log, status and rewind count lines only for
// at most this many changed paths. A huge turn (npm install, a 100k-file
// extract) is only counted, so that end and log stay fast (counting the
// lines of 100k new files took log 4-15 s); show counts them.
var maxLineCountedFiles = 2000

// summary is the one-line description `end` prints:
//
//	turn 4 closed: 3 files (+12 -4) by sed, go
//	turn 5 closed: 2 files (+3 -1) by git; git: commit ec90ceb, 9 files in .git
//
// As in log and show, the counts leave out the files under .git, which
// the part after "git:" sums up.
func summary(t ckpt.Turn, linesPending bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "turn %d closed: ", t.Num)
	var st ckpt.Stats
	if t.Stats != nil {
		st = t.Stats.OutsideGit()
	}
	switch {
	case t.Stats == nil:
		b.WriteString("changes not counted")
	case t.Stats.Files == 0 && t.Empty():
		b.WriteString("no changes")
	case st.Files == 0 && st.Git != nil:
		b.WriteString("no files changed outside .git")
	case linesPending:
		fmt.Fprintf(&b, "%s (lines not counted: see turnctl show %d)", plural(st.Files, "file"), t.Num)
	default:
		fmt.Fprintf(&b, "%s (+%d -%d)", plural(st.Files, "file"), st.LinesAdded, st.LinesDeleted)
	}
	if len(t.Programs) > 0 {
		fmt.Fprintf(&b, " by %s", strings.Join(t.Programs, ", "))
	}
	if st.Git != nil {
		fmt.Fprintf(&b, "; git: %s", st.Git.Summary())
	}
	return b.String()
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// turnStats computes what turn t changed; lines only up to
// maxLineCountedFiles changed paths.
func (s *Service) turnStats(t ckpt.Turn) (ckpt.Stats, error) {
	if t.Num <= s.store.HistoryStart().Turn || t.Empty() {
		return ckpt.Stats{}, nil
	}
	if testHookTurnStats != nil {
		testHookTurnStats(t.Num)
	}
	cs, err := s.store.TurnChanges(t.Num, s.tree)
	if err != nil {
		return ckpt.Stats{}, err
	}
	_, st, err := s.listChanges(cs, t.Num)
	return st, err
}

// testHookTurnStats, in tests, runs before turnStats reads turn n.
var testHookTurnStats func(n uint64)

// listChanges is fileChanges without patches, counting lines only when cs
// has at most maxLineCountedFiles paths (else Stats.LinesSkipped).
func (s *Service) listChanges(cs []versionstore.Change, to uint64) ([]turnctl.FileChange, ckpt.Stats, error) {
	if len(cs) <= maxLineCountedFiles {
		return s.fileChanges(cs, false, to)
	}
	fcs := make([]turnctl.FileChange, len(cs))
	for i, c := range cs {
		fcs[i] = wireChange(c)
	}
	st := sumStats(fcs)
	st.LinesSkipped = true
	st.Git = s.gitStats(cs, fcs, to)
	return fcs, st, nil
}

// turnChanges lists what turn n changed (an open turn: so far).
func (s *Service) turnChanges(n uint64, patch bool) ([]turnctl.FileChange, ckpt.Stats, error) {
	cs, err := s.turnStoreChanges(n)
	if err != nil {
		return nil, ckpt.Stats{}, err
	}
	return s.fileChanges(cs, patch, n)
}

// turnStoreChanges is the store's list of what turn n changed: none for
// turn 0 and for the first kept turn, whose changes are forgotten with
// the turns before it.
func (s *Service) turnStoreChanges(n uint64) ([]versionstore.Change, error) {
	if testHookStoreChanges != nil {
		testHookStoreChanges(n)
	}
	return s.store.TurnChanges(n, s.tree)
}

// testHookStoreChanges, in tests, runs before turnStoreChanges reads
// turn n.
var testHookStoreChanges func(n uint64)

// Status reports the open turn and what it changed so far.
func (s *Service) Status(ctx context.Context, req turnctl.StatusRequest) (*turnctl.StatusReply, error) {
	rep := &turnctl.StatusReply{Latest: s.store.Latest(), History: s.store.HistoryGen(), Changes: []turnctl.FileChange{}, Store: s.store.Health()}
	if !req.Brief { // a walk of the store directory and a statfs
		rep.Store.StoreBytes = s.store.StoreBytes()
		if pol, err := s.store.EffectivePolicy(); err == nil {
			rep.Store.Budget = pol.KeepSize
			rep.Store.AllKept = rep.Store.StoreBytes > pol.KeepSize && s.store.NothingToForget(pol)
		}
	}
	cur, ok := s.store.Current()
	if !ok {
		return rep, nil
	}
	rep.Open, rep.Turn = true, &cur
	if req.Brief {
		return rep, nil
	}
	rep.Runs = s.runs.running(cur.Num)
	// A status is what one asks when something is wrong: a change that
	// cannot be listed is reported, not made the reply's failure.
	cs, err := s.store.Changes(cur.Num-1, versionstore.Now, s.tree)
	if err == nil {
		rep.Changes, rep.Stats, err = s.listChanges(cs, versionstore.Now)
	}
	if err != nil {
		rep.Changes, rep.Stats = []turnctl.FileChange{}, ckpt.Stats{}
		rep.ChangesError = s.wrap(err).Error()
	}
	return rep, nil
}

// Log lists turns newest first, computing missing Stats (and storing them
// for closed turns).
func (s *Service) Log(ctx context.Context, req turnctl.LogRequest) (*turnctl.LogReply, error) {
	if req.N < 0 {
		return nil, errorf(turnctl.CodeBadRequest, "n must not be negative")
	}
	if req.Follow {
		if ps, err := cleanPaths(req.Paths); err != nil || len(ps) != 1 || ps[0] == "" {
			return nil, errorf(turnctl.CodeBadRequest, "follow takes exactly one path below the project's root")
		}
	}
	list := s.logTurns
	if req.Filtered() {
		list = s.logFiltered
	}
	for tries := 1; ; tries++ {
		turns, err := list(ctx, req)
		if errors.Is(err, versionstore.ErrForgotten) && tries < 5 {
			// The gc merged or forgot a turn listed before its changes
			// were read: list history again as it is now.
			continue
		}
		if err != nil {
			return nil, s.wrap(err)
		}
		return s.logReply(turns)
	}
}

// logTurns lists the newest req.N turns (0: all) with their Stats,
// counted (and stored) for those that have none yet.
func (s *Service) logTurns(ctx context.Context, req turnctl.LogRequest) ([]ckpt.Turn, error) {
	turns, err := s.store.Turns(req.N)
	if err != nil {
		return nil, err
	}
	p, done := s.ops.track(ctx)
	defer done()
	m := s.mark()
	var count int64 // the turns to count, for the progress
	for _, t := range turns {
		if t.Stats == nil {
			count++
		}
	}
	counted := int64(0)
	for i := range turns {
		t := &turns[i]
		if t.Stats != nil {
			continue
		}
		p.report(fmt.Sprintf("counting the changes of turn %d", t.Num), counted, count)
		counted++
		st, err := s.turnStats(*t)
		if err != nil {
			return nil, err
		}
		t.Stats = &st
		if !t.Open {
			s.cacheStats(t.Num, st, m)
		}
	}
	return turns, nil
}

// logReply adds where history starts and the pins to a log's turns.
func (s *Service) logReply(turns []ckpt.Turn) (*turnctl.LogReply, error) {
	if turns == nil {
		turns = []ckpt.Turn{}
	}
	rep := &turnctl.LogReply{Turns: turns}
	var err error
	if h := s.store.HistoryStart(); h.Turn > 0 {
		rep.Start = &h
	}
	if rep.Pins, err = s.store.Pins(); err != nil {
		return nil, s.wrap(err)
	}
	return rep, nil
}

// Verify checks the store's integrity.
func (s *Service) Verify(ctx context.Context, req turnctl.VerifyRequest) (*turnctl.VerifyReply, error) {
	rep, err := s.store.Verify()
	if err != nil {
		return nil, s.wrap(err)
	}
	return &turnctl.VerifyReply{VerifyReport: rep, OK: len(rep.Corrupt) == 0}, nil
}

// checkText rejects control characters in a one-line field.
func checkText(name, v string) error {
	if len(v) > 4096 {
		return errorf(turnctl.CodeBadRequest, "%s is too long (%d bytes; at most 4096)", name, len(v))
	}
	if strings.ContainsAny(v, "\x00\n\r") {
		return errorf(turnctl.CodeBadRequest, "%s must be one line", name)
	}
	return nil
}

// cleanPath checks a root-relative path from a request.
func cleanPath(p string) (string, error) {
	c, ok := ckpt.Clean(p)
	if !ok {
		return "", errorf(turnctl.CodeBadRequest, "bad path %q: paths are relative to the project root, without ..", p)
	}
	return c, nil
}

// invalidatingTree tells the gate about every path a rewind changes.
type invalidatingTree struct {
	ckpt.Tree
	gate Gate
}

func (t invalidatingTree) RemoveAll(p string) error {
	defer t.gate.Invalidate(p)
	return t.Tree.RemoveAll(p)
}

func (t invalidatingTree) Mkdir(p string, mode uint32) error {
	defer t.gate.Invalidate(p)
	return t.Tree.Mkdir(p, mode)
}

func (t invalidatingTree) Symlink(target, p string) error {
	defer t.gate.Invalidate(p)
	return t.Tree.Symlink(target, p)
}

func (t invalidatingTree) Mknod(p string, st ckpt.State) error {
	defer t.gate.Invalidate(p)
	return t.Tree.Mknod(p, st)
}

func (t invalidatingTree) WriteFile(p string, st ckpt.State, r io.Reader) error {
	defer t.gate.Invalidate(p)
	return t.Tree.WriteFile(p, st, r)
}

func (t invalidatingTree) PatchFile(p string, size int64, spans []int64, r io.ReaderAt) error {
	if t.gate.WritesPast(p) {
		return ckpt.ErrWrittenPast
	}
	defer t.gate.Invalidate(p)
	return t.Tree.PatchFile(p, size, spans, r)
}

func (t invalidatingTree) Chmod(p string, mode uint32) error {
	defer t.gate.Invalidate(p)
	return t.Tree.Chmod(p, mode)
}

func (t invalidatingTree) Lchown(p string, uid, gid uint32) error {
	defer t.gate.Invalidate(p)
	return t.Tree.Lchown(p, uid, gid)
}

func (t invalidatingTree) Rename(from, to string) error {
	defer t.gate.Invalidate(to)
	defer t.gate.Invalidate(from)
	err := t.Tree.Rename(from, to)
	if err == nil {
		t.gate.Moved(from, to, false)
	}
	return err
}

func (t invalidatingTree) Hardlink(from, to string) error {
	defer t.gate.Invalidate(to)
	defer t.gate.Invalidate(from) // its link count
	if err := t.Tree.Hardlink(from, to); err != nil {
		return err
	}
	if st, ino, err := t.Tree.LstatInode(to); err == nil && st.Type.Linkable() {
		t.gate.NoteLink(ino.Ino, from)
		t.gate.NoteLink(ino.Ino, to)
	}
	return nil
}

// LinkNames makes the overlay's knowledge of hard links the store's.
func (t invalidatingTree) LinkNames(ino uint64) []string { return t.gate.LinkNames(ino) }

func (t invalidatingTree) Exchange(a, b string) error {
	defer t.gate.Invalidate(b)
	defer t.gate.Invalidate(a)
	err := t.Tree.Exchange(a, b)
	if err == nil {
		t.gate.Moved(a, b, true)
	}
	return err
}

func wireState(st ckpt.State) *turnctl.FileState {
	if !st.Exists() {
		return nil
	}
	return &turnctl.FileState{Type: st.Type, Mode: fmt.Sprintf("%04o", st.Mode), UID: st.UID, GID: st.GID, Size: st.Size, Target: st.Target}
}

// Viewer mounts read-only views of a turn's tree (ckptfs mount --at):
// the daemon implements it, since mounting is not the Service's business.
type Viewer interface {
	// MountView mounts the tree at the end of turn n on dir and returns
	// once it is live.
	MountView(n uint64, dir string) error
}

// SetViewer lets the Service answer MountAt with v.
func (s *Service) SetViewer(v Viewer) { s.viewer = v }

// MountAt mounts a read-only view of the tree at the end of a turn.
func (s *Service) MountAt(ctx context.Context, req turnctl.MountAtRequest) (*turnctl.MountAtReply, error) {
	if req.Dir == "" || !filepath.IsAbs(req.Dir) || filepath.Clean(req.Dir) != req.Dir {
		return nil, errorf(turnctl.CodeBadRequest, "mount-at: %q is not a clean absolute path", req.Dir)
	}
	if s.viewer == nil {
		return nil, errorf(turnctl.CodeConflict, "this daemon does not serve views")
	}
	n, err := s.resolveTurn(req.Turn)
	if err != nil {
		return nil, err
	}
	if err := s.viewer.MountView(n, req.Dir); err != nil {
		return nil, s.wrap(err)
	}
	return &turnctl.MountAtReply{Turn: n, Dir: req.Dir}, nil
}
