package control

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"regexp"
	"slices"

	"ckptfs/internal/ckpt"
	"ckptfs/turnctl"
	"ckptfs/versionstore"
)

// service_search.go: log with filters: -- PATH..., -S TEXT, --grep,
// --program.

// logFiltered is Log limited to the turns that pass every filter req
// sets, newest first, at most req.N of them. The cheap tests run first:
// the turn's record (Programs), its text (Grep), its own events
// (store.Touches, for Paths); only a turn that passed them has its
// changes listed, and Pickaxe reads the bytes of the files the turn
// changed, before and after, never a whole tree. Each turn's Stats count
// its changes at or below Paths (with no Paths, the whole turn's).
func (s *Service) logFiltered(ctx context.Context, req turnctl.LogRequest) ([]ckpt.Turn, error) {
	var prefixes []string
	if len(req.Paths) > 0 {
		var err error
		if prefixes, err = cleanPaths(req.Paths); err != nil {
			return nil, err
		}
	}
	var re *regexp.Regexp
	if req.Grep != "" {
		var err error
		// Multi-line mode, as git log --grep: ^ and $ match at the start
		// and end of each line of a prompt (\A and \z at its ends).
		if re, err = regexp.Compile("(?m)" + req.Grep); err != nil {
			return nil, errorf(turnctl.CodeBadRequest, "bad --grep pattern: %v", err)
		}
	}
	all, err := s.store.Turns(0)
	if err != nil {
		return nil, err
	}
	m := s.mark()
	p, done := s.ops.track(ctx)
	defer done()
	// The changes of the turns that pass the cheap tests: past a few, a
	// Search (one pass over the log) answers them, so that the cost of
	// each is the events that concern its paths, not the rest of the log.
	var q *versionstore.Search
	listed := 0
	changesOf := func(n uint64) ([]versionstore.Change, error) {
		if listed++; listed > searchAfter && q == nil {
			var err error
			if q, err = s.store.NewSearch(); err != nil {
				return nil, err
			}
		}
		if q != nil {
			return q.TurnChanges(n, s.tree)
		}
		return s.turnStoreChanges(n)
	}
	turns := []ckpt.Turn{}
	for i, t := range all {
		if req.N > 0 && len(turns) == req.N {
			break
		}
		p.report("searching", int64(i), int64(len(all)))
		ok, cs, err := s.keep(t, req, prefixes, re, changesOf)
		if err != nil {
			return nil, err
		}
		if req.Follow {
			// A turn the other filters drop may still have renamed the
			// path: the turns before it know it by its old name.
			if !ok && cs == nil {
				if cs, err = s.changesUnder(t.Num, prefixes, changesOf); err != nil {
					return nil, err
				}
			}
			prefixes = followed(cs, prefixes)
		}
		if !ok {
			continue
		}
		switch {
		case prefixes != nil, t.Stats == nil && cs != nil:
			_, st, err := s.listChanges(cs, t.Num)
			if err != nil {
				return nil, err
			}
			if prefixes == nil && !t.Open {
				s.cacheStats(t.Num, st, m)
			}
			t.Stats = &st
		case t.Stats == nil:
			st, err := s.turnStats(t)
			if err != nil {
				return nil, err
			}
			if !t.Open {
				s.cacheStats(t.Num, st, m)
			}
			t.Stats = &st
		}
		turns = append(turns, t)
	}
	return turns, nil
}

// followed is the one path of prefixes as the turns before those that made
// the changes cs knew it: the name it was renamed from there, if it was (a
// rename of a directory lists each path below it renamed too).
func followed(cs []versionstore.Change, prefixes []string) []string {
	for _, c := range cs {
		if c.Kind == ckpt.Renamed && c.Path == prefixes[0] && c.From != "" {
			return []string{c.From}
		}
	}
	return prefixes
}

// searchAfter is how many turns' changes a log search lists before it
// makes a versionstore.Search for the rest.
const searchAfter = 8

// keep reports whether turn t passes req's filters, and the changes it
// listed to decide (nil if it listed none): with prefixes, those at or
// below them only.
func (s *Service) keep(t ckpt.Turn, req turnctl.LogRequest, prefixes []string, re *regexp.Regexp, changesOf func(uint64) ([]versionstore.Change, error)) (bool, []versionstore.Change, error) {
	if len(req.Programs) > 0 && !slices.ContainsFunc(t.Programs, func(p string) bool { return slices.Contains(req.Programs, p) }) {
		return false, nil, nil
	}
	if re != nil && !re.MatchString(t.Label) {
		full, err := s.store.Turn(t.Num)
		if err != nil {
			return false, nil, err
		}
		if full.Prompt == "" || !re.MatchString(full.Prompt) {
			return false, nil, nil
		}
	}
	if prefixes == nil && req.Pickaxe == "" {
		return true, nil, nil
	}
	var cs []versionstore.Change
	var err error
	if prefixes != nil {
		if cs, err = s.changesUnder(t.Num, prefixes, changesOf); err != nil || len(cs) == 0 {
			return false, nil, err
		}
	} else if cs, err = changesOf(t.Num); err != nil {
		return false, nil, err
	}
	if req.Pickaxe != "" {
		ok, err := s.pickaxe(cs, []byte(req.Pickaxe))
		if err != nil || !ok {
			return false, nil, err
		}
	}
	return true, cs, nil
}

// changesUnder lists turn n's changes at or below prefixes (none when
// its events do not touch them: store.Touches answers without listing).
func (s *Service) changesUnder(n uint64, prefixes []string, changesOf func(uint64) ([]versionstore.Change, error)) ([]versionstore.Change, error) {
	if ok, err := s.store.Touches(n, prefixes); err != nil || !ok {
		return nil, err
	}
	cs, err := changesOf(n)
	if err != nil {
		return nil, err
	}
	return pathHistory(cs, prefixes), nil
}

