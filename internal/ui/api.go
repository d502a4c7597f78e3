package ui

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"ckptfs/internal/bytejson"
	"ckptfs/internal/ckpt"
	"ckptfs/turnctl"
)

// api.go: the JSON API the page calls. Reads are GETs; actions are POSTs
// of a JSON body (ServeHTTP has checked their CSRF token). Every call is
// one or two requests to the daemon; what a page of a long list needs is
// cut here, so that the browser never holds 20,000 rows at once.

const (
	// pageTurns is the default number of timeline rows per page.
	pageTurns = 200
	// pageChanges is the default number of a turn's changes per page.
	pageChanges = 500
	// maxPage bounds any page asked for.
	maxPage = 5000
	// reportCut is how many changes an action's report lists.
	reportCut = 200
)

// row is one turn of the timeline, as the page draws it.
type row struct {
	Num      uint64      `json:"num"`
	Kind     ckpt.Kind   `json:"kind"`
	Label    string      `json:"label"`
	Refs     []string    `json:"refs"`
	Start    time.Time   `json:"start"`
	End      *time.Time  `json:"end"`
	Open     bool        `json:"open"`
	Programs []string    `json:"programs"`
	Parent   *uint64     `json:"parent"`
	Target   *uint64     `json:"target"`
	Stats    *ckpt.Stats `json:"stats"`
	Pin      *ckpt.Pin   `json:"pin"`
	Lane     *lane       `json:"lane,omitempty"`
	// MergedFrom: the forgotten turns MergedFrom..Num-1 were merged
	// into this one (0: none).
	MergedFrom uint64 `json:"merged_from,omitempty"`
}

func rowOf(t ckpt.Turn, pins map[uint64]ckpt.Pin) row {
	r := row{Num: t.Num, Kind: t.Kind, Label: t.Label, Refs: t.Refs, Start: t.Start, Open: t.Open,
		Programs: t.Programs, Target: t.Target, Stats: t.Stats, MergedFrom: t.MergedFrom}
	if r.Refs == nil {
		r.Refs = []string{}
	}
	if r.Programs == nil {
		r.Programs = []string{}
	}
	if !t.End.IsZero() {
		end := t.End
		r.End = &end
	}
	if p, ok := t.Parent(); ok {
		r.Parent = &p
	}
	if p, ok := pins[t.Num]; ok {
		r.Pin = &p
	}
	return r
}

// timelineCache keeps the last timeline laid out, for paging through it:
// it is valid while the daemon's latest turn, open state and kept turns
// (StatusReply.History: a forget, a pin, the background gc) are the same
// and no action ran since.
type timelineCache struct {
	key   string
	rows  []row
	width int
	start *ckpt.HistoryStart
	at    time.Time
}

// turnCache keeps the changes of the last closed turns asked for, for
// paging through a turn of 20,000 files without asking the daemon again:
// for turnFresh at most (a forget elsewhere may merge turns into one).
type turnCache struct {
	gen     int // bumped by every action: a gc may forget turns
	entries []*turnEntry
}

type turnEntry struct {
	gen int
	num uint64
	rep *turnctl.ShowReply
	at  time.Time
}

const (
	turnCacheSize = 4
	turnFresh     = 30 * time.Second
)

// invalidate drops what an action may have made stale.
func (s *Server) invalidate() {
	s.mu.Lock()
	s.cache = timelineCache{}
	s.turns.gen++
	s.mu.Unlock()
}

type timelineReply struct {
	Latest  uint64             `json:"latest"`
	Current uint64             `json:"current"` // the turn the tree is in the state of
	Open    bool               `json:"open"`
	History uint64             `json:"history"` // the daemon's StatusReply.History
	Total   int                `json:"total"`
	Offset  int                `json:"offset"`
	Width   int                `json:"width"`
	Start   *ckpt.HistoryStart `json:"start"`
	Rows    []row              `json:"rows"`
}

