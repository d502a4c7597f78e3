package main

import (
	"errors"
	"fmt"
	"io"

	"ckptfs/internal/clihelp"

	"ckptfs/internal/version"

	"github.com/spf13/pflag"
)

// Exit statuses, for every command.
const (
	exitOK      = 0 // success
	exitFailure = 1 // the command failed; one line on stderr says why
	exitUsage   = 2 // bad command line
)

const usage = `usage: ckptfs COMMAND [flags] [args]

commands:
  mount [flags] DIR     mount the versioning overlay over DIR, in place
                        (as a user: private to you, through fusermount3)
  mount --at TURN PROJECT MOUNTPOINT
                        a read-only view of PROJECT at the end of TURN
  umount [--lazy] DIR   close the open turn, flush, unmount (refused while in use)
  status [--json] [DIR] mounted?, daemon pid, store path and size against budget

Run 'ckptfs COMMAND --help' for a command's flags, 'ckptfs --version' for
the build.
Exit status: 0 ok, 1 failure (one line on stderr), 2 usage error.
`

// usageError marks a command-line mistake (exit status 2).
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	var err error
	switch args[0] {
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return exitOK
	case "--version", "version":
		fmt.Fprintln(stdout, version.String())
		return exitOK
	case "mount":
		err = runMount(args[1:], stdout, stderr)
	case "umount", "unmount":
		err = runUmount(args[1:], stdout, stderr)
	case "status":
		err = runStatus(args[1:], stdout, stderr)
	case "turnctl-offline": // not in usage: turnctl runs it, see turnctl.go
		return runTurnctlOffline(args[1:])
	case "warm-up": // not in usage: the daemon runs it, see warm.go
		return runWarmUp(args[1:], stdout)
	case flushCommand: // not in usage: the daemon runs it, see flush.go
		return runFlush(args[1:], stderr)
	default:
		err = usageError{fmt.Sprintf("unknown command %q (try --help)", args[0])}
	}
	return report(err, stderr)
}

func report(err error, stderr io.Writer) int {
	if err == nil || errors.Is(err, pflag.ErrHelp) {
		return exitOK
	}
	fmt.Fprintf(stderr, "ckptfs: %v\n", err)
	var u usageError
	if errors.As(err, &u) {
		return exitUsage
	}
	return exitFailure
}

// newFlags makes a GNU-style flag set whose errors are usage errors.
func newFlags(name, synopsis string, stdout io.Writer) *pflag.FlagSet {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {
		fmt.Fprintf(stdout, "usage: ckptfs %s\n\nflags:\n%s", synopsis, clihelp.FlagUsages(fs))
	}
	return fs
}

// parse parses args; --help prints usage to stdout (pflag calls fs.Usage)
// and returns ErrHelp.
func parse(fs *pflag.FlagSet, args []string) error {
	err := fs.Parse(args)
	if errors.Is(err, pflag.ErrHelp) {
		return err
	}
	if err != nil {
		return usageError{fmt.Sprintf("%s: %v (try --help)", fs.Name(), err)}
	}
	return nil
}
