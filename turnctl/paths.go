package turnctl

import (
	"path/filepath"
	"strings"
)

// RelPath is abs, a clean absolute path, as a path of the project whose
// directory is root: relative to it, slash-separated, "" for root itself;
// a path that reaches the project through a symlink is taken through it.
// ok is false for a path outside the project. turnctl's command line and
// the page of turnctl ui take the paths people give them so.
func RelPath(root, abs string) (rel string, ok bool) {
	inside := func(p string) (string, bool) {
		r, err := filepath.Rel(root, p)
		if err != nil || r == ".." || strings.HasPrefix(r, "../") {
			return "", false
		}
		if r == "." {
			return "", true
		}
		return filepath.ToSlash(r), true
	}
	if r, ok := inside(abs); ok {
		return r, true
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil && real != abs {
		return inside(real)
	}
	return "", false
}
