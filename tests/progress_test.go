package tests

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/creack/pty"
)

// TestRewindProgressAndSummary: a rewind of thousands of files through a
// real mount prints a summary and its first lines (all of them with
// --all), draws a progress bar on stderr when stderr is a terminal, and
// nothing on stderr when it is not.
func TestRewindProgressAndSummary(t *testing.T) {
	if testing.Short() {
		t.Skip("creates thousands of files through the mount")
	}
	const n = 5000
	proj := t.TempDir()
	m := mountProject(t, proj)
	m.turnctl(t, "begin", "--label", "many files")
	runIn(t, proj, fmt.Sprintf(`mkdir d && cd d && seq 1 %d | xargs touch`, n))
	m.turnctl(t, "end")

	// Not a terminal: the summary, the first 50 lines and how many more;
	// nothing on stderr.
	cmd := m.turnctlCmd("rewind", "0")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("rewind 0: %v\n%s%s", err, stdout.String(), stderr.String())
	}
	lines := strings.Split(strings.TrimSuffix(stdout.String(), "\n"), "\n")
	if stderr.Len() != 0 || len(lines) != 52 || !strings.HasPrefix(lines[0], fmt.Sprintf("rewind to turn 0 done as turn 2: %d files", n)) ||
		lines[51] != fmt.Sprintf("  ... and %d more (--all lists them all, as does turnctl show 2)", n+1-50) {
		t.Errorf("rewind 0 printed %d lines (stderr %q):\n%s", len(lines), stderr.String(), strings.Join(lines[:min(len(lines), 5)], "\n"))
	}

	// stderr a terminal: a progress bar there, wiped at the end; stdout
	// as before, and with --all every path.
	out, bar, err := onTerminal(t, m.turnctlCmd("rewind", "--all", "1"))
	if err != nil {
		t.Fatalf("rewind --all 1: %v\n%s%s", err, out, bar)
	}
	if lines := strings.Count(out, "\n"); lines != 1+n+1 {
		t.Errorf("rewind --all 1 printed %d lines, want %d", lines, n+2)
	}
	if !strings.Contains(bar, "rewind: ") || !strings.Contains(bar, "\r") {
		t.Errorf("no progress bar on the terminal: %q", bar)
	}
	if _, err := os.Stat(proj + "/d/5000"); err != nil {
		t.Errorf("rewind 1 did not bring the files back: %v", err)
	}

	// undo (of that rewind) likewise: a bar, the list cut.
	out, bar, err = onTerminal(t, m.turnctlCmd("undo"))
	if err != nil {
		t.Fatalf("undo: %v\n%s%s", err, out, bar)
	}
	if lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n"); len(lines) != 52 || !strings.HasPrefix(lines[0], "undo of turn 3 (rewind to 2) done as turn 4: ") {
		t.Errorf("undo printed %d lines:\n%s", len(lines), strings.Join(lines[:min(len(lines), 5)], "\n"))
	}
	if !strings.Contains(bar, "undo: ") || !strings.Contains(bar, "\r") {
		t.Errorf("no progress bar on the terminal for undo: %q", bar)
	}
	if _, err := os.Stat(proj + "/d/5000"); err == nil {
		t.Errorf("undo left the files of the rewind it undid")
	}
}

// onTerminal runs cmd with stderr a terminal and returns its stdout and
// what it wrote on the terminal.
func onTerminal(t *testing.T, cmd *exec.Cmd) (string, string, error) {
	t.Helper()
	ptm, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer ptm.Close()
	pty.Setsize(ptm, &pty.Winsize{Rows: 24, Cols: 100})
	var bar, stdout bytes.Buffer
	read := make(chan struct{})
	go func() { io.Copy(&bar, ptm); close(read) }()
	cmd.Stdout, cmd.Stderr = &stdout, tty
	// The bar from the first tick: a command that ends before turnctl's
	// usual delay would draw none, and that depends on the machine.
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	cmd.Env = append(cmd.Env, "CKPTFS_PROGRESS_DELAY=0s")
	err = cmd.Run()
	tty.Close()
	<-read
	return stdout.String(), bar.String(), err
}
