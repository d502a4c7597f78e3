package main

// The agent session (issue 20, doc/BENCH.md "A real agent session"):
// thirteen scripted turns of a coding agent over a clone of this
// repository with its git history, on N (a native directory), C (a fresh ckptfs mount over the
// clone, turnctl begin/end around every turn, in the timed wall) and G (a
// native directory whose every turn ends in `git add -A && git commit` into
// a shadow git dir, also timed), interleaved and repeated.
//
// Every session starts from a fresh clone (untimed); C mounts over it just
// before its first turn, so the first turn pays for a cold mount as an
// agent's first prompt would. All configurations share one GOCACHE outside
// every tree, warmed beforehand in each configuration's own directory, so a
// build compiles in every session exactly what that session's edits
// changed: each session writes its own stamp into the sources, and an
// unchanged package hits the cache in every configuration alike.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"time"
)

// sessionTurns are the agent's turns, each one shell script run in the
// project with $STAMP set to the session's stamp.
var sessionTurns = []struct{ name, script string }{
	{"explore (fresh mount)", `git status >/dev/null
git log --oneline -20 >/dev/null
find . -name '*.go' -not -path './.git/*' | wc -l >/dev/null
grep -rn 'func ' --include='*.go' . | wc -l >/dev/null
ls -la >/dev/null; cat README.md go.mod >/dev/null`},
	{"grep + sed -i", `grep -rln 'backing tree' --include='*.go' . >/dev/null
sed -i "s/backing tree/backing tree ($STAMP)/" fusefs/*.go
grep -l "$STAMP" fusefs/*.go | wc -l >/dev/null`},
	{"new file + go build", `printf 'package units\n\n// Stamp names the session.\nconst Stamp   =   "%s"\n' "$STAMP" > internal/units/stamp.go
go build ./...`},
	{"go test (small pkg)", `go test -count=1 ./internal/units/ >/dev/null`},
	{"gofmt", `gofmt -l . >/dev/null; gofmt -w internal/units fusefs`},
	{"go vet", `go vet ./...`},
	{"git status ×5 (warm)", `for i in 1 2 3 4 5; do git status >/dev/null; done`},
	{"git status + commit", `git status >/dev/null; git diff --stat >/dev/null
git add -A && git commit -q -m "session $STAMP"`},
	{"git checkout + commit", `git checkout -q -b feature HEAD~10
echo "session $STAMP" >> README.md
git commit -q -am "feature $STAMP"
git checkout -q -`},
	{"build binaries + 50 MB", `go build -o out/ ./cmd/ckptfs ./cmd/turnctl
head -c 50000000 /dev/zero > out/artifact.bin`},
	{"rm -rf + rebuild", `rm -rf out
go build -o out/ ./cmd/ckptfs ./cmd/turnctl`},
	{"mv a package + build", `git mv internal/units internal/sizes
grep -rl 'ckptfs/internal/units' --include='*.go' . | xargs sed -i -e 's#ckptfs/internal/units#ckptfs/internal/sizes#' -e 's/\<units\./sizes./g'
sed -i 's/^package units/package sizes/' internal/sizes/*.go
go build ./...`},
	{"wrap up: status, commit", `gofmt -l . >/dev/null
git status >/dev/null
git add -A && git commit -q -m "wrap up $STAMP"
git log --oneline -3 >/dev/null
rm -rf out`},
}

// altConfig is C with the binary of --session-alt.
const altConfig = "C'"

// sessionConfigs is the order of the report.
var sessionConfigs = []string{"N", "C", altConfig, "G"}

// sessionResult is the session row: samples per configuration.
type sessionResult struct {
	Source  string                     `json:"source"` // repository and commit cloned
	Turns   []string                   `json:"turns"`
	Samples map[string][]sessionSample `json:"samples"`
	Errors  map[string]string          `json:"errors,omitempty"`
}

// sessionSample is one session on one configuration.
type sessionSample struct {
	Rep  int       `json:"rep"`
	Wall float64   `json:"wall_s"` // the sum of Turns
	Turn []float64 `json:"turn_wall_s"`
	// Boundary is the checkpoint's part of each turn: begin + end (C),
	// git add -A && git commit (G).
	Boundary []float64 `json:"boundary_s,omitempty"`
	// CPU is the daemon's CPU seconds from before the first turn to the
	// daemon idle after the last (C; -1 otherwise).
	CPU float64 `json:"cpu_s"`
	// Requests counts FUSE requests by opcode per turn (C with
	// --session-debug).
	Requests []map[string]int `json:"requests,omitempty"`
}

