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
	skip    string // why data is nil for a file (binary too): too large, or vanished while read
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
			sd.binary, sd.skip = true, "it vanished while being read"
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
		data, err := readUpTo(rc, st.Size, maxDiffBytes)
		if err != nil {
			return sd, err
		}
		if data == nil {
			sd.binary, sd.skip = true, fmt.Sprintf("larger than %d MiB", maxDiffBytes>>20)
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

// readUpTo reads r, whose size is said to be size, whole; nil (and
// nothing read) when size or the bytes read are more than limit. A file
// larger than the limit (a binary a build makes, every turn) used to cost
// limit bytes read to learn it, most of a turn end's CPU in the agent
// session; the buffer is sized to the file at once.
func readUpTo(r io.Reader, size int64, limit int) ([]byte, error) {
	if size > int64(limit) {
		return nil, nil
	}
	var b bytes.Buffer
	b.Grow(int(max(size, 0)) + bytes.MinRead)
	if _, err := b.ReadFrom(io.LimitReader(r, int64(limit)+1)); err != nil {
		return nil, err
	}
	if b.Len() > limit {
		return nil, nil
	}
	return b.Bytes(), nil
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

// gitMode renders a state's mode as git does in extended headers: git
// knows executable or not (100755 or 100644) and symlinks (120000).
func gitMode(st ckpt.State) string {
	switch {
	case st.Type == ckpt.Symlink:
		return "120000"
	case st.Mode&0o111 != 0:
		return "100755"
	}
	return "100644"
}

// gitApplied is the permission bits git apply leaves on regular file b
// when it applies the patch from a: the file's own bits when the patch
// keeps git's mode, else 0644 or 0755 (the umask aside).
func gitApplied(a, b ckpt.State) uint32 {
	if a.Type == ckpt.Regular && gitMode(a) == gitMode(b) {
		return a.Mode & 0o7777
	}
	if gitMode(b) == "100755" {
		return 0o755
	}
	return 0o644
}

// inGit reports whether git can hold the state: a regular file or a
// symlink (directories it makes and removes as their files need them).
func inGit(st ckpt.State) bool { return st.Type == ckpt.Regular || st.Type == ckpt.Symlink }

// formatPatch writes one path's change as git writes it (git diff
// --binary, core.quotePath on), so that git apply on the tree at the
// earlier end gives the tree at the later one: names quoted as git does,
// a rename as "rename from/to", modes as git knows them, a symlink as a
// file holding its target, a change between a file and a symlink as a
// deletion and an addition, bytes that are not text as a GIT binary patch.
// What git cannot hold is left out: directories (git apply makes and
// removes them with their files), and with a note (a line starting "# ",
// which git apply passes over) FIFOs, sockets and devices, files larger
// than maxDiffBytes and bytes never captured. An owner or hard-link change
// alone writes nothing.
func formatPatch(oldPath, newPath string, a, b side, hunks []hunk) string {
	var w strings.Builder
	if a.unknown || b.unknown {
		name := newPath
		if a.unknown {
			name = oldPath
		}
		fmt.Fprintf(&w, "# ckptfs: skipped %s: its bytes were never captured (changed while the project was not mounted)\n", gitQuote(name))
		return w.String()
	}
	node := func(st ckpt.State) bool { return st.Type.IsNode() || st.Type == ckpt.Special }
	if node(a.st) && (oldPath != newPath || !node(b.st)) {
		fmt.Fprintf(&w, "# ckptfs: skipped %s: a %s, which git patches cannot hold\n", gitQuote(oldPath), a.st.Type)
	}
	if node(b.st) {
		fmt.Fprintf(&w, "# ckptfs: skipped %s: a %s, which git patches cannot hold\n", gitQuote(newPath), b.st.Type)
	}
	why := a.skip
	if b.skip != "" && b.skip != why {
		if why != "" {
			why += "; "
		}
		why += b.skip
	}
	if why != "" {
		fmt.Fprintf(&w, "# ckptfs: skipped %s: %s\n", gitQuote(newPath), why)
		return w.String()
	}
	if b.st.Type == ckpt.Regular && gitApplied(a.st, b.st) != b.st.Mode&0o7777 {
		from := "" // a new file: its mode alone
		if a.st.Type == ckpt.Regular {
			from = fmt.Sprintf("%04o -> ", a.st.Mode&0o7777)
		}
		fmt.Fprintf(&w, "# ckptfs: mode of %s %s%04o (git patches hold only whether a file is executable)\n",
			gitQuote(newPath), from, b.st.Mode&0o7777)
	}
	switch {
	case !inGit(a.st) && !inGit(b.st):
	case !inGit(a.st):
		writeWhole(&w, newPath, b, false)
	case !inGit(b.st):
		writeWhole(&w, oldPath, a, true)
	case a.st.Type != b.st.Type:
		writeWhole(&w, oldPath, a, true)
		writeWhole(&w, newPath, b, false)
	default:
		var head strings.Builder
		if gitMode(a.st) != gitMode(b.st) {
			fmt.Fprintf(&head, "old mode %s\nnew mode %s\n", gitMode(a.st), gitMode(b.st))
		}
		if oldPath != newPath {
			fmt.Fprintf(&head, "rename from %s\nrename to %s\n", gitQuote(oldPath), gitQuote(newPath))
		}
		binary := (a.binary || b.binary) && !bytes.Equal(a.data, b.data)
		if head.Len() == 0 && len(hunks) == 0 && !binary {
			return w.String() // nothing git sees
		}
		fmt.Fprintf(&w, "diff --git %s %s\n%s", gitQuote("a/"+oldPath), gitQuote("b/"+newPath), head.String())
		switch {
		case binary:
			fmt.Fprintf(&w, "index %s..%s\n", blobID(a.data), blobID(b.data))
			writeBinary(&w, a.data, b.data)
		case len(hunks) > 0:
			writeHunks(&w, "a/"+oldPath, "b/"+newPath, hunks)
		}
	}
	return w.String()
}

// writeWhole writes the addition (or with gone the deletion) of the file
// or symlink sd at path.
func writeWhole(w *strings.Builder, path string, sd side, gone bool) {
	word, from, to := "new", "/dev/null", "b/"+path
	if gone {
		word, from, to = "deleted", "a/"+path, "/dev/null"
	}
	fmt.Fprintf(w, "diff --git %s %s\n%s file mode %s\n", gitQuote("a/"+path), gitQuote("b/"+path), word, gitMode(sd.st))
	switch {
	case sd.binary:
		if gone {
			fmt.Fprintf(w, "index %s..%s\n", blobID(sd.data), zeroID)
			writeBinary(w, sd.data, nil)
		} else {
			fmt.Fprintf(w, "index %s..%s\n", zeroID, blobID(sd.data))
			writeBinary(w, nil, sd.data)
		}
	case len(sd.data) > 0:
		lines := splitLines(sd.data)
		h := hunk{aLen: len(lines)}
		prefix := "-"
		if !gone {
			h = hunk{bLen: len(lines)}
			prefix = "+"
		}
		for _, l := range lines {
			h.lines = append(h.lines, prefix+l)
		}
		writeHunks(w, from, to, []hunk{h})
	}
}

// writeHunks writes the ---/+++ lines (from and to: "a/PATH", "b/PATH" or
// /dev/null) and the hunks.
func writeHunks(w *strings.Builder, from, to string, hunks []hunk) {
	label := func(name string) string {
		if name == "/dev/null" {
			return name
		}
		if strings.Contains(name, " ") {
			return gitQuote(name) + "\t" // as git does: where the name ends
		}
		return gitQuote(name)
	}
	fmt.Fprintf(w, "--- %s\n+++ %s\n", label(from), label(to))
	for _, h := range hunks {
		fmt.Fprintf(w, "@@ -%s +%s @@\n", hunkRange(h.aStart, h.aLen), hunkRange(h.bStart, h.bLen))
		for _, l := range h.lines {
			w.WriteString(l)
			if !strings.HasSuffix(l, "\n") {
				w.WriteString("\n\\ No newline at end of file\n")
			}
		}
	}
}

// gitQuote quotes a name as git does with core.quotePath on (the
// default): as is unless it holds a control character, a byte of 0x7f or
// above, a double quote or a backslash; then in double quotes with C
// escapes (\n, \t, \", \\, ...) and octal for the rest (\303\251).
func gitQuote(name string) string {
	need := false
	for i := 0; i < len(name); i++ {
		if c := name[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			need = true
			break
		}
	}
	if !need {
		return name
	}
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(name); i++ {
		switch c := name[i]; c {
		case '\a':
			b.WriteString(`\a`)
		case '\b':
			b.WriteString(`\b`)
		case '\t':
			b.WriteString(`\t`)
		case '\n':
			b.WriteString(`\n`)
		case '\v':
			b.WriteString(`\v`)
		case '\f':
			b.WriteString(`\f`)
		case '\r':
			b.WriteString(`\r`)
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		default:
			if c < 0x20 || c >= 0x7f {
				fmt.Fprintf(&b, "\\%03o", c)
			} else {
				b.WriteByte(c)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}
