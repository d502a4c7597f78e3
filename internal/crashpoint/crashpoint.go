// Package crashpoint names the moments at which the daemon may be killed
// on purpose, so that a crash found by a test is replayed exactly: not "a
// SIGKILL some milliseconds into a rewind" but "the 3rd time a rewind had
// recorded an exchange and not yet made it".
//
// The code calls Hit("rewind.exchange.recorded") at each such moment. A
// process whose environment sets CKPTFS_CRASH=SPEC kills itself with
// SIGKILL (no deferred function runs, nothing is flushed: a kill -9) at
// the hit SPEC names, after one line on stderr saying which. SPEC is
//
//	PATTERN[,PATTERN...][@N]
//
// where a PATTERN is a point's name, or a prefix of names ending in '*'
// ("*" alone: any point), and N (default 1) counts the hits of the points
// the patterns match, from the start of the process: "rewind.step@3" is
// the third undo step, "rewind.*,tree.*@40" the 40th moment of a rewind.
// Without CKPTFS_CRASH, Hit is one atomic load. CKPTFS_CRASH_TRACE=FILE
// lists the hits counted in FILE.
//
// Points lists every name; the tests choose from it with their seed.
//
// A failure that the real world gives only by chance (a disk error just
// as the daemon saves the record of the tree at its unmount) is armed the
// same way, by name: a process whose environment sets CKPTFS_FAIL=NAME
// gets an error from every Fail(NAME), which the code there returns as
// the operation's own. FailPoints lists those names.
package crashpoint

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Env is the environment variable that arms a crash point.
const Env = "CKPTFS_CRASH"

// TraceEnv names a file to which a process armed by Env appends the name
// of every hit the patterns match, one a line, the fatal one included: a
// test learns from it how many hits an operation has.
const TraceEnv = "CKPTFS_CRASH_TRACE"

// Points names every crash point, grouped by where it is. A test in this
// package checks that the list and the Hit calls in the code agree.
var Points = []string{
	// versionstore: recording (hit by the overlay and by rewinds alike).
	"record.cloned",    // a capture's clone is in the attic and fsynced, its record not committed
	"record.spans",     // a range record's bytes are in the span file in use, its record not committed
	"record.nosync",    // a range record is committed without waiting for Pebble's log, not yet in the range log
	"record.committed", // a capture's record is committed; the change is not yet made
	"rename.recorded",  // RecordRename committed the record and its pending mark
	"rename.confirmed", // commit(true) deleted the pending mark (synced)
	"turn.committed",   // Begin or End committed the turn record, before fsyncing the WAL
	// versionstore: a rewind (and Recover, which runs the same steps).
	"rewind.begun",             // the rewind turn is open, no journal yet
	"rewind.journaled",         // the journal is written and synced, nothing changed yet
	"rewind.step",              // before undoing one event
	"rewind.step.done",         // the event is undone, progress not yet saved
	"rewind.rename.recorded",   // a rename back is recorded, not made
	"rewind.rename.done",       // the rename back is made, not confirmed
	"rewind.exchange.recorded", // an exchange back is recorded, not made
	"rewind.exchange.done",     // the exchange back is made, not confirmed
	"rewind.planned",           // the fix-up pass's plan is made, not yet saved
	"rewind.fixup",             // before one action of the fix-up pass (or a restore)
	"rewind.fixup.done",        // the action is done, progress not yet saved
	"rewind.links.planned",     // the link pass's plan is made, not yet saved
	"rewind.links",             // before one action of the link pass (a split or a link)
	"rewind.links.done",        // the action is done, progress not yet saved
	"rewind.noted",             // the finished rewind is noted for later rewinds to skip, its turn still open
	"rewind.rollback",          // a rewind stopped on unreadable bytes; its rollback is journaled and synced, nothing undone yet
	"rewind.ended",             // the rewind turn is closed, the journal not yet deleted
	"rewind.finished",          // the journal is deleted
	"recover.start",            // Recover begins, before the pending marks are settled
	"recover.marks",            // the pending marks are settled
	"recover.unshared",         // an attic file a crash left shared with the tree is copied, not yet unlinked
	"recover.done",             // Recover finished an interrupted rewind
	// versionstore: bounded history (forget, gc).
	"forget.committed", // the new start of history is committed, the WAL not yet fsynced
	"step.committed",   // a step boundary is committed, the WAL not yet fsynced
	"forget.merged",    // one run of turns is merged into the next kept turn (one batch), the WAL not yet fsynced
	"gc.forgotten",     // the policy's forget is done (or there was none), nothing swept
	"gc.marked",        // the references are read, nothing deleted
	"gc.batch",         // one batch of garbage chunks is deleted (unsynced)
	"gc.attic",         // one batch of garbage attic files is removed
	"gc.compacted",     // the deleted ranges are compacted
	// internal/backing: inside one change of the tree.
	"tree.changed",     // after each change a rewind makes to the tree (one syscall)
	"tree.write.tmp",   // WriteFile wrote its temporary, not yet renamed into place
	"tree.remove.part", // RemoveAll removed one entry of a directory, maybe not all
	"tree.link.tmp",    // Hardlink made its temporary link, not yet renamed into place
	// fusefs: the overlay's rename.
	"fuse.rename.recorded",   // the rename is recorded, the syscall not made
	"fuse.rename.done",       // the syscall is made, the record not confirmed
	"fuse.exchange.recorded", // the exchange is recorded, the syscall not made
	"fuse.exchange.done",     // the syscall is made, the record not confirmed
	// cmd/ckptfs: the daemon.
	"mount.recovered", // Recover returned, the tree is not yet served
	"daemon.stopping", // asked to stop (umount's SIGTERM), the open turn not closed nor the manifest saved
}

