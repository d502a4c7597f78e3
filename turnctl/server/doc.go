// Package server is the daemon's side of turnctl's control protocol (see
// package turnctl for the protocol): Service carries out the commands on
// the history store (versionstore) and the tree, Listen and Serve put it on
// the control socket, and OpenOffline gives the CLI a Service on the store
// of a project that is not mounted (`ckptfs turnctl-offline`).
//
// It is kept apart from package turnctl so that the turnctl binary, which
// only needs the wire types and the Client, does not link the store.
package server
