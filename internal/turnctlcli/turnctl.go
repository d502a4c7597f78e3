package turnctlcli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"ckptfs/internal/clihelp"

	"ckptfs/internal/version"

	"github.com/spf13/pflag"

	"ckptfs/turnctl"
)

// Exit codes.
const (
	exitOK      = 0
	exitFailure = 1 // one line "turnctl: ..." on stderr
	exitUsage   = 2
)

const exitCodesHelp = `Exit status: 0 ok, 1 failure (one line "turnctl: ..." on stderr), 2 usage error.`

// command is one subcommand. Each lives in its own file with an options
// struct that binds its flags and runs it.
type command struct {
	name  string
	args  string // usage after the name
	short string
	long  string
	// mount: the command needs a live mount (the daemon marks turns).
	mount bool
	// interspersed: flags may follow positional arguments (false for run,
	// whose arguments are another command's).
	noInterspersed bool
	// self: the command finds the project itself (or needs none).
	self bool
	// neverFails: the command exits 0 whatever happens, with a notice on
	// stderr (hook-event: an agent must not fail a turn because of us).
	neverFails bool
	// changes: the command lists changed paths, those under .git as one
	// summary line unless --all.
	changes bool
	// quiet: the command takes --quiet (no progress bar, no report).
	quiet bool
	opts  func() options
}

type options interface {
	addFlags(fs *pflag.FlagSet)
	run(e *env, args []string) error
}

var commands = []*command{
	beginCmd, endCmd, stepCmd, statusCmd, logCmd, showCmd, diffCmd, catCmd, checkoutCmd, exportCmd,
	rewindCmd, undoCmd, restoreCmd, revertCmd, runCmd, verifyCmd,
	forgetCmd, pinCmd, unpinCmd, gcCmd, policyCmd, duCmd,
	hookEventCmd, hooksCmd, uiCmd,
}

func lookup(name string) *command {
	for _, c := range commands {
		if c.name == name {
			return c
		}
	}
	return nil
}

// globals are the options before the command.
type globals struct {
	dir   string // -C
	store string // --store
	json  bool
	all   bool // --all of the commands that list changes
	quiet bool // --quiet of the long commands
}

// env is what a command runs with.
type env struct {
	ctx    context.Context
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	json   bool
	color  bool
	// all: list every changed path under .git rather than one summary
	// line (--all, or paths under .git asked for by name).
	all bool
	// quiet: print nothing but errors (--quiet; --json still prints).
	quiet bool
	// progress is where a long command draws its progress bar: stderr
	// when it is a terminal and not --quiet, else nil (no bar).
	progress io.Writer
	dash     int             // index in args of the first argument after "--", or -1
	g        globals         // the options before the command
	proj     *project        // where the project is and how we reach it
	h        turnctl.Handler // the daemon (Client) or an in-process Service
	// offline opens the store when the project is not mounted.
	offline Offline
	// ui serves turnctl ui's page (nil: this binary cannot).
	ui UI
}

// usageError is a wrong invocation: exit status 2. An error of another
// package says it is one with a BadUsage method.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{fmt.Sprintf(format, args...)}
}

// exitError ends turnctl with a given status and no message of its own
// (run: the command's exit status; verify: corruption, already reported).
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// Offline opens the history store of a project that is not mounted (root:
// the project directory; store: its store directory) and returns a Handler
// on it and a func that closes it. The ckptfs binary passes
// control.OpenOffline; the turnctl binary, which does not link the store,
// passes a func that hands the whole command over to `ckptfs
// turnctl-offline` (it returns only with an error).
type Offline func(root, store string) (turnctl.Handler, func(), error)

// Main runs turnctl with args (without the program name) on the process's
// stdin, stdout and stderr, and returns the exit status. offline opens a
// store that is not mounted, ui serves the page of turnctl ui.
func Main(args []string, offline Offline, ui UI) int {
	return runLinked(context.Background(), offline, ui, args, os.Stdin, os.Stdout, os.Stderr)
}

func runWith(ctx context.Context, offline Offline, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return runLinked(ctx, offline, nil, args, stdin, stdout, stderr)
}

