package turnctlcli

import (
	"archive/tar"
	"bufio"
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"ckptfs/internal/ckpt"
	"ckptfs/turnctl"
)

var exportCmd = &command{
	name:  "export",
	args:  "git [TURN-RANGE] | patch TURN",
	short: "turns as git commits on a private ref, or one turn as a patch",
	long: `export git: each turn becomes a commit on a private ref (--ref, default
refs/ckptfs/turns) of the project's own git repository, or of --git-dir
(created bare if missing), so that "git push origin refs/ckptfs/turns"
shares the history. HEAD, the index, the work tree and the branches are
never touched: the commits are made with git's plumbing and a temporary
index outside the project. A commit's tree is the turn's tree without .git
(a rewind's is its target's), its parent the commit of the turn before,
its message the turn's label and whole prompt with trailers (Ckptfs-Turn,
Ckptfs-Kind, Ckptfs-End, Ckptfs-Ref, Ckptfs-Programs, Ckptfs-Target), its dates the
turn's end. Symlinks are git symlinks and the executable bit is kept; what
git cannot hold (FIFOs, sockets, devices, bytes never captured) is left
out and named in the message of each commit whose tree lacks it; another
mode (0600) is kept as 644 or 755 and named in the commit of the turn
that set it (the first commit exported names every such file). Incremental: the
ref's last commit says which turn it holds, and only the closed turns
after it are added. TURN-RANGE is FIRST..LAST, FIRST.., ..LAST or one
turn (default: every closed turn). A ref that exists but was not made by
ckptfs, or whose last commit is another project's turn, is refused unless
--force, which starts it over. The ref moves
once, at the end (from the tip it was seen at): an error or a crash leaves
it as it was, and the objects already written for git gc. Git's objects
written into the project's own .git are recorded like any other write (in
the open turn, the automatic manual one if none is).

export patch TURN: prints TURN as a patch "git am" applies on the tree at
the turn before (From, Date and Subject headers, the prompt and trailers,
then what "turnctl diff" prints). A step N.K is the patch of that step's
own changes, on the tree at the end of the step before it (N.K-1, or the
turn before N for N.1), with a Ckptfs-Step trailer.

--json has no effect.`,
	opts: func() options { return &exportOptions{} },
}

type exportOptions struct {
	ref    string
	gitDir string
	force  bool
}

func (o *exportOptions) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.ref, "ref", "refs/ckptfs/turns", "export git: the `REF` the commits go on")
	fs.StringVar(&o.gitDir, "git-dir", "", "export git: the repository (`DIR`, created bare if missing; default: the project's .git)")
	fs.BoolVar(&o.force, "force", false, "export git: replace a ref that ckptfs did not make")
}

func (o *exportOptions) run(e *env, args []string) error {
	if len(args) == 0 {
		return usagef("missing what to export: git or patch")
	}
	switch args[0] {
	case "git":
		if err := wantArgs(args[1:], 0, 1); err != nil {
			return err
		}
		return o.git(e, args[1:])
	case "patch":
		if err := wantArgs(args[1:], 1, 1); err != nil {
			return err
		}
		return exportPatch(e, args[1])
	}
	return usagef("unknown export %q: use git or patch", args[0])
}

// git runs git on one repository with a temporary index.
type gitRepo struct {
	dir   string // GIT_DIR
	index string // GIT_INDEX_FILE
	tmp   string // a directory of our own, outside the project
}

func (g *gitRepo) cmd(stdin io.Reader, args ...string) *exec.Cmd {
	c := exec.Command("git", args...)
	c.Dir = g.tmp
	c.Env = append(os.Environ(), "GIT_DIR="+g.dir, "GIT_INDEX_FILE="+g.index)
	c.Stdin = stdin
	return c
}

