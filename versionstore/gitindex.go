package versionstore

import (
	"bytes"
	"encoding/binary"
	"slices"
	"strings"

	"ckptfs/internal/ckpt"
)

// gitindex.go: telling git's refresh of its index from a change of what
// it holds. `git status` rewrites .git/index whenever the stat data it
// caches of a work-tree file is stale, which it is for every file a rewind
// wrote: a revert (or an undo) of the rewind then finds the index changed
// both by the turn and later, though the later change is only that cache.

// isGitIndex reports whether path is a git index: "index" in a .git
// directory, or below one (a worktree's or a submodule's).
func isGitIndex(path string) bool {
	dir, base := splitPath(path)
	if base != "index" {
		return false
	}
	return dir == ".git" || strings.HasPrefix(dir, ".git/") || strings.Contains(dir, "/.git/") || strings.HasSuffix(dir, "/.git")
}

// splitPath splits a relative path at its last slash ("" for the top).
func splitPath(p string) (dir, base string) {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[:i], p[i+1:]
	}
	return "", p
}

// gitIndexEntries returns what a git index holds of each of its entries,
// in order: its path, mode, object id and flags, without the stat data git
// caches beside them (times, device, inode, owner, size) and without the
// extensions. ok is false for what it cannot read as an index of version
// 2, 3 or 4 with SHA-1 or SHA-256 ids, and for a split index (its entries
// are partly in another file).
func gitIndexEntries(data []byte) (entries [][]byte, ok bool) {
	if len(data) < 12 || string(data[:4]) != "DIRC" {
		return nil, false
	}
	version := binary.BigEndian.Uint32(data[4:8])
	if version < 2 || version > 4 {
		return nil, false
	}
	n := binary.BigEndian.Uint32(data[8:12])
	for _, idLen := range []int{20, 32} {
		if es, rest, ok := readIndexEntries(data[12:], version, n, idLen); ok && !hasLinkExtension(rest, idLen) {
			return es, true
		}
	}
	return nil, false
}

// readIndexEntries reads n entries of an index version with ids of idLen
// bytes, and returns them and what follows them.
func readIndexEntries(b []byte, version, n uint32, idLen int) ([][]byte, []byte, bool) {
	const statLen = 40 // ctime, mtime (8 each), dev, ino, mode, uid, gid, size (4 each)
	const modeAt = 24
	entries := make([][]byte, 0, n)
	var prev []byte
	for range n {
		start := len(b)
		fixed := statLen + idLen + 2
		if len(b) < fixed {
			return nil, nil, false
		}
		flags := binary.BigEndian.Uint16(b[statLen+idLen:])
		e := append([]byte(nil), b[modeAt:modeAt+4]...) // mode
		e = append(e, b[statLen:fixed]...)              // id and flags
		b = b[fixed:]
		if flags&0x4000 != 0 { // extended flags (version 3 and later)
			if version < 3 || len(b) < 2 {
				return nil, nil, false
			}
			e = append(e, b[:2]...)
			b = b[2:]
		}
		var name []byte
		if version == 4 {
			drop, k, ok := gitVarint(b)
			if !ok || drop > uint64(len(prev)) {
				return nil, nil, false
			}
			b = b[k:]
			end := bytes.IndexByte(b, 0)
			if end < 0 {
				return nil, nil, false
			}
			name = append(append([]byte(nil), prev[:len(prev)-int(drop)]...), b[:end]...)
			b = b[end+1:]
		} else {
			end := bytes.IndexByte(b, 0)
			if end < 0 {
				return nil, nil, false
			}
			name = b[:end]
			// Entries are padded with 1-8 NULs to a multiple of 8 bytes.
			used := start - len(b) + end
			pad := 8 - used%8
			if len(b) < end+pad {
				return nil, nil, false
			}
			b = b[end+pad:]
		}
		prev = name
		entries = append(entries, append(append(e, 0), name...))
	}
	return entries, b, true
}

// gitVarint decodes git's offset varint (varint.c: each continuation
// byte adds one before the shift) at the start of b, and its length.
func gitVarint(b []byte) (v uint64, n int, ok bool) {
	for n < len(b) && n < 10 {
		c := b[n]
		if n > 0 {
			v++
		}
		v = v<<7 | uint64(c&0x7f)
		n++
		if c&0x80 == 0 {
			return v, n, true
		}
	}
	return 0, 0, false
}

// hasLinkExtension reports whether the extensions after the entries
// (before the trailing id) include "link": a split index.
func hasLinkExtension(b []byte, idLen int) bool {
	for len(b) >= 8+idLen {
		size := binary.BigEndian.Uint32(b[4:8])
		if string(b[:4]) == "link" {
			return true
		}
		if uint64(size) > uint64(len(b)-8) {
			return false
		}
		b = b[8+size:]
	}
	return false
}

// gitIndexRefreshed reports whether path is a git index that changed from
// base to ours only in the stat data it caches.
func (s *Store) gitIndexRefreshed(path string, base, ours resolved, live ckpt.Tree) (bool, error) {
	if !isGitIndex(path) || !base.State.Exists() {
		return false, nil
	}
	return s.sameGitIndexEntries(base, ours, live)
}

// maxGitIndex is the largest index sameGitIndexEntries reads.
const maxGitIndex = 256 << 20

// sameGitIndexEntries reports whether two states of a git index hold the
// same entries, whatever stat data they cache: one is the other refreshed.
func (s *Store) sameGitIndexEntries(x, y resolved, live ckpt.Tree) (bool, error) {
	var es [2][][]byte
	for i, r := range []resolved{x, y} {
		if r.State.Type != ckpt.Regular || r.State.Size > maxGitIndex || r.Lost {
			return false, nil
		}
		data, err := s.readAll(r, live)
		if err != nil {
			return false, err
		}
		var ok bool
		if es[i], ok = gitIndexEntries(data); !ok {
			return false, nil
		}
	}
	return slices.EqualFunc(es[0], es[1], bytes.Equal), nil
}
