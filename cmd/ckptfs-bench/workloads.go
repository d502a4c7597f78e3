package main

// The workloads of doc/BENCH.md. Each has an optional global preparation (once,
// outside every configuration: tarballs, projects), an optional per-target
// setup (untimed), and steps; a step's prep is untimed and its run timed.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// sizes scales the workloads; --quick uses quickSizes.
type sizes struct {
	srcDirs     []string // subdirectories of GOROOT/src to extract (nil: all)
	churnFiles  int
	seqBytes    int64
	randBytes   int64
	sedFiles    int
	statRounds  int
	histTrees   []int // turn boundary vs tree size
	gitTree     int   // tree size for the shadow-git comparison
	logTurns    int   // turns of history for log/show
	rewindFiles []int // files changed by the rewound turn
	storedBytes int64 // file size for bytes-stored-per-byte-changed
	sqliteRows  int   // rows of the SQLite database (~200 bytes each)
}

var fullSizes = sizes{
	churnFiles:  20000,
	seqBytes:    1 << 30,
	randBytes:   256 << 20,
	sedFiles:    2000,
	statRounds:  10,
	histTrees:   []int{1000, 10000, 100000},
	gitTree:     10000,
	logTurns:    1000,
	rewindFiles: []int{10, 1000, 10000},
	storedBytes: 64 << 20,
	sqliteRows:  1000000,
}

var quickSizes = sizes{
	srcDirs:     []string{"go", "net", "encoding"}, // ~1.1k files
	churnFiles:  2000,
	seqBytes:    256 << 20,
	randBytes:   32 << 20,
	sedFiles:    500,
	statRounds:  5,
	histTrees:   []int{1000, 3000},
	gitTree:     3000,
	logTurns:    50,
	rewindFiles: []int{10, 300},
	storedBytes: 8 << 20,
	sqliteRows:  100000,
}

type workload struct {
	num       int
	name      string
	desc      string
	skipQuick bool
	skipUser  string // why it does not run as --user (Cu, Lu; "": it does)
	// onXFS: run on configurations of its own over a loop-mounted XFS
	// image made with reflink=1 (reflink.go), not on the work directory's.
	onXFS    bool
	global   func(ctx context.Context, g *global) error
	setup    func(ctx context.Context, e *env) error
	steps    []step
	after    func(ctx context.Context, e *env) error // after each repetition
	teardown func(ctx context.Context, e *env) error // once, at the end
}

type step struct {
	name string
	prep func(ctx context.Context, e *env) error
	run  func(ctx context.Context, e *env) error
	// post runs after the timed run, untimed (figures that need the
	// state the run left).
	post func(ctx context.Context, e *env) error
}

// global is what a workload prepared once for all configurations.
type global struct {
	b    *bench
	note string // goes into the report
	path string // tarball, project template, ...
	aux  string
	fio  bool
	// sqlite is the SQLite workload's state (sqlite.go).
	sqlite *sqliteRun
	// lists holds per-target data from setup (file lists), by target name.
	lists map[string][]string
}

// env is one target during one repetition.
type env struct {
	*global
	t   target
	dir string // the target's directory
	rep int
}

func (e *env) setList(l []string) {
	if e.lists == nil {
		e.lists = map[string][]string{}
	}
	e.lists[e.t.Name()] = l
}

func (e *env) list() []string { return e.lists[e.t.Name()] }

func (e *env) p(elem ...string) string { return filepath.Join(append([]string{e.dir}, elem...)...) }

// command runs a program for the target, as command does, with what the
// target's user needs in its environment (Cu: a home of its own).
func (e *env) command(ctx context.Context, dir string, env []string, name string, args ...string) (string, error) {
	if u := userOf(e.t); u != nil {
		env = append(append([]string{}, env...), u.extraEnv()...)
	}
	return command(ctx, dir, env, name, args...)
}

