package control

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"

	"github.com/aymanbagabas/go-udiff/lcs"

	"ckptfs/internal/ckpt"
	"ckptfs/turnctl"
	"ckptfs/versionstore"
)

// Line diffs.
//
// The diff itself is gopls's (github.com/aymanbagabas/go-udiff/lcs: Myers
// with a bounded search, so a pathological pair of files costs bounded time
// and yields a correct if not minimal diff). The unified format is written
// here, in git's shape, from the line ranges lcs returns: one linear pass.

const (
	// maxDiffBytes: a side larger than this is not diffed line by line;
	// it is reported like a binary file ("files differ", no line counts).
	maxDiffBytes = 8 << 20
	// binaryProbe: a NUL byte within this many leading bytes marks a file
	// as binary, as git decides.
	binaryProbe = 8000
	// contextLines around each hunk.
	contextLines = 3
)

// side is one side of a file comparison.
type side struct {
	st      ckpt.State
	data    []byte // the bytes (regular) or target (symlink)
	binary  bool   // not text, or too large: no line diff
	unknown bool   // never captured (binary too)
}

// readSide loads one side of a store Change (after: the later state). The
// store hands out the version it already resolved, so reading k changed
// files costs one pass over the log, not k.
func (s *Service) readSide(c versionstore.Change, after bool) (side, error) {
	st := c.Before
	if after {
		st = c.After
	}
	sd := side{st: st}
	switch st.Type {
	case ckpt.Symlink:
		sd.data = []byte(st.Target)
	case ckpt.Regular:
		rc, err := s.store.OpenChange(c, after, s.tree)
		if errors.Is(err, fs.ErrNotExist) {
			// A live file that vanished since Changes looked (the mount is
			// in use): its bytes are unknown, not an error of the command.
			sd.binary = true
			return sd, nil
		}
		if errors.Is(err, versionstore.ErrNotCaptured) {
			sd.binary, sd.unknown = true, true
			return sd, nil
		}
		if err != nil {
			return sd, err
		}
		defer rc.Close()
		data, err := io.ReadAll(io.LimitReader(rc, maxDiffBytes+1))
		if err != nil {
			return sd, err
		}
		if len(data) > maxDiffBytes {
			sd.binary = true
			return sd, nil
		}
		sd.data = data
		probe := data
		if len(probe) > binaryProbe {
			probe = probe[:binaryProbe]
		}
		sd.binary = bytes.IndexByte(probe, 0) >= 0
	}
	return sd, nil
}

// wireChange is c on the wire, without line counts.
func wireChange(c versionstore.Change) turnctl.FileChange {
	return turnctl.FileChange{Path: c.Path, From: c.From, Kind: c.Kind, Before: wireState(c.Before), After: wireState(c.After)}
}

// fileChange turns a store Change into a FileChange with line counts and,
// if patch, a unified diff.
func (s *Service) fileChange(c versionstore.Change, patch bool) (turnctl.FileChange, error) {
	fc := wireChange(c)
	oldPath := c.Path
	if c.From != "" {
		oldPath = c.From
	}
	a, b := side{st: c.Before}, side{st: c.After}
	if c.Kind != ckpt.ModeOnly && c.Kind != ckpt.Relinked {
		// Only mode or owner, or the hard links, changed: the bytes are
		// the same, skip them.
		var err error
		if a, err = s.readSide(c, false); err != nil {
			return fc, err
		}
		if b, err = s.readSide(c, true); err != nil {
			return fc, err
		}
		if isGitObject(c.Path) {
			// zlib streams and packs: lines of them mean nothing.
			a.binary = a.binary || a.st.Type == ckpt.Regular
			b.binary = b.binary || b.st.Type == ckpt.Regular
		}
	}
	var hunks []hunk
	switch {
	case a.unknown || b.unknown:
		fc.NotCaptured = true
	case (a.binary || b.binary) && (a.data == nil || b.data == nil || !bytes.Equal(a.data, b.data)):
		// Too large to hold (data nil) or not text.
		if a.st.Exists() || b.st.Exists() {
			fc.Binary = true
		}
	case a.binary || b.binary:
		// Binary but equal bytes (a rename, a mode change).
	case !bytes.Equal(a.data, b.data):
		al, bl := splitLines(a.data), splitLines(b.data)
		hunks = makeHunks(al, bl, lcs.DiffLines(al, bl))
		for _, h := range hunks {
			fc.LinesAdded += h.added
			fc.LinesDeleted += h.deleted
		}
	}
	if patch {
		fc.Patch = formatPatch(oldPath, c.Path, a, b, hunks)
	}
	return fc, nil
}