// session is one configuration's project during one session.
type session struct {
	b     *bench
	cfg   string
	base  string // WORK/session/CFG
	dir   string // the project
	stamp string
	d     *ckptfsTarget // C
	log   string        // C: the daemon's log (requests with --session-debug)
}

func (s *session) env() []string {
	return append(gitEnv(), "STAMP="+s.stamp,
		"GOCACHE="+s.b.sessionGocache(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOSUMDB=off",
		"GOTOOLCHAIN=local", "GOWORK=off")
}

func (s *session) sh(ctx context.Context, script string) error {
	_, err := command(ctx, s.dir, s.env(), "sh", "-ec", script)
	return err
}

func (b *bench) sessionGocache() string {
	if b.o.sessionGocache != "" {
		return b.o.sessionGocache
	}
	return filepath.Join(b.o.work, "session", "gocache")
}

// runSession runs the session on N, C (each if configured) and G.
func (b *bench) runSession(ctx context.Context) error {
	res := &sessionResult{Samples: map[string][]sessionSample{}}
	for _, t := range sessionTurns {
		res.Turns = append(res.Turns, t.name)
	}
	b.res.Session = res
	src, err := b.sessionSource(ctx)
	if err != nil {
		return err
	}
	res.Source = src
	var cfgs []string
	for _, c := range []string{"N", "C"} {
		if contains(b.o.configs, c) {
			cfgs = append(cfgs, c)
		}
	}
	if b.o.sessionAlt != "" {
		cfgs = append(cfgs, altConfig)
	}
	cfgs = append(cfgs, "G")
	if err := b.warmSession(ctx, cfgs); err != nil {
		return fmt.Errorf("session: warming GOCACHE: %w", err)
	}
	for rep := 0; rep < b.o.reps; rep++ {
		for i := range cfgs {
			// Rotate the order, so no configuration always runs first.
			cfg := cfgs[(i+rep)%len(cfgs)]
			if _, bad := res.Errors[cfg]; bad {
				continue
			}
			sm, err := b.oneSession(ctx, cfg, rep)
			if err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				if res.Errors == nil {
					res.Errors = map[string]string{}
				}
				res.Errors[cfg] = err.Error()
				b.logf("session on %s failed: %v", cfg, err)
				continue
			}
			res.Samples[cfg] = append(res.Samples[cfg], sm)
			b.logf("session  %-2s rep %d: %7.2f s wall, daemon CPU %.2f s", cfg, rep+1, sm.Wall, sm.CPU)
		}
	}
	return nil
}

// sessionSource clones the repository the bench runs from (its HEAD
// commit) into WORK/session/src, which every session clones in turn.
func (b *bench) sessionSource(ctx context.Context) (string, error) {
	top, err := command(ctx, "", nil, "git", "rev-parse", "--show-toplevel")
	if err != nil {
		return "", fmt.Errorf("session: not run from a git repository: %w", err)
	}
	top = strings.TrimSpace(top)
	head, err := command(ctx, top, nil, "git", "rev-parse", "HEAD")
	if err != nil {
		return "", err
	}
	head = strings.TrimSpace(head)
	src := filepath.Join(b.o.work, "session", "src")
	if err := os.RemoveAll(src); err != nil {
		return "", err
	}
	if _, err := git(ctx, "", "clone", "-q", "--no-hardlinks", "--no-checkout", top, src); err != nil {
		return "", err
	}
	if _, err := git(ctx, src, "checkout", "-q", "-B", "session", head); err != nil {
		return "", err
	}
	return top + " @ " + head[:12], nil
}

// warmSession fills the shared GOCACHE with everything a session builds
// but does not change, in each configuration's own directory (the cache
// keys of a package include its directory).
func (b *bench) warmSession(ctx context.Context, cfgs []string) error {
	for _, cfg := range cfgs {
		s := b.newSession(cfg, "warm")
		if err := s.clone(ctx); err != nil {
			return err
		}
		b.logf("session: warming GOCACHE in %s", s.dir)
		if err := s.sh(ctx, `go build ./... && go vet ./... && go test -count=1 ./internal/units/ >/dev/null && go build -o out/ ./cmd/ckptfs ./cmd/turnctl`); err != nil {
			return err
		}
		if err := os.RemoveAll(s.base); err != nil {
			return err
		}
	}
	return nil
}