var workloads = []*workload{
	{num: 1, name: "extract", desc: "tar x of $(go env GOROOT)/src (~11k files)",
		global: globalTarball,
		steps: []step{{name: "extract",
			prep: func(ctx context.Context, e *env) error { return os.RemoveAll(e.p("tree")) },
			run:  func(ctx context.Context, e *env) error { return extract(ctx, e) },
		}}},
	{num: 2, name: "find", desc: "find . -type f | wc -l; git status in a git repo of the tree",
		global: globalTarball, setup: setupGitTree,
		steps: []step{
			{name: "find", run: func(ctx context.Context, e *env) error {
				out, err := e.command(ctx, e.p("tree"), nil, "sh", "-c", "find . -type f | wc -l")
				if err == nil {
					if n, _ := strconv.Atoi(strings.TrimSpace(out)); n == 0 {
						err = fmt.Errorf("find counted %q files", strings.TrimSpace(out))
					}
				}
				return err
			}},
			{name: "git status", run: func(ctx context.Context, e *env) error {
				_, err := e.command(ctx, e.p("tree"), gitEnv(), "git", "status")
				return err
			}},
		}},
	{num: 9, name: "sed", desc: "sed -i over 2k files (each a rename-over)",
		global: globalTarball, setup: setupSed,
		steps: []step{{name: "sed -i", run: runSed}}},
	{num: 10, name: "stat", desc: "stat storm: lstat of existing and missing names, in-process",
		global: globalTarball, setup: setupStat,
		steps: []step{{name: "stat storm", run: runStat}}},
	{num: 8, name: "rm", desc: "rm -rf of the extracted tree",
		global: globalTarball,
		steps: []step{{name: "rm -rf tree",
			prep: func(ctx context.Context, e *env) error {
				if err := os.RemoveAll(e.p("tree", ".git")); err != nil {
					return err
				}
				return ensureTree(ctx, e)
			},
			run: func(ctx context.Context, e *env) error {
				_, err := e.command(ctx, e.dir, nil, "rm", "-rf", "tree")
				return err
			},
		}}},
	{num: 3, name: "churn", desc: "create, write 4 KiB, close, then delete 20k files, in-process",
		setup: func(ctx context.Context, e *env) error { return os.RemoveAll(e.p("churn")) },
		steps: []step{{name: "churn",
			prep: func(ctx context.Context, e *env) error { return os.MkdirAll(e.p("churn"), 0o755) },
			run:  runChurn,
		}},
		teardown: func(ctx context.Context, e *env) error { return os.RemoveAll(e.p("churn")) }},
	{num: 4, name: "seq", desc: "sequential 1 GiB write + fsync, read cold (drop_caches) and warm",
		steps: []step{
			{name: "seq write+fsync",
				prep: func(ctx context.Context, e *env) error { return removeIfExists(e.p("seq.dat")) },
				run:  runSeqWrite},
			{name: "seq read cold", prep: dropCaches, run: runSeqRead},
			{name: "seq read warm", prep: runSeqRead, run: runSeqRead},
		},
		after: func(ctx context.Context, e *env) error { return removeIfExists(e.p("seq.dat")) }},
	{num: 5, name: "random", desc: "random 4 KiB writes then reads on a 256 MiB file (fio if installed)",
		global: globalFio, setup: setupRandom,
		steps: []step{
			{name: "rand write 4k", run: func(ctx context.Context, e *env) error { return runRandom(ctx, e, true) }},
			{name: "rand read 4k", run: func(ctx context.Context, e *env) error { return runRandom(ctx, e, false) }},
		},
		teardown: func(ctx context.Context, e *env) error { return removeIfExists(e.p("rand.dat")) }},
	{num: 11, name: "random-xfs", desc: "the random 4 KiB writes on a loop-mounted XFS image made with reflink=1 (N, Nx: N with its big files cloned aside, L, L+, C; needs mkfs.xfs)",
		global: globalFio, setup: setupRandom, onXFS: true,
		steps: []step{
			{name: "rand write 4k, XFS reflink", run: func(ctx context.Context, e *env) error { return runRandom(ctx, e, true) }},
		}},
	{num: 12, name: "sqlite", desc: "python3 sqlite3: 100 transactions of 100 row updates into a 200 MB database made before the turn; rollback journal, WAL",
		global:   globalSqlite,
		steps:    []step{sqliteStep(sqliteModes[0], ""), sqliteStep(sqliteModes[1], "")},
		teardown: teardownSqlite},
	{num: 13, name: "sqlite-xfs", desc: "the SQLite updates on a loop-mounted XFS image made with reflink=1 (N, Nx, L, L+, C; needs mkfs.xfs)",
		global: globalSqlite, onXFS: true,
		steps:    []step{sqliteStep(sqliteModes[0], ", XFS reflink"), sqliteStep(sqliteModes[1], ", XFS reflink")},
		teardown: teardownSqlite},
	{num: 6, name: "build", desc: "go build of a vendored module (go-fuse, x/sys, pflag): cold, no-op",
		skipQuick: true, global: globalBuild,
		steps: []step{
			{name: "go build cold", prep: prepBuild, run: runBuild},
			{name: "go build no-op", run: runBuild},
		},
		teardown: func(ctx context.Context, e *env) error { return os.RemoveAll(e.p("build")) }},
	{num: 7, name: "npm", desc: "npm ci of a small real project (skipped if npm or the registry is unavailable)",
		skipQuick: true, global: globalNpm, skipUser: "npm's cache is root's",
		steps: []step{{name: "npm ci", prep: prepNpm, run: func(ctx context.Context, e *env) error {
			_, err := e.command(ctx, e.p("npm"), nil, "npm", "ci", "--prefer-offline", "--no-audit", "--no-fund", "--loglevel=error")
			return err
		}}},
		teardown: func(ctx context.Context, e *env) error { return os.RemoveAll(e.p("npm")) }},
}

