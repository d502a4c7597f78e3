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
	t, err := s.store.Turn(n)
	if err != nil {
		return nil, s.wrap(err)
	}
	m := s.mark()
	fcs, st, err := s.turnChanges(n, req.Patch)
	if err != nil {
		return nil, s.wrap(err)
	}
	if t.Stats == nil && !t.Open {
		s.cacheStats(n, st, m)
	}
	t.Stats = &st
	return &turnctl.ShowReply{Turn: t, Changes: fcs, Stats: st}, nil
}

// Diff compares the state at the end of one turn with another (or with the
// live tree), optionally only below some paths.
func (s *Service) Diff(ctx context.Context, req turnctl.DiffRequest) (*turnctl.DiffReply, error) {
	from, err := s.resolve(req.From)
	if err != nil {
		return nil, err
	}
	to := versionstore.Now
	rep := &turnctl.DiffReply{From: from}
	if spec := strings.TrimSpace(req.To); spec != "" && spec != "now" {
		if to, err = s.resolve(spec); err != nil {
			return nil, err
		}
		rep.To = &to
	}
	var prefixes []string
	for _, p := range req.Paths {
		c, err := cleanPath(p)
		if err != nil {
			return nil, err
		}
		prefixes = append(prefixes, c)
	}
	cs, err := s.store.Changes(from, to, s.tree)
	if err != nil {
		return nil, s.wrap(err)
	}
	if req.Paths != nil {
		cs = versionstore.RestrictChanges(cs, prefixes)
	}
	if rep.Changes, rep.Stats, err = s.fileChanges(cs, true); err != nil {
		return nil, s.wrap(err)
	}
	return rep, nil
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
	if st.Type != ckpt.Regular {
		rc.Close()
		switch st.Type {
		case ckpt.Absent:
			return nil, errorf(turnctl.CodeNotFound, "%s did not exist at the end of turn %d", p, n)
		case ckpt.Symlink:
			return nil, errorf(turnctl.CodeBadRequest, "%s is not a file at the end of turn %d: a symlink to %s", p, n, st.Target)
		}
		return nil, errorf(turnctl.CodeBadRequest, "%s is not a file at the end of turn %d: a %s", p, n, typeName(st.Type))
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
