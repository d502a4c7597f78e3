//go:build !turnctl

package main

import (
	"ckptfs/fusefs"
	"ckptfs/internal/backing"
	"ckptfs/versionstore"
)

// startControl starts the control socket server.
//
// TODO(turnctl): package ckptfs/turnctl does not exist yet; the real wiring
// is in control_turnctl.go (build tag turnctl). Once the package lands,
// delete this file and the build tag line there.
func startControl(sock string, store *versionstore.Store, tree *backing.Tree, root *fusefs.Root) (stop func(), err error) {
	return func() {}, nil
}