func findWorkload(s string) *workload {
	for _, wl := range workloads {
		if wl.name == s || strconv.Itoa(wl.num) == s {
			return wl
		}
	}
	return nil
}

// command runs name args in dir and returns stdout; the error carries stderr.
func command(ctx context.Context, dir string, env []string, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if len(msg) > 300 {
			msg = msg[:300] + "..."
		}
		return stdout.String(), fmt.Errorf("%s %s: %v: %s", name, strings.Join(shortArgs(args), " "), err, msg)
	}
	return stdout.String(), nil
}

func shortArgs(args []string) []string {
	if len(args) > 6 {
		return append(args[:6:6], fmt.Sprintf("... (%d args)", len(args)))
	}
	return args
}

func removeIfExists(p string) error {
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// --- 1 extract, 2 find, 8 rm, 9 sed, 10 stat: the Go source tree ---

func globalTarball(ctx context.Context, g *global) error {
	goroot, err := command(ctx, "", nil, "go", "env", "GOROOT")
	if err != nil {
		return err
	}
	src := filepath.Join(strings.TrimSpace(goroot), "src")
	g.path = filepath.Join(g.b.o.work, "src.tar")
	if _, err := os.Stat(g.path); err == nil {
		return nil
	}
	args := []string{"-cf", g.path, "-C", src}
	if dirs := g.b.sz.srcDirs; dirs != nil {
		args = append(args, dirs...)
	} else {
		args = append(args, ".")
	}
	_, err = command(ctx, "", nil, "tar", args...)
	return err
}

func extract(ctx context.Context, e *env) error {
	if err := os.MkdirAll(e.p("tree"), 0o755); err != nil {
		return err
	}
	_, err := e.command(ctx, e.p("tree"), nil, "tar", "-xf", e.path)
	return err
}

// ensureTree extracts the tree (untimed) unless it is there.
func ensureTree(ctx context.Context, e *env) error {
	if _, err := os.Stat(e.p("tree")); err == nil {
		return nil
	}
	return extract(ctx, e)
}

func gitEnv() []string {
	return []string{
		"GIT_AUTHOR_NAME=bench", "GIT_AUTHOR_EMAIL=bench@example.com",
		"GIT_COMMITTER_NAME=bench", "GIT_COMMITTER_EMAIL=bench@example.com",
		"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
	}
}

func git(ctx context.Context, dir string, args ...string) (string, error) {
	return command(ctx, dir, gitEnv(), "git", gitArgs(args)...)
}

func gitArgs(args []string) []string {
	return append([]string{"-c", "user.email=bench@example.com", "-c", "user.name=bench"}, args...)
}

// setupGitTree makes the tree a git repository with everything committed.
func setupGitTree(ctx context.Context, e *env) error {
	if err := ensureTree(ctx, e); err != nil {
		return err
	}
	if _, err := os.Stat(e.p("tree", ".git")); err == nil {
		return nil
	}
	for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}, {"commit", "-q", "-m", "base"}} {
		if _, err := e.command(ctx, e.p("tree"), gitEnv(), "git", gitArgs(args)...); err != nil {
			return err
		}
	}
	return nil
}

