package turnctlcli

import (
	"context"
	"errors"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"

	"ckptfs/turnctl"
)

var uiCmd = &command{
	name:  "ui",
	args:  "[--addr 127.0.0.1:0] [--no-open]",
	short: "serve the timeline as a local web page (tree, diffs, search, rewind)",
	long: `Serves a web page for the mount: the timeline as a tree (forks where a
rewind went back, the current state marked, pins), each turn's files and
diffs (unified or side by side), a file's history, search (-S, --grep,
--program), and rewind, restore, revert, undo, pin, unpin and gc, each
previewed (a dry run) and confirmed. The page updates when a turn begins or
ends. It prints the page's URL, and opens a browser when there is a display
(not with --no-open). Ctrl-C stops it.

The page talks to the daemon through the control socket, as turnctl does.
It listens on a loopback address only (--addr; a free port of 127.0.0.1 by
default), and the URL carries a random token: only who has it can use the
page (the browser keeps it in a cookie of that port). The project must be
mounted. The turnctl binary hands the command over to the ckptfs binary,
which links the web server.`,
	mount: true,
	opts:  func() options { return &uiOptions{} },
}

type uiOptions struct {
	addr   string
	noOpen bool
}

func (o *uiOptions) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.addr, "addr", "127.0.0.1:0", "listen on `HOST:PORT`, a loopback address (port 0: any free port)")
	fs.BoolVar(&o.noOpen, "no-open", false, "print the URL only; do not open a browser")
}

// UI serves the page of `turnctl ui` for the project at root through h
// until ctx is done (addr: where to listen; open: open a browser),
// printing its URL on stdout. The ckptfs binary passes internal/ui's Run;
// the turnctl binary, which must not link net/http, a func that hands the
// command over to ckptfs.
type UI func(ctx context.Context, h turnctl.Handler, root, addr string, open bool, stdout io.Writer) error

func (o *uiOptions) run(e *env, args []string) error {
	if err := wantArgs(args, 0, 0); err != nil {
		return err
	}
	if e.ui == nil {
		return errors.New("this turnctl cannot serve the page")
	}
	ctx, stop := signal.NotifyContext(e.ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	return e.ui(ctx, e.h, e.proj.root, o.addr, !o.noOpen, e.stdout)
}
