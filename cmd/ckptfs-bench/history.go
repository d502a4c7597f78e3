package main

// History figures, on C only: turn boundary latency against tree size (and
// the shadow-git peer G), log and show with many turns, rewind of k changed
// files, bytes stored per byte changed, and what finding the changes made
// while unmounted costs a mount (and saving the manifest an umount).

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"ckptfs/turnctl"
)

// runHistory runs the history figures; figures names the parts to run
// (nil: all).
func (b *bench) runHistory(ctx context.Context, ts []target, figures ...string) error {
	var c *ckptfsTarget
	for _, t := range ts {
		if ct, ok := t.(*ckptfsTarget); ok {
			c = ct
		}
	}
	if c == nil {
		b.note("history figures skipped: C unavailable")
		return nil
	}
	// Start from an empty tree, so that tree size is what we say it is.
	if err := emptyDir(c.Dir()); err != nil {
		return fmt.Errorf("emptying %s: %w", c.Dir(), err)
	}
	h := &history{b: b, c: c, reps: b.o.reps}
	parts := []struct {
		name string
		run  func(context.Context) error
	}{{"boundaries", h.boundaries}, {"logshow", h.logShow}, {"rewinds", h.rewinds}, {"navigation", h.navigation}, {"ui", h.ui}, {"bigfile", h.bigFile}, {"at", h.at}, {"capture", h.capture}, {"stored", h.stored}, {"offline", h.offline}}
	for _, f := range parts {
		if figures != nil && !contains(figures, f.name) {
			continue
		}
		if err := f.run(ctx); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			b.note("history: %v", err)
		}
	}
	return nil
}

type history struct {
	b     *bench
	c     *ckptfsTarget
	reps  int
	files int // files generated under hist/ so far
}

func (h *history) p(elem ...string) string {
	return filepath.Join(append([]string{h.c.Dir()}, elem...)...)
}

// timed runs fn and charges the C daemon's CPU to it.
func (h *history) timed(fn func() error) (sample, error) {
	return timedOn(h.c, fn)
}

func (h *history) record(name, config string, s sample) {
	h.b.res.historyRow(name).add(config, s)
	h.b.logf("history  %-34s %-2s %7.3f s", name, config, s.Wall)
}

// boundaries: begin, a one-file change (untimed), end, on growing trees;
// and git add -A && git commit into a shadow git dir (G) on a native tree.
func (h *history) boundaries(ctx context.Context) error {
	for _, n := range h.b.sz.histTrees {
		h.b.logf("history: growing the tree to %d files", n)
		if err := genFiles(ctx, h.p("hist"), h.files, n); err != nil {
			return err
		}
		h.files = n
		// Growing the tree leaves the store flushing and compacting for
		// a while; that is the growth's cost, not the boundary's.
		h.idle()
		name := fmt.Sprintf("turn boundary, %d files", n)
		for rep := 0; rep < h.reps; rep++ {
			var begin, end sample
			var err error
			if begin, err = h.timed(func() error { return h.c.Begin(ctx) }); err != nil {
				return err
			}
			if err := os.WriteFile(h.p("hist", "d000", "f0"), fmt.Appendf(nil, "boundary %d %d\n", n, rep), 0o644); err != nil {
				return err
			}
			if end, err = h.timed(func() error { return h.c.End(ctx) }); err != nil {
				return err
			}
			h.record(name, "C", sample{Wall: begin.Wall + end.Wall, CPU: begin.CPU + end.CPU})
		}
		if n == h.b.sz.histTrees[0] {
			// What an agent's hook pays on top: two turnctl processes.
			for rep := 0; rep < h.reps; rep++ {
				cli, err := h.timed(func() error {
					if _, err := h.b.turnctlCmd(ctx, h.c.Dir(), "begin"); err != nil {
						return err
					}
					_, err := h.b.turnctlCmd(ctx, h.c.Dir(), "end")
					return err
				})
				if err != nil {
					return err
				}
				h.record(fmt.Sprintf("turn boundary via the turnctl CLI, %d files", n), "C", cli)
			}
		}
		if n == h.b.sz.gitTree {
			if err := h.shadowGit(ctx, name, n); err != nil {
				h.b.note("shadow git: %v", err)
			}
		}
	}
	return nil
}