// sessionDirName is cfg as a file name.
func sessionDirName(cfg string) string {
	return strings.ReplaceAll(cfg, "'", "alt")
}

func (b *bench) newSession(cfg, stamp string) *session {
	base := filepath.Join(b.o.work, "session", sessionDirName(cfg))
	return &session{b: b, cfg: cfg, base: base, dir: filepath.Join(base, "proj"), stamp: stamp}
}

// clone makes a fresh clone of the session source at s.dir.
func (s *session) clone(ctx context.Context) error {
	if err := os.RemoveAll(s.base); err != nil {
		return err
	}
	if err := os.MkdirAll(s.base, 0o755); err != nil {
		return err
	}
	_, err := git(ctx, "", "clone", "-q", "--no-hardlinks", filepath.Join(s.b.o.work, "session", "src"), s.dir)
	return err
}

// oneSession runs the twelve turns once on cfg.
func (b *bench) oneSession(ctx context.Context, cfg string, rep int) (sessionSample, error) {
	s := b.newSession(cfg, fmt.Sprintf("%s-%d-%d", cfg, rep, time.Now().UnixNano()))
	sm := sessionSample{Rep: rep, CPU: -1}
	if err := s.clone(ctx); err != nil {
		return sm, err
	}
	defer os.RemoveAll(s.base)
	var pid int
	var cpu0 float64
	switch cfg {
	case "C", altConfig:
		if err := s.mount(ctx, rep); err != nil {
			return sm, err
		}
		defer s.d.Close()
		pid = s.d.DaemonPID()
		settle(pid, cpuSeconds(pid), 30*time.Second) // the mount's own work
		cpu0 = cpuSeconds(pid)
	case "G":
		if err := s.shadowGit(ctx, "init", "-q"); err != nil {
			return sm, err
		}
		if err := s.checkpoint(ctx); err != nil {
			return sm, err
		}
	}
	var offsets []int64
	for i, t := range sessionTurns {
		syscall.Sync() // what earlier turns left dirty is not this turn's
		offsets = append(offsets, s.logSize())
		var bound float64
		start := time.Now()
		if s.d != nil {
			t0 := time.Now()
			if err := s.d.Begin(ctx); err != nil {
				return sm, err
			}
			bound += since(t0)
		}
		if err := s.sh(ctx, t.script); err != nil {
			return sm, fmt.Errorf("turn %d (%s): %w", i+1, t.name, err)
		}
		t1 := time.Now()
		switch {
		case s.d != nil:
			if err := s.d.End(ctx); err != nil {
				return sm, err
			}
		case cfg == "G":
			if err := s.checkpoint(ctx); err != nil {
				return sm, err
			}
		}
		bound += since(t1)
		sm.Turn = append(sm.Turn, since(start))
		sm.Wall += sm.Turn[i]
		if cfg != "N" {
			sm.Boundary = append(sm.Boundary, bound)
		}
		if s.d != nil {
			// Deferred work lands on this session, not the next turn.
			settle(pid, cpuSeconds(pid), 30*time.Second)
		}
	}
	offsets = append(offsets, s.logSize())
	if s.d != nil {
		sm.CPU = cpuSeconds(pid) - cpu0
		if b.o.sessionDebug {
			sm.Requests = countRequests(s.log, offsets)
		}
		if err := s.d.Close(); err != nil {
			return sm, err
		}
	}
	return sm, nil
}

func (s *session) logSize() int64 {
	if s.log == "" {
		return 0
	}
	fi, err := os.Stat(s.log)
	if err != nil {
		return 0
	}
	return fi.Size()
}

func (s *session) shadowGit(ctx context.Context, args ...string) error {
	_, err := git(ctx, s.dir, append([]string{"--git-dir=" + filepath.Join(s.base, "shadow.git"), "--work-tree=" + s.dir}, args...)...)
	return err
}

// checkpoint is G's turn end: what Gemini CLI and Cline do.
func (s *session) checkpoint(ctx context.Context) error {
	if err := s.shadowGit(ctx, "add", "-A"); err != nil {
		return err
	}
	return s.shadowGit(ctx, "commit", "-q", "--allow-empty", "-m", "turn")
}