// treeFiles lists the regular files under the tree (relative, sorted),
// outside .git.
func treeFiles(e *env) ([]string, error) {
	root := e.p("tree")
	var files []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if d.Type().IsRegular() {
			rel, _ := filepath.Rel(root, p)
			files = append(files, rel)
		}
		return nil
	})
	sort.Strings(files)
	return files, err
}

func setupSed(ctx context.Context, e *env) error {
	if err := ensureTree(ctx, e); err != nil {
		return err
	}
	files, err := treeFiles(e)
	if err != nil {
		return err
	}
	var goFiles []string
	for _, f := range files {
		if strings.HasSuffix(f, ".go") && !strings.Contains(f, "testdata") {
			goFiles = append(goFiles, f)
			if len(goFiles) == e.b.sz.sedFiles {
				break
			}
		}
	}
	if len(goFiles) < e.b.sz.sedFiles {
		e.b.note("sed: only %d .go files in the tree", len(goFiles))
	}
	e.setList(goFiles)
	return nil
}

// runSed flips "Copyright" to "COPYRIGHT" and back on alternate repetitions.
func runSed(ctx context.Context, e *env) error {
	expr := "s/Copyright/COPYRIGHT/"
	if e.rep%2 == 1 {
		expr = "s/COPYRIGHT/Copyright/"
	}
	args := append([]string{"-i", "-e", expr}, e.list()...)
	_, err := e.command(ctx, e.p("tree"), nil, "sed", args...)
	return err
}

func setupStat(ctx context.Context, e *env) error {
	if err := ensureTree(ctx, e); err != nil {
		return err
	}
	files, err := treeFiles(e)
	e.setList(files)
	return err
}

// runStat lstats every file of the tree and as many missing names beside
// them, statRounds times.
func runStat(ctx context.Context, e *env) error {
	files := e.list()
	root := e.p("tree") + "/"
	var st syscall.Stat_t
	for r := 0; r < e.b.sz.statRounds; r++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		for _, f := range files {
			if err := syscall.Lstat(root+f, &st); err != nil {
				return fmt.Errorf("lstat %s: %v", f, err)
			}
			if err := syscall.Lstat(root+f+".missing", &st); err != syscall.ENOENT {
				return fmt.Errorf("lstat %s.missing: %v, want ENOENT", f, err)
			}
		}
	}
	return nil
}

// --- 3 churn ---

func runChurn(ctx context.Context, e *env) error {
	buf := bytes.Repeat([]byte("churn 4 KiB\n"), 4096/12+1)[:4096]
	dir := e.p("churn") + "/"
	n := e.b.sz.churnFiles
	for i := 0; i < n; i++ {
		if i%1000 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		f, err := os.OpenFile(dir+"f"+strconv.Itoa(i), os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o644)
		if err != nil {
			return err
		}
		_, err = f.Write(buf)
		if err2 := f.Close(); err == nil {
			err = err2
		}
		if err != nil {
			return err
		}
	}
	for i := 0; i < n; i++ {
		if err := os.Remove(dir + "f" + strconv.Itoa(i)); err != nil {
			return err
		}
	}
	return nil
}

// --- 4 sequential ---

const chunk = 1 << 20

func patternChunk() []byte {
	buf := make([]byte, chunk)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range buf {
		buf[i] = byte(r.Uint32())
	}
	return buf
}

func runSeqWrite(ctx context.Context, e *env) error {
	f, err := os.OpenFile(e.p("seq.dat"), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	buf := patternChunk()
	for n := int64(0); n < e.b.sz.seqBytes; n += chunk {
		if n%(64*chunk) == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		buf[0]++ // not all chunks equal: no dedup shortcut
		if _, err := f.Write(buf); err != nil {
			return err
		}
	}
	if err := f.Sync(); err != nil {
		return err
	}
	return f.Close()
}

func runSeqRead(ctx context.Context, e *env) error {
	f, err := os.Open(e.p("seq.dat"))
	if err != nil {
		return err
	}
	defer f.Close()
	buf := make([]byte, chunk)
	var total int64
	for {
		n, err := f.Read(buf)
		total += int64(n)
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
	}
	if total != e.b.sz.seqBytes {
		return fmt.Errorf("read %d bytes, want %d", total, e.b.sz.seqBytes)
	}
	return nil
}

// dropCaches writes back dirty pages and drops the page, dentry and inode
// caches (machine-wide), as root also when the step runs as Cu's user.
func dropCaches(ctx context.Context, e *env) error {
	return asRoot(func() error {
		syscall.Sync()
		if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3\n"), 0); err != nil {
			return fmt.Errorf("drop caches (need root): %w", err)
		}
		return nil
	})
}

