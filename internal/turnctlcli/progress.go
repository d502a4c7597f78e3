package turnctlcli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/cheggaaa/pb/v3"
	"golang.org/x/sys/unix"

	"ckptfs/turnctl"
)

// The progress bar of a long command (rewind, undo, restore, revert, gc,
// log) on stderr: drawn only when stderr is a terminal and --quiet was
// not given, once the command has run for progressDelay, from what the
// daemon (or the in-process Service) says on /v1/progress every
// progressTick.
var (
	progressDelay = 400 * time.Millisecond
	progressTick  = 100 * time.Millisecond
	// progressTerminal says whether w is a terminal the bar may be drawn
	// on (a test may pretend).
	progressTerminal = func(w io.Writer) bool {
		f, ok := w.(*os.File)
		if !ok || os.Getenv("TERM") == "dumb" {
			return false
		}
		_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
		return err == nil
	}
)

// CKPTFS_PROGRESS_DELAY=DURATION sets progressDelay (tests: 0, a bar from
// the first tick, however fast the machine), and a tick no longer than it
// (10 ms at 0).
func init() {
	d, err := time.ParseDuration(os.Getenv("CKPTFS_PROGRESS_DELAY"))
	if err != nil || d < 0 {
		return
	}
	progressDelay = d
	progressTick = min(progressTick, max(d, 10*time.Millisecond))
}

// watch runs call, the one request of a long command, and while it runs
// shows its progress under the title what on e.progress (nil: it just
// runs call). The bar's line is wiped before watch returns, so that what
// the command prints next starts on a clean line.
func (e *env) watch(what string, call func(ctx context.Context) error) error {
	if e.progress == nil {
		return call(e.ctx)
	}
	id := fmt.Sprintf("turnctl-%d-%d", os.Getpid(), time.Now().UnixNano())
	done := make(chan error, 1)
	go func() { done <- call(turnctl.WithOp(e.ctx, id)) }()
	start := time.Now()
	tick := time.NewTicker(progressTick)
	defer tick.Stop()
	var bar *progressBar
	for {
		select {
		case err := <-done:
			bar.finish()
			return err
		case <-tick.C:
			if time.Since(start) < progressDelay {
				continue
			}
			rep, err := e.h.Progress(e.ctx, turnctl.ProgressRequest{ID: id})
			if err != nil {
				// A daemon too old to tell: wait without a bar.
				tick.Stop()
				continue
			}
			if rep.Running {
				if bar == nil {
					bar = newProgressBar(e.progress, what)
				}
				bar.update(rep)
			}
		}
	}
}

// progressBar draws a turnctl.ProgressReply with cheggaaa/pb: a bar with
// counts and percent when the phase's total is known, a spinner and the
// count so far when it is not.
type progressBar struct {
	bar  *pb.ProgressBar
	what string
}

// progressTmpl draws a bar when the total is known, else a spinner. One
// template for both: pb renders from another goroutine and reads its
// template without its lock, so a running bar's template must not be
// replaced (SetTemplateString races with the render).
const progressTmpl = `{{string . "what"}}: {{string . "phase"}} ` +
	`{{if gt .Total 0}}{{bar . "[" "=" ">" " " "]"}} {{counters . }} {{percent . "%.0f%%"}}` +
	`{{else}}{{cycle . "-" "\\" "|" "/"}} {{string . "count"}}{{end}}`

func newProgressBar(w io.Writer, what string) *progressBar {
	b := pb.New64(0)
	b.SetWriter(w)
	b.Set(pb.Terminal, true)
	b.Set(pb.ReturnSymbol, "\r")
	b.Set(pb.CleanOnFinish, true)
	b.Set("what", what)
	b.SetMaxWidth(100)
	b.SetRefreshRate(progressTick)
	b.SetTemplateString(progressTmpl)
	b.Start()
	// Drawn now, not at the refresher's first tick: a command that ends
	// within a tick of the bar's start still shows what it was doing.
	b.Write()
	return &progressBar{bar: b, what: what}
}

func (p *progressBar) update(rep *turnctl.ProgressReply) {
	p.bar.Set("phase", rep.Phase)
	count := ""
	if rep.Done > 0 {
		count = fmt.Sprint(rep.Done)
	}
	p.bar.Set("count", count)
	p.bar.SetTotal(rep.Total)
	p.bar.SetCurrent(rep.Done)
}

// finish wipes the bar's line (nothing for a nil p: no bar was drawn).
func (p *progressBar) finish() {
	if p != nil {
		p.bar.Finish()
	}
}

// watchChange is watchToEnd for a change of the tree, watch for its dry
// run (which stops at an interrupt as any command does).
func (e *env) watchChange(dry bool, what string, call func(ctx context.Context) error) error {
	if dry {
		return e.watch(what, call)
	}
	return e.watchToEnd(what, call)
}

// interrupts is where watchToEnd hears SIGINT, SIGTERM and SIGHUP (a
// variable for the tests, which send on a channel of their own).
var interrupts = func() (<-chan os.Signal, func()) {
	c := make(chan os.Signal, 2)
	signal.Notify(c, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	return c, func() { signal.Stop(c) }
}

// watchToEnd is watch for a change of the tree that runs to its end once
// begun (a rewind, undo, restore or revert: journaled, never stopped
// half-way). A first interrupt says so and waits on; a second stops
// waiting and exits 130, the change going on in the daemon (or, run
// without one, finished from its journal by the next command or mount).
func (e *env) watchToEnd(what string, call func(ctx context.Context) error) error {
	sigs, stop := interrupts()
	defer stop()
	done := make(chan error, 1)
	go func() { done <- e.watch(what, call) }()
	for told := false; ; {
		select {
		case err := <-done:
			return err
		case <-sigs:
		}
		if told {
			if e.proj != nil && e.proj.mounted {
				return &exitError{code: 130, msg: fmt.Sprintf("stopped waiting; the %s goes on in the daemon (turnctl log shows it done)", what)}
			}
			return &exitError{code: 130, msg: fmt.Sprintf("stopped: the %s is cut short, and the next turnctl command or mount finishes it from its journal", what)}
		}
		told = true
		fmt.Fprintf(e.stderr, "\nturnctl: the %s cannot stop half-way: waiting for it to finish (interrupt again to stop waiting)\n", what)
	}
}