// mount mounts a fresh ckptfs over the clone (its store in DIR/.ckptfs,
// as a user's would be), with --debug and CKPTFS_CPUPROFILE when asked.
func (s *session) mount(ctx context.Context, rep int) error {
	b := s.b
	for _, p := range []string{b.o.ckptfs, b.o.turnctl} {
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("%v (run make build)", err)
		}
	}
	args := []string{"mount", "-f"}
	if b.o.sessionDebug {
		args = append(args, "--debug")
	}
	args = append(args, s.dir)
	bin := b.o.ckptfs
	if s.cfg == altConfig {
		bin = b.o.sessionAlt
	}
	c := &ckptfsTarget{b: b, store: filepath.Join(s.dir, ".ckptfs")}
	c.daemon = daemon{name: s.cfg, mnt: s.dir, cmd: exec.Command(bin, args...),
		log: filepath.Join(b.o.work, "session", fmt.Sprintf("%s-daemon-%d.log", sessionDirName(s.cfg), rep))}
	if b.o.sessionProfile != "" {
		if err := os.MkdirAll(b.o.sessionProfile, 0o755); err != nil {
			return err
		}
		c.cmd.Env = append(os.Environ(), "CKPTFS_CPUPROFILE="+filepath.Join(b.o.sessionProfile, fmt.Sprintf("session-%s-cpu-%d.pprof", sessionDirName(s.cfg), rep)))
	}
	c.unmount = func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, bin, "umount", s.dir).CombinedOutput()
		if err != nil {
			return fmt.Errorf("C: ckptfs umount: %v: %s", err, strings.TrimSpace(string(out)))
		}
		return nil
	}
	logf, err := os.Create(c.log)
	if err != nil {
		return err
	}
	defer logf.Close()
	c.cmd.Stdout, c.cmd.Stderr = logf, logf
	if err := c.start(); err != nil {
		return err
	}
	b.register(c)
	s.d, s.log = c, c.log
	for deadline := time.Now().Add(60 * time.Second); !isMounted(s.dir); time.Sleep(20 * time.Millisecond) {
		if c.exited() {
			return fmt.Errorf("ckptfs mount exited (%v): %s", c.err, c.logTail())
		}
		if time.Now().After(deadline) {
			c.Close()
			return fmt.Errorf("ckptfs mount: not mounted after 60 s: %s", c.logTail())
		}
	}
	_, err = c.control() // the socket opens just after the mount
	return err
}

// rxRE matches go-fuse's debug line of a request: "rx 12: LOOKUP n1 ...".
var rxRE = regexp.MustCompile(`^(?:\S+ \S+ )?rx \d+: (\w+) `)

// countRequests counts the requests logged between consecutive offsets
// of the daemon's --debug log: one map per turn.
func countRequests(log string, offsets []int64) []map[string]int {
	f, err := os.Open(log)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []map[string]int
	for i := 0; i+1 < len(offsets); i++ {
		out = append(out, countRx(io.NewSectionReader(f, offsets[i], offsets[i+1]-offsets[i])))
	}
	return out
}

func countRx(r io.Reader) map[string]int {
	m := map[string]int{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if mm := rxRE.FindStringSubmatch(sc.Text()); mm != nil {
			m[mm[1]]++
		}
	}
	return m
}

