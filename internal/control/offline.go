package control

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"ckptfs/internal/backing"
	"ckptfs/internal/exclude"
	"ckptfs/turnctl"
	"ckptfs/versionstore"
)

// OpenOffline opens the history store of a project that is not mounted and
// returns a Service on it (no gate: nothing else uses the tree), and a
// func that closes the store. A rewind that a dead daemon left half-done
// is finished first. Errors are one line, for turnctl to print.
func OpenOffline(root, store string) (turnctl.Handler, func(), error) {
	if fi, err := os.Stat(store); err != nil || !fi.IsDir() {
		return nil, nil, fmt.Errorf("no history store at %s", store)
	}
	st, err := versionstore.Open(store, versionstore.Options{})
	if err != nil {
		if errors.Is(err, versionstore.ErrLocked) {
			return nil, nil, fmt.Errorf("the history store %s is in use (is %s mounted elsewhere?)", store, root)
		}
		return nil, nil, fmt.Errorf("%s", strings.TrimPrefix(err.Error(), "versionstore: "))
	}
	tree, err := backing.Open(root)
	if err != nil {
		st.Close()
		return nil, nil, err
	}
	// A daemon that died during a rewind left it to the next user of the
	// store to finish, before anyone reads history or the tree.
	if _, err := st.Recover(tree); err != nil {
		tree.Close()
		st.Close()
		return nil, nil, fmt.Errorf("finishing an interrupted rewind: %s", strings.TrimPrefix(err.Error(), "versionstore: "))
	}
	// Changes made since the last unmount are history before anyone reads
	// it, as a mount would record them; the manifest then describes the
	// tree as this command found it.
	if err := recordOffline(st, tree, root, store); err != nil {
		tree.Close()
		st.Close()
		return nil, nil, fmt.Errorf("recording changes made while unmounted: %s", strings.TrimPrefix(err.Error(), "versionstore: "))
	}
	st.SetUnversioned(unversioned(st, root, store))
	return NewService(st, tree, nil), func() { tree.Close(); st.Close() }, nil
}

// unversioned reports the paths of the tree no capture sees: the store, if
// it lies in the tree, and what the manifest's exclude patterns match.
func unversioned(st *versionstore.Store, root, store string) func(string, bool) bool {
	var hidden string
	if rel, err := filepath.Rel(root, store); err == nil && rel != "." && !strings.HasPrefix(rel, "..") {
		hidden = filepath.ToSlash(rel)
	}
	ex, _ := exclude.New(nil)
	if pats, ok, err := st.ManifestPatterns(); err == nil && ok {
		if e, err := exclude.New(pats); err == nil {
			ex = e
		}
	}
	return func(p string, isDir bool) bool { return p == hidden || ex.Match(p, isDir) }
}

// recordOffline runs versionstore.RecordOffline with the exclude patterns
// of the manifest, keeping a manifest of the tree as it is now.
func recordOffline(st *versionstore.Store, tree *backing.Tree, root, store string) error {
	pats, ok, err := st.ManifestPatterns()
	if err != nil || !ok {
		return err
	}
	ex, err := exclude.New(pats)
	if err != nil {
		return err
	}
	var hidden string
	if rel, err := filepath.Rel(root, store); err == nil && rel != "." && !strings.HasPrefix(rel, "..") {
		hidden = filepath.ToSlash(rel)
	}
	skip := func(p string, isDir bool) bool { return p == hidden || ex.Match(p, isDir) }
	_, err = st.RecordOffline(tree, skip, nil, true)
	return err
}