// run runs git and returns its output, trimmed; a failure is one line
// with git's own message.
func (g *gitRepo) run(stdin io.Reader, args ...string) (string, error) {
	c := g.cmd(stdin, args...)
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	if err := c.Run(); err != nil {
		msg := strings.TrimSpace(errb.String())
		if msg == "" {
			msg = err.Error()
		}
		return "", fmt.Errorf("git %s: %s", args[0], strings.ReplaceAll(msg, "\n", "; "))
	}
	return strings.TrimSpace(out.String()), nil
}

// gitDir finds (or, for --git-dir, makes) the repository.
func (o *exportOptions) repo(e *env) (string, error) {
	if _, err := exec.LookPath("git"); err != nil {
		return "", errors.New("export git needs the git binary on $PATH")
	}
	if o.gitDir == "" {
		d := filepath.Join(e.proj.root, ".git")
		if _, err := os.Stat(d); err != nil {
			return "", usagef("%s has no git repository (.git): name one with --git-dir DIR (made bare if missing)", e.proj.root)
		}
		return d, nil
	}
	d := absIn(e.proj.base, o.gitDir)
	if _, err := os.Stat(d); err == nil {
		return d, nil
	}
	if out, err := exec.Command("git", "init", "-q", "--bare", d).CombinedOutput(); err != nil {
		return "", fmt.Errorf("git init --bare %s: %s", d, strings.TrimSpace(string(out)))
	}
	return d, nil
}

// exportTurn is one turn to make a commit of.
type exportTurn struct {
	t      ckpt.Turn
	commit string
}

func (o *exportOptions) git(e *env, args []string) error {
	if !strings.HasPrefix(o.ref, "refs/") || strings.HasPrefix(o.ref, "refs/heads/") {
		return usagef("--ref %s: name a ref under refs/ other than a branch (refs/heads/)", o.ref)
	}
	lg, err := e.h.Log(e.ctx, turnctl.LogRequest{})
	if err != nil {
		return err
	}
	turns := lg.Turns
	sort.Slice(turns, func(i, j int) bool { return turns[i].Num < turns[j].Num })
	first, last := turns[0].Num, turns[len(turns)-1].Num
	if len(args) == 1 {
		if first, last, err = exportRange(turns, args[0]); err != nil {
			return err
		}
	}
	dir, err := o.repo(e)
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "ckptfs-export-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	g := &gitRepo{dir: dir, index: filepath.Join(tmp, "index"), tmp: tmp}
	if _, err := g.run(nil, "rev-parse", "--git-dir"); err != nil {
		return fmt.Errorf("%s is not a git repository: %v", dir, err)
	}
	// Where the ref is: its tip and the turn that tip holds.
	tip, _ := g.run(nil, "rev-parse", "-q", "--verify", o.ref+"^{commit}")
	old := tip
	base, haveBase := uint64(0), false
	if tip != "" {
		msg, err := g.run(nil, "cat-file", "commit", tip)
		if err != nil {
			return err
		}
		n, ok := trailerTurn(msg)
		switch {
		case !ok && !o.force:
			return usagef("%s in %s was not made by ckptfs (its last commit has no Ckptfs-Turn trailer): name another --ref, or --force to replace it", o.ref, dir)
		case ok && n > turns[len(turns)-1].Num && !o.force:
			return usagef("%s in %s holds turn %d, which this history does not have: name another --ref, or --force to start it over", o.ref, dir, n)
		case ok && !o.force && !sameTurn(msg, turns, n):
			// Another project's export: a delta on its tree would
			// give every commit a wrong tree.
			return usagef("%s in %s holds turn %d of another history (its commit is not this project's turn %d): name another --ref, or --force to start it over", o.ref, dir, n, n)
		case !ok || o.force:
			tip = ""
		default:
			if first <= n {
				first = n + 1
			}
			base, haveBase = n, n >= turns[0].Num
		}
	}
	var todo []exportTurn
	for _, t := range turns {
		if t.Num >= first && t.Num <= last && !t.Open {
			todo = append(todo, exportTurn{t: t})
		}
	}
	if len(todo) == 0 {
		if tip != "" {
			fmt.Fprintf(e.stdout, "%s in %s is up to date (turn %d)\n", o.ref, dir, base)
		} else {
			fmt.Fprintf(e.stdout, "no closed turn to export\n")
		}
		return nil
	}
	x := &gitExport{e: e, g: g, tree: map[string]string{}}
	if err := x.start(tip, haveBase); err != nil {
		return err
	}
	defer x.stop()
	parent := tip
	for i := range todo {
		t := &todo[i]
		req := turnctl.TreeRequest{Turn: strconv.FormatUint(t.t.Num, 10)}
		if haveBase && x.left != nil { // nil: the tip names only some of what it lacks
			req.Base = strconv.FormatUint(base, 10)
		}
		if t.commit, err = x.commit(t.t, req, parent); err != nil {
			return fmt.Errorf("exporting turn %d: %w (%s is unchanged)", t.t.Num, err, o.ref)
		}
		parent, base, haveBase = t.commit, t.t.Num, true
	}
	zero := strings.Repeat("0", len(parent))
	if old == "" {
		old = zero
	}
	if _, err := g.run(nil, "update-ref", "-m", "ckptfs export", o.ref, parent, old); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "exported %s to %s in %s: %s\n", turnList(todo), o.ref, dir, plural(len(todo), "commit"))
	return nil
}

