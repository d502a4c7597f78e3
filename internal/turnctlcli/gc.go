package turnctlcli

import (
	"context"
	"fmt"

	"github.com/spf13/pflag"

	"ckptfs/internal/units"
	"ckptfs/turnctl"
)

var gcCmd = &command{
	name:  "gc",
	args:  "[--dry-run]",
	short: "apply the retention policy now and reclaim the store's space",
	long: `Forgets what the retention policy (turnctl policy) says to forget, deletes the
content no kept turn needs any more (chunks and attic files) and compacts the
store so that its files shrink. Captures and turn boundaries go on meanwhile;
a rewind is not made to wait (gc stops and a later gc goes on). Refused while
a rewind runs. The daemon runs it by itself when the store passes its budget.
--dry-run reports what it would do. On a terminal, a progress bar on stderr
shows what it is doing; --quiet prints nothing but errors.`,
	quiet: true,
	opts:  func() options { return &gcOptions{} },
}

type gcOptions struct {
	dryRun bool
}

func (o *gcOptions) addFlags(fs *pflag.FlagSet) {
	fs.BoolVarP(&o.dryRun, "dry-run", "n", false, "report what gc would do; change nothing")
}

func (o *gcOptions) run(e *env, args []string) error {
	if err := wantArgs(args, 0, 0); err != nil {
		return err
	}
	var rep *turnctl.GCReply
	err := e.watch("gc", func(ctx context.Context) (err error) {
		rep, err = e.h.GC(ctx, turnctl.GCRequest{DryRun: o.dryRun})
		return err
	})
	if err != nil {
		return err
	}
	if e.json {
		return e.printJSON(jGC(rep.GCReport))
	}
	if e.quiet {
		return nil
	}
	verb := "forgot"
	if rep.DryRun {
		verb = "would forget"
	}
	if len(rep.Forgot) > 0 {
		line := fmt.Sprintf("%s %s (policy)", verb, turnRange(rep.Forgot))
		if rep.Start != nil {
			line += fmt.Sprintf("; history starts at turn %d", rep.Start.Turn)
		}
		if rep.Merged > 0 {
			line += fmt.Sprintf("; %d of them merged into the kept turn after them", rep.Merged)
		}
		fmt.Fprintln(e.stdout, line)
	}
	if rep.DryRun {
		fmt.Fprintf(e.stdout, "would free about %s: store %s -> %s\n", units.Bytes(rep.Freed()), units.Bytes(rep.Before), units.Bytes(rep.After))
		return nil
	}
	fmt.Fprintf(e.stdout, "freed %s (%d chunks, %d attic files): store %s -> %s\n",
		units.Bytes(rep.Freed()), rep.Chunks, rep.Attic, units.Bytes(rep.Before), units.Bytes(rep.After))
	if rep.Stopped != "" {
		fmt.Fprintf(e.stdout, "stopped early: %s (run gc again)\n", rep.Stopped)
	}
	return nil
}
