package versionstore

import (
	"crypto/sha256"
	"fmt"
	"strings"
)

func (s *Store) dumpEvents(from uint64, filter string) string {
	var b strings.Builder
	s.scanEvents(from, s.nextSeq, func(r *record) (bool, error) {
		if strings.Contains(r.Path, filter) || strings.Contains(r.To, filter) {
			fmt.Fprintf(&b, "%d t%d %s %s %s %v\n", r.Seq, r.Turn, r.Op, r.Path, r.To, r.State.Type)
		}
		return true, nil
	})
	return b.String()
}

func sha256Of(b []byte) [32]byte { return sha256.Sum256(b) }
