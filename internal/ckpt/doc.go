// Package ckpt is ckptfs's vocabulary: the words every layer shares, one
// name each, and nothing else. It imports neither FUSE nor Pebble, so that
// the overlay (fusefs), the backing-tree operations (internal/backing), the
// history store (versionstore), the control protocol (turnctl) and the
// command lines can all speak it without depending on one another.
//
//   - state.go: what one path's state is (State, Type, Inode, Stamp), how a
//     capture describes the prior state of a path (Capture, Program), and
//     the Tree the store reads and changes (with clean relative paths).
//   - turn.go: turns (Turn, Kind), what a turn changed (Stats,
//     ChangeKind), and the store's health (Health, VerifyReport).
package ckpt