// timeline: GET /api/timeline?offset=O&limit=N, a page of the timeline
// newest first, each row with its lane.
func (s *Server) timeline(w http.ResponseWriter, r *http.Request) {
	offset, limit := paging(r, pageTurns)
	st, err := s.latest(r.Context())
	if err != nil {
		apiError(w, err)
		return
	}
	key := fmt.Sprintf("%d/%v/%d", st.Latest, st.Open, st.History)
	s.mu.Lock()
	c := s.cache
	s.mu.Unlock()
	// An open turn's counts change as it goes: ask again sooner.
	if c.key != key || st.Open && time.Since(c.at) > time.Second {
		rep, err := s.h.Log(r.Context(), turnctl.LogRequest{})
		if err != nil {
			apiError(w, err)
			return
		}
		pins := pinMap(rep.Pins)
		lanes, width := layout(rep.Turns)
		c = timelineCache{key: key, width: width, start: rep.Start, at: time.Now(), rows: make([]row, len(rep.Turns))}
		for i, t := range rep.Turns {
			c.rows[i] = rowOf(t, pins)
			c.rows[i].Lane = &lanes[i]
		}
		s.mu.Lock()
		s.cache = c
		s.mu.Unlock()
	}
	out := timelineReply{Latest: st.Latest, Open: st.Open, History: st.History, Total: len(c.rows), Offset: offset, Width: c.width, Start: c.start, Rows: []row{}}
	if len(c.rows) > 0 {
		out.Current = c.rows[0].Num
	}
	if offset < len(c.rows) {
		out.Rows = c.rows[offset:min(len(c.rows), offset+limit)]
	}
	writeJSON(w, out)
}

func pinMap(pins []ckpt.Pin) map[uint64]ckpt.Pin {
	m := make(map[uint64]ckpt.Pin, len(pins))
	for _, p := range pins {
		m[p.Turn] = p
	}
	return m
}

// paging reads offset and limit (def if absent), bounded.
func paging(r *http.Request, def int) (int, int) {
	offset, _ := strconv.Atoi(r.URL.Query().Get("offset"))
	limit, err := strconv.Atoi(r.URL.Query().Get("limit"))
	if err != nil || limit <= 0 {
		limit = def
	}
	return max(offset, 0), min(limit, maxPage)
}

// change is a FileChange without its patch, as a turn's list shows it.
type change struct {
	turnctl.FileChange
	Git bool `json:"git"` // inside the project's .git
}

type turnReply struct {
	Turn   ckpt.Turn `json:"turn"`
	Parent *uint64   `json:"parent"`
	Pin    *ckpt.Pin `json:"pin"`
	// Steps are the turn's steps when it has more than one (turnctl
	// step: one tool call's changes each); else none.
	Steps []ckpt.Step `json:"steps"`
	// Step is the step shown (n=3.2: its own changes), else nil.
	Step    *ckpt.Step `json:"step"`
	Stats   ckpt.Stats `json:"stats"`
	Total   int        `json:"total"`
	Offset  int        `json:"offset"`
	Changes []change   `json:"changes"`
}

// turn: GET /api/turn?n=TURN&offset=O&limit=N, one turn (its whole
// prompt) and a page of its changes, without patches (see diff); n=N.K
// gives step K's own changes.
func (s *Server) turn(w http.ResponseWriter, r *http.Request) {
	n := r.URL.Query().Get("n")
	offset, limit := paging(r, pageChanges)
	rep, err := s.show(r.Context(), n)
	if err != nil {
		apiError(w, err)
		return
	}
	out := turnReply{Turn: rep.Turn, Step: rep.Step, Stats: rep.Stats, Total: len(rep.Changes), Offset: offset, Changes: []change{}, Steps: []ckpt.Step{}}
	if len(rep.Steps) > 1 {
		out.Steps = rep.Steps
	}
	if p, ok := rep.Turn.Parent(); ok {
		out.Parent = &p
	}
	if lr, err := s.h.Log(r.Context(), turnctl.LogRequest{N: 1}); err == nil {
		if p, ok := pinMap(lr.Pins)[rep.Turn.Num]; ok {
			out.Pin = &p
		}
	}
	if offset < len(rep.Changes) {
		for _, c := range rep.Changes[offset:min(len(rep.Changes), offset+limit)] {
			c.Patch = ""
			out.Changes = append(out.Changes, change{FileChange: c, Git: c.InGitDir()})
		}
	}
	writeJSON(w, out)
}

