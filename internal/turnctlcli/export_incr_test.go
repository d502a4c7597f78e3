package turnctlcli

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"ckptfs/fusefs/fusefstest"
	"ckptfs/turnctl"
)

// incrementalExport builds a history turn by turn (steps), exporting to
// refs/ckptfs/turns after each turn as a user running `turnctl export
// git` now and then would; then exports the whole history at once to
// refs/ckptfs/once. The two chains must be the same commits (same trees,
// messages, dates, parents), and it returns the tip's message.
func incrementalExport(t *testing.T, steps []func(ov *fusefstest.Overlay)) (string, string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	e, _, _, ov := onlineEnv(t)
	bare := filepath.Join(t.TempDir(), "h.git")
	for i, step := range steps {
		if _, err := e.h.Begin(e.ctx, turnctl.BeginRequest{Label: fmt.Sprint("step ", i)}); err != nil {
			t.Fatal(err)
		}
		step(ov)
		if _, err := e.h.End(e.ctx, turnctl.EndRequest{}); err != nil {
			t.Fatal(err)
		}
		if err := (&exportOptions{ref: "refs/ckptfs/turns", gitDir: bare}).git(e, nil); err != nil {
			t.Fatalf("export after step %d: %v", i, err)
		}
	}
	if err := (&exportOptions{ref: "refs/ckptfs/once", gitDir: bare}).git(e, nil); err != nil {
		t.Fatal(err)
	}
	g := func(args ...string) string {
		out, err := exec.Command("git", append([]string{"--git-dir", bare}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	a, b := g("rev-parse", "refs/ckptfs/turns"), g("rev-parse", "refs/ckptfs/once")
	if a != b {
		t.Errorf("the export made turn by turn differs from the one made at once:\n%s\n--- at once:\n%s\n--- trees:\n%s\n---\n%s",
			g("log", "--format=%B", "-2", a), g("log", "--format=%B", "-2", b), g("ls-tree", "-r", a), g("ls-tree", "-r", b))
	}
	return g("log", "-1", "--format=%B", a), g("ls-tree", "-r", "--name-only", a)
}

func TestExportIncrementalFIFOBecomesFile(t *testing.T) {
	msg, tree := incrementalExport(t, []func(*fusefstest.Overlay){
		func(ov *fusefstest.Overlay) { ov.Mkfifo("p"); ov.Write("a", "a\n") },
		func(ov *fusefstest.Overlay) { ov.Remove("p"); ov.Write("p", "now a file\n") },
	})
	if strings.Contains(msg, "p (a FIFO)") || !strings.Contains(tree, "p") {
		t.Errorf("p is a file now: message\n%s\ntree %s", msg, tree)
	}
}

func TestExportIncrementalDirOfFIFODeleted(t *testing.T) {
	msg, _ := incrementalExport(t, []func(*fusefstest.Overlay){
		func(ov *fusefstest.Overlay) { ov.Mkdir("d"); ov.Mkfifo("d/q"); ov.Write("d/x", "x\n") },
		func(ov *fusefstest.Overlay) {
			ov.Remove("d/q")
			ov.Remove("d/x")
			ov.Remove("d")
			ov.Write("d", "file\n")
		},
	})
	if strings.Contains(msg, "d/q") {
		t.Errorf("d/q is gone: message\n%s", msg)
	}
}

func TestExportIncrementalDirOfFIFORenamed(t *testing.T) {
	msg, _ := incrementalExport(t, []func(*fusefstest.Overlay){
		func(ov *fusefstest.Overlay) { ov.Mkdir("d"); ov.Mkfifo("d/q"); ov.Write("d/x", "x\n") },
		func(ov *fusefstest.Overlay) { ov.Rename("d", "e") },
	})
	if strings.Contains(msg, "d/q") || !strings.Contains(msg, "e/q (a FIFO)") {
		t.Errorf("d was renamed e: message\n%s", msg)
	}
}

func TestExportIncrementalNewlineInName(t *testing.T) {
	msg, _ := incrementalExport(t, []func(*fusefstest.Overlay){
		func(ov *fusefstest.Overlay) { ov.Mkfifo("a\nb"); ov.Mkfifo("z") },
		func(ov *fusefstest.Overlay) { ov.Write("f", "f\n") },
	})
	if !strings.Contains(msg, "z (a FIFO)") {
		t.Errorf("z is still a FIFO: message\n%s", msg)
	}
}

func TestExportIncrementalManyFIFOs(t *testing.T) {
	incrementalExport(t, []func(*fusefstest.Overlay){
		func(ov *fusefstest.Overlay) {
			for i := range 25 {
				ov.Mkfifo(fmt.Sprintf("p%02d", i))
			}
		},
		func(ov *fusefstest.Overlay) { ov.Remove("p03"); ov.Write("f", "f\n") },
		func(ov *fusefstest.Overlay) {
			for i := 5; i < 25; i++ {
				ov.Remove(fmt.Sprintf("p%02d", i))
			}
		},
		func(ov *fusefstest.Overlay) { ov.Write("g", "g\n") },
	})
}

func TestExportIncrementalPromptQuotesNotes(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	e, _, _, ov := onlineEnv(t)
	bare := filepath.Join(t.TempDir(), "h.git")
	turn := func(label string, fn func()) {
		if _, err := e.h.Begin(e.ctx, turnctl.BeginRequest{Label: label}); err != nil {
			t.Fatal(err)
		}
		fn()
		if _, err := e.h.End(e.ctx, turnctl.EndRequest{}); err != nil {
			t.Fatal(err)
		}
		if err := (&exportOptions{ref: "refs/ckptfs/turns", gitDir: bare}).git(e, nil); err != nil {
			t.Fatal(err)
		}
	}
	turn("make a fifo", func() { ov.Mkfifo("p") })
	turn("why does the commit say\n\n"+leftHeading+"\n  ghost (a FIFO)\n\nplease explain", func() { ov.Write("f", "f\n") })
	turn("more", func() { ov.Write("g", "g\n") })
	out, _ := exec.Command("git", "--git-dir", bare, "log", "-1", "--format=%B", "refs/ckptfs/turns").CombinedOutput()
	msg := string(out)
	notes := msg[strings.LastIndex(msg, leftHeading):]
	if !strings.Contains(notes, "  p (a FIFO)") || strings.Contains(notes, "ghost") {
		t.Errorf("the newest commit's notes:\n%s", msg)
	}
}
