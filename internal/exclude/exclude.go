// Package exclude matches the gitignore-style patterns of `ckptfs mount
// --exclude`: the paths a mount passes through unversioned, which the
// daemon, the manifest of an unmount and the offline commands must agree on.
//
// Every Matcher, a nil one too, also holds one built-in pattern (Nested):
// a directory named .ckptfs below the root is another project's history
// store (a project inside this one, mounted on its own while this one was
// not), which this history must never record, and a rewind of it never
// touch.
package exclude

import (
	"fmt"
	"path"
	"strings"
)

// Matcher matches the gitignore-style --exclude patterns. The subset
// implemented (no dependency needed for it):
//
//	name        a glob without '/': matches any path element, so the path
//	            and everything below it is excluded ("node_modules", "*.o")
//	dir/        trailing '/': as above, but only directories (and what is
//	            below them)
//	/a/b, a/b   a glob containing '/': anchored at the root, matches that
//	            path and everything below it ("/build", "web/dist")
//
// Globs are path.Match globs ('*', '?', '[...]'); "**" and negation ("!")
// are not supported and are rejected.
type Matcher struct{ pats []pattern }

type pattern struct {
	elems   []string // anchored: one glob per element
	name    string   // unanchored: one glob for any element
	dirOnly bool
}

// New compiles patterns; an unsupported pattern is an error naming it.
func New(pats []string) (*Matcher, error) {
	e := &Matcher{}
	for _, raw := range pats {
		p := strings.TrimSpace(raw)
		if p == "" || strings.HasPrefix(p, "!") || strings.Contains(p, "**") {
			return nil, fmt.Errorf("--exclude %q: unsupported pattern", raw)
		}
		var pt pattern
		if strings.HasSuffix(p, "/") {
			pt.dirOnly = true
			p = strings.TrimRight(p, "/")
		}
		if strings.Contains(p, "/") {
			pt.elems = strings.Split(strings.TrimPrefix(p, "/"), "/")
		} else {
			pt.name = p
		}
		for _, g := range append(pt.elems, pt.name) {
			if _, err := path.Match(g, ""); err != nil {
				return nil, fmt.Errorf("--exclude %q: %v", raw, err)
			}
		}
		e.pats = append(e.pats, pt)
	}
	return e, nil
}

// StoreName is the name of a project's history store directory by
// default (DIR/.ckptfs).
const StoreName = ".ckptfs"

// Nested reports whether the root-relative path p (isDir: p is a
// directory) is, or is below, a directory named StoreName other than the
// root's own: the default store of a project inside this one. It is the
// built-in pattern of every Matcher, as if "*/.ckptfs/" at any depth but
// the root's: the root's own .ckptfs is the store itself (hidden when it
// is, left to the patterns when --store put the store elsewhere). A file
// so named is no store, and stays versioned.
func Nested(p string, isDir bool) bool {
	const mid = "/" + StoreName + "/"
	return strings.Contains(p, mid) || isDir && strings.HasSuffix(p, mid[:len(mid)-1])
}

// Match reports whether the root-relative path p (isDir: p is a directory)
// is excluded: by a pattern, or by the built-in one (Nested), which a nil
// Matcher holds too.
func (e *Matcher) Match(p string, isDir bool) bool {
	if p == "" {
		return false
	}
	if Nested(p, isDir) {
		return true
	}
	if e == nil || len(e.pats) == 0 {
		return false // the common case, on every request: no allocation
	}
	els := strings.Split(p, "/")
	for _, pt := range e.pats {
		if pt.name != "" {
			for i, el := range els {
				// A dir-only pattern matches a non-final element (a
				// directory by construction) or a final directory.
				if pt.dirOnly && i == len(els)-1 && !isDir {
					continue
				}
				if ok, _ := path.Match(pt.name, el); ok {
					return true
				}
			}
			continue
		}
		if len(els) < len(pt.elems) {
			continue
		}
		if pt.dirOnly && len(els) == len(pt.elems) && !isDir {
			continue
		}
		ok := true
		for i, g := range pt.elems {
			if m, _ := path.Match(g, els[i]); !m {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}