func runLinked(ctx context.Context, offline Offline, ui UI, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	var g globals
	fs := pflag.NewFlagSet("turnctl", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.SetInterspersed(false)
	fs.StringVarP(&g.dir, "dir", "C", "", "run as if started in `DIR` (default: the current directory, else $CKPTFS_DIR)")
	fs.StringVar(&g.store, "store", "", "history store `PATH` when the project is not mounted (default DIR/.ckptfs)")
	fs.BoolVar(&g.json, "json", false, "print results as JSON (see doc/schema)")
	help := fs.BoolP("help", "h", false, "show this help")
	showVersion := fs.Bool("version", false, "print the build of turnctl and exit")
	if err := fs.Parse(args); err != nil {
		fmt.Fprintf(stderr, "turnctl: %v (see turnctl --help)\n", err)
		return exitUsage
	}
	if *showVersion {
		fmt.Fprintln(stdout, "turnctl from "+version.String()) // not "turnctl: ...", which reads as an error
		return exitOK
	}
	if *help || fs.NArg() == 0 {
		w := stdout
		if !*help {
			w = stderr
		}
		mainHelp(w, fs)
		if !*help {
			return exitUsage
		}
		return exitOK
	}
	name := fs.Arg(0)
	if name == "help" {
		if fs.NArg() > 1 && lookup(fs.Arg(1)) != nil {
			commandHelp(stdout, lookup(fs.Arg(1)))
		} else {
			mainHelp(stdout, fs)
		}
		return exitOK
	}
	c := lookup(name)
	if c == nil {
		if name == "redo" {
			fmt.Fprintf(stderr, "turnctl: unknown command \"redo\": an undo of an undo is the redo (turnctl undo)\n")
			return exitUsage
		}
		fmt.Fprintf(stderr, "turnctl: unknown command %q (see turnctl --help)\n", name)
		return exitUsage
	}
	o := c.opts()
	cfs := commandFlags(c, o, &g)
	if err := cfs.Parse(fs.Args()[1:]); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			commandHelp(stdout, c)
			return exitOK
		}
		if c.neverFails {
			fmt.Fprintf(stderr, "turnctl %s: %v; nothing recorded\n", name, err)
			return exitOK
		}
		if n := negativeNumber(fs.Args()[1:]); n != "" {
			fmt.Fprintf(stderr, "turnctl: %q is not a turn: use a number, 0, or ref:ID (see turnctl log)\n", n)
			return exitUsage
		}
		fmt.Fprintf(stderr, "turnctl %s: %s (see turnctl %s --help)\n", name, errorLine(err.Error()), name)
		return exitUsage
	}
	if h, _ := cfs.GetBool("help"); h {
		commandHelp(stdout, c)
		return exitOK
	}
	e := &env{ctx: ctx, stdin: stdin, stdout: stdout, stderr: stderr, json: g.json, dash: cfs.ArgsLenAtDash(), g: g, all: g.all, offline: offline, ui: ui}
	e.color = useColor(stdout)
	e.quiet = g.quiet
	if !g.quiet && progressTerminal(stderr) {
		e.progress = stderr
	}
	if c.self {
		return report(stderr, name, o.run(e, cfs.Args()))
	}
	err := func() error {
		p, err := findProject(g, c.mount)
		if err != nil {
			return err
		}
		e.proj = p
		h, closer, err := p.connect(offline)
		if err != nil {
			return err
		}
		defer closer()
		e.h = h
		return p.diedDuring(name, o.run(e, cfs.Args()))
	}()
	return report(stderr, name, err)
}

// negativeNumber returns the first argument that is a negative number
// ("-1", which the flag parser reads as flags), if any: no command takes
// one, and a person who types it means a turn.
func negativeNumber(args []string) string {
	for _, a := range args {
		if a == "--" {
			return ""
		}
		if len(a) > 1 && a[0] == '-' && strings.Trim(a[1:], "0123456789") == "" {
			return a
		}
	}
	return ""
}

// errorLine is s as an error line prints it: a newline as a space, and
// what else a terminal would act on escaped (visible): a name in a
// message can neither move the cursor nor put a byte that is not UTF-8 on
// the terminal.
func errorLine(s string) string {
	return visible(strings.ReplaceAll(s, "\n", " "))
}

