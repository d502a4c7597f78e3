package server

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"

	"ckptfs/internal/backing"
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
	// A rewind changes the tree with no daemon to see it: keep the
	// manifest of the last unmount in step, path by path, so that the
	// next mount does not take the rewind for changes made by hand.
	g := &touchedPaths{}
	return NewService(st, tree, g), func() {
		if len(g.paths) > 0 {
			if err := st.RefreshManifest(tree, g.paths); err != nil {
				fmt.Fprintf(os.Stderr, "turnctl: keeping the manifest of the last unmount in step: %v\n", err)
			}
		}
		tree.Close()
		st.Close()
	}, nil
}

// touchedPaths is the Gate of an offline Service: nothing else uses the
// tree, so Exclusive just runs fn; it collects the paths a rewind changed.
type touchedPaths struct {
	mu    sync.Mutex
	paths []string
}

func (g *touchedPaths) Exclusive(fn func() error) error { return fn() }

func (g *touchedPaths) Invalidate(p string) {
	g.mu.Lock()
	g.paths = append(g.paths, p)
	g.mu.Unlock()
}