// --- 5 random ---

func globalFio(ctx context.Context, g *global) error {
	if _, err := exec.LookPath("fio"); err == nil {
		g.fio = true
		g.note = "random I/O by fio (psync, 4 KiB, one pass over the file, page cache warm, no fsync)"
	} else {
		g.note = "fio not installed: random I/O by an in-process Go loop (pwrite/pread, 4 KiB, one pass worth of ops)"
	}
	return nil
}

func setupRandom(ctx context.Context, e *env) error {
	p := e.p("rand.dat")
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	buf := patternChunk()
	for n := int64(0); n < e.b.sz.randBytes; n += chunk {
		buf[0]++
		if _, err := f.Write(buf); err != nil {
			return err
		}
	}
	if err := f.Sync(); err != nil {
		return err
	}
	return f.Close()
}

func runRandom(ctx context.Context, e *env, write bool) error {
	size := e.b.sz.randBytes
	if e.fio {
		rw := "randread"
		if write {
			rw = "randwrite"
		}
		_, err := e.command(ctx, e.dir, nil, "fio", "--name=bench", "--filename=rand.dat",
			"--rw="+rw, "--bs=4k", fmt.Sprintf("--size=%d", size), "--ioengine=psync",
			"--invalidate=0", "--randrepeat=1", "--output=/dev/null")
		return err
	}
	flag := os.O_RDONLY
	if write {
		flag = os.O_RDWR
	}
	f, err := os.OpenFile(e.p("rand.dat"), flag, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	r := rand.New(rand.NewPCG(uint64(e.rep), 7))
	buf := make([]byte, 4096)
	blocks := size / 4096
	for i := int64(0); i < blocks; i++ {
		off := r.Int64N(blocks) * 4096
		if write {
			buf[0] = byte(i)
			_, err = f.WriteAt(buf, off)
		} else {
			_, err = f.ReadAt(buf, off)
		}
		if err != nil {
			return err
		}
	}
	return f.Close()
}

// --- 6 build ---

const buildMain = `package main

import (
	"log"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/spf13/pflag"
)

func main() {
	pflag.Parse()
	root, err := fs.NewLoopbackRoot(pflag.Arg(0))
	if err != nil {
		log.Fatal(err)
	}
	server, err := fs.Mount(pflag.Arg(1), root, nil)
	if err != nil {
		log.Fatal(err)
	}
	server.Wait()
}
`

// buildEnv runs go offline, with the module cache we have.
func buildEnv(gocache string) []string {
	return []string{"GOCACHE=" + gocache, "GOFLAGS=-mod=vendor", "GOPROXY=off", "GOSUMDB=off", "GOTOOLCHAIN=local", "GOWORK=off"}
}

// globalBuild makes a self-contained module (main + vendor/) and a GOCACHE
// template holding only the standard library packages it needs, so that a
// "cold" build compiles exactly the module's own packages.
func globalBuild(ctx context.Context, g *global) error {
	w := g.b.o.work
	src := filepath.Join(w, "buildsrc")
	g.path = src
	g.aux = filepath.Join(w, "gocache-std")
	if _, err := os.Stat(g.aux); err == nil {
		return nil
	}
	if err := os.MkdirAll(src, 0o755); err != nil {
		return err
	}
	gover := strings.TrimPrefix(runtimeVersion(), "go")
	gomod := fmt.Sprintf("module benchbuild\n\ngo %s\n\nrequire (\n%s)\n", gover, buildRequires())
	if err := os.WriteFile(filepath.Join(src, "go.mod"), []byte(gomod), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(src, "main.go"), []byte(buildMain), 0o644); err != nil {
		return err
	}
	// go.sum: the repository's has every hash we need; without it, -mod=mod
	// takes them from the module cache.
	if gomodPath, err := command(ctx, "", nil, "go", "env", "GOMOD"); err == nil && strings.TrimSpace(gomodPath) != "" {
		if sum, err := os.ReadFile(filepath.Join(filepath.Dir(strings.TrimSpace(gomodPath)), "go.sum")); err == nil {
			os.WriteFile(filepath.Join(src, "go.sum"), sum, 0o644)
		}
	}
	env := []string{"GOFLAGS=-mod=mod", "GOPROXY=off", "GOSUMDB=off", "GOTOOLCHAIN=local", "GOWORK=off"}
	if _, err := command(ctx, src, env, "go", "mod", "vendor"); err != nil {
		return err
	}
	out, err := command(ctx, src, buildEnv(g.aux), "go", "list", "-deps", "-f", "{{if .Standard}}{{.ImportPath}}{{end}}", ".")
	if err != nil {
		return err
	}
	std := strings.Fields(out)
	if _, err := command(ctx, src, buildEnv(g.aux), "go", append([]string{"build"}, std...)...); err != nil {
		return err
	}
	g.note = fmt.Sprintf("a module vendoring go-fuse v2.12.1, x/sys and pflag; \"cold\" = GOCACHE holding only the %d std packages it needs", len(std))
	return nil
}

// buildRequires lists the module versions this binary was built with, so
// that the build project needs nothing the module cache lacks.
func buildRequires() string {
	want := map[string]string{
		"github.com/hanwen/go-fuse/v2": "v2.12.1",
		"github.com/spf13/pflag":       "v1.1.0",
		"golang.org/x/sys":             "v0.49.0",
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if _, ok := want[d.Path]; ok && d.Version != "" && d.Version != "(devel)" {
				want[d.Path] = d.Version
			}
		}
	}
	var sb strings.Builder
	for _, p := range []string{"github.com/hanwen/go-fuse/v2", "github.com/spf13/pflag", "golang.org/x/sys"} {
		fmt.Fprintf(&sb, "\t%s %s\n", p, want[p])
	}
	return sb.String()
}

