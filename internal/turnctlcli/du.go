package turnctlcli

import (
	"fmt"
	"sort"

	"github.com/spf13/pflag"

	"ckptfs/internal/ckpt"
	"ckptfs/internal/units"
	"ckptfs/turnctl"
)

var duCmd = &command{
	name:  "du",
	args:  "[-n N]",
	short: "what the history store holds: size, budget, per turn, largest files",
	long: `Shows the store's size on disk against its budget, the bytes each turn alone
keeps (what only its records reference: the prior bytes of what it changed),
the largest file versions history keeps, and what turnctl gc would free now.
It reads the whole store.`,
	opts: func() options { return &duOptions{} },
}

type duOptions struct {
	n int
}

func (o *duOptions) addFlags(fs *pflag.FlagSet) {
	fs.IntVarP(&o.n, "max-count", "n", 10, "show at most `N` turns (the largest; 0: all)")
}

func (o *duOptions) run(e *env, args []string) error {
	if err := wantArgs(args, 0, 0); err != nil {
		return err
	}
	if o.n < 0 {
		return usagef("-n must not be negative")
	}
	rep, err := e.h.Du(e.ctx, turnctl.DuRequest{})
	if err != nil {
		return err
	}
	if e.json {
		return e.printJSON(jDu(rep))
	}
	u := rep.Usage
	pct := 0.0
	if u.Budget > 0 {
		pct = 100 * float64(u.StoreBytes) / float64(u.Budget)
	}
	// Worded as ckptfs status's budget line, which counts the same bytes.
	fmt.Fprintf(e.stdout, "budget:  %s of %s (%.0f%%, the reserve aside); content %s\n", units.Bytes(u.StoreBytes), units.Bytes(u.Budget), pct, units.Bytes(u.ContentBytes))
	if u.Start != nil {
		fmt.Fprintf(e.stdout, "history: starts at turn %d\n", u.Start.Turn)
	}
	gcLine := fmt.Sprintf("would free about %s", units.Bytes(u.GC.Freed()))
	if len(u.GC.Forgot) > 0 {
		gcLine += fmt.Sprintf(", forgetting %s", turnRange(u.GC.Forgot))
		if u.GC.Merged > 0 {
			gcLine += fmt.Sprintf(" (%d of them merged into the kept turn after them)", u.GC.Merged)
		}
	}
	fmt.Fprintf(e.stdout, "gc:      %s (garbage now: %s)\n", gcLine, units.Bytes(u.Garbage))
	turns := append([]ckpt.TurnUsage(nil), u.Turns...)
	sort.SliceStable(turns, func(i, j int) bool { return turns[i].Bytes > turns[j].Bytes })
	if o.n > 0 && len(turns) > o.n {
		turns = turns[:o.n]
	}
	if len(turns) > 0 {
		fmt.Fprintln(e.stdout, "\nturns holding the most (bytes only they keep):")
		var rows [][]cell
		for _, t := range turns {
			pin := ""
			if t.Pinned {
				pin = "pinned"
			}
			rows = append(rows, []cell{{text: fmt.Sprint(t.Turn), color: cYellow, right: true}, {text: units.Bytes(t.Bytes), right: true}, {text: pin, color: cDim}})
		}
		e.printTable(rows, "  ")
	}
	if len(u.Largest) > 0 {
		fmt.Fprintln(e.stdout, "\nlargest file versions in history (as before the turn changed them):")
		var rows [][]cell
		for _, f := range u.Largest {
			rows = append(rows, []cell{{text: units.Bytes(f.Bytes), right: true}, {text: fmt.Sprintf("turn %d", f.Turn), color: cYellow}, {text: printable(f.Path)}})
		}
		e.printTable(rows, "  ")
	}
	return nil
}
