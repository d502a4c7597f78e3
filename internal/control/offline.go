package control

import (
	"errors"
	"fmt"
	"os"
	"strings"

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
	if _, err := Start(st, tree, root, store, StartOptions{KeepManifest: true}); err != nil {
		tree.Close()
		st.Close()
		return nil, nil, fmt.Errorf("%s", strings.ReplaceAll(err.Error(), "versionstore: ", ""))
	}
	return NewService(st, tree, nil), func() { tree.Close(); st.Close() }, nil
}
