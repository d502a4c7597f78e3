package turnctlcli

import (
	"fmt"

	"github.com/spf13/pflag"

	"ckptfs/turnctl"
)

var endCmd = &command{
	name:  "end",
	args:  "[--ref ID]",
	short: "close the open turn; prints a one-line summary",
	long: `Every change that returned before end belongs to the closed turn. Changes
after it go to an automatic "manual" turn until the next begin.`,
	mount: true,
	opts:  func() options { return &endOptions{} },
}

type endOptions struct {
	ref string
}

func (o *endOptions) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.ref, "ref", "", "attach `ID` to the closed turn, usable later as TURN ref:ID")
}

func (o *endOptions) run(e *env, args []string) error {
	if err := wantArgs(args, 0, 0); err != nil {
		return err
	}
	rep, err := e.h.End(e.ctx, turnctl.EndRequest{Ref: o.ref})
	if err != nil {
		return err
	}
	if e.json {
		return e.printJSON(jEnd(rep))
	}
	fmt.Fprintln(e.stdout, rep.Summary)
	return nil
}
