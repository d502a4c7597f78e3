package turnctlcli

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"ckptfs/turnctl"
)

var diffCmd = &command{
	name:  "diff",
	args:  "TURN [TURN2] [-- PATH...]",
	short: "unified diff between two states (default TURN2: now)",
	long: `Compares the tree at the end of TURN with the tree at the end of TURN2, or
with the tree as it is now. PATHs (relative to the current directory) limit
the diff to those files and directories (a file renamed across their edge
shows as added or deleted). The output is a patch git apply accepts: git
diff --binary's format, names quoted as git quotes them, each path moved by
a directory rename as its own rename, modes as git knows them (executable
or not), symlinks as git shows them, binary files as GIT binary patches.
What git cannot hold is left out with a note, a line starting "# ckptfs:"
that git apply passes over: a mode change git cannot tell (0644 -> 0600),
FIFOs, sockets and devices, files over 8 MiB, bytes never captured.
Directories are not entries of their own (git apply makes and removes them
with their files; an empty directory is not in the patch). The changes
inside .git (git's objects, index, refs, logs), which git apply refuses to
write, are left out and summed up on such a line ("# ckptfs: left out the
changes inside .git (git: commit ec90ceb, 24 files in .git)...") unless
--all or a PATH under .git asks for them.`,
	changes: true,
	opts:    func() options { return &diffOptions{} },
}

type diffOptions struct{}

func (o *diffOptions) addFlags(fs *pflag.FlagSet) {}

func (o *diffOptions) run(e *env, args []string) error {
	turns, paths, err := splitDash(e, args)
	if err != nil {
		return err
	}
	if e.dash < 0 && len(turns) > 1 {
		// Without "--", what does not look like a turn is a path, as in
		// "turnctl diff 3 src/".
		i := 1
		if looksLikeTurn(turns[1]) {
			i = 2
		}
		turns, paths = turns[:i], turns[i:]
		for _, p := range paths {
			if looksLikeTurn(p) {
				return usagef("diff compares two states: %q would be a third (a path of that name goes after --)", p)
			}
		}
	}
	if err := wantArgs(turns, 1, 2); err != nil {
		return err
	}
	req := turnctl.DiffRequest{From: turns[0]}
	if len(turns) == 2 {
		req.To = turns[1]
	}
	if req.Paths, err = e.relPaths(paths); err != nil {
		return err
	}
	e.all = e.all || anyInGitDir(req.Paths)
	rep, err := e.h.Diff(e.ctx, req)
	if err != nil {
		return err
	}
	if e.json {
		return e.printJSON(jDiff(rep))
	}
	e.printPatches(rep.Changes)
	if g := e.gitSummary(rep.Changes, rep.Stats); g != nil {
		// A line git apply passes over, as the patches' other notes.
		fmt.Fprintf(e.stdout, "# ckptfs: left out the changes inside .git (git: %s): git apply does not write there; --all adds them\n", g.Summary())
	}
	return nil
}

// looksLikeTurn: a number, a step (3.2), "now" or "ref:ID".
func looksLikeTurn(s string) bool {
	if s == "now" || strings.HasPrefix(s, "ref:") {
		return true
	}
	n, k, step := strings.Cut(s, ".") // a step: 3.2
	if _, err := strconv.ParseUint(n, 10, 64); err != nil {
		return false
	}
	if step {
		_, err := strconv.ParseUint(k, 10, 16)
		return err == nil
	}
	return true
}

// splitDash splits the positional arguments at "--".
func splitDash(e *env, args []string) (before, after []string, err error) {
	if e.dash < 0 {
		return args, nil, nil
	}
	return args[:e.dash], args[e.dash:], nil
}

// relPaths converts command-line paths into project-relative ones (nil
// for none).
func (e *env) relPaths(args []string) ([]string, error) {
	if len(args) == 0 {
		return nil, nil
	}
	out := make([]string, 0, len(args))
	for _, a := range args {
		r, err := e.proj.rel(a)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}