// shadowGit measures G on a native tree of n files under WORK/G.
func (h *history) shadowGit(ctx context.Context, name string, n int) error {
	base := filepath.Join(h.b.o.work, "G")
	tree, gitDir := filepath.Join(base, "tree"), filepath.Join(base, "shadow.git")
	defer os.RemoveAll(base)
	if err := genFiles(ctx, tree, 0, n); err != nil {
		return err
	}
	g := func(args ...string) error {
		_, err := git(ctx, tree, append([]string{"--git-dir=" + gitDir, "--work-tree=" + tree}, args...)...)
		return err
	}
	if err := g("init", "-q"); err != nil {
		return err
	}
	if err := g("add", "-A"); err != nil {
		return err
	}
	if err := g("commit", "-q", "-m", "base"); err != nil {
		return err
	}
	for rep := 0; rep < h.reps; rep++ {
		if err := os.WriteFile(filepath.Join(tree, "d000", "f0"), fmt.Appendf(nil, "boundary %d %d\n", n, rep), 0o644); err != nil {
			return err
		}
		start := time.Now()
		if err := g("add", "-A"); err != nil {
			return err
		}
		if err := g("commit", "-q", "-m", "x"); err != nil {
			return err
		}
		h.record(name, "G", sample{Wall: since(start), CPU: -1})
	}
	return nil
}

var numberRE = regexp.MustCompile(`\d+`)

// beginTurn runs turnctl --json begin and returns the new turn's number.
func (h *history) beginTurn(ctx context.Context) (int, error) {
	out, err := h.b.turnctlCmd(ctx, h.c.Dir(), "--json", "begin")
	if err != nil {
		return 0, err
	}
	return parseBegin(out)
}

// parseBegin reads the turn number from turnctl begin's output: JSON
// {"turn": {"num": N}}, else a bare number, else the last number printed.
func parseBegin(out string) (int, error) {
	var reply struct {
		Turn *struct {
			Num *int `json:"num"`
		} `json:"turn"`
	}
	if json.Unmarshal([]byte(out), &reply) == nil && reply.Turn != nil && reply.Turn.Num != nil {
		return *reply.Turn.Num, nil
	}
	ms := numberRE.FindAllString(out, -1)
	if len(ms) == 0 {
		return 0, fmt.Errorf("turnctl begin printed no turn number: %q", strings.TrimSpace(out))
	}
	return strconv.Atoi(ms[len(ms)-1])
}

// logShow builds logTurns small turns, then times log, log -n 10 and show.
func (h *history) logShow(ctx context.Context) error {
	k := h.b.sz.logTurns
	h.b.logf("history: making %d turns", k)
	if err := os.MkdirAll(h.p("turns"), 0o755); err != nil {
		return err
	}
	mid := 0
	for i := 0; i < k; i++ {
		n, err := h.beginTurn(ctx)
		if err != nil {
			return err
		}
		if i == k/2 {
			mid = n
		}
		if err := os.WriteFile(h.p("turns", fmt.Sprintf("f%02d", i%20)), fmt.Appendf(nil, "turn %d\n", i), 0o644); err != nil {
			return err
		}
		if err := h.c.End(ctx); err != nil {
			return err
		}
	}
	// The first log after the boundary figures also counts the turns whose
	// stats were never counted (the 100k files created between turns):
	// O(their changes), once. It is a figure of its own.
	s, err := h.timed(func() error {
		_, err := h.b.turnctlCmd(ctx, h.c.Dir(), "log")
		return err
	})
	if err != nil {
		return err
	}
	h.record("turnctl log, first (counts new turns)", "C", s)
	figures := []struct {
		name string
		args []string
	}{
		{fmt.Sprintf("turnctl log (%d+ turns)", k), []string{"log"}},
		{"turnctl log -n 10", []string{"log", "-n", "10"}},
		{"turnctl show (one-file turn)", []string{"show", strconv.Itoa(mid)}},
	}
	for rep := 0; rep < h.reps; rep++ {
		for _, f := range figures {
			s, err := h.timed(func() error {
				_, err := h.b.turnctlCmd(ctx, h.c.Dir(), f.args...)
				return err
			})
			if err != nil {
				return err
			}
			h.record(f.name, "C", s)
		}
	}
	return nil
}