// plan is an armed crash: fire at the n-th hit of a point pats match
// (n 0: never; trace, if set, lists every hit).
type plan struct {
	spec string
	pats []string
	n    int64
	hits atomic.Int64
	fire func(name string, spec string)

	mu    sync.Mutex
	trace *[]string
	out   *os.File // TraceEnv
}

var armed atomic.Pointer[plan]

func init() {
	s := os.Getenv(Env)
	if s == "" {
		return
	}
	p, err := parse(s)
	if err != nil {
		fmt.Fprintf(os.Stderr, "ckptfs: %s=%q: %v\n", Env, s, err)
		os.Exit(2)
	}
	p.fire = kill
	if f := os.Getenv(TraceEnv); f != "" {
		if p.out, err = os.OpenFile(f, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644); err != nil {
			fmt.Fprintf(os.Stderr, "ckptfs: %s: %v\n", TraceEnv, err)
			os.Exit(2)
		}
	}
	armed.Store(p)
}

func parse(spec string) (*plan, error) {
	p := &plan{spec: spec, n: 1}
	pats := spec
	if i := strings.LastIndexByte(spec, '@'); i >= 0 {
		n, err := strconv.ParseInt(spec[i+1:], 10, 64)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("bad hit count %q (want PATTERN[,PATTERN...][@N], N >= 1)", spec[i+1:])
		}
		p.n, pats = n, spec[:i]
	}
	for _, pat := range strings.Split(pats, ",") {
		if pat = strings.TrimSpace(pat); pat == "" {
			continue
		}
		if !known(pat) {
			return nil, fmt.Errorf("no crash point matches %q (crashpoint.Points lists them)", pat)
		}
		p.pats = append(p.pats, pat)
	}
	if len(p.pats) == 0 {
		return nil, fmt.Errorf("no pattern (want PATTERN[,PATTERN...][@N])")
	}
	return p, nil
}

func match(pat, name string) bool {
	if pre, ok := strings.CutSuffix(pat, "*"); ok {
		return strings.HasPrefix(name, pre)
	}
	return pat == name
}

// known reports whether pat matches some point.
func known(pat string) bool {
	for _, n := range Points {
		if match(pat, n) {
			return true
		}
	}
	return false
}

// Hit marks the moment name: if it is the armed crash point's hit, the
// process dies here (or, under Arm, the test's fire function runs).
func Hit(name string) {
	p := armed.Load()
	if p == nil {
		return
	}
	for _, pat := range p.pats {
		if match(pat, name) {
			if p.trace != nil {
				p.mu.Lock()
				*p.trace = append(*p.trace, name)
				p.mu.Unlock()
			}
			if p.out != nil {
				p.out.WriteString(name + "\n") // one append: lines stay whole
			}
			if p.hits.Add(1) == p.n && armed.CompareAndSwap(p, nil) {
				p.fire(name, p.spec)
			}
			return
		}
	}
}

// kill is the daemon's way to fire: one line on stderr, then SIGKILL.
func kill(name, spec string) {
	fmt.Fprintf(os.Stderr, "crashpoint: killed at %s (%s=%s)\n", name, Env, spec)
	syscall.Kill(os.Getpid(), syscall.SIGKILL)
	time.Sleep(10 * time.Second) // the signal is on its way
	os.Exit(137)
}

// Arm arms spec in this process for a test: at its hit, fire runs in
// place of the kill (it may panic to unwind the "crashed" operation; the
// point is disarmed first). Disarm with the returned function.
func Arm(spec string, fire func(name string)) (disarm func(), err error) {
	p, err := parse(spec)
	if err != nil {
		return nil, err
	}
	p.fire = func(name, _ string) { fire(name) }
	armed.Store(p)
	return func() { armed.CompareAndSwap(p, nil) }, nil
}

// Trace records, for a test, every hit of a point from now until the
// returned function is called, which returns them in order. Nothing fires.
func Trace() (stop func() []string) {
	p := &plan{spec: "*", pats: []string{"*"}, trace: new([]string)}
	armed.Store(p)
	return func() []string {
		armed.CompareAndSwap(p, nil)
		p.mu.Lock()
		defer p.mu.Unlock()
		return *p.trace
	}
}

// Fired reports, after Arm, whether the armed point has fired (or was
// disarmed).
func Fired() bool { return armed.Load() == nil }

// FailEnv is the environment variable that arms a failure point.
const FailEnv = "CKPTFS_FAIL"

// FailPoints names every failure point (Fail). A test in this package
// checks that the list and the Fail calls in the code agree.
var FailPoints = []string{
	// cmd/ckptfs: the daemon, ending, closes the open turn and saves the
	// manifest (the record of the tree the next mount compares with).
	"daemon.manifest",
	// fusefs: an unlink fails after its capture (which may have linked
	// the inode into the attic); a rename over a file fails to be
	// recorded after the capture of what it replaces.
	"fuse.unlink",
	"fuse.rename.record",
}

// ErrInjected is what an armed Fail returns (wrapped, with its name).
var ErrInjected = errors.New("injected failure")

// failAt is the failure point FailEnv names, "" for none.
var failAt = os.Getenv(FailEnv)

// Fail returns an error matching ErrInjected if the process's
// environment arms the failure point name (FailEnv), else nil.
func Fail(name string) error {
	if failAt == "" || failAt != name {
		return nil
	}
	return fmt.Errorf("%w at %s (%s)", ErrInjected, name, FailEnv)
}
