package main

import (
	"os"

	"ckptfs/fusefs"
	"ckptfs/internal/backing"
	"ckptfs/internal/control"
	"ckptfs/versionstore"
)

// startControl starts the control socket server: the turnctl server's Service drives
// the store and uses root as its gate (Exclusive, Invalidate).
func startControl(sock string, store *versionstore.Store, tree *backing.Tree, root *fusefs.Root) (stop func(), err error) {
	ln, err := control.Listen(sock)
	if err != nil {
		return nil, err
	}
	go control.Serve(ln, control.NewService(store, tree, root))
	return func() { ln.Close(); os.Remove(sock) }, nil
}
