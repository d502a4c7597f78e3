package turnctlcli

import (
	"io"

	"github.com/spf13/pflag"

	"ckptfs/turnctl"
)

var catCmd = &command{
	name:  "cat",
	args:  "TURN PATH",
	short: "a file's content as it was at the end of TURN",
	long: `Writes the raw bytes to standard output (--json is ignored). PATH is relative
to the current directory. It is an error if PATH did not exist at the end of
TURN or was not a regular file then.`,
	opts: func() options { return &catOptions{} },
}

type catOptions struct{}

func (o *catOptions) addFlags(fs *pflag.FlagSet) {}

func (o *catOptions) run(e *env, args []string) error {
	if err := wantArgs(args, 2, 2); err != nil {
		return err
	}
	p, err := e.proj.rel(args[1])
	if err != nil {
		return err
	}
	rep, err := e.h.Cat(e.ctx, turnctl.CatRequest{Turn: args[0], Path: p})
	if err != nil {
		return err
	}
	defer rep.Body.Close()
	_, err = io.Copy(e.stdout, rep.Body)
	return err
}
