package control

import (
	"io"
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
	// read returns the trimmed bytes of a small file under .git on one
	// side of the comparison ("" if absent or unreadable).
	read := func(p string, after bool) string {
		var rc io.ReadCloser
		var err error
		if i, ok := idx[p]; ok {
			st := cs[i].Before
			if after {
				st = cs[i].After
			}
			if st.Type != ckpt.Regular {
				return ""
			}
			rc, err = s.store.OpenChange(cs[i], after, s.tree)
		} else {
			var st ckpt.State
			rc, st, err = s.store.OpenAt(to, p, s.tree)
			if err == nil && st.Type != ckpt.Regular {
				rc.Close()
				return ""
			}
		}
		if err != nil {
			return ""
		}
		defer rc.Close()
		data, _ := io.ReadAll(io.LimitReader(rc, maxGitRef))
		return strings.TrimSpace(string(data))
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
		obj := ckpt.GitDir + "/objects/" + g.Head[:2] + "/" + g.Head[2:]
		if i, ok := idx[obj]; ok && fcs[i].Kind == ckpt.Added {
			g.Commit = true
		}
	}
	return &g
}

// isHash reports whether h is a full object name (SHA-1 or SHA-256).
func isHash(h string) bool {
	if len(h) != 40 && len(h) != 64 {
		return false
	}
	return strings.Trim(h, "0123456789abcdef") == ""
}
