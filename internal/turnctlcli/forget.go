package turnctlcli

import (
	"fmt"
	"strings"

	"github.com/spf13/pflag"

	"ckptfs/turnctl"
)

var forgetCmd = &command{
	name:  "forget",
	args:  "[--dry-run] TURN... | --before TURN",
	short: "forget turns: they can no longer be rewound to",
	long: `Forgets turns for good, freeing what only they kept (turnctl gc reclaims the
space); every kept turn still rewinds exactly. Forgetting the oldest kept
turns (the turn where history starts and those right after it; --before
TURN forgets every kept turn before TURN) moves the start of history: the
turn after the last one forgotten is the oldest state kept, as that turn
ended, so what that turn itself changed is no longer shown (turnctl log
shows where history starts and why). A turn in the middle of history is merged
into the kept turn after it: that turn's changes (show, diff, log) then
include the forgotten turn's, and the state between them is gone. A pinned
turn, the open turn, the newest closed turn, and the turn the open turn
continues from cannot be forgotten; then nothing is. --dry-run says what
the forget would do, or refuses as it would, and changes nothing.`,
	opts: func() options { return &forgetOptions{} },
}

type forgetOptions struct {
	before string
	dryRun bool
}

func (o *forgetOptions) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.before, "before", "", "forget every kept turn before `TURN`")
	fs.BoolVarP(&o.dryRun, "dry-run", "n", false, "say what would be forgotten; change nothing")
}

func (o *forgetOptions) run(e *env, args []string) error {
	if o.before == "" && len(args) == 0 {
		return usagef("name the turns to forget, or --before TURN")
	}
	if o.before != "" && len(args) > 0 {
		return usagef("give either turns or --before, not both")
	}
	rep, err := e.h.Forget(e.ctx, turnctl.ForgetRequest{Turns: args, Before: o.before, DryRun: o.dryRun})
	if err != nil {
		return err
	}
	if e.json {
		return e.printJSON(jForget(rep))
	}
	forgot, starts, merged, tail := "forgot", "starts", "merged", " (turnctl gc reclaims the space)"
	if rep.DryRun {
		forgot, starts, merged, tail = "would forget", "would start", "would merge", "; nothing changed"
	}
	fmt.Fprintf(e.stdout, "%s %s", forgot, turnRange(rep.Forgot))
	if len(rep.Forgot) > 0 && rep.Forgot[0] < rep.Start.Turn {
		fmt.Fprintf(e.stdout, "; history %s at turn %d, as it ended (what it changed is no longer shown)", starts, rep.Start.Turn)
	}
	var runs []string
	for i := 0; i < len(rep.Merged); {
		var ts []uint64
		j := i
		for ; j < len(rep.Merged) && rep.Merged[j].Into == rep.Merged[i].Into; j++ {
			ts = append(ts, rep.Merged[j].Turn)
		}
		runs = append(runs, fmt.Sprintf("%s into turn %d", turnRange(ts), rep.Merged[i].Into))
		i = j
	}
	if len(runs) > 0 {
		fmt.Fprintf(e.stdout, "; %s %s", merged, strings.Join(runs, ", "))
	}
	fmt.Fprintln(e.stdout, tail)
	return nil
}

// turnRange names a sorted list of turns: "turn 3", "turns 0-5",
// "turns 0-2, 5, 7-9".
func turnRange(ts []uint64) string {
	switch len(ts) {
	case 0:
		return "no turn"
	case 1:
		return fmt.Sprintf("turn %d", ts[0])
	}
	var parts []string
	for i := 0; i < len(ts); {
		j := i
		for j+1 < len(ts) && ts[j+1] == ts[j]+1 {
			j++
		}
		if j == i {
			parts = append(parts, fmt.Sprint(ts[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", ts[i], ts[j]))
		}
		i = j + 1
	}
	return "turns " + strings.Join(parts, ", ")
}
