package main

import (
	"ckptfs/internal/control"
	"ckptfs/internal/turnctlcli"
)

// runTurnctlOffline is the hidden `ckptfs turnctl-offline ARGS...`: turnctl's
// command line with the history store linked in. The turnctl binary, which
// does not link the store, hands commands over to it when the project is
// not mounted. args are turnctl's (without the program name).
func runTurnctlOffline(args []string) int {
	return turnctlcli.Main(args, control.OpenOffline)
}
