package turnctlcli

import (
	"fmt"

	"github.com/spf13/pflag"

	"ckptfs/internal/units"
	"ckptfs/turnctl"
)

var verifyCmd = &command{
	name:  "verify",
	args:  "",
	short: "check the history store's checksums; exit 1 if anything is corrupt",
	long: `Reads every stored chunk and checks its SHA-256, and checks that every file
history keeps in the store's attic is present with its size. Damage is
reported, never repaired.`,
	opts: func() options { return &verifyOptions{} },
}

type verifyOptions struct{}

func (o *verifyOptions) addFlags(fs *pflag.FlagSet) {}

func (o *verifyOptions) run(e *env, args []string) error {
	if err := wantArgs(args, 0, 0); err != nil {
		return err
	}
	rep, err := e.h.Verify(e.ctx, turnctl.VerifyRequest{})
	if err != nil {
		return err
	}
	if e.json {
		if err := e.printJSON(jVerify(rep)); err != nil {
			return err
		}
	} else {
		for _, c := range rep.Corrupt {
			fmt.Fprintln(e.stdout, e.paint(cRed, "corrupt: ")+c)
		}
		fmt.Fprintf(e.stdout, "%d chunks (%s), %d attic files checked\n", rep.Chunks, units.Bytes(rep.Bytes), rep.Attic)
	}
	if !rep.OK {
		return fmt.Errorf("the store is corrupt: %s", plural(len(rep.Corrupt), "problem"))
	}
	if !e.json {
		fmt.Fprintln(e.stdout, e.paint(cGreen, "ok"))
	}
	return nil
}
