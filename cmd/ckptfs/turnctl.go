package main

import (
	"ckptfs/internal/control"
	"ckptfs/internal/turnctlcli"
	"ckptfs/internal/ui"
)

// runTurnctlOffline is the hidden `ckptfs turnctl-offline ARGS...`: turnctl's
// command line with the history store and the web page linked in. The
// turnctl binary, which links neither, hands commands over to it when the
// project is not mounted, and `turnctl ui` always. args are turnctl's
// (without the program name).
func runTurnctlOffline(args []string) int {
	return turnctlcli.Main(args, control.OpenOffline, ui.Run)
}
