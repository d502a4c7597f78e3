package turnctl

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"strings"
)

// TreeRequest asks for the tree as it was at the end of a turn (POST
// /v1/tree; checkout, export). The reply body is a tar stream (TreeReply).
type TreeRequest struct {
	Turn string `json:"turn"`
	// Base: only the paths whose state at the end of Turn differs from
	// their state at the end of Base, each with its state at Turn; a path
	// gone (deleted, or the old name of a rename) is an entry marked
	// PAXDeleted. "" the whole tree.
	Base string `json:"base,omitempty"`
}

// TreeReply carries the tree as a tar stream (PAX format) in Body, which
// the caller closes: entries sorted by path, parents first, the root
// itself as ".", every entry with its exact mode bits (07777), owner and
// type; a hard link is a tar link to the first name of its inode;
// directories come with no bytes. ReadTree reads it.
type TreeReply struct {
	Turn uint64 `json:"turn"`
	// Step is the step of Turn whose end the tree is ("checkout 3.2");
	// 0 for the end of the whole turn.
	Step int           `json:"step,omitempty"`
	Body io.ReadCloser `json:"-"`
}

// PAX records of the tree stream, on entries of type tar.TypeReg and size
// 0 unless said otherwise.
const (
	// PAXDeleted: the path is gone at Turn (a delta's entry).
	PAXDeleted = "CKPTFS.deleted"
	// PAXLost: a regular file whose bytes at Turn were never captured
	// (changed while the project was not mounted): not in the stream.
	PAXLost = "CKPTFS.lost"
	// PAXSocket: a Unix socket node (tar has no type for it).
	PAXSocket = "CKPTFS.socket"
	// PAXError: the stream stops here, for this reason (its value).
	PAXError = "CKPTFS.error"
	// PAXEnd: the last entry of a whole stream (name ".ckptfs-end").
	PAXEnd = "CKPTFS.end"
)

// TreeEndName is the name of the entry that ends a whole stream.
const TreeEndName = ".ckptfs-end"

// ReadTree reads a tree stream and calls fn for each entry, with its
// bytes to read for a regular file. It returns the error the stream ends
// with (PAXError), or io.ErrUnexpectedEOF when the stream stops before its
// end entry (the daemon died, say).
func ReadTree(r io.Reader, fn func(h *tar.Header, body io.Reader) error) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("the tree stream ended early: %w", io.ErrUnexpectedEOF)
		}
		if err != nil {
			return fmt.Errorf("reading the tree stream: %w", err)
		}
		if msg, ok := h.PAXRecords[PAXError]; ok {
			return &Error{Code: CodeInternal, Message: msg}
		}
		if _, ok := h.PAXRecords[PAXEnd]; ok {
			return nil
		}
		if name := strings.TrimSuffix(h.Name, "/"); name != "." && !ValidTreeName(name) {
			return fmt.Errorf("the tree stream holds a bad name %q", h.Name)
		}
		if err := fn(h, tr); err != nil {
			return err
		}
	}
}

// ValidTreeName reports whether name is a clean relative path that stays
// below the root.
func ValidTreeName(name string) bool {
	if name == "" || strings.HasPrefix(name, "/") {
		return false
	}
	for _, part := range strings.Split(name, "/") {
		if part == "" || part == "." || part == ".." {
			return false
		}
	}
	return true
}