// pickaxe reports whether one of cs changed how many times text occurs
// in a regular file's bytes, as git log -S decides: the occurrences
// (without overlaps, as bytes.Count counts them) before and after the
// change differ. A side that is no regular file counts none; a change
// whose bytes are not known on a side (never captured, or a live file
// that vanished while read) is passed over.
func (s *Service) pickaxe(cs []versionstore.Change, text []byte) (bool, error) {
	windowed := !overlapsItself(text)
	for _, c := range cs {
		if c.Kind == ckpt.ModeOnly || c.Kind == ckpt.Relinked {
			continue // the same bytes
		}
		if ranges, ok := s.store.ChangedRanges(c); ok && windowed {
			differ, ok, err := s.occurrencesDifferIn(c, ranges, text)
			if err != nil {
				return false, err
			}
			if ok {
				if differ {
					return true, nil
				}
				continue
			}
		}
		before, ok, err := s.occurrences(c, false, text)
		if err != nil {
			return false, err
		}
		if !ok {
			continue
		}
		after, ok, err := s.occurrences(c, true, text)
		if err != nil {
			return false, err
		}
		if ok && before != after {
			return true, nil
		}
	}
	return false, nil
}

// occurrences counts text in one side of c; ok is false when its bytes
// are not known.
func (s *Service) occurrences(c versionstore.Change, after bool, text []byte) (n int, ok bool, err error) {
	st := c.Before
	if after {
		st = c.After
	}
	if st.Type != ckpt.Regular {
		return 0, true, nil
	}
	rc, err := s.store.OpenChange(c, after, s.tree)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, versionstore.ErrNotCaptured) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	defer rc.Close()
	if n, err = countIn(rc, text); err != nil {
		return 0, false, fmt.Errorf("reading %s: %w", c.Path, err)
	}
	return n, true, nil
}

// occurrencesDifferIn is pickaxe's question for a change whose sides
// hold the same bytes outside ranges (a write into a big file): it reads
// only the ranges, widened (occurrencesDiffer). ok is false when a side
// cannot be read at an offset; the caller then reads both whole.
func (s *Service) occurrencesDifferIn(c versionstore.Change, ranges []int64, text []byte) (differ, ok bool, err error) {
	var sides [2]io.ReaderAt
	for i, after := range []bool{false, true} {
		rc, err := s.store.OpenChange(c, after, s.tree)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, versionstore.ErrNotCaptured) {
			return false, false, nil
		}
		if err != nil {
			return false, false, err
		}
		defer rc.Close()
		ra, isRA := rc.(io.ReaderAt)
		if !isRA {
			return false, false, nil
		}
		sides[i] = ra
	}
	differ, err = occurrencesDiffer(sides[0], sides[1], c.Before.Size, c.After.Size, ranges, text)
	if err != nil {
		return false, false, fmt.Errorf("reading %s: %w", c.Path, err)
	}
	return differ, true, nil
}

// occurrencesDiffer reports whether text occurs a different number of
// times in a (size na) and b (size nb), which hold the same bytes outside
// ranges (ascending offset, length pairs, up to the larger size). It
// reads only the ranges, each widened by len(text)-1 bytes on both sides.
// text must not overlap itself (overlapsItself): then its occurrences
// never overlap, an occurrence that touches a range lies within the
// widened range, and every other one is in both files, counted in both or
// in neither.
func occurrencesDiffer(a, b io.ReaderAt, na, nb int64, ranges []int64, text []byte) (bool, error) {
	w := int64(len(text) - 1)
	var windows [][2]int64
	for i := 0; i+1 < len(ranges); i += 2 {
		lo, hi := max(0, ranges[i]-w), ranges[i]+ranges[i+1]+w
		if n := len(windows); n > 0 && lo <= windows[n-1][1] {
			windows[n-1][1] = max(windows[n-1][1], hi)
			continue
		}
		windows = append(windows, [2]int64{lo, hi})
	}
	count := func(r io.ReaderAt, size int64, win [2]int64) (int, error) {
		if hi := min(win[1], size); win[0] < hi {
			return countIn(io.NewSectionReader(r, win[0], hi-win[0]), text)
		}
		return 0, nil
	}
	delta := 0
	for _, win := range windows {
		ca, err := count(a, na, win)
		if err != nil {
			return false, err
		}
		cb, err := count(b, nb, win)
		if err != nil {
			return false, err
		}
		delta += ca - cb
	}
	return delta != 0, nil
}

// overlapsItself reports whether two occurrences of text can overlap: a
// proper prefix of it is also its suffix ("aa", "abab").
func overlapsItself(text []byte) bool {
	for k := 1; k < len(text); k++ {
		if bytes.Equal(text[:k], text[len(text)-k:]) {
			return true
		}
	}
	return false
}

// countIn counts the occurrences of text (not empty) in r as
// bytes.Count would in all of r, reading it a block at a time: an
// occurrence across two blocks counts once.
func countIn(r io.Reader, text []byte) (int, error) {
	const block = 256 << 10
	buf := make([]byte, 0, block+len(text))
	n := 0
	for {
		m, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+m]
		if err != nil && err != io.EOF {
			return n, err
		}
		i := 0 // where the next occurrence may start
		for {
			k := bytes.Index(buf[i:], text)
			if k < 0 {
				break
			}
			n++
			i += k + len(text)
		}
		if err == io.EOF {
			return n, nil
		}
		// Keep what could start an occurrence that ends in the next
		// block: fewer bytes than text, past the last occurrence.
		keep := max(i, len(buf)-(len(text)-1))
		buf = buf[:copy(buf, buf[keep:])]
	}
}
