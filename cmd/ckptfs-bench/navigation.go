package main

// The navigation figures of issue 18, on C only: revert of a 1-file turn
// under logTurns (1000) later turns and its dry run; log --graph, log -S
// and log --grep over them; export git of them all into a new repository,
// then of one new turn; checkout of an early turn.
//
// They run on a mount of their own (WORK/nav): a small source tree, not
// the 100k files the boundary figures leave in C's tree, so that what is
// timed is the history's length, not the tree's size. The history is made
// as fast as the bench can: turns opened and closed over the control
// socket, files written directly through the mount.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"ckptfs/turnctl"
)

const (
	navDirs      = 15 // the source tree: navDirs×navFiles files
	navFiles     = 20
	navLines     = 40 // lines per file
	navPerTurn   = 3  // files each turn of the long history changes
	navForks     = 4  // rewinds in the history: branches for log --graph
	navNeedle    = "frobnicate_the_needle_7f3a"
	navGrepLabel = "rename the flux capacitor"
)

// navProject is the mount the navigation figures run on, and what they
// know of its history.
type navProject struct {
	h     *history
	c     *ckptfsTarget
	early []uint64 // the 1-file turns made first, one per repetition
	turns int      // turns in the long history after them
}

func navSrcPath(root string, i int) string {
	return filepath.Join(root, "src", fmt.Sprintf("pkg%02d", i/navFiles), fmt.Sprintf("file%02d.go", i%navFiles))
}

func navEarlyPath(root string, k int) string {
	return filepath.Join(root, "early", fmt.Sprintf("e%d.go", k))
}

// startNavMount mounts a ckptfs of its own over WORK/nav/dir after
// writing the source tree into it (history begins with that tree).
func startNavMount(ctx context.Context, b *bench, early int) (*ckptfsTarget, error) {
	base := filepath.Join(b.o.work, "nav")
	dir := filepath.Join(base, "dir")
	if err := os.RemoveAll(base); err != nil {
		return nil, err
	}
	for i := 0; i < navDirs*navFiles; i++ {
		p := navSrcPath(dir, i)
		if i%navFiles == 0 {
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return nil, err
			}
		}
		var sb strings.Builder
		fmt.Fprintf(&sb, "package pkg%02d\n", i/navFiles)
		for l := 1; l < navLines; l++ {
			fmt.Fprintf(&sb, "var v%d_%d = %d // line %d of file %d\n", i, l, l*i, l, i)
		}
		if err := os.WriteFile(p, []byte(sb.String()), 0o644); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "early"), 0o755); err != nil {
		return nil, err
	}
	for k := 0; k < early; k++ {
		if err := os.WriteFile(navEarlyPath(dir, k), fmt.Appendf(nil, "package early\n\nconst E%d = %d\n", k, k), 0o644); err != nil {
			return nil, err
		}
	}
	return mountCkptfs(ctx, b, base, "nav")
}

func (h *history) navigation(ctx context.Context) error {
	reps := h.reps
	nav, err := startNavMount(ctx, h.b, reps)
	if err != nil {
		return err
	}
	defer func() {
		if err := nav.Close(); err != nil {
			h.b.logf("nav: %v", err)
		}
		os.RemoveAll(filepath.Join(h.b.o.work, "nav"))
	}()
	p := &navProject{h: h, c: nav}
	start := time.Now()
	if err := p.build(ctx, h.b.sz.logTurns); err != nil {
		return err
	}
	h.b.logf("history: nav: %d turns made in %.1f s", p.turns+len(p.early), since(start))
	h.idleOn(nav)
	figs := []func(context.Context) error{p.logs, p.checkout, p.revert, p.export}
	for _, f := range figs {
		if err := f(ctx); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			h.b.note("history: nav: %v", err)
		}
	}
	return nil
}

// turn opens a turn labelled label, runs fn and closes the turn; it
// returns the turn's number.
func (p *navProject) turn(ctx context.Context, label string, fn func() error) (uint64, error) {
	cl, err := p.c.control()
	if err != nil {
		return 0, err
	}
	rep, err := cl.Begin(ctx, turnctl.BeginRequest{Label: label})
	if err != nil {
		return 0, err
	}
	if err := fn(); err != nil {
		cl.End(ctx, turnctl.EndRequest{})
		return 0, err
	}
	if _, err := cl.End(ctx, turnctl.EndRequest{}); err != nil {
		return 0, err
	}
	return rep.Turn.Num, nil
}

