package control

import (
	"bytes"
	"compress/zlib"
	"io"
	"slices"
	"strings"

	"ckptfs/internal/ckpt"
	"ckptfs/turnctl"
	"ckptfs/versionstore"
)

// git.go: the changes inside the project's .git directory, summed up as
// what happened to the repository (ckpt.GitStats).

// isGitObject reports whether p is one of git's object files: zlib
// streams (loose objects) and packs, never text whatever their bytes.
func isGitObject(p string) bool {
	_, ok := ckpt.Under(p, ckpt.GitDir+"/objects")
	return ok
}

// maxGitRef bounds what is read of HEAD or a ref file.
const maxGitRef = 4096

// gitStats sums up the changes under .git among cs (fcs are their wire
// forms, with line counts), nil if there are none. to is the later side of
// the comparison (a turn, or versionstore.Now): HEAD is read there when
// it did not change but the ref it names may have. Reading HEAD and refs
// is best effort: what cannot be read is left unknown.
func (s *Service) gitStats(cs []versionstore.Change, fcs []turnctl.FileChange, to uint64) *ckpt.GitStats {
	var g ckpt.GitStats
	idx := map[string]int{}
	refMoved := false
	for i, fc := range fcs {
		if !fc.InGitDir() {
			continue
		}
		idx[fc.Path] = i
		if strings.HasPrefix(fc.Path, ckpt.GitDir+"/refs/heads/") {
			refMoved = true
		}
		if isDir(fc.Before) && (fc.After == nil || isDir(fc.After)) || fc.Before == nil && isDir(fc.After) {
			continue
		}
		g.Files++
		g.LinesAdded += fc.LinesAdded
		g.LinesDeleted += fc.LinesDeleted
	}
	if g.Files == 0 {
		return nil
	}
	const headPath = ckpt.GitDir + "/HEAD"
	hi, headChanged := idx[headPath]
	if !headChanged && !refMoved {
		return &g
	}
	// readRaw returns up to limit bytes of a file under .git on one side
	// of the comparison (nil if absent or unreadable); read, the trimmed
	// text of a small one (HEAD, a ref).
	readRaw := func(p string, after bool, limit int64) []byte {
		var rc io.ReadCloser
		var err error
		if i, ok := idx[p]; ok {
			st := cs[i].Before
			if after {
				st = cs[i].After
			}
			if st.Type != ckpt.Regular {
				return nil
			}
			rc, err = s.store.OpenChange(cs[i], after, s.tree)
		} else {
			var st ckpt.State
			rc, st, err = s.store.OpenAt(to, p, s.tree)
			if err == nil && st.Type != ckpt.Regular {
				rc.Close()
				return nil
			}
		}
		if err != nil {
			return nil
		}
		defer rc.Close()
		data, _ := io.ReadAll(io.LimitReader(rc, limit))
		return data
	}
	read := func(p string, after bool) string {
		return strings.TrimSpace(string(readRaw(p, after, maxGitRef)))
	}
	headAfter := read(headPath, true)
	headBefore := headAfter
	if headChanged {
		headBefore = read(cs[hi].Path, false)
	}
	refAfter, symAfter := strings.CutPrefix(headAfter, "ref: ")
	refBefore, symBefore := strings.CutPrefix(headBefore, "ref: ")
	if symAfter {
		g.Branch = strings.TrimPrefix(refAfter, "refs/heads/")
	}
	if symAfter && symBefore && refAfter != refBefore {
		g.PrevBranch = strings.TrimPrefix(refBefore, "refs/heads/")
	}
	switch {
	case symAfter:
		// Did the ref of HEAD's branch move?
		if _, ok := idx[ckpt.GitDir+"/"+refAfter]; ok {
			g.Head = read(ckpt.GitDir+"/"+refAfter, true)
			g.PrevHead = read(ckpt.GitDir+"/"+refAfter, false)
		}
	case !symAfter && headChanged:
		g.Head = headAfter
		if !symBefore {
			g.PrevHead = headBefore
		}
	}
	if !isHash(g.Head) || g.PrevHead != "" && !isHash(g.PrevHead) || g.Head == g.PrevHead {
		g.Head, g.PrevHead = "", ""
	}
	if g.Head != "" {
		if i, ok := idx[gitObject(g.Head)]; ok && fcs[i].Kind == ckpt.Added {
			// A commit made here, unless the head before is its child
			// (a rewind past a gc that had packed the commit away
			// brings its loose object back). Before the head's move
			// its object was there; after it, it may be gone.
			prev := readRaw(gitObject(g.PrevHead), false, maxGitObject)
			if prev == nil {
				prev = readRaw(gitObject(g.PrevHead), true, maxGitObject)
			}
			g.Commit = g.PrevHead == "" || !slices.Contains(commitParents(prev), g.Head)
		}
		// A rewind, restore, revert or undo makes no commit, whatever
		// objects it brings back (git gc packs the head before too).
		if n, _ := versionstore.SplitPoint(to); to != versionstore.Now {
			if t, err := s.store.Turn(n); err == nil && (t.Kind == ckpt.KindRewind || t.Kind == ckpt.KindRevert) {
				g.Commit = false
			}
		}
	}
	return &g
}

// gitObject is the path of the loose object named h.
func gitObject(h string) string {
	if len(h) < 3 {
		return ""
	}
	return ckpt.GitDir + "/objects/" + h[:2] + "/" + h[2:]
}

// maxGitObject bounds what is read of a loose commit object.
const maxGitObject = 64 << 10

// commitParents returns the parents a loose commit object names (nil if
// it is not one, or cannot be read).
func commitParents(obj []byte) []string {
	zr, err := zlib.NewReader(bytes.NewReader(obj))
	if err != nil {
		return nil
	}
	data, _ := io.ReadAll(io.LimitReader(zr, maxGitObject))
	head, body, ok := bytes.Cut(data, []byte{0})
	if !ok || !bytes.HasPrefix(head, []byte("commit ")) {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" {
			break // the headers end
		}
		if p, ok := strings.CutPrefix(line, "parent "); ok {
			out = append(out, p)
		}
	}
	return out
}

// isHash reports whether h is a full object name (SHA-1 or SHA-256).
func isHash(h string) bool {
	if len(h) != 40 && len(h) != 64 {
		return false
	}
	return strings.Trim(h, "0123456789abcdef") == ""
}
