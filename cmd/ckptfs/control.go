package main

import (
	"os"

	"ckptfs/fusefs"
	"ckptfs/internal/backing"
	"ckptfs/internal/control"
	"ckptfs/versionstore"
)

// startControl starts the control socket server: the turnctl server's Service drives
// the store, uses root as its gate (Exclusive, Invalidate) and v to mount
// views (mount --at).
func startControl(sock string, store *versionstore.Store, tree *backing.Tree, root *fusefs.Root, v control.Viewer) (stop func(), err error) {
	ln, err := control.Listen(sock)
	if err != nil {
		return nil, err
	}
	svc := control.NewService(store, tree, root)
	svc.SetViewer(v)
	go control.Serve(ln, svc)
	return func() { ln.Close(); os.Remove(sock) }, nil
}