func turnList(todo []exportTurn) string {
	a, b := todo[0].t.Num, todo[len(todo)-1].t.Num
	if a == b {
		return fmt.Sprintf("turn %d", a)
	}
	return fmt.Sprintf("turns %d-%d", a, b)
}

// exportRange parses FIRST..LAST, FIRST.., ..LAST or TURN.
func exportRange(turns []ckpt.Turn, spec string) (uint64, uint64, error) {
	a, b, isRange := strings.Cut(spec, "..")
	if !isRange {
		b = a
	}
	first, last := turns[0].Num, turns[len(turns)-1].Num
	var err error
	if a != "" {
		if first, err = turnNum(turns, a); err != nil {
			return 0, 0, err
		}
	}
	if b != "" {
		if last, err = turnNum(turns, b); err != nil {
			return 0, 0, err
		}
	}
	if first > last {
		return 0, 0, usagef("%q: the first turn comes after the last", spec)
	}
	return first, last, nil
}

// turnNum finds a turn by number or ref:ID among turns.
func turnNum(turns []ckpt.Turn, spec string) (uint64, error) {
	have := fmt.Sprintf("turns are %d-%d", turns[0].Num, turns[len(turns)-1].Num)
	if ref, ok := strings.CutPrefix(spec, "ref:"); ok {
		for _, t := range turns {
			for _, r := range t.Refs {
				if r == ref {
					return t.Num, nil
				}
			}
		}
		return 0, usagef("no turn has ref %q (%s)", ref, have)
	}
	n, err := strconv.ParseUint(spec, 10, 64)
	if a, b, ok := strings.Cut(spec, "-"); ok && err != nil && isDigits(a) && isDigits(b) {
		x, _ := strconv.ParseUint(a, 10, 64)
		y, _ := strconv.ParseUint(b, 10, 64)
		return 0, usagef("%q is not a turn: a range of turns is FIRST..LAST (%d..%d)", spec, min(x, y), max(x, y))
	}
	if err != nil || spec[0] == '+' {
		return 0, usagef("%q is not a turn: use a number, 0, or ref:ID (%s)", spec, have)
	}
	if n < turns[0].Num || n > turns[len(turns)-1].Num {
		return 0, usagef("no turn %d (%s)", n, have)
	}
	return n, nil
}

