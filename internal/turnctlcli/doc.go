// Package turnctlcli is turnctl's command line. Two binaries run it:
//
//   - turnctl (cmd/turnctl), which agents' hooks start at every prompt. It
//     reaches a mounted project's daemon over the control socket and links
//     nothing of the history store, so that it starts in a few
//     milliseconds. For a project that is not mounted it hands the command
//     over to `ckptfs turnctl-offline` (see Offline).
//   - ckptfs, whose hidden `turnctl-offline` command runs the same code
//     with the store linked in (control.OpenOffline).
//
// The package must not import versionstore (or anything that links
// Pebble): cmd/turnctl's test checks it.
package turnctlcli
