package versionstore

import (
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/binary"
	"path"
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
func isGitIndex(p string) bool {
	if path.Base(p) != "index" {
		return false
	}
	dir := parentOf(p)
	_, under := ckpt.Under(dir, ckpt.GitDir)
	return under || strings.HasSuffix(dir, "/"+ckpt.GitDir) || strings.Contains(dir, "/"+ckpt.GitDir+"/")
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
		if !indexChecksum(data, idLen) {
			continue
		}
		if es, rest, ok := readIndexEntries(data[12:], version, n, idLen); ok && extensionsFit(rest, idLen) {
			return es, true
		}
	}
	return nil, false
}

// indexChecksum reports whether data ends in the SHA-1 (idLen 20) or
// SHA-256 (32) of what comes before, as git writes an index, or in zeros
// (index.skipHash): which of the two it is tells the ids' length.
func indexChecksum(data []byte, idLen int) bool {
	if len(data) < 12+idLen {
		return false
	}
	body, sum := data[:len(data)-idLen], data[len(data)-idLen:]
	if bytes.Equal(sum, make([]byte, idLen)) {
		return true
	}
	if idLen == 20 {
		h := sha1.Sum(body)
		return bytes.Equal(sum, h[:])
	}
	h := sha256.Sum256(body)
	return bytes.Equal(sum, h[:])
}

// readIndexEntries reads n entries of an index version with ids of idLen
// bytes, and returns them and what follows them.
func readIndexEntries(b []byte, version, n uint32, idLen int) ([][]byte, []byte, bool) {
	const statLen = 40 // ctime, mtime (8 each), dev, ino, mode, uid, gid, size (4 each)
	const modeAt = 24
	entries := make([][]byte, 0, min(int(n), len(b)/(statLen+idLen+2+8))) // n is the file's word
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

// extensionsFit reports whether what follows the entries is whole
// extensions (a signature, a size, that many bytes) then the checksum
// of idLen bytes, none of them "link": a split index holds its entries
// partly in another file.
func extensionsFit(b []byte, idLen int) bool {
	for len(b) > idLen {
		if len(b) < 8+idLen || string(b[:4]) == "link" {
			return false
		}
		size := uint64(binary.BigEndian.Uint32(b[4:8]))
		if size > uint64(len(b)-8-idLen) {
			return false
		}
		b = b[8+size:]
	}
	return len(b) == idLen
}

// gitIndexRefreshed reports whether path is a git index that changed from
// base to ours only in the stat data it caches.
func (s *Store) gitIndexRefreshed(path string, base, ours resolved, live ckpt.Tree) (bool, error) {
	if !isGitIndex(path) {
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