// fileChanges converts a list of store Changes, between some state and
// the end of turn to (or versionstore.Now), and sums their Stats.
func (s *Service) fileChanges(cs []versionstore.Change, patch bool, to uint64) ([]turnctl.FileChange, ckpt.Stats, error) {
	out := make([]turnctl.FileChange, 0, len(cs))
	for _, c := range cs {
		fc, err := s.fileChange(c, patch)
		if err != nil {
			return nil, ckpt.Stats{}, fmt.Errorf("%s: %w", c.Path, err)
		}
		out = append(out, fc)
	}
	st := sumStats(out)
	st.Git = s.gitStats(cs, out, to)
	return out, st, nil
}

// sumStats summarises file changes. Directories are not counted as files:
// a new directory with three files is "3 files".
func sumStats(fcs []turnctl.FileChange) ckpt.Stats {
	var st ckpt.Stats
	for _, fc := range fcs {
		if isDir(fc.Before) && (fc.After == nil || isDir(fc.After)) || fc.Before == nil && isDir(fc.After) {
			continue
		}
		st.Files++
		switch fc.Kind {
		case ckpt.Added:
			st.Added++
		case ckpt.Deleted:
			st.Deleted++
		case ckpt.Renamed:
			st.Renamed++
		case ckpt.ModeOnly:
			st.ModeChanged++
		default:
			st.Modified++
		}
		st.LinesAdded += fc.LinesAdded
		st.LinesDeleted += fc.LinesDeleted
		if fc.After != nil && fc.After.Type == ckpt.Regular {
			st.Bytes += fc.After.Size
		}
	}
	return st
}

func isDir(fs *turnctl.FileState) bool { return fs != nil && fs.Type == ckpt.Dir }

// splitLines splits text into lines, each keeping its "\n" (the last may
// lack one).
func splitLines(data []byte) []string {
	if len(data) == 0 {
		return nil
	}
	text := string(data)
	lines := make([]string, 0, bytes.Count(data, []byte{'\n'})+1)
	for len(text) > 0 {
		i := strings.IndexByte(text, '\n')
		if i < 0 {
			lines = append(lines, text)
			break
		}
		lines = append(lines, text[:i+1])
		text = text[i+1:]
	}
	return lines
}

// hunk is one @@ block of a unified diff.
type hunk struct {
	aStart, aLen, bStart, bLen int // 0-based starts
	lines                      []string
	added, deleted             int
}

// makeHunks groups the edits of a line diff into hunks with context.
func makeHunks(a, b []string, diffs []lcs.Diff) []hunk {
	var out []hunk
	for i := 0; i < len(diffs); {
		// Edits closer than 2*context lines share a hunk.
		j := i
		for j+1 < len(diffs) && diffs[j+1].Start-diffs[j].End <= 2*contextLines {
			j++
		}
		first, last := diffs[i], diffs[j]
		aLo := max(0, first.Start-contextLines)
		aHi := min(len(a), last.End+contextLines)
		h := hunk{aStart: aLo, bStart: first.ReplStart - (first.Start - aLo)}
		h.aLen = aHi - aLo
		h.bLen = last.ReplEnd + (aHi - last.End) - h.bStart
		pos := aLo
		for _, d := range diffs[i : j+1] {
			for _, l := range a[pos:d.Start] {
				h.lines = append(h.lines, " "+l)
			}
			for _, l := range a[d.Start:d.End] {
				h.lines = append(h.lines, "-"+l)
				h.deleted++
			}
			for _, l := range b[d.ReplStart:d.ReplEnd] {
				h.lines = append(h.lines, "+"+l)
				h.added++
			}
			pos = d.End
		}
		for _, l := range a[pos:aHi] {
			h.lines = append(h.lines, " "+l)
		}
		out = append(out, h)
		i = j + 1
	}
	return out
}

