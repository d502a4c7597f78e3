package control

import (
	"context"
	"strings"

	"ckptfs/internal/ckpt"
	"ckptfs/turnctl"
	"ckptfs/versionstore"
)

// Show lists what one turn changed.
func (s *Service) Show(ctx context.Context, req turnctl.ShowRequest) (*turnctl.ShowReply, error) {
	n, err := s.resolve(req.Turn)
	if err != nil {
		return nil, err
	}
	turn, k := versionstore.SplitPoint(n)
	t, err := s.store.Turn(turn)
	if err != nil {
		return nil, s.wrap(err)
	}
	steps, err := s.store.Steps(turn)
	if err != nil {
		return nil, s.wrap(err)
	}
	var step *ckpt.Step
	if k > 0 {
		step = &steps[k-1]
	} else if !strings.HasPrefix(req.Turn, "ref:") && strings.Contains(req.Turn, ".") && len(steps) == 1 {
		// "N.1" of a turn that is one step resolves to the turn: it is
		// still the step that was asked for.
		step = &steps[0]
	}
	if len(req.Paths) > 0 {
		prefixes, err := cleanPaths(req.Paths)
		if err != nil {
			return nil, err
		}
		cs, err := s.turnStoreChanges(n)
		if err != nil {
			return nil, s.wrap(err)
		}
		fcs, st, err := s.fileChanges(pathHistory(cs, prefixes), req.Patch, n)
		if err != nil {
			return nil, s.wrap(err)
		}
		return &turnctl.ShowReply{Turn: t, Step: step, Steps: steps, Changes: fcs, Stats: st}, nil
	}
	m := s.mark()
	fcs, st, err := s.turnChanges(n, req.Patch)
	if err != nil {
		return nil, s.wrap(err)
	}
	if k == 0 {
		if t.Stats == nil && !t.Open {
			s.cacheStats(n, st, m)
		}
		t.Stats = &st
	}
	return &turnctl.ShowReply{Turn: t, Step: step, Steps: steps, Changes: fcs, Stats: st}, nil
}

// cleanPaths checks the root-relative paths of a request.
func cleanPaths(paths []string) ([]string, error) {
	out := make([]string, 0, len(paths))
	for _, p := range paths {
		c, err := cleanPath(p)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// Diff compares the state at the end of one turn with another (or with the
// live tree), optionally only below some paths.
func (s *Service) Diff(ctx context.Context, req turnctl.DiffRequest) (*turnctl.DiffReply, error) {
	// To first: when neither exists, the error names the later one, the
	// turn asked about (the page's patch of turn N diffs N-1 to N).
	to := versionstore.Now
	rep := &turnctl.DiffReply{}
	var err error
	if spec := strings.TrimSpace(req.To); spec != "" && spec != "now" {
		if to, err = s.resolve(spec); err != nil {
			return nil, err
		}
		tn, k := versionstore.SplitPoint(to)
		rep.To, rep.ToStep = &tn, k
	}
	from, err := s.resolve(req.From)
	if err != nil {
		return nil, err
	}
	rep.From, rep.FromStep = versionstore.SplitPoint(from)
	prefixes, err := cleanPaths(req.Paths)
	if err != nil {
		return nil, err
	}
	cs, err := s.store.Changes(from, to, s.tree)
	if err != nil {
		return nil, s.wrap(err)
	}
	if req.Paths != nil {
		cs = versionstore.RestrictChanges(cs, prefixes)
	}
	if rep.Changes, rep.Stats, err = s.fileChanges(cs, true, to); err != nil {
		return nil, s.wrap(err)
	}
	return rep, nil
}

// pathHistory keeps the changes that happened to the paths prefixes
// name, for their history (log and show with paths): those at or below
// one of them, a rename whole when either of its ends is (where the path
// came from, or went). A directory renamed above a path needs no rule of
// its own: Changes lists each path it moved as a rename of its own, and
// the directory's change is not the file's. A path-limited diff and a
// restore keep only the half inside instead (versionstore.RestrictChanges):
// they act on those paths alone.
func pathHistory(cs []versionstore.Change, prefixes []string) []versionstore.Change {
	out := []versionstore.Change{}
	for _, c := range cs {
		if underAny(c.Path, prefixes) || c.From != "" && underAny(c.From, prefixes) {
			out = append(out, c)
		}
	}
	return out
}

func underAny(p string, prefixes []string) bool {
	for _, d := range prefixes {
		if _, ok := ckpt.Under(p, d); ok {
			return true
		}
	}
	return false
}

// Cat returns a regular file's bytes at the end of a turn.
func (s *Service) Cat(ctx context.Context, req turnctl.CatRequest) (*turnctl.CatReply, error) {
	n, err := s.resolve(req.Turn)
	if err != nil {
		return nil, err
	}
	p, err := cleanPath(req.Path)
	if err != nil {
		return nil, err
	}
	if p == "" {
		return nil, errorf(turnctl.CodeBadRequest, "cat needs a file path")
	}
	rc, st, err := s.store.OpenAt(n, p, s.tree)
	if err != nil {
		return nil, s.wrap(err)
	}
	// What the path was is an answer, not a malformed request: no file
	// there is "not found" (exit 1), whatever was there instead.
	if st.Type != ckpt.Regular {
		rc.Close()
		switch st.Type {
		case ckpt.Absent:
			return nil, errorf(turnctl.CodeNotFound, "%s did not exist at the end of %s", p, versionstore.PointWord(n))
		case ckpt.Symlink:
			return nil, errorf(turnctl.CodeNotFound, "%s is not a file at the end of %s: a symlink to %s", p, versionstore.PointWord(n), st.Target)
		}
		return nil, errorf(turnctl.CodeNotFound, "%s is not a file at the end of %s: a %s", p, versionstore.PointWord(n), typeName(st.Type))
	}
	return &turnctl.CatReply{Turn: n, State: *wireState(st), Body: rc}, nil
}

func typeName(t ckpt.Type) string {
	switch t {
	case ckpt.Dir:
		return "directory"
	case ckpt.Special:
		return "device, FIFO or socket"
	case ckpt.FIFO:
		return "FIFO"
	case ckpt.Socket:
		return "socket"
	case ckpt.CharDevice:
		return "character device"
	case ckpt.BlockDevice:
		return "block device"
	}
	return t.String()
}
