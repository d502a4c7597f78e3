package turnctlcli

import (
	"fmt"

	"github.com/spf13/pflag"

	"ckptfs/internal/ckpt"
	"ckptfs/turnctl"
)

var beginCmd = &command{
	name:  "begin",
	args:  "[--label TEXT] [--ref ID]",
	short: "open a new turn (closes any open one); prints its number",
	long: `Every change that returned before begin belongs to the turn it closes (an
agent's turn, or the automatic "manual" turn that collects changes made while
no turn was open); every change after it, to the new turn. A begin that closes
a turn a begin opened (its end never came) says so on stderr.`,
	mount: true,
	opts:  func() options { return &beginOptions{} },
}

type beginOptions struct {
	label, ref string
}

func (o *beginOptions) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.label, "label", "", "describe the turn (`TEXT`: e.g. the user's request; of several lines, its first is the label and show prints all)")
	fs.StringVar(&o.ref, "ref", "", "attach `ID` (e.g. a message id), usable later as TURN ref:ID")
}

func (o *beginOptions) run(e *env, args []string) error {
	if err := wantArgs(args, 0, 0); err != nil {
		return err
	}
	rep, err := e.h.Begin(e.ctx, turnctl.BeginRequest{Label: o.label, Ref: o.ref})
	if err != nil {
		return err
	}
	if e.json {
		return e.printJSON(jBegin(rep))
	}
	if c := rep.Closed; c != nil && c.Kind == ckpt.KindAgent {
		fmt.Fprintf(e.stderr, "turnctl begin: turn %d was still open (no turnctl end); closed it\n", c.Num)
	}
	fmt.Fprintln(e.stdout, rep.Turn.Num)
	return nil
}