// editLine replaces line l (mod the file's lines, never the first) of the
// file at path with text, through the mount.
func editLine(path string, l int, text string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	lines[1+l%(len(lines)-1)] = text
	return os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644)
}

// build makes the history: one 1-file turn per repetition (each changes a
// file of early/ that nothing touches again), then n turns that each
// change navPerTurn files of src/, with navForks rewinds 4 turns back
// spread among them; the turn at n/2 adds navNeedle to a file (the only
// turn that adds or removes it), the turn at n/3 is labelled with
// navGrepLabel (the only one).
func (p *navProject) build(ctx context.Context, n int) error {
	dir := p.c.Dir()
	for k := range p.h.reps {
		t, err := p.turn(ctx, fmt.Sprintf("early change %d", k), func() error {
			return editLine(navEarlyPath(dir, k), 2, fmt.Sprintf("const E%d = %d // changed early", k, 100+k))
		})
		if err != nil {
			return err
		}
		p.early = append(p.early, t)
	}
	files := navDirs * navFiles
	needle := n / 2
	var nums []uint64
	forkEvery := max(n/navForks, 8)
	for i := 0; i < n; i++ {
		if i%1000 == 0 && i > 0 {
			p.h.b.logf("history: nav: %d turns", i)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		label := fmt.Sprintf("turn %d: tidy up", i)
		if i == n/3 {
			label = fmt.Sprintf("turn %d: %s", i, navGrepLabel)
		}
		t, err := p.turn(ctx, label, func() error {
			for j := 0; j < navPerTurn; j++ {
				f := (i*(7+6*j) + j*101) % files
				if err := editLine(navSrcPath(dir, f), i+j, fmt.Sprintf("var t%d_%d = %d // turn %d", i, j, i, i)); err != nil {
					return err
				}
			}
			if i == needle {
				return os.WriteFile(filepath.Join(dir, "src", "needle.go"), []byte("package src\n\n// "+navNeedle+"\n"), 0o644)
			}
			return nil
		})
		if err != nil {
			return err
		}
		nums = append(nums, t)
		// A rewind 4 turns back, never across the needle's turn.
		if i%forkEvery == forkEvery/2 && i >= 4 && !(i-4 < needle && needle <= i) {
			cl, err := p.c.control()
			if err != nil {
				return err
			}
			if _, err := cl.Rewind(ctx, turnctl.RewindRequest{Turn: strconv.FormatUint(nums[i-4], 10)}); err != nil {
				return fmt.Errorf("rewind to %d: %w", nums[i-4], err)
			}
		}
	}
	p.turns = n
	return nil
}

// cli runs turnctl in the project and charges the daemon's CPU to it.
func (p *navProject) cli(ctx context.Context, check func(out string) error, args ...string) (sample, error) {
	var out string
	s, err := timedOn(p.c, func() error {
		var err error
		out, err = p.h.b.turnctlCmd(ctx, p.c.Dir(), args...)
		return err
	})
	if err == nil && check != nil {
		err = check(out)
	}
	return s, err
}

func wantIn(what string) func(string) error {
	return func(out string) error {
		if !strings.Contains(out, what) {
			return fmt.Errorf("the output lacks %q: %.300s", what, out)
		}
		return nil
	}
}

// logs times log --graph, log -S and log --grep over the whole history.
func (p *navProject) logs(ctx context.Context) error {
	n := p.turns
	figures := []struct {
		name  string
		check func(string) error
		args  []string
	}{
		{fmt.Sprintf("log --graph (%d+ turns, %d forks)", n, navForks), wantIn("|/"), []string{"log", "--graph"}},
		{fmt.Sprintf("log -S TEXT (%d+ turns, 1 match)", n), wantIn(fmt.Sprintf("turn %d: tidy up", n/2)), []string{"log", "-S", navNeedle}},
		{fmt.Sprintf("log --grep (%d+ turns, 1 match)", n), wantIn(navGrepLabel), []string{"log", "--grep", "flux capacitor"}},
	}
	for rep := 0; rep < p.h.reps; rep++ {
		for _, f := range figures {
			s, err := p.cli(ctx, f.check, f.args...)
			if err != nil {
				return err
			}
			p.h.record(f.name, "C", s)
		}
	}
	return nil
}

// checkout writes the tree at the end of the first early turn into a new
// directory.
func (p *navProject) checkout(ctx context.Context) error {
	name := fmt.Sprintf("checkout of an early turn (%d files)", navDirs*navFiles+len(p.early))
	turn := strconv.FormatUint(p.early[0], 10)
	for rep := 0; rep < p.h.reps; rep++ {
		dst := filepath.Join(p.h.b.o.work, "nav", fmt.Sprintf("co%d", rep))
		s, err := p.cli(ctx, nil, "checkout", turn, dst)
		if err != nil {
			return err
		}
		got, err := os.ReadFile(navSrcPath(dst, navDirs*navFiles-1))
		if err != nil || strings.Contains(string(got), "// turn ") {
			return fmt.Errorf("checkout %s: %v; last file %.200q", turn, err, got)
		}
		os.RemoveAll(dst)
		p.h.record(name, "C", s)
	}
	return nil
}

// revert reverts each early 1-file turn (one per repetition), dry run
// first: each has the whole long history after it.
func (p *navProject) revert(ctx context.Context) error {
	later := p.turns
	for rep, t := range p.early {
		turn := strconv.FormatUint(t, 10)
		s, err := p.cli(ctx, wantIn(fmt.Sprintf("e%d.go", rep)), "revert", turn, "--dry-run")
		if err != nil {
			return err
		}
		p.h.record(fmt.Sprintf("revert --dry-run, 1-file turn, %d+ later", later), "C", s)
		if s, err = p.cli(ctx, nil, "revert", turn); err != nil {
			return err
		}
		got, err := os.ReadFile(navEarlyPath(p.c.Dir(), rep))
		if err != nil || strings.Contains(string(got), "changed early") {
			return fmt.Errorf("after revert %s: %v; %s holds %q", turn, err, navEarlyPath("", rep), got)
		}
		p.h.record(fmt.Sprintf("revert of a 1-file turn, %d+ later turns", later), "C", s)
	}
	return nil
}

// export times export git of every turn into a new bare repository
// (--git-dir: the project has no .git), a few times, then of one new
// turn after that, each repetition.
func (p *navProject) export(ctx context.Context) error {
	n := p.turns
	base := filepath.Join(p.h.b.o.work, "nav")
	full := min(p.h.reps, 2) // the costliest figure
	var gd string
	for rep := 0; rep < full; rep++ {
		if gd != "" {
			os.RemoveAll(gd)
		}
		gd = filepath.Join(base, fmt.Sprintf("export%d.git", rep))
		s, err := p.cli(ctx, nil, "export", "git", "--git-dir", gd)
		if err != nil {
			return err
		}
		p.h.record(fmt.Sprintf("export git of %d+ turns, new repository", n), "C", s)
	}
	out, err := git(ctx, base, "--git-dir", gd, "rev-list", "--count", "refs/ckptfs/turns")
	if err != nil {
		return err
	}
	if c, _ := strconv.Atoi(strings.TrimSpace(out)); c < n {
		return fmt.Errorf("the export holds %d commits, want %d+", c, n)
	}
	for rep := 0; rep < p.h.reps; rep++ {
		if _, err := p.turn(ctx, fmt.Sprintf("a new turn %d", rep), func() error {
			return editLine(navSrcPath(p.c.Dir(), rep), 5, fmt.Sprintf("var after_export_%d = 1", rep))
		}); err != nil {
			return err
		}
		s, err := p.cli(ctx, wantIn("1 commit"), "export", "git", "--git-dir", gd)
		if err != nil {
			return err
		}
		p.h.record("export git of 1 new turn (incremental)", "C", s)
	}
	return nil
}
