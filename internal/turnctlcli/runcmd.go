package turnctlcli

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/spf13/pflag"

	"ckptfs/turnctl"
)

var runCmd = &command{
	name:  "run",
	args:  "[--label TEXT] [--ref ID] -- CMD ARGS...",
	short: "run a command as one turn",
	long: `Opens a turn (begin), runs CMD in the current directory with standard input,
output and error passed through, closes the turn (end, even when CMD fails),
prints the turn's summary on standard error, and exits with CMD's exit status
(128+N if a signal N killed it, 127 if it could not be started). The label
defaults to the command line. SIGINT, SIGTERM and SIGHUP are passed on to CMD.`,
	mount:          true,
	noInterspersed: true,
	opts:           func() options { return &runOptions{} },
}

type runOptions struct {
	label, ref string
}

func (o *runOptions) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.label, "label", "", "describe the turn (default: the command line)")
	fs.StringVar(&o.ref, "ref", "", "attach `ID` to the turn")
}

func (o *runOptions) run(e *env, args []string) error {
	if len(args) == 0 {
		return usagef("missing command to run")
	}
	label := o.label
	if label == "" {
		label = strings.Join(strings.Fields(strings.Join(args, " ")), " ")
		label = truncate(label, 200)
	}
	cmd, err := childCommand(e, args)
	if err != nil {
		// Nothing ran: no turn.
		return &exitError{code: 127, msg: err.Error()}
	}
	begin, err := e.h.Begin(e.ctx, turnctl.BeginRequest{Label: label, Ref: o.ref})
	if err != nil {
		return err
	}
	code, runErr := runChild(cmd, args)
	end, err := e.h.End(e.ctx, turnctl.EndRequest{})
	if err != nil {
		return err
	}
	if e.json {
		if err := e.printJSON(jRunOut{Begin: jBegin(begin), End: jEnd(end), ExitCode: code}); err != nil {
			return err
		}
	} else {
		fmt.Fprintln(e.stderr, end.Summary)
	}
	if runErr != nil {
		return &exitError{code: code, msg: runErr.Error()}
	}
	if code != 0 {
		return &exitError{code: code}
	}
	return nil
}

// childCommand prepares args to run in the project's current directory,
// or says why it cannot run (not found, not executable) before any turn
// is opened for it.
func childCommand(e *env, args []string) (*exec.Cmd, error) {
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = e.stdin, e.stdout, e.stderr
	if e.proj != nil {
		cmd.Dir = e.proj.base // the current directory, or -C DIR
	}
	if cmd.Err != nil {
		return nil, fmt.Errorf("cannot run %s: %v", args[0], unwrapExec(cmd.Err))
	}
	if strings.Contains(args[0], "/") {
		p := args[0]
		if !filepath.IsAbs(p) && cmd.Dir != "" {
			p = filepath.Join(cmd.Dir, p)
		}
		if err := unix.Access(p, unix.X_OK); err != nil {
			return nil, fmt.Errorf("cannot run %s: %v", args[0], err)
		}
	}
	return cmd, nil
}

// runChild runs cmd and returns its exit status; the error is set only
// when the command could not be started.
func runChild(cmd *exec.Cmd, args []string) (int, error) {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		return 127, fmt.Errorf("cannot run %s: %v", args[0], unwrapExec(err))
	}
	done := make(chan struct{})
	go func() {
		for {
			select {
			case s := <-sigs:
				cmd.Process.Signal(s)
			case <-done:
				return
			}
		}
	}()
	err := cmd.Wait()
	close(done)
	var xe *exec.ExitError
	if errors.As(err, &xe) {
		if ws, ok := xe.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal()), nil
		}
		return xe.ExitCode(), nil
	}
	if err != nil {
		return 1, err
	}
	return 0, nil
}

func unwrapExec(err error) error {
	var ee *exec.Error
	if errors.As(err, &ee) {
		return ee.Err
	}
	return err
}