// rewinds: a turn overwrites k files of hist/; rewind to the turn before.
func (h *history) rewinds(ctx context.Context) error {
	for _, k := range h.b.sz.rewindFiles {
		if k > h.files {
			if err := genFiles(ctx, h.p("hist"), h.files, k); err != nil {
				return err
			}
			h.files = k
		}
		name := fmt.Sprintf("rewind of a %d-file turn", k)
		for rep := 0; rep < h.reps; rep++ {
			t, err := h.beginTurn(ctx)
			if err != nil {
				return err
			}
			changed := fmt.Appendf(nil, "rewind %d %d\n", k, rep)
			for i := 0; i < k; i++ {
				if err := os.WriteFile(genPath(h.p("hist"), i), changed, 0o644); err != nil {
					return err
				}
			}
			if err := h.c.End(ctx); err != nil {
				return err
			}
			s, err := h.timed(func() error {
				_, err := h.b.turnctlCmd(ctx, h.c.Dir(), "rewind", strconv.Itoa(t-1))
				return err
			})
			if err != nil {
				return err
			}
			if got, _ := os.ReadFile(genPath(h.p("hist"), k-1)); string(got) == string(changed) {
				return fmt.Errorf("after rewind %d, %s still has the rewound content", t-1, genPath("hist", k-1))
			}
			h.record(name, "C", s)
		}
	}
	return nil
}

// bigFile times the rename and the delete of a big file (1 GiB; --quick
// 256 MiB) made in an earlier turn, on C inside an open turn and on N side
// by side: history keeps a moved or deleted file by its name or a hard
// link, never by copying it, so C must stay near N (target: ≤ 2×). The
// file is written and the page cache written back before each timing.
func (h *history) bigFile(ctx context.Context) error {
	size := h.b.sz.seqBytes
	label := fmt.Sprintf("%d MiB", size>>20)
	if size >= 1<<30 {
		label = fmt.Sprintf("%d GiB", size>>30)
	}
	nat := filepath.Join(h.b.o.work, "Nbig")
	defer os.RemoveAll(nat)
	dirs := []struct{ config, dir string }{{"N", nat}, {"C", h.p("big")}}
	for _, d := range dirs {
		if err := os.MkdirAll(d.dir, 0o755); err != nil {
			return err
		}
	}
	timeOp := func(name, config string, op func() error) error {
		syscall.Sync()
		start := time.Now()
		if err := op(); err != nil {
			return err
		}
		h.record(name, config, sample{Wall: since(start), CPU: -1})
		return nil
	}
	for rep := 0; rep < h.reps; rep++ {
		for _, d := range dirs {
			if err := writeRandom(filepath.Join(d.dir, "big.dat"), size, uint64(10+rep), false); err != nil {
				return err
			}
		}
		if err := h.c.Begin(ctx); err != nil {
			return err
		}
		for _, d := range dirs {
			a, b := filepath.Join(d.dir, "big.dat"), filepath.Join(d.dir, "big.moved")
			if err := timeOp("rename of a "+label+" file", d.config, func() error { return os.Rename(a, b) }); err != nil {
				return err
			}
		}
		for _, d := range dirs {
			b := filepath.Join(d.dir, "big.moved")
			if err := timeOp("delete of a "+label+" file", d.config, func() error { return os.Remove(b) }); err != nil {
				return err
			}
		}
		if err := h.c.End(ctx); err != nil {
			return err
		}
	}
	return nil
}

