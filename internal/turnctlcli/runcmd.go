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
	"time"

	"golang.org/x/sys/unix"

	"github.com/spf13/pflag"

	"ckptfs/internal/ckpt"
	"ckptfs/turnctl"
)

var runCmd = &command{
	name:  "run",
	args:  "[--label TEXT] [--ref ID] [--new-turn] -- CMD ARGS...",
	short: "run a command as one turn (as one step inside an open agent turn)",
	long: `Opens a turn (begin), runs CMD in the current directory with standard input,
output and error passed through, closes the turn (end, even when CMD fails),
prints the turn's summary on standard error, and exits with CMD's exit status
(128+N if a signal N killed it, 127 if it could not be started). The label
defaults to the command line. SIGINT, SIGTERM and SIGHUP are passed on to CMD.

Inside a turn a begin opened (an agent's, whose hooks run turnctl run, or a
script's between turnctl begin and end), run does not close that turn: what
CMD changed becomes one step of it (turnctl step, tool "run", the label as
its label: show N lists it, N.K names it), the turn stays open for the rest
of the agent's work, and run says on standard error which step it recorded.
If that turn closes while CMD runs, run records no step in the next one
and says so. With --new-turn or --ref, run opens its own turn all the
same, closing the open one, and says so on standard error.

Runs at the same time in one project (two terminals, an agent's parallel
tools) share one turn, as turns are spans of time: a run that starts while
another run's command still runs joins its turn (its label becomes "A & B",
and run says so), and the turn closes when the last of them ends; the
first to end says the turn stays open. Each exits with its own command's
status. Inside an agent's turn, runs at the same time make one step, named
after all of them, which the last to end records. A run started by the
command of another run (turnctl run -- AGENT, whose tool runs turnctl run)
is part of it: a step of its turn. A run whose turn a begin or an end
closed while CMD ran (an agent's prompt) closes nothing at its end, and
says where its later changes went.`,
	mount:          true,
	noInterspersed: true,
	opts:           func() options { return &runOptions{} },
}

type runOptions struct {
	label, ref string
	newTurn    bool
}

func (o *runOptions) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.label, "label", "", "describe the turn (`TEXT`; default: the command line)")
	fs.StringVar(&o.ref, "ref", "", "attach `ID` to the turn (run then opens its own turn)")
	fs.BoolVar(&o.newTurn, "new-turn", false, "open a turn of its own also inside an open agent turn (closing it)")
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
	id := fmt.Sprintf("%d.%x", os.Getpid(), time.Now().UnixNano())
	join := !o.newTurn && o.ref == ""
	begin, err := e.h.Begin(e.ctx, turnctl.BeginRequest{Label: label, Ref: o.ref, Run: id, Join: join})
	if isUnknownField(err, "run") {
		// A daemon older than runs: as before, not atomically, and the
		// run's end closes whatever turn is open then.
		return o.runOld(e, cmd, args, label)
	}
	if err != nil {
		return err
	}
	if begin.InTurn {
		return o.runAsStep(e, cmd, args, label, begin.Turn.Num, id)
	}
	if !e.json {
		if begin.Joined {
			fmt.Fprintf(e.stderr, "turnctl run: joined turn %d of another turnctl run still running (now %q)\n", begin.Turn.Num, begin.Turn.Label)
		} else if c := begin.Closed; c != nil && c.Kind == ckpt.KindAgent {
			fmt.Fprintf(e.stderr, "turnctl run: turn %d was still open (no turnctl end); closed it\n", c.Num)
		}
	}
	code, runErr := runChild(cmd, args)
	end, err := e.h.End(e.ctx, turnctl.EndRequest{Run: id})
	note := ""
	if isConflict(err) {
		// A begin or an end closed the run's turn while CMD ran: the
		// turn open now is someone else's, and stays open.
		note, end, err = errMessage(err), nil, nil
	}
	if err != nil {
		if code != 0 {
			return &exitError{code: code, msg: err.Error()}
		}
		return err
	}
	if end != nil && end.Running > 0 {
		note = end.Summary
	}
	if e.json {
		out := jRunOut{Begin: ptr(jBegin(begin)), Joined: begin.Joined, Note: note, ExitCode: code}
		if end != nil {
			out.End, out.Running = ptr(jEnd(end)), end.Running
		}
		if err := e.printJSON(out); err != nil {
			return err
		}
	} else if note != "" {
		fmt.Fprintf(e.stderr, "turnctl run: %s\n", note)
	} else {
		fmt.Fprintln(e.stderr, end.Summary)
	}
	return runExit(code, runErr)
}