// show asks the daemon what turn n changed, from the cache for a closed
// turn asked for lately.
func (s *Server) show(ctx context.Context, n string) (*turnctl.ShowReply, error) {
	num, numErr := strconv.ParseUint(n, 10, 64)
	if numErr == nil {
		s.mu.Lock()
		for _, e := range s.turns.entries {
			if e.num == num && e.gen == s.turns.gen && time.Since(e.at) < turnFresh {
				s.mu.Unlock()
				return e.rep, nil
			}
		}
		s.mu.Unlock()
	}
	rep, err := s.h.Show(ctx, turnctl.ShowRequest{Turn: n})
	if err != nil {
		return nil, err
	}
	// git's own files (objects, index, refs: dozens per commit) after the
	// project's, so that the first page shows what people look for.
	slices.SortStableFunc(rep.Changes, func(a, b turnctl.FileChange) int {
		return cmp.Compare(b2i(a.InGitDir()), b2i(b.InGitDir()))
	})
	if numErr == nil && !rep.Turn.Open {
		s.mu.Lock()
		e := &turnEntry{gen: s.turns.gen, num: rep.Turn.Num, rep: rep, at: time.Now()}
		s.turns.entries = append([]*turnEntry{e}, s.turns.entries[:min(len(s.turns.entries), turnCacheSize-1)]...)
		s.mu.Unlock()
	}
	return rep, nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// diff: GET /api/diff?n=TURN&path=P, the change turn n made to path P
// with its patch: one file's diff at a time, so that a turn of 20,000
// files costs only the files looked at.
func (s *Server) diff(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p := q.Get("path")
	if p == "" {
		apiError(w, &turnctl.Error{Code: turnctl.CodeBadRequest, Message: "diff needs a path"})
		return
	}
	rep, err := s.h.Show(r.Context(), turnctl.ShowRequest{Turn: q.Get("n"), Patch: true, Paths: []string{p}})
	if err != nil {
		apiError(w, err)
		return
	}
	for _, c := range rep.Changes {
		if c.Path == p || c.From == p {
			writeJSON(w, change{FileChange: c, Git: c.InGitDir()})
			return
		}
	}
	apiError(w, &turnctl.Error{Code: turnctl.CodeNotFound, Message: fmt.Sprintf("turn %s did not change %s", q.Get("n"), p)})
}

// patch: GET /api/patch?n=TURN[&from=TURN], what turn n changed as one
// patch `git apply` takes on the tree of turn from (default n-1; the page
// gives the turn before those merged into n: turnctl diff FROM N), for the page
// to download. As diff does, it leaves out the changes inside .git, on a
// "# ckptfs:" line.
func (s *Server) patch(w http.ResponseWriter, r *http.Request) {
	n, err := strconv.ParseUint(r.URL.Query().Get("n"), 10, 64)
	if err != nil || n == 0 {
		apiError(w, &turnctl.Error{Code: turnctl.CodeBadRequest, Message: "patch needs a turn number after 0"})
		return
	}
	to := strconv.FormatUint(n, 10)
	from := strconv.FormatUint(n-1, 10)
	if f, err := strconv.ParseUint(r.URL.Query().Get("from"), 10, 64); err == nil && f < n {
		from = strconv.FormatUint(f, 10)
	}
	rep, err := s.h.Diff(r.Context(), turnctl.DiffRequest{From: from, To: to})
	if err != nil {
		apiError(w, err)
		return
	}
	w.Header().Set("Content-Type", "text/x-diff; charset=utf-8")
	w.Header().Set("Content-Disposition", `attachment; filename="turn-`+to+`.patch"`)
	git := 0
	for _, c := range rep.Changes {
		if c.InGitDir() {
			git++
			continue
		}
		io.WriteString(w, c.Patch)
	}
	if git > 0 {
		fmt.Fprintf(w, "# ckptfs: left out %d changes inside .git: git apply does not write there\n", git)
	}
}

// imageTypes are the files cat serves as what they are (the page shows
// them before and after); anything else is a download. SVG is not among
// them: it can carry script.
var imageTypes = map[string]bool{".png": true, ".jpg": true, ".jpeg": true, ".gif": true, ".webp": true, ".bmp": true, ".ico": true}

// cat: GET /api/cat?n=TURN&path=P, the file's bytes at the end of turn n.
func (s *Server) cat(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	rep, err := s.h.Cat(r.Context(), turnctl.CatRequest{Turn: q.Get("n"), Path: q.Get("path")})
	if err != nil {
		apiError(w, err)
		return
	}
	defer rep.Body.Close()
	ext := strings.ToLower(path.Ext(q.Get("path")))
	if imageTypes[ext] {
		w.Header().Set("Content-Type", mime.TypeByExtension(ext))
	} else {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Disposition", "attachment")
	}
	io.Copy(w, rep.Body)
}

type searchReply struct {
	Rows []row `json:"rows"`
}

// search: GET /api/search?s=TEXT&grep=PATTERN&program=NAME&path=P, the
// turns that pass every filter given (log -S, --grep, --program, a
// path's history), newest first, at most limit.
func (s *Server) search(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	req := turnctl.LogRequest{Pickaxe: q.Get("s"), Grep: q.Get("grep"), Programs: q["program"]}
	if p := q.Get("path"); p != "" {
		rel, err := s.projectPath(p)
		if err != nil {
			apiError(w, err)
			return
		}
		req.Paths = []string{rel}
	}
	if !req.Filtered() {
		apiError(w, &turnctl.Error{Code: turnctl.CodeBadRequest, Message: "search needs text (-S), a pattern (--grep), a program or a path"})
		return
	}
	_, req.N = paging(r, pageTurns)
	rep, err := s.h.Log(r.Context(), req)
	if err != nil {
		apiError(w, err)
		return
	}
	pins := pinMap(rep.Pins)
	out := searchReply{Rows: make([]row, 0, len(rep.Turns))}
	for _, t := range rep.Turns {
		out.Rows = append(out.Rows, rowOf(t, pins))
	}
	writeJSON(w, out)
}

// projectPath is a path typed into the page's search, relative to the
// project: an absolute one is taken relative to its root (through
// symlinks too), as turnctl takes the paths of its command line, and
// refused outside it; a relative one is already.
func (s *Server) projectPath(p string) (string, error) {
	if !filepath.IsAbs(p) {
		return strings.Trim(p, "/"), nil
	}
	root := filepath.Clean(s.opts.Root)
	if r, ok := turnctl.RelPath(root, filepath.Clean(p)); ok {
		return r, nil
	}
	return "", &turnctl.Error{Code: turnctl.CodeBadRequest, Message: fmt.Sprintf("%s is outside the project %s: give a path inside it, or one relative to it", p, root)}
}

// latest asks the daemon for its latest turn and whether one is open: a
// brief status, which does not list the open turn's changes; a daemon
// older than that request gets the whole one.
func (s *Server) latest(ctx context.Context) (*turnctl.StatusReply, error) {
	st, err := s.h.Status(ctx, turnctl.StatusRequest{Brief: true})
	var te *turnctl.Error
	if errors.As(err, &te) && te.Code == turnctl.CodeBadRequest {
		st, err = s.h.Status(ctx, turnctl.StatusRequest{})
	}
	return st, err
}

// events: GET /api/events, server-sent events: an "update" event whenever
// the daemon's latest turn, its open state or its kept turns change (a
// turn began or ended, a rewind was made elsewhere, a forget, a pin, the
// gc), found by asking it every
// Options.Poll; the first event says how things are now.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		apiError(w, errors.New("streaming unsupported"))
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	fl.Flush()
	tick := time.NewTicker(s.opts.Poll)
	defer tick.Stop()
	last, quiet := "", 0
	for {
		st, err := s.latest(r.Context())
		switch {
		case err != nil && r.Context().Err() != nil:
			return
		case err != nil:
			msg, _ := bytejson.Marshal(err.Error())
			fmt.Fprintf(w, "event: error\ndata: %s\n\n", msg)
			fl.Flush()
		default:
			key := fmt.Sprintf(`{"latest":%d,"open":%v,"history":%d}`, st.Latest, st.Open, st.History)
			if key != last {
				last, quiet = key, 0
				fmt.Fprintf(w, "event: update\ndata: %s\n\n", key)
				fl.Flush()
			} else if quiet++; quiet*int(s.opts.Poll/time.Millisecond) >= 15000 {
				quiet = 0
				fmt.Fprint(w, ": keep-alive\n\n")
				fl.Flush()
			}
		}
		select {
		case <-r.Context().Done():
			return
		case <-tick.C:
		}
	}
}

