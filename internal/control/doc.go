// Package control is the daemon's control service: the server side of turnctl's control protocol (see
// package turnctl for the protocol): Service carries out the commands on
// the history store (versionstore) and the tree, Listen and Serve put it on
// the control socket, and OpenOffline gives the CLI a Service on the store
// of a project that is not mounted (`ckptfs turnctl-offline`).
//
// It sits above versionstore and below cmd/ckptfs, which wires it to the
// mount (fusefs.Root is its Gate). Package turnctl, the protocol, stays at
// the bottom: the turnctl binary links only the wire types and the Client,
// never the store.
package control
