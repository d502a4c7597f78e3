package control

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"ckptfs/internal/backing"
	"ckptfs/internal/rundir"
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
			if mp, ok := rundir.OfflineView(root); ok {
				return nil, nil, fmt.Errorf("the history store %s is in use by the view of %s on %s (ckptfs mount --at); run 'ckptfs umount %s' first", store, root, mp, mp)
			}
			return nil, nil, fmt.Errorf("the history store %s is in use (is %s mounted elsewhere?)", store, root)
		}
		return nil, nil, fmt.Errorf("%s", strings.TrimPrefix(err.Error(), "versionstore: "))
	}
	tree, err := backing.Open(root)
	if err != nil {
		st.Close()
		return nil, nil, err
	}
	started, err := Start(st, tree, root, store, StartOptions{KeepManifest: true})
	if err != nil {
		tree.Close()
		st.Close()
		return nil, nil, fmt.Errorf("%s", strings.ReplaceAll(err.Error(), "versionstore: ", ""))
	}
	events := st.Events()
	return NewService(st, tree, nil), func() {
		// A command that changed the tree (a rewind, a restore) leaves
		// a manifest of the tree as it left it, and seals what it left
		// range-kept: an edit made after it, before the next mount, is
		// then told as one made before it would be. (Without, the next
		// mount took the paths its events name as they are then.)
		if pats, ok, err := st.ManifestPatterns(); err == nil && ok && st.Events() != events {
			st.SaveManifest(tree, started.Skip, pats)
		}
		tree.Close()
		st.Close()
	}, nil
}
