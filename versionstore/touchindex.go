package versionstore

import (
	"fmt"
	"sort"
	"strings"

	"github.com/cockroachdb/pebble/v2"

	"ckptfs/internal/ckpt"
)

// touchindex.go: answering many questions about one history at once.
//
// Forward resolution from the end of turn N reads the events after N
// until every path it asks about is answered; a path no later event names
// is answered by the live tree only at the end of the log. Asked for every
// turn of a long history in turn (log -S, a file's history), that is a
// pass over the rest of the log per turn: quadratic in the history's
// length. A touchIndex, made by one pass, lists for every path the events
// that name it; resolution of a few paths then reads only the events that
// name one of them or a directory above one (resolveManyIx), so each
// question costs the events that concern its paths.

// touchIndex lists, for every path an event up to end names (either end
// of a rename or exchange), those events in order.
type touchIndex struct {
	end  uint64
	seqs map[string][]uint64
}

// ixMaxPaths: resolutions of more paths than this read the events in
// order, as without an index (finding the next event of each pending path
// at every step would cost more than decoding the events).
const ixMaxPaths = 64

func (s *Store) newTouchIndex() (*touchIndex, error) {
	s.mu.Lock()
	end := s.nextSeq - 1
	s.mu.Unlock()
	ix := &touchIndex{end: end, seqs: map[string][]uint64{}}
	err := s.scanEvents(0, end+1, func(r *record) (bool, error) {
		ix.seqs[r.Path] = append(ix.seqs[r.Path], r.Seq)
		if r.To != "" && r.To != r.Path {
			ix.seqs[r.To] = append(ix.seqs[r.To], r.Seq)
		}
		return true, nil
	})
	return ix, err
}

// next is the first indexed event after seq that can change the answer
// for path p: one naming p or a directory above it (0: none). A rename
// moves the question to another name, whose own events then count.
func (ix *touchIndex) next(p string, seq uint64) uint64 {
	best := uint64(0)
	for q := p; ; {
		l := ix.seqs[q]
		if i := sort.Search(len(l), func(i int) bool { return l[i] > seq }); i < len(l) && (best == 0 || l[i] < best) {
			best = l[i]
		}
		i := strings.LastIndexByte(q, '/')
		if i < 0 {
			return best
		}
		q = q[:i]
	}
}

// event reads event seq (ok false: there is none, e.g. a merge dropped it).
func (s *Store) event(seq uint64) (*record, bool, error) {
	v, closer, err := s.db.Get(eventKey(seq))
	if err == pebble.ErrNotFound {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("versionstore: %w", err)
	}
	defer closer.Close()
	r := &record{}
	if err := decodeRecord(seq, v, r); err != nil {
		return nil, false, err
	}
	r.Seq = seq
	return r, true, nil
}

// A Search answers many questions about the store's history at once:
// what each of many turns changed. It reads the whole log once when made;
// events recorded after that are read as usual. Not safe for concurrent
// use.
type Search struct {
	s  *Store
	ix *touchIndex
}

// NewSearch makes a Search (one pass over the events).
func (s *Store) NewSearch() (*Search, error) {
	ix, err := s.newTouchIndex()
	if err != nil {
		return nil, err
	}
	return &Search{s: s, ix: ix}, nil
}

// TurnChanges is Store.TurnChanges.
func (q *Search) TurnChanges(n uint64, live ckpt.Tree) ([]Change, error) {
	return q.s.turnChanges(n, live, q.ix)
}