// Actions. Each takes its request as the JSON body of a POST and answers
// the daemon's reply, its list of changes cut to reportCut.

type actionRequest struct {
	Turn      string   `json:"turn"`
	Paths     []string `json:"paths"`
	DryRun    bool     `json:"dry_run"`
	Conflicts string   `json:"conflicts"`
	Note      string   `json:"note"`
	// Also (restore) are paths restored with Paths unless that is
	// refused as naming nothing (absent at the turn and now): a rename's
	// new name, restored with its old one, which a later turn may have
	// removed since.
	Also []string `json:"also"`
}

func readAction(w http.ResponseWriter, r *http.Request) (*actionRequest, bool) {
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		apiError(w, &turnctl.Error{Code: turnctl.CodeBadRequest, Message: "actions take a JSON body (Content-Type: application/json)"})
		return nil, false
	}
	var req actionRequest
	body, err := io.ReadAll(io.LimitReader(r.Body, turnctl.MaxRequestBytes))
	if err == nil {
		err = bytejson.UnmarshalStrict(body, &req)
	}
	if err != nil {
		apiError(w, &turnctl.Error{Code: turnctl.CodeBadRequest, Message: "bad request body: " + err.Error()})
		return nil, false
	}
	return &req, true
}

// rewindReport is a RewindReply with its changes cut: the project's
// changes only, as turnctl's report lists them, git's own files counted
// apart (a rewind past a commit changes dozens of them, and ".git" sorts
// first: listed, they would fill the cut list and hide the project's).
type rewindReport struct {
	*turnctl.RewindReply
	More int `json:"more"` // the project's changes left out of Changes
	Git  int `json:"git"`  // changes inside .git, left out of Changes
}

