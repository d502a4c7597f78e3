package clihelp

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

func TestFlagUsages(t *testing.T) {
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	fs.BoolP("json", "j", false, "print JSON")
	fs.String("store", "", "history store `PATH`")
	fs.Bool("secret", false, "not shown")
	fs.MarkHidden("secret")
	got := FlagUsages(fs)
	want := "  -j, --json         print JSON\n      --store PATH   history store PATH\n"
	if got != want {
		t.Errorf("FlagUsages:\n%s\nwant:\n%s", got, want)
	}
	if strings.Contains(got, "[=") {
		t.Errorf("a yes/no flag shows a value: %s", got)
	}
}