// sessionTable renders the session section of the report.
func (r *sessionResult) table(reps int) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "\nagent session: %d turns over a clone of %s; fresh clone (and mount) per session, interleaved; wall seconds, median (min–max) of %d\n",
		len(r.Turns), r.Source, reps)
	med := func(cfg string, f func(sessionSample) float64) (float64, bool) {
		ss := r.Samples[cfg]
		if len(ss) == 0 {
			return 0, false
		}
		v := make([]float64, len(ss))
		for i, s := range ss {
			v[i] = f(s)
		}
		m, _, _ := stats(v)
		return m, true
	}
	rng := func(cfg string) string {
		ss := r.Samples[cfg]
		v := make([]float64, len(ss))
		for i, s := range ss {
			v[i] = s.Wall
		}
		m, lo, hi := stats(v)
		return fmt.Sprintf("%s (%s–%s)", fmtSecs(m), fmtSecs(lo), fmtSecs(hi))
	}
	nWall, nOK := med("N", func(s sessionSample) float64 { return s.Wall })
	var rows [][]string
	for _, cfg := range sessionConfigs {
		if len(r.Samples[cfg]) == 0 {
			continue
		}
		w, _ := med(cfg, func(s sessionSample) float64 { return s.Wall })
		vsN := "-"
		if nOK && cfg != "N" {
			vsN = fmtRatio(ratio(w, nWall))
		}
		cpu, bound := "-", "-"
		if cfg == "C" || cfg == altConfig {
			c, _ := med(cfg, func(s sessionSample) float64 { return s.CPU })
			cpu = fmtSecs(c)
		}
		if cfg != "N" {
			bsum, _ := med(cfg, func(s sessionSample) float64 { return sum(s.Boundary) })
			bmax, _ := med(cfg, func(s sessionSample) float64 { return maxOf(s.Boundary) })
			bound = fmt.Sprintf("%s (max %s)", fmtSecs(bsum), fmtSecs(bmax))
		}
		rows = append(rows, []string{cfg, rng(cfg), vsN, cpu, bound})
	}
	sb.WriteString(formatTable([]string{"session", "wall", "vs N", "daemon CPU", "checkpoints (per session)"}, rows))

	// Per turn: median walls and ratios against N.
	header := []string{"turn"}
	var cfgs []string
	for _, cfg := range sessionConfigs {
		if len(r.Samples[cfg]) > 0 {
			cfgs = append(cfgs, cfg)
			header = append(header, cfg)
		}
	}
	for _, cfg := range cfgs {
		if cfg != "N" && nOK {
			header = append(header, cfg+"/N")
		}
	}
	var trows [][]string
	for i, name := range r.Turns {
		row := []string{fmt.Sprintf("%2d %s", i+1, name)}
		vals := map[string]float64{}
		for _, cfg := range cfgs {
			v, ok := med(cfg, func(s sessionSample) float64 {
				if i < len(s.Turn) {
					return s.Turn[i]
				}
				return 0
			})
			vals[cfg] = v
			row = append(row, fmtCell(summary{N: 1, Median: v}, ok))
		}
		for _, cfg := range cfgs {
			if cfg != "N" && nOK {
				row = append(row, fmtRatio(ratio(vals[cfg], vals["N"])))
			}
		}
		trows = append(trows, row)
	}
	sb.WriteString("\n")
	sb.WriteString(formatTable(header, trows))

	// Requests per turn, when counted.
	for _, cfg := range []string{"C", altConfig} {
		sb.WriteString(r.requestTable(cfg))
	}
	for cfg, e := range r.Errors {
		fmt.Fprintf(&sb, "session on %s failed: %s\n", cfg, e)
	}
	return sb.String()
}

// requestTable is the FUSE requests per turn of cfg's last session with
// counts, by opcode (the eight most frequent), or "".
func (r *sessionResult) requestTable(cfg string) string {
	var withReq []sessionSample
	for _, s := range r.Samples[cfg] {
		if len(s.Requests) == len(r.Turns) {
			withReq = append(withReq, s)
		}
	}
	if len(withReq) == 0 {
		return ""
	}
	s := withReq[len(withReq)-1]
	total := map[string]int{}
	for _, m := range s.Requests {
		for op, n := range m {
			total[op] += n
		}
	}
	var ops []string
	for op := range total {
		ops = append(ops, op)
	}
	sort.Slice(ops, func(i, j int) bool {
		if total[ops[i]] != total[ops[j]] {
			return total[ops[i]] > total[ops[j]]
		}
		return ops[i] < ops[j]
	})
	if len(ops) > 8 {
		ops = ops[:8]
	}
	header := append([]string{"turn", "all"}, ops...)
	var rows [][]string
	all := 0
	for i, m := range s.Requests {
		n := 0
		for _, c := range m {
			n += c
		}
		all += n
		row := []string{fmt.Sprintf("%2d %s", i+1, r.Turns[i]), fmt.Sprint(n)}
		for _, op := range ops {
			row = append(row, fmt.Sprint(m[op]))
		}
		rows = append(rows, row)
	}
	row := []string{"session", fmt.Sprint(all)}
	for _, op := range ops {
		row = append(row, fmt.Sprint(total[op]))
	}
	rows = append(rows, row)
	return fmt.Sprintf("\nFUSE requests per turn (%s, rep %d, --debug)\n", cfg, s.Rep+1) + formatTable(header, rows)
}

func sum(v []float64) float64 {
	t := 0.0
	for _, x := range v {
		t += x
	}
	return t
}

func maxOf(v []float64) float64 {
	m := 0.0
	for _, x := range v {
		m = max(m, x)
	}
	return m
}
