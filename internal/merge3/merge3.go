// Package merge3 merges text three ways, line by line, with the semantics
// of `git merge-file` (and GNU diff3 -m): the changes from base to ours and
// from base to theirs are both applied; where they touch or overlap and
// differ, the result holds both versions between conflict markers.
//
// The line diffs are go-udiff's (a port of the Go team's internal/diff,
// already used for ckptfs's patches); only the merge of the two diffs is
// here.
package merge3

import (
	"bytes"

	"github.com/aymanbagabas/go-udiff/lcs"
)

// Labels name the two sides on the conflict markers.
type Labels struct{ Ours, Theirs string }

// Result is a merge: Text, with Conflicts regions between markers.
type Result struct {
	Text      []byte
	Conflicts int
}

// MaxSize is the largest input merged as text: larger files are treated as
// binary (a merge holds all three versions in memory).
const MaxSize = 8 << 20

// Binary reports whether b is not text for a merge: it has a NUL byte in
// its first 8000 bytes (git's test), or is larger than MaxSize.
func Binary(b []byte) bool {
	if len(b) > MaxSize {
		return true
	}
	return bytes.IndexByte(b[:min(len(b), 8000)], 0) >= 0
}

// hunk replaces base lines [lo, hi) with side lines [rlo, rhi).
type hunk struct {
	lo, hi, rlo, rhi int
	ours             bool
}

// Merge merges ours and theirs, both changed from base. Changes of one
// side only are taken; changes of both sides to the same base lines (or
// to lines next to each other, as git and diff3 hold them) are taken once
// if they are the same, else written as a conflict:
//
//	<<<<<<< Ours
//	ours' lines
//	=======
//	theirs' lines
//	>>>>>>> Theirs
//
// A side whose last line has no newline gets one before the marker that
// follows it.
func Merge(base, ours, theirs []byte, l Labels) Result {
	bl, ol, tl := lines(base), lines(ours), lines(theirs)
	var hs []hunk
	for _, d := range lcs.DiffLines(bl, ol) {
		hs = append(hs, hunk{d.Start, d.End, d.ReplStart, d.ReplEnd, true})
	}
	var ths []hunk
	for _, d := range lcs.DiffLines(bl, tl) {
		ths = append(ths, hunk{d.Start, d.End, d.ReplStart, d.ReplEnd, false})
	}
	hs = mergeSorted(hs, ths)
	var out bytes.Buffer
	var res Result
	pos := 0 // next base line to copy
	for i := 0; i < len(hs); {
		// A group: hunks whose base ranges overlap or touch.
		lo, hi := hs[i].lo, hs[i].hi
		j := i + 1
		for j < len(hs) && hs[j].lo <= hi {
			hi = max(hi, hs[j].hi)
			j++
		}
		group := hs[i:j]
		i = j
		writeLines(&out, bl[pos:lo])
		pos = hi
		var hasO, hasT bool
		for _, h := range group {
			hasO = hasO || h.ours
			hasT = hasT || !h.ours
		}
		o := side(bl, ol, group, lo, hi, true)
		t := side(bl, tl, group, lo, hi, false)
		switch {
		case !hasT:
			writeLines(&out, o)
		case !hasO:
			writeLines(&out, t)
		case equal(o, t):
			writeLines(&out, o)
		default:
			res.Conflicts++
			out.WriteString("<<<<<<< " + l.Ours + "\n")
			writeLinesNL(&out, o)
			out.WriteString("=======\n")
			writeLinesNL(&out, t)
			out.WriteString(">>>>>>> " + l.Theirs + "\n")
		}
	}
	writeLines(&out, bl[pos:])
	res.Text = out.Bytes()
	return res
}

// side returns the lines one side has in place of base[lo:hi].
func side(bl, sl []string, group []hunk, lo, hi int, ours bool) []string {
	var out []string
	at := lo
	for _, h := range group {
		if h.ours != ours {
			continue
		}
		out = append(out, bl[at:h.lo]...)
		out = append(out, sl[h.rlo:h.rhi]...)
		at = h.hi
	}
	return append(out, bl[at:hi]...)
}

func mergeSorted(a, b []hunk) []hunk {
	out := make([]hunk, 0, len(a)+len(b))
	for len(a) > 0 || len(b) > 0 {
		if len(b) == 0 || len(a) > 0 && a[0].lo <= b[0].lo {
			out, a = append(out, a[0]), a[1:]
		} else {
			out, b = append(out, b[0]), b[1:]
		}
	}
	return out
}

// lines splits b after each newline; the last line may have none.
func lines(b []byte) []string {
	var out []string
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n') + 1
		if i == 0 {
			i = len(b)
		}
		out = append(out, string(b[:i]))
		b = b[i:]
	}
	return out
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func writeLines(w *bytes.Buffer, ls []string) {
	for _, s := range ls {
		w.WriteString(s)
	}
}

// writeLinesNL writes ls ending with a newline (before a marker).
func writeLinesNL(w *bytes.Buffer, ls []string) {
	writeLines(w, ls)
	if n := len(ls); n > 0 && ls[n-1][len(ls[n-1])-1] != '\n' {
		w.WriteByte('\n')
	}
}