// at times the first byte and the full read of a big file (1 GiB;
// --quick 256 MiB) made in a turn, through a view of that turn (ckptfs
// mount --at; config A) against the project's mount (C), each with the
// page cache dropped first. The view reads an unchanged file from the
// live backing file through the daemon, so A must stay near C.
func (h *history) at(ctx context.Context) error {
	size := h.b.sz.seqBytes
	label := fmt.Sprintf("%d MiB", size>>20)
	if size >= 1<<30 {
		label = fmt.Sprintf("%d GiB", size>>30)
	}
	cl, err := h.c.control()
	if err != nil {
		return err
	}
	dir := h.p("atbig")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if _, err := cl.Begin(ctx, turnctl.BeginRequest{}); err != nil {
		return err
	}
	if err := writeRandom(filepath.Join(dir, "big.dat"), size, 7, false); err != nil {
		return err
	}
	end, err := cl.End(ctx, turnctl.EndRequest{})
	if err != nil {
		return err
	}
	view := filepath.Join(h.b.o.work, "atview")
	if err := os.MkdirAll(view, 0o755); err != nil {
		return err
	}
	defer os.Remove(view)
	if _, err := cl.MountAt(ctx, turnctl.MountAtRequest{Turn: strconv.FormatUint(end.Turn.Num, 10), Dir: view}); err != nil {
		return err
	}
	defer func() {
		if syscall.Unmount(view, 0) != nil {
			syscall.Unmount(view, syscall.MNT_DETACH)
		}
	}()
	rel, _ := filepath.Rel(h.c.Dir(), filepath.Join(dir, "big.dat"))
	files := []struct{ config, path string }{{"C", filepath.Join(dir, "big.dat")}, {"A", filepath.Join(view, rel)}}
	cold := func() error {
		syscall.Sync()
		return os.WriteFile("/proc/sys/vm/drop_caches", []byte("3\n"), 0)
	}
	read := func(p string, n int64) error {
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		buf := make([]byte, min(n, 1<<20))
		got, err := io.ReadFull(f, buf[:min(n, int64(len(buf)))])
		for total := int64(got); err == nil && total < n; total += int64(got) {
			got, err = f.Read(buf)
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			err = nil
		}
		return err
	}
	for rep := 0; rep < h.reps; rep++ {
		for _, f := range files {
			for _, fig := range []struct {
				name string
				n    int64
			}{{"first byte of a " + label + " file, cold", 1}, {"read of a " + label + " file, cold", size}} {
				if err := cold(); err != nil {
					return fmt.Errorf("drop caches (need root): %w", err)
				}
				start := time.Now()
				if err := read(f.path, fig.n); err != nil {
					return err
				}
				h.record(fig.name, f.config, sample{Wall: since(start), CPU: -1})
			}
		}
	}
	// Then the file changes in a later turn (one block: its prior bytes
	// are captured whole into the store), and the view reads them from
	// the store.
	if _, err := cl.Begin(ctx, turnctl.BeginRequest{}); err != nil {
		return err
	}
	w, err := os.OpenFile(files[0].path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = w.WriteAt(make([]byte, 4096), 0)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if _, err := cl.End(ctx, turnctl.EndRequest{}); err != nil {
		return err
	}
	for rep := 0; rep < h.reps; rep++ {
		for _, fig := range []struct {
			name string
			n    int64
		}{{"first byte of a " + label + " file from the store, cold", 1}, {"read of a " + label + " file from the store, cold", size}} {
			if err := cold(); err != nil {
				return fmt.Errorf("drop caches (need root): %w", err)
			}
			start := time.Now()
			if err := read(files[1].path, fig.n); err != nil {
				return err
			}
			h.record(fig.name, "A", sample{Wall: since(start), CPU: -1})
		}
	}
	return nil
}

// stored measures the store's growth (du -sb) for one change of each kind.
func (h *history) stored(ctx context.Context) error {
	size := h.b.sz.storedBytes
	dir := h.p("stored")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	ops := []struct {
		name    string
		changed int64
		do      func(p string) error
	}{
		{"overwrite", size, func(p string) error { return writeRandom(p, size, 2, false) }},
		{"append", size / 4, func(p string) error { return writeRandom(p, size/4, 3, true) }},
		{"delete", size, os.Remove},
		{"rename", size, func(p string) error { return os.Rename(p, p+".renamed") }},
	}
	for _, op := range ops {
		p := filepath.Join(dir, op.name+".dat")
		if err := h.c.Begin(ctx); err != nil {
			return err
		}
		if err := writeRandom(p, size, 1, false); err != nil {
			return err
		}
		if err := h.c.End(ctx); err != nil {
			return err
		}
		h.idle()
		before, err := duBytes(ctx, h.c.store)
		if err != nil {
			return err
		}
		if err := h.c.Begin(ctx); err != nil {
			return err
		}
		if err := op.do(p); err != nil {
			return err
		}
		if err := h.c.End(ctx); err != nil {
			return err
		}
		h.idle()
		after, err := duBytes(ctx, h.c.store)
		if err != nil {
			return err
		}
		st := storedRow{Op: fmt.Sprintf("%s of a %d MiB file", op.name, size>>20), Changed: op.changed, Stored: after - before}
		st.PerByte = float64(st.Stored) / float64(st.Changed)
		h.b.res.Stored = append(h.b.res.Stored, st)
		h.b.logf("history  stored: %s: %d bytes for %d changed", st.Op, st.Stored, st.Changed)
	}
	return nil
}

// idle waits until the daemon has finished what it deferred.
func (h *history) idle() {
	h.idleOn(h.c)
}

func duBytes(ctx context.Context, dir string) (int64, error) {
	out, err := command(ctx, "", nil, "du", "-sb", dir)
	if err != nil {
		return 0, err
	}
	f := strings.Fields(out)
	if len(f) == 0 {
		return 0, errors.New("du printed nothing")
	}
	return strconv.ParseInt(f[0], 10, 64)
}

// writeRandom writes n incompressible bytes to p (appending or replacing).
func writeRandom(p string, n int64, seed uint64, appendTo bool) error {
	flag := os.O_CREATE | os.O_WRONLY | os.O_TRUNC
	if appendTo {
		flag = os.O_WRONLY | os.O_APPEND
	}
	f, err := os.OpenFile(p, flag, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	var key [32]byte
	binary.LittleEndian.PutUint64(key[:8], seed) // seeds < 256 as before
	r := rand.NewChaCha8(key)
	buf := make([]byte, chunk)
	for left := n; left > 0; left -= chunk {
		r.Read(buf)
		m := min(left, chunk)
		if _, err := f.Write(buf[:m]); err != nil {
			return err
		}
	}
	return f.Close()
}

// offline times `ckptfs umount` (which saves the manifest of the tree) and
// `ckptfs mount` (which compares the tree with it and records what changed
// in between, here one file) on a project of the largest history tree
// size, mounted in the background as a user would.
func (h *history) offline(ctx context.Context) error {
	n := h.b.sz.histTrees[len(h.b.sz.histTrees)-1]
	dir := filepath.Join(h.b.o.work, "offline")
	defer func() {
		exec.Command(h.b.o.ckptfs, "umount", dir).Run()
		os.RemoveAll(dir)
	}()
	if err := genFiles(ctx, dir, 0, n); err != nil {
		return err
	}
	run := func(args ...string) (sample, error) {
		start := time.Now()
		out, err := exec.CommandContext(ctx, h.b.o.ckptfs, args...).CombinedOutput()
		if err != nil {
			return sample{}, fmt.Errorf("ckptfs %s: %v: %s", strings.Join(args, " "), err, out)
		}
		return sample{Wall: since(start), CPU: -1}, nil
	}
	if _, err := run("mount", dir); err != nil {
		return err
	}
	for rep := 0; rep < h.reps; rep++ {
		s, err := run("umount", dir)
		if err != nil {
			return err
		}
		h.record(fmt.Sprintf("umount (saves the manifest), %d files", n), "C", s)
		if err := os.WriteFile(genPath(dir, rep), fmt.Appendf(nil, "changed offline %d\n", rep), 0o644); err != nil {
			return err
		}
		if s, err = run("mount", dir); err != nil {
			return err
		}
		h.record(fmt.Sprintf("mount (finds offline changes), %d files", n), "C", s)
	}
	return nil
}

// genPath is file i of a generated tree: 100 files per directory.
func genPath(root string, i int) string {
	return filepath.Join(root, fmt.Sprintf("d%03d", i/100), "f"+strconv.Itoa(i%100))
}

// genFiles creates files from..to-1 of a generated tree under root.
func genFiles(ctx context.Context, root string, from, to int) error {
	for i := from; i < to; i++ {
		if i%100 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		p := genPath(root, i)
		if i%100 == 0 || i == from {
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
		}
		if err := os.WriteFile(p, fmt.Appendf(nil, "generated file %d\n", i), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// emptyDir removes everything inside dir.
func emptyDir(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range ents {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