// report prints err as one line and returns the exit status.
func report(stderr io.Writer, name string, err error) int {
	var ue *usageError
	var be interface{ BadUsage() }
	var xe *exitError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "turnctl %s: %s (see turnctl %s --help)\n", name, errorLine(ue.msg), name)
		return exitUsage
	case errors.As(err, &be):
		fmt.Fprintf(stderr, "turnctl %s: %s (see turnctl %s --help)\n", name, errorLine(err.Error()), name)
		return exitUsage
	case errors.As(err, &xe):
		if xe.msg != "" {
			fmt.Fprintf(stderr, "turnctl: %s\n", errorLine(xe.msg))
		}
		return xe.code
	}
	fmt.Fprintf(stderr, "turnctl: %s\n", errorLine(err.Error()))
	// A malformed argument (a TURN that is not one, a path outside the
	// project) is a usage error, whichever side found it.
	var te *turnctl.Error
	if errors.As(err, &te) && te.Code == turnctl.CodeBadRequest {
		return exitUsage
	}
	return exitFailure
}

// cutsLists: the commands whose list of changes is cut after listCut
// lines unless --all (those that print a rewind's report, printRewind: a
// rewind of 20,000 files; and status, asked often in a turn that may have
// made as many). show lists what it is asked for whole.
var cutsLists = map[string]bool{"rewind": true, "undo": true, "restore": true, "revert": true, "status": true}

func commandFlags(c *command, o options, g *globals) *pflag.FlagSet {
	fs := pflag.NewFlagSet("turnctl "+c.name, pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.SetInterspersed(!c.noInterspersed)
	o.addFlags(fs)
	switch {
	case c.changes && cutsLists[c.name]:
		fs.BoolVarP(&g.all, "all", "a", false, fmt.Sprintf("list everything: every change of a long list, and those under .git one by one (default: the first %d, and .git as one summary line)", listCut))
	case c.changes:
		fs.BoolVarP(&g.all, "all", "a", false, "list every path changed under .git (default: one summary line)")
	}
	if c.quiet {
		fs.BoolVarP(&g.quiet, "quiet", "q", false, "print nothing but errors: no progress bar, no report (--json still prints its object)")
	}
	fs.BoolVar(&g.json, "json", g.json, "print results as JSON (see doc/schema)")
	fs.BoolP("help", "h", false, "show this help")
	return fs
}

func mainHelp(w io.Writer, fs *pflag.FlagSet) {
	fmt.Fprintf(w, `Usage: turnctl [-C DIR] [--json] COMMAND [ARGS]

Marks the turns of whoever works in a ckptfs-mounted project, and shows,
compares and rewinds its history. turnctl finds the mount that contains the
current directory (or -C DIR, or $CKPTFS_DIR). When the project is not
mounted, the commands that only read history, and rewind, undo, restore,
revert, verify, forget, pin, unpin, gc, policy and du, open the store directly.

Commands:
`)
	for _, c := range commands {
		use := c.name + " " + c.args
		if len(use) > 34 {
			fmt.Fprintf(w, "  %s\n  %-34s %s\n", use, "", c.short)
			continue
		}
		fmt.Fprintf(w, "  %-34s %s\n", use, c.short)
	}
	fmt.Fprintf(w, `
TURN is a turn number (3), 0 (the tree when history began), ref:ID (a ref
given at begin or end), or a step of a turn (3.2: turnctl step).

--json prints one JSON object whose keys are always all there ("" and []
when empty, null for what does not exist, e.g. the end of an open turn),
times in RFC 3339 UTC; doc/schema holds a JSON Schema for each command's.
cat, checkout, export, hooks, hook-event and ui print no JSON (--json has
no effect on them).

Options:
%s
Run "turnctl COMMAND --help" for more about a command.
%s
`, clihelp.FlagUsages(fs), exitCodesHelp)
}

func commandHelp(w io.Writer, c *command) {
	fs := commandFlags(c, c.opts(), &globals{})
	fmt.Fprintf(w, "Usage: %s\n\n%s\n", strings.TrimSpace("turnctl [-C DIR] [--json] "+c.name+" "+c.args), c.short)
	if c.long != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimSpace(c.long))
	}
	fmt.Fprintf(w, "\nOptions:\n%s\n%s\n", clihelp.FlagUsages(fs), exitCodesHelp)
}

// wantArgs checks the number of positional arguments.
func wantArgs(args []string, min, max int) error {
	switch {
	case len(args) < min:
		return usagef("missing argument")
	case max >= 0 && len(args) > max:
		return usagef("unexpected argument %q", args[max])
	}
	return nil
}