// hunkRange formats one side of a hunk header as GNU diff does.
func hunkRange(start, n int) string {
	switch n {
	case 0:
		return fmt.Sprintf("%d,0", start) // the line before the (empty) range
	case 1:
		return fmt.Sprintf("%d", start+1)
	}
	return fmt.Sprintf("%d,%d", start+1, n)
}

// gitMode renders a state's mode as git does in extended headers.
func gitMode(st ckpt.State) string {
	switch st.Type {
	case ckpt.Symlink:
		return "120000"
	case ckpt.Dir:
		return fmt.Sprintf("40%03o", st.Mode&0o777)
	}
	return fmt.Sprintf("100%03o", st.Mode&0o777)
}

// formatPatch writes one file's change in git's diff format.
func formatPatch(oldPath, newPath string, a, b side, hunks []hunk) string {
	var w strings.Builder
	aName, bName := "a/"+oldPath, "b/"+newPath
	if a.st.Type == ckpt.Dir || b.st.Type == ckpt.Dir {
		aName, bName = aName+"/", bName+"/"
	}
	fmt.Fprintf(&w, "diff --git %s %s\n", aName, bName)
	switch {
	case !a.st.Exists():
		fmt.Fprintf(&w, "new %s mode %s\n", fileWord(b.st), gitMode(b.st))
	case !b.st.Exists():
		fmt.Fprintf(&w, "deleted %s mode %s\n", fileWord(a.st), gitMode(a.st))
	default:
		if oldPath != newPath {
			fmt.Fprintf(&w, "rename from %s\nrename to %s\n", oldPath, newPath)
		}
		if gitMode(a.st) != gitMode(b.st) {
			fmt.Fprintf(&w, "old mode %s\nnew mode %s\n", gitMode(a.st), gitMode(b.st))
		}
	}
	if a.st.Type == ckpt.Dir || b.st.Type == ckpt.Dir {
		return w.String()
	}
	from, to := aName, bName
	if !a.st.Exists() {
		from = "/dev/null"
	}
	if !b.st.Exists() {
		to = "/dev/null"
	}
	if a.unknown || b.unknown {
		// Not a patch git would apply: say why there are no hunks.
		name := to
		if a.unknown {
			name = from
		}
		fmt.Fprintf(&w, "Bytes of %s never captured (changed while the project was not mounted)\n", name)
		return w.String()
	}
	if a.binary || b.binary {
		fmt.Fprintf(&w, "Binary files %s and %s differ\n", from, to)
		return w.String()
	}
	if len(hunks) == 0 {
		return w.String()
	}
	fmt.Fprintf(&w, "--- %s\n+++ %s\n", from, to)
	for _, h := range hunks {
		fmt.Fprintf(&w, "@@ -%s +%s @@\n", hunkRange(h.aStart, h.aLen), hunkRange(h.bStart, h.bLen))
		for _, l := range h.lines {
			w.WriteString(l)
			if !strings.HasSuffix(l, "\n") {
				w.WriteString("\n\\ No newline at end of file\n")
			}
		}
	}
	return w.String()
}

func fileWord(st ckpt.State) string {
	if st.Type == ckpt.Dir {
		return "directory"
	}
	return "file"
}
