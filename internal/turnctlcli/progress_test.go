package turnctlcli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"ckptfs/fusefs/fusefstest"
	"ckptfs/turnctl"
)

// lockedBuffer is a terminal stand-in: the bar writes from its own
// goroutine.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// slowRewinder is a daemon whose rewind runs until its progress has been
// asked for a few times, through a phase of unknown length and one of 40
// steps.
type slowRewinder struct {
	turnctl.Handler // nil: any other call panics
	mu              sync.Mutex
	polls           int
	op              string // the ID the rewind arrived with
}

var script = []turnctl.ProgressReply{
	{Running: true, Phase: "comparing"},
	{Running: true, Phase: "rewinding", Done: 10, Total: 40},
	{Running: true, Phase: "rewinding", Done: 30, Total: 40},
}

func (s *slowRewinder) Rewind(ctx context.Context, req turnctl.RewindRequest) (*turnctl.RewindReply, error) {
	s.mu.Lock()
	s.op = turnctl.Op(ctx)
	s.mu.Unlock()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		s.mu.Lock()
		n := s.polls
		s.mu.Unlock()
		if n >= 3*len(script) {
			break
		}
	}
	return &turnctl.RewindReply{Target: 0, Changes: []turnctl.FileChange{}}, nil
}

func (s *slowRewinder) Progress(ctx context.Context, req turnctl.ProgressRequest) (*turnctl.ProgressReply, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if req.ID != s.op || req.ID == "" {
		return &turnctl.ProgressReply{}, nil
	}
	rep := script[min(s.polls/3, len(script)-1)]
	s.polls++
	return &rep, nil
}

// TestProgressBar: on a terminal, a long rewind draws a bar from what the
// daemon says, a spinner while the total is not known, and wipes it
// before the report.
func TestProgressBar(t *testing.T) {
	d, tk := progressDelay, progressTick
	t.Cleanup(func() { progressDelay, progressTick = d, tk })
	progressDelay, progressTick = 0, 5*time.Millisecond
	var out bytes.Buffer
	term := &lockedBuffer{}
	h := &slowRewinder{}
	e := &env{ctx: context.Background(), stdout: &out, stderr: term, progress: term, dash: -1, h: h}
	if err := (&rewindOptions{}).run(e, []string{"0"}); err != nil {
		t.Fatal(err)
	}
	bar := term.String()
	for _, want := range []string{"rewind: comparing ", "rewind: rewinding [", "10 / 40", "30 / 40", "75%", "\r"} {
		if !strings.Contains(bar, want) {
			t.Errorf("the bar lacks %q:\n%q", want, bar)
		}
	}
	// The line is wiped at the end: blanks between two carriage returns.
	if i := strings.LastIndex(strings.TrimSuffix(bar, "\r"), "\r"); !strings.HasSuffix(bar, "\r") || i < 0 || strings.Trim(bar[i:], "\r \x1b[0m") != "" {
		t.Errorf("the bar's line is not wiped at the end: %q", bar)
	}
	if out.String() != "rewind to turn 0: nothing to change\n" {
		t.Errorf("report: %q", out.String())
	}
}

// TestNoProgressBarOffTerminal: with stderr not a terminal, or --quiet,
// nothing is drawn and the daemon is not asked.
func TestNoProgressBarOffTerminal(t *testing.T) {
	d, tk := progressDelay, progressTick
	t.Cleanup(func() { progressDelay, progressTick = d, tk })
	progressDelay, progressTick = 0, time.Millisecond
	dir := testProject(t)
	out, errs, code := tc(t, "-C", dir, "rewind", "1")
	if code != 0 || errs != "" || !strings.Contains(out, "done as turn 4") {
		t.Errorf("rewind off a terminal: %d %q %q", code, out, errs)
	}
	// --quiet: nothing but errors, even where a terminal would get a bar.
	term := &lockedBuffer{}
	defer func(f func(io.Writer) bool) { progressTerminal = f }(progressTerminal)
	progressTerminal = func(w io.Writer) bool { return true }
	var stdout bytes.Buffer
	code = runWith(context.Background(), nil, []string{"-C", dir, "rewind", "--quiet", "2"}, strings.NewReader(""), &stdout, term)
	if code != 1 { // no offline handler: the one error line
		t.Errorf("rewind --quiet without a store: exit %d", code)
	}
	if strings.Count(term.String(), "\n") != 1 || stdout.Len() != 0 {
		t.Errorf("rewind --quiet failing: %q %q", stdout.String(), term.String())
	}
}

