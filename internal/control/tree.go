package control

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"ckptfs/internal/ckpt"
	"ckptfs/turnctl"
	"ckptfs/versionstore"
)

// Tree streams the tree at the end of a turn (or what differs from
// another turn's) as the tar stream turnctl.TreeReply describes. The
// states and bytes are the store's forward resolution, the one a restore
// plans with (versionstore.TreeAt, TreeDelta); the project is only read.
// A failure once the stream has begun is its last entry (PAXError).
func (s *Service) Tree(ctx context.Context, req turnctl.TreeRequest) (*turnctl.TreeReply, error) {
	n, err := s.resolve(req.Turn)
	if err != nil {
		return nil, err
	}
	var sn *versionstore.Snapshot
	if strings.TrimSpace(req.Base) != "" {
		base, err := s.resolve(req.Base)
		if err != nil {
			return nil, err
		}
		sn, err = s.store.TreeDelta(base, n, s.tree)
		if err != nil {
			return nil, s.wrap(err)
		}
	} else if sn, err = s.store.TreeAt(n, s.tree); err != nil {
		return nil, s.wrap(err)
	}
	pr, pw := io.Pipe()
	go func() {
		err := s.writeTree(ctx, tar.NewWriter(pw), sn)
		pw.CloseWithError(err)
	}()
	turn, k := versionstore.SplitPoint(n)
	return &turnctl.TreeReply{Turn: turn, Step: k, Body: pr}, nil
}

// writeTree writes sn's entries, then the end entry, or an error entry
// for the failure that stopped it. It returns an error only when the
// stream itself cannot be written.
func (s *Service) writeTree(ctx context.Context, tw *tar.Writer, sn *versionstore.Snapshot) error {
	marker := func(key, val string) error {
		h := &tar.Header{Name: turnctl.TreeEndName, Typeflag: tar.TypeReg, Mode: 0o600, ModTime: time.Unix(0, 0),
			Format: tar.FormatPAX, PAXRecords: map[string]string{key: val}}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		return tw.Close()
	}
	err := s.treeEntries(ctx, tw, sn)
	var we streamError
	if errors.As(err, &we) {
		return we.error
	}
	if err == nil {
		err = s.store.Check(sn)
	}
	if err != nil {
		return marker(turnctl.PAXError, strings.ReplaceAll(s.wrap(err).Error(), "\n", " "))
	}
	return marker(turnctl.PAXEnd, "1")
}

// streamError is a failure to write the stream (the reader went away).
type streamError struct{ error }

func (s *Service) treeEntries(ctx context.Context, tw *tar.Writer, sn *versionstore.Snapshot) error {
	type group struct {
		first string
		lost  bool
	}
	groups := map[[2]uint64]*group{}
	for _, e := range sn.Entries {
		if err := ctx.Err(); err != nil {
			return err
		}
		name := e.Path
		if name == "" {
			name = "."
		}
		st := e.State
		h := &tar.Header{Name: name, Mode: int64(st.Mode & 0o7777), Uid: int(st.UID), Gid: int(st.GID),
			ModTime: time.Unix(0, 0), Format: tar.FormatPAX, Typeflag: tar.TypeReg}
		pax := func(key string) { h.PAXRecords = map[string]string{key: "1"} }
		var g *group
		if e.Linked() {
			k := [2]uint64{e.Inode.Dev, e.Inode.Ino}
			if g = groups[k]; g != nil {
				if g.lost || e.Lost {
					pax(turnctl.PAXLost)
				} else {
					h.Typeflag, h.Linkname = tar.TypeLink, g.first
				}
				if err := tw.WriteHeader(h); err != nil {
					return streamError{err}
				}
				continue
			}
			g = &group{first: name, lost: e.Lost}
			groups[k] = g
		}
		var body io.ReadCloser
		switch st.Type {
		case ckpt.Absent:
			pax(turnctl.PAXDeleted)
		case ckpt.Dir:
			h.Typeflag = tar.TypeDir
		case ckpt.Symlink:
			h.Typeflag, h.Linkname = tar.TypeSymlink, st.Target
		case ckpt.FIFO:
			h.Typeflag = tar.TypeFifo
		case ckpt.Socket:
			pax(turnctl.PAXSocket)
		case ckpt.CharDevice, ckpt.BlockDevice:
			h.Typeflag = tar.TypeChar
			if st.Type == ckpt.BlockDevice {
				h.Typeflag = tar.TypeBlock
			}
			h.Devmajor, h.Devminor = int64(major(st.Rdev)), int64(minor(st.Rdev))
		case ckpt.Regular:
			if e.Lost {
				pax(turnctl.PAXLost)
				break
			}
			rc, err := s.store.OpenEntry(e, s.tree)
			if err != nil {
				return fmt.Errorf("%s at the end of %s: %w", e.Path, versionstore.PointWord(sn.Turn), err)
			}
			body, h.Size = rc, st.Size
		default:
			return fmt.Errorf("%s at the end of %s: a %s, which cannot be written", e.Path, versionstore.PointWord(sn.Turn), typeName(st.Type))
		}
		if err := tw.WriteHeader(h); err != nil {
			if body != nil {
				body.Close()
			}
			return streamError{err}
		}
		if body != nil {
			err := copyEntry(tw, body, h.Size)
			body.Close()
			if err != nil {
				if _, ok := err.(streamError); !ok {
					err = fmt.Errorf("%s at the end of %s: %w", e.Path, versionstore.PointWord(sn.Turn), err)
				}
				return err
			}
		}
	}
	return nil
}

// copyEntry copies size bytes of body into the entry. A file that
// ends early (changed while it was read) or a failed read is padded with
// zeros, so that the stream can carry the error entry next; the reader
// never writes such an entry as it is.
func copyEntry(tw *tar.Writer, body io.Reader, size int64) error {
	n, err := io.CopyN(tw, readErr{body}, size)
	if err == nil {
		return nil
	}
	var re readFailure
	if !errors.As(err, &re) && !errors.Is(err, io.EOF) {
		return streamError{err}
	}
	if _, werr := io.CopyN(tw, zeros{}, size-n); werr != nil {
		return streamError{werr}
	}
	if errors.Is(err, io.EOF) {
		return errors.New("it changed while it was read (the project is in use): run again")
	}
	return re.error
}

type readFailure struct{ error }

// readErr marks the errors of its reader as readFailure.
type readErr struct{ r io.Reader }

func (r readErr) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if err != nil && err != io.EOF {
		err = readFailure{err}
	}
	return n, err
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// major and minor split a Linux device number (glibc's encoding).
func major(dev uint64) uint32 {
	return uint32((dev>>8)&0xfff) | uint32((dev>>32)&^0xfff)
}

func minor(dev uint64) uint32 {
	return uint32(dev&0xff) | uint32((dev>>12)&^0xff)
}
