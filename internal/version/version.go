// Package version says which build of ckptfs a binary is, for
// `ckptfs --version` and `turnctl --version`: the commit it was built
// from (as the go command stamps it into the binary) and the Go release.
package version

import (
	"runtime"
	"runtime/debug"
	"strings"
)

// Commit and CommitTime are what the Makefile's build sets (-X) where the
// go command stamps no commit: it does not in a git worktree, whose .git
// is a file. The go command's own stamp comes first.
var Commit, CommitTime string

// String is the one line both binaries print: "ckptfs COMMIT[+dirty]
// (DATE, GO)", or "ckptfs devel (GO)" where the build has no commit (go
// run, go test, a build outside a git checkout).
func String() string {
	rev, date, dirty := "", "", false
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.time":
				date = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
	}
	if rev == "" && Commit != "" {
		rev, date = strings.TrimSuffix(Commit, "+dirty"), CommitTime
		dirty = strings.HasSuffix(Commit, "+dirty")
	}
	if rev == "" {
		return "ckptfs devel (" + runtime.Version() + ")"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if dirty {
		rev += "+dirty"
	}
	return "ckptfs " + rev + " (" + date + ", " + runtime.Version() + ")"
}
