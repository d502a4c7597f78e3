package turnctlcli

import (
	"fmt"

	"github.com/spf13/pflag"

	"ckptfs/turnctl"
)

var forgetCmd = &command{
	name:  "forget",
	args:  "TURN... | --before TURN",
	short: "forget the oldest turns: history then starts later",
	long: `Forgets turns for good, freeing what only they kept (turnctl gc reclaims the
space). The turns must be the oldest kept ones: the turn where history starts
and those right after it (turnctl log shows where it starts); --before TURN
forgets every kept turn before TURN. History then starts at the turn after
the last one forgotten: its state is the oldest one kept, and every kept turn
still rewinds exactly. Forgetting a turn in the middle of history (merging
its changes into its neighbours) is not done yet. A pinned turn, the open
turn and the newest closed turn cannot be forgotten.`,
	opts: func() options { return &forgetOptions{} },
}

type forgetOptions struct {
	before string
}

func (o *forgetOptions) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.before, "before", "", "forget every kept turn before `TURN`")
}

func (o *forgetOptions) run(e *env, args []string) error {
	if o.before == "" && len(args) == 0 {
		return usagef("name the turns to forget, or --before TURN")
	}
	if o.before != "" && len(args) > 0 {
		return usagef("give either turns or --before, not both")
	}
	rep, err := e.h.Forget(e.ctx, turnctl.ForgetRequest{Turns: args, Before: o.before})
	if err != nil {
		return err
	}
	if e.json {
		return e.printJSON(jForget(rep))
	}
	fmt.Fprintf(e.stdout, "forgot %s; history starts at turn %d (turnctl gc reclaims the space)\n", turnRange(rep.Forgot), rep.Start.Turn)
	return nil
}

// turnRange names a contiguous list of turns: "turn 3", "turns 0-5".
func turnRange(ts []uint64) string {
	switch len(ts) {
	case 0:
		return "no turn"
	case 1:
		return fmt.Sprintf("turn %d", ts[0])
	}
	return fmt.Sprintf("turns %d-%d", ts[0], ts[len(ts)-1])
}