// sameTurn reports whether commit (an object) is the export of this
// history's turn n: its Ckptfs-End trailer is n's end (to the
// nanosecond; unlike its start, which a merge of the turns before it
// moves, a turn's end never changes), or (an export older than the
// trailer) its commit date is. A turn this history no longer keeps
// cannot be told: it counts as the same (the next commit then takes a
// whole tree).
func sameTurn(commit string, turns []ckpt.Turn, n uint64) bool {
	i, found := slices.BinarySearchFunc(turns, n, func(t ckpt.Turn, n uint64) int { return cmp.Compare(t.Num, n) })
	if !found {
		return true
	}
	t := turns[i]
	end := t.End
	if end.IsZero() {
		end = t.Start
	}
	for _, l := range strings.Split(commit, "\n") {
		if v, ok := strings.CutPrefix(l, "Ckptfs-End: "); ok {
			return strings.TrimSpace(v) == end.UTC().Format(time.RFC3339Nano)
		}
	}
	for _, l := range strings.Split(commit, "\n") {
		if v, ok := strings.CutPrefix(l, "committer "); ok {
			f := strings.Fields(v)
			return len(f) >= 2 && f[len(f)-2] == strconv.FormatInt(end.Unix(), 10)
		}
		if l == "" {
			break // the end of the headers
		}
	}
	return false
}

// trailerTurn reads the Ckptfs-Turn trailer of a commit object.
func trailerTurn(commit string) (uint64, bool) {
	var n uint64
	ok := false
	for _, l := range strings.Split(commit, "\n") {
		if v, found := strings.CutPrefix(l, "Ckptfs-Turn: "); found {
			if x, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64); err == nil {
				n, ok = x, true
			}
		}
	}
	return n, ok
}

// gitExport makes the commits: the temporary index holds the tree of
// the last commit made, tree mirrors it (path -> "MODE SHA"), and one
// git hash-object process writes every blob.
type gitExport struct {
	e    *env
	g    *gitRepo
	tree map[string]string
	// left: the paths of the last commit's turn that its tree lacks (git
	// cannot hold them), with why; every commit names them all.
	left map[string]string
	hash *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Reader
	n    int // temporary blob files written
}

// start loads the tip's tree into the index (when the next turn is a
// delta on it) and starts hash-object.
func (x *gitExport) start(tip string, delta bool) error {
	if tip != "" && delta {
		if _, err := x.g.run(nil, "read-tree", tip+"^{tree}"); err != nil {
			return err
		}
		msg, err := x.g.run(nil, "cat-file", "commit", tip)
		if err != nil {
			return err
		}
		x.left = leftIn(msg)
		out, err := x.g.run(nil, "ls-files", "-s", "-z")
		if err != nil {
			return err
		}
		for _, rec := range strings.Split(out, "\x00") {
			meta, p, ok := strings.Cut(rec, "\t")
			if f := strings.Fields(meta); ok && len(f) == 3 {
				x.tree[p] = f[0] + " " + f[1]
			}
		}
	}
	x.hash = x.g.cmd(nil, "hash-object", "-w", "--no-filters", "--stdin-paths")
	var err error
	if x.in, err = x.hash.StdinPipe(); err != nil {
		return err
	}
	pipe, err := x.hash.StdoutPipe()
	if err != nil {
		return err
	}
	x.out = bufio.NewReader(pipe)
	return x.hash.Start()
}

func (x *gitExport) stop() {
	if x.hash != nil && x.hash.Process != nil {
		x.in.Close()
		x.hash.Wait()
	}
}

// blob writes bytes as a git blob and returns its id.
func (x *gitExport) blob(r io.Reader) (string, error) {
	x.n++
	p := filepath.Join(x.g.tmp, "blob"+strconv.Itoa(x.n%2))
	f, err := os.Create(p)
	if err != nil {
		return "", err
	}
	_, err = io.Copy(f, r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", err
	}
	if _, err := io.WriteString(x.in, p+"\n"); err != nil {
		return "", fmt.Errorf("git hash-object: %w", err)
	}
	line, err := x.out.ReadString('\n')
	if err != nil {
		return "", fmt.Errorf("git hash-object: %w", err)
	}
	return strings.TrimSpace(line), nil
}