func (s *Server) report(w http.ResponseWriter, rep *turnctl.RewindReply, err error) {
	if err != nil {
		apiError(w, err)
		return
	}
	if !rep.DryRun {
		s.invalidate()
	}
	out := rewindReport{RewindReply: rep}
	project := rep.Changes[:0:0]
	for _, c := range rep.Changes {
		if c.InGitDir() {
			out.Git++
		} else {
			project = append(project, c)
		}
	}
	rep.Changes = project
	if len(rep.Changes) > reportCut {
		out.More = len(rep.Changes) - reportCut
		rep.Changes = rep.Changes[:reportCut]
	}
	for i := range rep.Changes {
		rep.Changes[i].Patch = ""
	}
	writeJSON(w, out)
}

// rewind: POST /api/rewind {"turn", "dry_run"}.
func (s *Server) rewind(w http.ResponseWriter, r *http.Request) {
	if req, ok := readAction(w, r); ok {
		rep, err := s.h.Rewind(r.Context(), turnctl.RewindRequest{Turn: req.Turn, DryRun: req.DryRun})
		s.report(w, rep, err)
	}
}

// restore: POST /api/restore {"turn", "paths", "also", "dry_run"}.
func (s *Server) restore(w http.ResponseWriter, r *http.Request) {
	if req, ok := readAction(w, r); ok {
		if len(req.Paths) == 0 {
			apiError(w, &turnctl.Error{Code: turnctl.CodeBadRequest, Message: "restore needs the paths to restore"})
			return
		}
		rep, err := s.h.Restore(r.Context(), turnctl.RestoreRequest{Turn: req.Turn, Paths: append(req.Paths, req.Also...), DryRun: req.DryRun})
		var te *turnctl.Error
		if len(req.Also) > 0 && errors.As(err, &te) && te.Code == turnctl.CodeNotFound {
			// One of them names nothing; if it is one of Also, restoring
			// it would do nothing: Paths alone (refused in turn if it is
			// one of them).
			rep, err = s.h.Restore(r.Context(), turnctl.RestoreRequest{Turn: req.Turn, Paths: req.Paths, DryRun: req.DryRun})
		}
		s.report(w, rep, err)
	}
}