func TestQuiet(t *testing.T) {
	dir := testProject(t)
	for _, args := range [][]string{
		{"rewind", "--quiet", "1"},
		{"restore", "-q", "2", "--", "a.txt"},
		{"gc", "--quiet"},
	} {
		out, errs, code := tc(t, append([]string{"-C", dir}, args...)...)
		if code != 0 || out != "" || errs != "" {
			t.Errorf("%q: %d %q %q; want nothing printed", args, code, out, errs)
		}
	}
	if data, _ := os.ReadFile(filepath.Join(dir, "a.txt")); string(data) != "one\n2\nthree\n" {
		t.Errorf("a.txt after a quiet rewind and restore: %q", data)
	}
	// undo and revert likewise: the undo (turn 6) takes the restore back,
	// the revert of the undo does it again.
	for _, args := range [][]string{{"undo", "-q"}, {"revert", "--quiet", "6"}} {
		out, errs, code := tc(t, append([]string{"-C", dir}, args...)...)
		if code != 0 || out != "" || errs != "" {
			t.Errorf("%q: %d %q %q; want nothing printed", args, code, out, errs)
		}
	}
	if data, _ := os.ReadFile(filepath.Join(dir, "a.txt")); string(data) != "one\n2\nthree\n" {
		t.Errorf("a.txt after a quiet undo and revert: %q", data)
	}
	out, _, code := tc(t, "-C", dir, "--json", "rewind", "--quiet", "0")
	if code != 0 || !strings.HasPrefix(out, "{") {
		t.Errorf("--json rewind --quiet: %d %q; want the JSON object", code, out)
	}
	_, errs, code := tc(t, "-C", dir, "rewind", "--quiet", "9")
	if code != 2 || strings.Count(errs, "\n") != 1 {
		t.Errorf("rewind --quiet 9: %d %q; want the error", code, errs)
	}
	if _, _, code := tc(t, "-C", dir, "log", "--quiet"); code != 2 {
		t.Errorf("log --quiet: exit %d; only the long commands that report take it", code)
	}
}

