package turnctlcli

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"ckptfs/internal/units"
	"ckptfs/turnctl"
)

var policyCmd = &command{
	name:  "policy",
	args:  "[--keep-size SIZE] [--keep-turns N] [--keep-age DURATION] [--keep-hourly DURATION] [--keep-daily DURATION]",
	short: "show or change the retention policy",
	long: `The policy is kept in the store. Turns among the last --keep-turns (default
100), or that ended less than --keep-age ago (default 24h), are all kept
while the store is within its budget. Older turns are thinned: of those
that ended less than --keep-hourly ago (default 7d) the last turn of each
hour is kept, then of those that ended less than --keep-daily ago (default
30d) the last turn of each day (UTC); the others are merged into the kept
turn after them (their changes stay, the states between are forgotten).
Turns older than that are forgotten (the oldest first, up to the first
pinned one; past it they are merged instead). While the store is over
--keep-size (default: the smaller of 10 GiB and a tenth of its disk), more
of the oldest turns are forgotten until it fits (past a pinned turn, the
oldest after it are merged). A pinned turn is always kept, and so is the turn
before the newest one that changed something (its undo). 0 sets a value back
to its default; --keep-hourly off and --keep-daily off thin none that way.
SIZE: 500M, 10GiB, 100B (a unit is needed: a bare 100 is refused rather
than read as 100 bytes); DURATION: 90m, 24h, 7d, 2w.`,
	opts: func() options { return &policyOptions{} },
}

type policyOptions struct {
	size, turns, age, hourly, daily string
	fs                              *pflag.FlagSet
}

func (o *policyOptions) addFlags(fs *pflag.FlagSet) {
	o.fs = fs
	fs.StringVar(&o.size, "keep-size", "", "budget of the store on disk (`SIZE`)")
	fs.StringVar(&o.turns, "keep-turns", "", "keep at least the last `N` turns")
	fs.StringVar(&o.age, "keep-age", "", "keep the turns of the last `DURATION`")
	fs.StringVar(&o.hourly, "keep-hourly", "", "then the last turn of each hour for `DURATION` (off: none)")
	fs.StringVar(&o.daily, "keep-daily", "", "then the last turn of each day for `DURATION` (off: none)")
}

func (o *policyOptions) run(e *env, args []string) error {
	if err := wantArgs(args, 0, 0); err != nil {
		return err
	}
	if f := EmptyKeepFlag(o.fs); f != "" {
		return usagef("--%s: no value given", f)
	}
	req, err := parsePolicy(o.size, o.turns, o.age, o.hourly, o.daily)
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
	fmt.Fprintf(e.stdout, "keep-size:   %s%s; the store holds %s\n", units.Bytes(eff.KeepSize), dflt(p.KeepSize != 0), units.Bytes(rep.StoreBytes))
	fmt.Fprintf(e.stdout, "keep-turns:  %d%s\n", eff.KeepTurns, dflt(p.KeepTurns != 0))
	fmt.Fprintf(e.stdout, "keep-age:    %s%s\n", units.Duration(eff.KeepAge), dflt(p.KeepAge != 0))
	window := func(d time.Duration) string {
		if d < 0 {
			return "off"
		}
		return units.Duration(d)
	}
	fmt.Fprintf(e.stdout, "keep-hourly: %s%s\n", window(eff.KeepHourly), dflt(p.KeepHourly != 0))
	fmt.Fprintf(e.stdout, "keep-daily:  %s%s\n", window(eff.KeepDaily), dflt(p.KeepDaily != 0))
	if req.KeepSize != nil && rep.StoreBytes > eff.KeepSize {
		// Only a mounted project's daemon runs the gc by itself.
		when := "within a minute"
		if e.proj != nil && !e.proj.mounted {
			when = "when you run turnctl gc or mount the project: none runs while it is not mounted"
		}
		fmt.Fprintf(e.stderr, "turnctl: note: the store holds %s, over the new budget: the gc forgets the oldest turns until it fits, %s (turnctl gc --dry-run lists them)\n", units.Bytes(rep.StoreBytes), when)
	}
	return nil
}

// EmptyKeepFlag names the first --keep-* flag of fs given an empty value
// ("--keep-size="), which would otherwise read as not given; "" if none.
func EmptyKeepFlag(fs *pflag.FlagSet) string {
	name := ""
	fs.Visit(func(f *pflag.Flag) {
		if name == "" && strings.HasPrefix(f.Name, "keep-") && f.Value.String() == "" {
			name = f.Name
		}
	})
	return name
}

// parsePolicy turns the --keep-* flags into a request (usage errors for
// malformed values).
func parsePolicy(size, turns, age, hourly, daily string) (turnctl.PolicyRequest, error) {
	var req turnctl.PolicyRequest
	if size != "" {
		n, err := units.ParseBudget(size)
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
	for _, w := range []struct {
		flag, v string
		dst     **time.Duration
	}{{"--keep-hourly", hourly, &req.KeepHourly}, {"--keep-daily", daily, &req.KeepDaily}} {
		if w.v == "" {
			continue
		}
		d, err := units.ParseWindow(w.v)
		if err != nil {
			return req, usagef("%s: %v", w.flag, err)
		}
		*w.dst = &d
	}
	return req, nil
}
