package turnctlcli

import (
	"fmt"

	"github.com/spf13/pflag"

	"ckptfs/internal/units"
	"ckptfs/turnctl"
)

var policyCmd = &command{
	name:  "policy",
	args:  "[--keep-size SIZE] [--keep-turns N] [--keep-age DURATION]",
	short: "show or change the retention policy",
	long: `The policy is kept in the store. Turns among the last --keep-turns (default
100), or that ended less than --keep-age ago (default 24h), are kept while
the store is within its budget; older turns are forgotten (the oldest
first, never a pinned one nor what follows it). While the store is over
--keep-size (default: the smaller of 10 GiB and a tenth of its disk), more
of the oldest turns are forgotten until it fits. 0 sets a value back to its
default. SIZE: 500M, 10GiB, ...; DURATION: 90m, 24h, 7d, 2w.`,
	opts: func() options { return &policyOptions{} },
}

type policyOptions struct {
	size, turns, age string
}

func (o *policyOptions) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.size, "keep-size", "", "budget of the store on disk (`SIZE`)")
	fs.StringVar(&o.turns, "keep-turns", "", "keep at least the last `N` turns")
	fs.StringVar(&o.age, "keep-age", "", "keep the turns of the last `DURATION`")
}

func (o *policyOptions) run(e *env, args []string) error {
	if err := wantArgs(args, 0, 0); err != nil {
		return err
	}
	req, err := parsePolicy(o.size, o.turns, o.age)
	if err != nil {
		return err
	}
	rep, err := e.h.Policy(e.ctx, req)
	if err != nil {
		return err
	}
	if e.json {
		return e.printJSON(jPolicyReply(rep))
	}
	dflt := func(set bool) string {
		if set {
			return ""
		}
		return " (default)"
	}
	p, eff := rep.Policy, rep.Effective
	fmt.Fprintf(e.stdout, "keep-size:  %s%s; the store holds %s\n", units.Bytes(eff.KeepSize), dflt(p.KeepSize != 0), units.Bytes(rep.StoreBytes))
	fmt.Fprintf(e.stdout, "keep-turns: %d%s\n", eff.KeepTurns, dflt(p.KeepTurns != 0))
	fmt.Fprintf(e.stdout, "keep-age:   %s%s\n", units.Duration(eff.KeepAge), dflt(p.KeepAge != 0))
	return nil
}

// parsePolicy turns the --keep-* flags into a request (usage errors for
// malformed values).
func parsePolicy(size, turns, age string) (turnctl.PolicyRequest, error) {
	var req turnctl.PolicyRequest
	if size != "" {
		n, err := units.ParseBytes(size)
		if err != nil {
			return req, usagef("--keep-size: %v", err)
		}
		req.KeepSize = &n
	}
	if turns != "" {
		var n int
		if _, err := fmt.Sscan(turns, &n); err != nil || n < 0 || fmt.Sprint(n) != turns {
			return req, usagef("--keep-turns: bad number %q", turns)
		}
		req.KeepTurns = &n
	}
	if age != "" {
		d, err := units.ParseDuration(age)
		if err != nil {
			return req, usagef("--keep-age: %v", err)
		}
		req.KeepAge = &d
	}
	return req, nil
}