func runtimeVersion() string {
	out, err := exec.Command("go", "env", "GOVERSION").Output()
	if err != nil {
		return "go1.26"
	}
	return strings.TrimSpace(string(out))
}

func (e *env) gocache() string {
	if u := userOf(e.t); u != nil {
		return filepath.Join(u.base, "gocache") // the user's own
	}
	return filepath.Join(e.b.o.work, "gocache-"+configDirName(e.t.Name()))
}

func prepBuild(ctx context.Context, e *env) error {
	if err := os.RemoveAll(e.p("build")); err != nil {
		return err
	}
	if _, err := e.command(ctx, "", nil, "cp", "-a", e.path, e.p("build")); err != nil {
		return err
	}
	if err := os.RemoveAll(e.gocache()); err != nil {
		return err
	}
	_, err := e.command(ctx, "", nil, "cp", "-a", e.aux, e.gocache())
	return err
}

func runBuild(ctx context.Context, e *env) error {
	_, err := e.command(ctx, e.p("build"), buildEnv(e.gocache()), "go", "build", "-o", "app", ".")
	return err
}

// --- 7 npm ---

func globalNpm(ctx context.Context, g *global) error {
	if _, err := exec.LookPath("npm"); err != nil {
		return errors.New("skipped: npm not installed")
	}
	g.path = filepath.Join(g.b.o.work, "npmproj")
	if _, err := os.Stat(filepath.Join(g.path, "package-lock.json")); err == nil {
		return nil
	}
	if err := os.MkdirAll(g.path, 0o755); err != nil {
		return err
	}
	pkg := `{"name": "ckptfs-bench-npm", "version": "1.0.0", "private": true}` + "\n"
	if err := os.WriteFile(filepath.Join(g.path, "package.json"), []byte(pkg), 0o644); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	if _, err := command(ctx, g.path, nil, "npm", "install", "--no-audit", "--no-fund", "--loglevel=error",
		"chalk@4", "commander@12", "debug@4"); err != nil {
		return fmt.Errorf("skipped: npm install failed (registry unavailable?): %w", err)
	}
	g.note = "npm ci --prefer-offline of chalk@4, commander@12, debug@4 (npm cache warm)"
	return nil
}

func prepNpm(ctx context.Context, e *env) error {
	d := e.p("npm")
	if err := os.RemoveAll(d); err != nil {
		return err
	}
	if err := os.MkdirAll(d, 0o755); err != nil {
		return err
	}
	for _, f := range []string{"package.json", "package-lock.json"} {
		data, err := os.ReadFile(filepath.Join(e.path, f))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(d, f), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}