// commit makes the commit of turn t, whose tree (or delta) req asks for.
func (x *gitExport) commit(t ckpt.Turn, req turnctl.TreeRequest, parent string) (string, error) {
	rep, err := x.e.h.Tree(x.e.ctx, req)
	if err != nil {
		return "", err
	}
	defer rep.Body.Close()
	var index bytes.Buffer
	var notes []string // of this turn's changes only
	if req.Base == "" || x.left == nil {
		x.left = map[string]string{}
	}

	set := func(p, v string) {
		if v == "" {
			if _, ok := x.tree[p]; !ok {
				return
			}
			delete(x.tree, p)
			fmt.Fprintf(&index, "0 %s\t%s\x00", strings.Repeat("0", 40), p)
			return
		}
		x.tree[p] = v
		fmt.Fprintf(&index, "%s\t%s\x00", v, p)
	}
	// leave notes p, which the tree then lacks.
	leave := func(p, why string) {
		if _, ok := x.tree[p]; ok {
			set(p, "")
		}
		x.left[p] = p + " (" + why + ")"
	}
	// remove drops p and what lies below it.
	remove := func(p string) {
		for q := range x.left {
			if q == p || strings.HasPrefix(q, p+"/") {
				delete(x.left, q)
			}
		}
		if _, ok := x.tree[p]; ok {
			set(p, "") // a file: nothing below it
			return
		}
		for q := range x.tree {
			if strings.HasPrefix(q, p+"/") {
				set(q, "")
			}
		}
	}
	if req.Base == "" {
		for p := range x.tree {
			set(p, "")
		}
	}
	err = turnctl.ReadTree(rep.Body, func(h *tar.Header, body io.Reader) error {
		p := strings.TrimSuffix(h.Name, "/")
		if _, in := ckpt.Under(p, ckpt.GitDir); in || p == "." {
			return nil
		}
		if h.PAXRecords[turnctl.PAXDeleted] != "" {
			remove(p)
			return nil
		}
		if h.PAXRecords[turnctl.PAXLost] != "" {
			remove(p)
			leave(p, "bytes never captured")
			return nil
		}
		delete(x.left, p)
		switch {
		case h.PAXRecords[turnctl.PAXSocket] != "":
			leave(p, "a socket")
		case h.Typeflag == tar.TypeDir:
			if _, ok := x.tree[p]; ok {
				set(p, "") // a file that became a directory
			}
		case h.Typeflag == tar.TypeReg, h.Typeflag == tar.TypeLink:
			if h.Typeflag == tar.TypeLink {
				// A hard link: the same bytes as its first name's.
				if v := x.tree[h.Linkname]; v != "" {
					set(p, v)
				} else {
					leave(p, leftLinkPrefix[2:]+h.Linkname+", which is not exported")
				}
				return nil
			}
			sha, err := x.blob(body)
			if err != nil {
				return err
			}
			mode := "100644"
			if h.Mode&0o100 != 0 {
				mode = "100755"
			}
			if m := h.Mode & 0o7777; m != 0o644 && m != 0o755 {
				notes = append(notes, fmt.Sprintf("%s (mode %04o, kept as %s)", p, m, mode[3:]))
			}
			set(p, mode+" "+sha)
		case h.Typeflag == tar.TypeSymlink:
			sha, err := x.blob(strings.NewReader(h.Linkname))
			if err != nil {
				return err
			}
			set(p, "120000 "+sha)
		case h.Typeflag == tar.TypeFifo:
			leave(p, "a FIFO")
		case h.Typeflag == tar.TypeChar, h.Typeflag == tar.TypeBlock:
			leave(p, "a device")
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	if index.Len() > 0 {
		if _, err := x.g.run(&index, "update-index", "-z", "--index-info"); err != nil {
			return "", err
		}
	}
	tree, err := x.g.run(nil, "write-tree")
	if err != nil {
		return "", err
	}
	args := []string{"commit-tree", tree}
	if parent != "" {
		args = append(args, "-p", parent)
	}
	for _, n := range x.left {
		notes = append(notes, n)
	}
	c := x.g.cmd(strings.NewReader(commitMessage(x.e, t, notes)), args...)
	end := t.End
	if end.IsZero() {
		end = t.Start
	}
	date := fmt.Sprintf("@%d +0000", end.Unix())
	c.Env = append(c.Env, "GIT_AUTHOR_NAME=ckptfs", "GIT_AUTHOR_EMAIL=ckptfs@localhost", "GIT_AUTHOR_DATE="+date,
		"GIT_COMMITTER_NAME=ckptfs", "GIT_COMMITTER_EMAIL=ckptfs@localhost", "GIT_COMMITTER_DATE="+date)
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	if err := c.Run(); err != nil {
		return "", fmt.Errorf("git commit-tree: %s", strings.TrimSpace(errb.String()))
	}
	return strings.TrimSpace(out.String()), nil
}

// subject is a turn's one line: its label, else what it was.
func subject(t ckpt.Turn) string {
	switch {
	case t.Label != "":
		return t.Label
	case t.Kind == ckpt.KindInitial:
		return "the tree when history began"
	case t.Kind == ckpt.KindManual:
		return "changes made while no turn was open"
	case t.Kind == ckpt.KindOffline:
		return "changed while unmounted"
	}
	return fmt.Sprintf("turn %d (%s)", t.Num, t.Kind)
}

// leftReasons are the reasons of the notes of paths a commit's tree
// lacks (a hard link's: its prefix), as leftIn reads them back.
var leftReasons = []string{" (bytes never captured)", " (a socket)", " (a FIFO)", " (a device)"}

const leftLinkPrefix = " (a hard link of "

// leftIn reads back the paths a commit's tree lacks from its message
// (commitMessage): nil (the next commit then takes a whole tree) when
// the message names only some of them.
func leftIn(msg string) map[string]string {
	left := map[string]string{}
	// The last heading: the notes follow the prompt, which may quote one
	// (commitMessage then writes a heading of its own, if with no notes).
	i := strings.LastIndex(msg, "\n"+leftHeading+"\n")
	if i < 0 {
		return left
	}
	notes := msg[i+len(leftHeading)+2:]
	for _, l := range strings.Split(notes, "\n") {
		if l == "" {
			break // the blank line before the trailers
		}
		n, ok := strings.CutPrefix(l, "  ")
		if !ok {
			return nil // a name with a newline: its note is not one line
		}
		if strings.HasPrefix(l, "  and ") && strings.HasSuffix(l, " more") && !strings.Contains(l, " (") {
			return nil
		}
		for _, r := range leftReasons {
			if p, ok := strings.CutSuffix(n, r); ok {
				left[p] = n
			}
		}
		if i := strings.LastIndex(n, leftLinkPrefix); i > 0 && strings.HasSuffix(n, ", which is not exported)") {
			left[n[:i]] = n
		}
	}
	return left
}

const leftHeading = "ckptfs: not in git (git cannot hold it):"

// commitMessage is the label, the whole prompt, the notes and the
// trailers. The prompt is read with show (a log has none), limited to a
// path no turn changes, so that it does no diff work.
func commitMessage(e *env, t ckpt.Turn, notes []string) string {
	var b strings.Builder
	b.WriteString(subject(t) + "\n")
	if t.Label != "" && t.Prompt == "" {
		if rep, err := e.h.Show(e.ctx, turnctl.ShowRequest{Turn: strconv.FormatUint(t.Num, 10), Paths: []string{ckpt.GitDir + "/ckptfs-none"}}); err == nil {
			t.Prompt = rep.Turn.Prompt
		}
	}
	if p := promptBody(t); p != "" {
		b.WriteString("\n" + p + "\n")
	}
	if len(notes) > 0 || strings.Contains(b.String(), leftHeading) {
		sort.Strings(notes)
		b.WriteString("\n" + leftHeading + "\n")
		for i, n := range notes {
			if i == 20 {
				fmt.Fprintf(&b, "  and %d more\n", len(notes)-i)
				break
			}
			b.WriteString("  " + n + "\n")
		}
	}
	b.WriteString("\n" + trailers(t))
	return b.String()
}

// promptBody is the whole prompt without its first line when that line
// is the label (the subject already).
func promptBody(t ckpt.Turn) string {
	p := strings.TrimSpace(t.Prompt)
	if first, rest, _ := strings.Cut(p, "\n"); strings.TrimSpace(first) == t.Label {
		p = strings.TrimSpace(rest)
	}
	return p
}

func trailers(t ckpt.Turn) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Ckptfs-Turn: %d\nCkptfs-Kind: %s\n", t.Num, t.Kind)
	// Which history the turn is of: an incremental export checks it.
	end := t.End
	if end.IsZero() {
		end = t.Start
	}
	fmt.Fprintf(&b, "Ckptfs-End: %s\n", end.UTC().Format(time.RFC3339Nano))
	for _, r := range t.Refs {
		fmt.Fprintf(&b, "Ckptfs-Ref: %s\n", oneLine(r))
	}
	if len(t.Programs) > 0 {
		fmt.Fprintf(&b, "Ckptfs-Programs: %s\n", oneLine(strings.Join(t.Programs, ", ")))
	}
	if t.Target != nil {
		fmt.Fprintf(&b, "Ckptfs-Target: %d\n", *t.Target)
	}
	return b.String()
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// exportPatch prints turn spec as a mail git am applies on the tree at
// the turn before.
func exportPatch(e *env, spec string) error {
	// A path no turn changes: the turn and its prompt, no diff work.
	sh, err := e.h.Show(e.ctx, turnctl.ShowRequest{Turn: spec, Paths: []string{ckpt.GitDir + "/ckptfs-none"}})
	if err != nil {
		return err
	}
	t := sh.Turn
	if t.Num == 0 {
		return usagef("turn 0 is where history begins: it has no turn before it to patch")
	}
	if t.Open {
		return usagef("turn %d is still open: end it first", t.Num)
	}
	if start, err := e.startsHistory(t.Num); err != nil {
		return err
	} else if start {
		return fmt.Errorf("turn %d is where history starts now: its own changes were forgotten with the turns before it, so it has no patch", t.Num)
	}
	// A step (N.K) is the patch of its own changes: from the end of the
	// step before it (of the turn before, for the first) to its end.
	from, to := strconv.FormatUint(t.Prev(), 10), strconv.FormatUint(t.Num, 10)
	subj, end, tr := subject(t), t.End, trailers(t)
	if st := sh.Step; st != nil {
		if st.Num > 1 {
			from = fmt.Sprintf("%d.%d", st.Turn, st.Num-1)
		}
		to = fmt.Sprintf("%d.%d", st.Turn, st.Num)
		subj += fmt.Sprintf(", step %s%s", to, stepText(*st))
		if !st.End.IsZero() {
			end = st.End
		}
		tr += fmt.Sprintf("Ckptfs-Step: %s\n", to)
	}
	d, err := e.h.Diff(e.ctx, turnctl.DiffRequest{From: from, To: to})
	if err != nil {
		return err
	}
	body := ""
	if p := promptBody(t); p != "" {
		body = p + "\n\n"
	}
	fmt.Fprintf(e.stdout, "From %s Mon Sep 17 00:00:00 2001\nFrom: ckptfs <ckptfs@localhost>\nDate: %s\nSubject: [PATCH] %s\nMIME-Version: 1.0\nContent-Type: text/plain; charset=UTF-8\nContent-Transfer-Encoding: 8bit\n\n%s%s---\n",
		strings.Repeat("0", 40), end.UTC().Format("Mon, 2 Jan 2006 15:04:05 -0700"), oneLine(subj), body, tr)
	e.color = false
	e.printPatches(d.Changes)
	if g := e.gitSummary(d.Changes, d.Stats); g != nil {
		fmt.Fprintf(e.stdout, "# ckptfs: left out the changes inside .git (git: %s): git apply does not write there\n", g.Summary())
	}
	return nil
}

// isDigits reports whether s is a non-empty run of decimal digits.
func isDigits(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}