// revert: POST /api/revert {"turn", "dry_run", "conflicts"}.
func (s *Server) revert(w http.ResponseWriter, r *http.Request) {
	if req, ok := readAction(w, r); ok {
		rep, err := s.h.Revert(r.Context(), turnctl.RevertRequest{Turn: req.Turn, DryRun: req.DryRun, Conflicts: req.Conflicts})
		s.report(w, rep, err)
	}
}

// undo: POST /api/undo {"dry_run"}.
func (s *Server) undo(w http.ResponseWriter, r *http.Request) {
	if req, ok := readAction(w, r); ok {
		rep, err := s.h.Undo(r.Context(), turnctl.UndoRequest{DryRun: req.DryRun})
		s.report(w, rep, err)
	}
}

// pin: POST /api/pin {"turn", "note"}.
func (s *Server) pin(w http.ResponseWriter, r *http.Request) {
	if req, ok := readAction(w, r); ok {
		rep, err := s.h.Pin(r.Context(), turnctl.PinRequest{Turn: req.Turn, Note: req.Note})
		if err != nil {
			apiError(w, err)
			return
		}
		s.invalidate()
		writeJSON(w, rep)
	}
}

// unpin: POST /api/unpin {"turn"}.
func (s *Server) unpin(w http.ResponseWriter, r *http.Request) {
	if req, ok := readAction(w, r); ok {
		rep, err := s.h.Unpin(r.Context(), turnctl.UnpinRequest{Turn: req.Turn})
		if err != nil {
			apiError(w, err)
			return
		}
		s.invalidate()
		writeJSON(w, rep)
	}
}

// gc: POST /api/gc {"dry_run"}.
func (s *Server) gc(w http.ResponseWriter, r *http.Request) {
	if req, ok := readAction(w, r); ok {
		rep, err := s.h.GC(r.Context(), turnctl.GCRequest{DryRun: req.DryRun})
		if err != nil {
			apiError(w, err)
			return
		}
		if !req.DryRun {
			s.invalidate()
		}
		writeJSON(w, rep)
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	data, err := bytejson.Marshal(v)
	if err != nil {
		apiError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(append(data, '\n'))
}

// apiError answers err as {"error": "...", "code": "..."} with the
// status of its turnctl.Error code.
func apiError(w http.ResponseWriter, err error) {
	status, code := http.StatusInternalServerError, turnctl.CodeInternal
	var te *turnctl.Error
	if errors.As(err, &te) {
		code = te.Code
		switch te.Code {
		case turnctl.CodeBadRequest:
			status = http.StatusBadRequest
		case turnctl.CodeNotFound:
			status = http.StatusNotFound
		case turnctl.CodeConflict:
			status = http.StatusConflict
		case turnctl.CodeForbidden:
			status = http.StatusForbidden
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	data, _ := bytejson.Marshal(map[string]string{"error": err.Error(), "code": code})
	w.Write(append(data, '\n'))
}

// httpError answers a refused request with a one-line text.
func httpError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	fmt.Fprintln(w, msg)
}
