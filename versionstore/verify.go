package versionstore

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"

	"ckptfs/internal/ckpt"

	"github.com/cockroachdb/pebble/v2"
)

// Verify checks every stored chunk against its checksum and every attic
// file that history refers to. Damage is reported, never repaired.
func (s *Store) Verify() (ckpt.VerifyReport, error) {
	var rep ckpt.VerifyReport
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixChunk}, UpperBound: upper(prefixChunk)})
	if err != nil {
		return rep, err
	}
	for ok := it.First(); ok; ok = it.Next() {
		rep.Chunks++
		key := it.Key()
		plain, err := decodeChunk(it.Value())
		if err != nil {
			rep.Corrupt = append(rep.Corrupt, fmt.Sprintf("chunk %x: %v", key[1:9], err))
			continue
		}
		rep.Bytes += int64(len(plain))
		if sum := sha256.Sum256(plain); !bytes.Equal(sum[:], key[1:]) {
			rep.Corrupt = append(rep.Corrupt, fmt.Sprintf("chunk %x: checksum mismatch", key[1:9]))
		}
	}
	if err := it.Close(); err != nil {
		if !pebble.IsCorruptionError(err) {
			return rep, err
		}
		rep.Corrupt = append(rep.Corrupt, fmt.Sprintf("chunks after %d checked: %v", rep.Chunks, err))
	}
	s.mu.Lock()
	end := s.nextSeq
	s.mu.Unlock()
	spanFiles := map[string]bool{} // counted once each
	err = s.scanEvents(1, end, func(r *record) (bool, error) {
		if r.Content == nil {
			return true, nil
		}
		if r.Content.Attic != "" {
			if !r.Content.Part || !spanFiles[r.Content.Attic] {
				rep.Attic++
			}
			if r.Content.Part {
				spanFiles[r.Content.Attic] = true
				rep.Bytes += r.Content.Size
			}
			rc, err := s.openContent(r.Content) // a part's sum is checked here
			if err != nil {
				rep.Corrupt = append(rep.Corrupt, fmt.Sprintf("turn %d %s: %v", r.Turn, r.Path, err))
			} else {
				rc.Close()
			}
			return true, nil
		}
		for c := r.Content.Chunks; len(c) >= 32; c = c[32:] {
			var k [32]byte
			copy(k[:], c[:32])
			if !s.hasChunk(chunkKey(k)) {
				rep.Corrupt = append(rep.Corrupt, fmt.Sprintf("turn %d %s: chunk %x missing", r.Turn, r.Path, k[:8]))
				break
			}
		}
		return true, nil
	})
	if err != nil && (pebble.IsCorruptionError(err) || errors.Is(err, ErrCorrupt)) {
		rep.Corrupt = append(rep.Corrupt, fmt.Sprintf("history: %v", err))
		err = nil
	}
	return rep, err
}
