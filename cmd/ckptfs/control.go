package main

import (
	"os"

	"ckptfs/fusefs"
	"ckptfs/internal/backing"
	"ckptfs/turnctl"
	"ckptfs/versionstore"
)

// startControl starts the control socket server: turnctl's Service drives
// the store and uses root as its gate (Exclusive, Invalidate).
func startControl(sock string, store *versionstore.Store, tree *backing.Tree, root *fusefs.Root) (stop func(), err error) {
	ln, err := turnctl.Listen(sock)
	if err != nil {
		return nil, err
	}
	go turnctl.Serve(ln, turnctl.NewService(store, tree, root))
	return func() { ln.Close(); os.Remove(sock) }, nil
}
