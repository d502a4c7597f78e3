package turnctlcli

import (
	"fmt"

	"github.com/spf13/pflag"

	"ckptfs/turnctl"
)

var pinCmd = &command{
	name:  "pin",
	args:  "TURN [--note TEXT]",
	short: "keep TURN: it always rewinds exactly, whatever the policy",
	long: `A pinned turn is never forgotten: forget refuses it, and the retention policy
stops before it. turnctl log marks it [pinned] ([pinned: NOTE] with a note).
Pinning a pinned turn again replaces its note.`,
	opts: func() options { return &pinOptions{} },
}

type pinOptions struct {
	note string
}

func (o *pinOptions) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.note, "note", "", "why the turn is kept (`TEXT`, one line)")
}

func (o *pinOptions) run(e *env, args []string) error {
	if err := wantArgs(args, 1, 1); err != nil {
		return err
	}
	rep, err := e.h.Pin(e.ctx, turnctl.PinRequest{Turn: args[0], Note: o.note})
	if err != nil {
		return err
	}
	if e.json {
		return e.printJSON(jPinReplyOut{Pin: jPin(rep.Pin)})
	}
	fmt.Fprintf(e.stdout, "turn %d pinned\n", rep.Pin.Turn)
	return nil
}

var unpinCmd = &command{
	name:  "unpin",
	args:  "TURN",
	short: "remove TURN's pin: the policy may forget it again",
	opts:  func() options { return &unpinOptions{} },
}

type unpinOptions struct{}

func (o *unpinOptions) addFlags(fs *pflag.FlagSet) {}

func (o *unpinOptions) run(e *env, args []string) error {
	if err := wantArgs(args, 1, 1); err != nil {
		return err
	}
	rep, err := e.h.Unpin(e.ctx, turnctl.UnpinRequest{Turn: args[0]})
	if err != nil {
		return err
	}
	if e.json {
		return e.printJSON(jUnpinOut{Turn: rep.Turn})
	}
	fmt.Fprintf(e.stdout, "turn %d unpinned\n", rep.Turn)
	return nil
}