// runOld is run with a daemon that does not know runs (BeginRequest.Run).
func (o *runOptions) runOld(e *env, cmd *exec.Cmd, args []string, label string) error {
	if !o.newTurn && o.ref == "" {
		st, err := e.h.Status(e.ctx, turnctl.StatusRequest{Brief: true})
		if err == nil && st.Open && st.Turn != nil && st.Turn.Kind == ckpt.KindAgent {
			// The step so far (the agent's own edits) ends here, so
			// that the next holds only what CMD changes.
			if _, err := e.h.Step(e.ctx, turnctl.StepRequest{}); err == nil {
				return o.runAsStep(e, cmd, args, label, st.Turn.Num, "")
			}
		}
	}
	begin, err := e.h.Begin(e.ctx, turnctl.BeginRequest{Label: label, Ref: o.ref})
	if err != nil {
		return err
	}
	if c := begin.Closed; c != nil && c.Kind == ckpt.KindAgent && !e.json {
		fmt.Fprintf(e.stderr, "turnctl run: turn %d was still open (no turnctl end); closed it\n", c.Num)
	}
	code, runErr := runChild(cmd, args)
	end, err := e.h.End(e.ctx, turnctl.EndRequest{})
	if err != nil {
		return err
	}
	if e.json {
		if err := e.printJSON(jRunOut{Begin: ptr(jBegin(begin)), End: ptr(jEnd(end)), ExitCode: code}); err != nil {
			return err
		}
	} else {
		fmt.Fprintln(e.stderr, end.Summary)
	}
	return runExit(code, runErr)
}

// runAsStep runs cmd inside the open agent turn n and makes what it
// changed one step of it (with other runs inside n running at the same
// time: the last of them does; id is the run's, "" for an old daemon).
func (o *runOptions) runAsStep(e *env, cmd *exec.Cmd, args []string, label string, n uint64, id string) error {
	code, runErr := runChild(cmd, args)
	// A step's label is one line (the daemon refuses more): the label's
	// first, as a turn's label is of the text it was opened with.
	stepLabel := strings.ReplaceAll(ckpt.LabelOf(label), "\r", " ")
	rep, err := stepIf(e.ctx, e.h, turnctl.StepRequest{Tool: "run", Label: stepLabel, Turn: n, Run: id})
	if isConflict(err) {
		// The turn closed while CMD ran (the agent's answer ended): a
		// step now would cut the next turn.
		if e.json {
			if err := e.printJSON(jRunOut{InTurn: &n, Note: errMessage(err), ExitCode: code}); err != nil {
				return err
			}
		} else {
			fmt.Fprintf(e.stderr, "turnctl run: ran inside turn %d, but %s\n", n, errMessage(err))
		}
		return runExit(code, runErr)
	}
	if err != nil {
		msg := fmt.Sprintf("ran inside turn %d, but its step was not recorded: %v", n, err)
		if code != 0 {
			// Still CMD's exit status, as run promises.
			return &exitError{code: code, msg: msg}
		}
		return errors.New(msg)
	}
	if e.json {
		if err := e.printJSON(jRunOut{InTurn: &n, Step: jStepReply(rep).Step, Running: rep.Running, ExitCode: code}); err != nil {
			return err
		}
	} else if rep.Running == 1 {
		fmt.Fprintf(e.stderr, "turnctl run: inside the open turn %d: 1 other turnctl run is still running in it; the last to end records the step\n", n)
	} else if rep.Running > 1 {
		fmt.Fprintf(e.stderr, "turnctl run: inside the open turn %d: %d other turnctl runs are still running in it; the last to end records the step\n", n, rep.Running)
	} else if rep.Step != nil {
		fmt.Fprintf(e.stderr, "turnctl run: inside the open turn %d: recorded step %d.%d (the turn stays open)\n", n, rep.Step.Turn, rep.Step.Num)
	} else {
		fmt.Fprintf(e.stderr, "turnctl run: inside the open turn %d: changed nothing, no step (the turn stays open)\n", n)
	}
	return runExit(code, runErr)
}

func runExit(code int, runErr error) error {
	if runErr != nil {
		return &exitError{code: code, msg: runErr.Error()}
	}
	if code != 0 {
		return &exitError{code: code}
	}
	return nil
}

func ptr[T any](v T) *T { return &v }

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