// TestLongListsAreCut: a rewind of many files lists the first listCut
// and says how many more; --all lists them all.
func TestLongListsAreCut(t *testing.T) {
	const n = 200
	dir := historyOf(t, func(turn func(label, ref string, fn func()), ov *fusefstest.Overlay) {
		turn("many", "", func() {
			for i := range n {
				ov.Write(fmt.Sprintf("f%03d", i), "x\n")
			}
		})
	})
	out, _, code := tc(t, "-C", dir, "rewind", "--dry-run", "0")
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if code != 0 || len(lines) != 1+listCut+1 || lines[len(lines)-1] != fmt.Sprintf("  ... and %d more (--all lists them all)", n-listCut) {
		t.Errorf("rewind --dry-run of %d files: %d, %d lines:\n%s", n, code, len(lines), out)
	}
	out, _, code = tc(t, "-C", dir, "rewind", "0")
	lines = strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if code != 0 || len(lines) != 1+listCut+1 || lines[0] != fmt.Sprintf("rewind to turn 0 done as turn 2: %d files (+0 -%d)", n, n) ||
		lines[len(lines)-1] != fmt.Sprintf("  ... and %d more (--all lists them all, as does turnctl show 2)", n-listCut) {
		t.Errorf("rewind of %d files: %d, %d lines:\n%s", n, code, len(lines), out)
	}
	out, _, code = tc(t, "-C", dir, "rewind", "--all", "1")
	if lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n"); code != 0 || len(lines) != 1+n || strings.Contains(out, "more") {
		t.Errorf("rewind --all of %d files: %d, %d lines", n, code, len(lines))
	}
	// A list only a little longer than the cut is printed whole.
	paths := []string{"restore", "--dry-run", "0", "--"}
	for i := range listCut + listSlack {
		paths = append(paths, fmt.Sprintf("f%03d", i))
	}
	out, _, code = tc(t, append([]string{"-C", dir}, paths...)...)
	if lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n"); code != 0 || len(lines) != 1+listCut+listSlack {
		t.Errorf("restore --dry-run of %d files: %d, %d lines:\n%s", listCut+listSlack, code, len(lines), out)
	}
	// revert and undo report as rewind does (turn 3 brought the files
	// back).
	out, _, code = tc(t, "-C", dir, "revert", "--dry-run", "3")
	lines = strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if code != 0 || len(lines) != 1+listCut+1 || lines[len(lines)-1] != fmt.Sprintf("  ... and %d more (--all lists them all)", n-listCut) {
		t.Errorf("revert --dry-run of %d files: %d, %d lines:\n%s", n, code, len(lines), out)
	}
	out, _, code = tc(t, "-C", dir, "undo")
	lines = strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if code != 0 || len(lines) != 1+listCut+1 || lines[len(lines)-1] != fmt.Sprintf("  ... and %d more (--all lists them all, as does turnctl show 4)", n-listCut) {
		t.Errorf("undo of %d files: %d, %d lines:\n%s", n, code, len(lines), out)
	}
}

// heldRewind is a daemon whose rewind runs until released.
type heldRewind struct {
	turnctl.Handler
	started, release chan struct{}
}

func (h *heldRewind) Rewind(ctx context.Context, req turnctl.RewindRequest) (*turnctl.RewindReply, error) {
	close(h.started)
	<-h.release
	return &turnctl.RewindReply{Target: 1, Changes: []turnctl.FileChange{}}, nil
}

// TestInterruptOfARewind: a first interrupt during a rewind says that it
// cannot stop half-way and waits for its reply; a second stops waiting,
// exit status 130, saying that it goes on in the daemon.
func TestInterruptOfARewind(t *testing.T) {
	sigs := make(chan os.Signal, 2)
	old := interrupts
	interrupts = func() (<-chan os.Signal, func()) { return sigs, func() {} }
	t.Cleanup(func() { interrupts = old })
	const note = "\nturnctl: the rewind cannot stop half-way: waiting for it to finish (interrupt again to stop waiting)\n"
	for _, twice := range []bool{false, true} {
		h := &heldRewind{started: make(chan struct{}), release: make(chan struct{})}
		var out, errb lockedBuffer
		e := &env{ctx: context.Background(), stdout: &out, stderr: &errb, dash: -1, proj: &project{mounted: true}, h: h}
		done := make(chan error, 1)
		go func() { done <- (&rewindOptions{}).run(e, []string{"1"}) }()
		<-h.started
		sigs <- os.Interrupt
		for deadline := time.Now().Add(10 * time.Second); errb.String() != note; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("after an interrupt, stderr %q; want %q", errb.String(), note)
			}
		}
		select {
		case err := <-done:
			t.Fatalf("the rewind's wait ended at the first interrupt: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
		if !twice {
			close(h.release)
			if err := <-done; err != nil || out.String() != "rewind to turn 1: nothing to change\n" {
				t.Errorf("rewind after an interrupt: %v, %q", err, out.String())
			}
			continue
		}
		sigs <- os.Interrupt
		err := <-done
		var xe *exitError
		if !errors.As(err, &xe) || xe.code != 130 || xe.msg != "stopped waiting; the rewind goes on in the daemon (turnctl log shows it done)" {
			t.Errorf("second interrupt: %#v", err)
		}
		close(h.release)
	}
}
