// Package clihelp formats the flags of both command lines (ckptfs and
// turnctl) for their --help: one flag a line, aligned, a yes/no flag as
// just its name ("--json", not pflag's "--json[=true|false]").
package clihelp

import (
	"fmt"
	"strings"

	"github.com/spf13/pflag"
)

// FlagUsages lists the flags of fs, one a line: "  -s, --name ARG   usage".
func FlagUsages(fs *pflag.FlagSet) string {
	type line struct{ left, usage string }
	var lines []line
	width := 0
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		l := "      --" + f.Name
		if f.Shorthand != "" {
			l = "  -" + f.Shorthand + ", --" + f.Name
		}
		name, usage := pflag.UnquoteUsage(f)
		if f.Value.Type() != "bool" && name != "" {
			l += " " + name
		}
		lines = append(lines, line{l, usage})
		width = max(width, len(l))
	})
	var b strings.Builder
	for _, l := range lines {
		fmt.Fprintf(&b, "%-*s   %s\n", width, l.left, l.usage)
	}
	return b.String()
}
