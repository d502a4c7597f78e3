package turnctlcli

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"

	"ckptfs/turnctl"
)

var checkoutCmd = &command{
	name:  "checkout",
	args:  "TURN DIR",
	short: "write the tree as it was at the end of TURN into a new directory",
	long: `Writes the whole tree as it was at the end of TURN into DIR, to run the old
tests, say: exactly what a rewind to TURN would leave in the project (paths,
types, modes, symlink targets, hard links, FIFOs and sockets; owners and
device nodes where you may set them, as root), .git included, the store and
the --exclude patterns (not versioned) left out. The project is only read,
mounted or not: nothing in it changes.

DIR is relative to the current directory (with -C: to that directory). It
must not exist or be empty, and must lie outside the project (a checkout
inside it would change it). A file whose bytes at TURN were never captured
(changed while the project was not mounted) is not written: it is named,
and the checkout fails (exit 1) once everything else is written. A crash
or an error leaves DIR partial (remove it and run again), never the
project changed. --json has no effect.`,
	opts: func() options { return &checkoutOptions{} },
}

type checkoutOptions struct{}

func (o *checkoutOptions) addFlags(fs *pflag.FlagSet) {}

func (o *checkoutOptions) run(e *env, args []string) error {
	if err := wantArgs(args, 2, 2); err != nil {
		return err
	}
	dir := absIn(e.proj.base, args[1])
	if err := outsideProject(e.proj, dir); err != nil {
		return err
	}
	fi, err := os.Stat(dir)
	exists := err == nil
	switch {
	case exists && !fi.IsDir():
		return usagef("%s exists and is not a directory", dir)
	case exists:
		names, err := readNames(dir)
		if err != nil {
			return err
		}
		if len(names) > 0 {
			return usagef("%s is not empty (a checkout goes into a new or empty directory)", dir)
		}
	case !errors.Is(err, os.ErrNotExist):
		return err
	}
	rep, err := e.h.Tree(e.ctx, turnctl.TreeRequest{Turn: args[0]})
	if err != nil {
		return err
	}
	defer rep.Body.Close()
	if !exists {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
	}
	x := newExtractor(dir)
	err = turnctl.ReadTree(rep.Body, x.entry)
	if err == nil {
		err = x.finish()
	}
	at := fmt.Sprintf("turn %d", rep.Turn)
	if rep.Step > 0 {
		at = fmt.Sprintf("step %d.%d", rep.Turn, rep.Step)
	}
	if err != nil {
		return fmt.Errorf("checkout of %s into %s failed, leaving it partial (the project was not changed): %w", at, dir, err)
	}
	fmt.Fprintf(e.stdout, "%s checked out into %s: %s\n", at, printable(dir), x.counts())
	if len(x.notMade) > 0 {
		fmt.Fprintf(e.stderr, "turnctl checkout: not made (not permitted; a rewind as root makes them): %s\n", strings.Join(x.notMade, ", "))
	}
	if len(x.lost) > 0 {
		return fmt.Errorf("checkout of %s into %s is incomplete: the bytes of %s at the end of %s were never captured (changed while the project was not mounted), so not written: %s",
			at, dir, plural(len(x.lost), "file"), at, strings.Join(x.lost, ", "))
	}
	return nil
}

// outsideProject refuses a directory inside the project (or the project
// itself): writing there would change what it is to copy.
func outsideProject(p *project, dir string) error {
	real := dir
	// The nearest existing ancestor may reach the project through a
	// symlink.
	for d, rest := dir, ""; ; {
		if r, err := filepath.EvalSymlinks(d); err == nil {
			real = filepath.Join(r, rest)
			break
		}
		if d == filepath.Dir(d) {
			break
		}
		rest = filepath.Join(filepath.Base(d), rest)
		d = filepath.Dir(d)
	}
	for _, c := range []string{dir, real} {
		r, err := filepath.Rel(p.root, c)
		if err == nil && r != ".." && !strings.HasPrefix(r, "../") {
			return usagef("%s is inside the project %s: check out into a directory outside it", dir, p.root)
		}
	}
	return nil
}

func readNames(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(1)
}

// extractor writes a tree stream into a directory it made (or found
// empty): every entry new, never following a symlink, directories' modes
// set last (a read-only one must not stop its children).
type extractor struct {
	dir     string
	root    bool            // euid 0: owners are set too
	dirs    map[string]bool // the directories made, by entry name
	fixDirs []*tar.Header   // their modes and owners, set at the end
	n       map[byte]int    // entries by type
	lost    []string
	notMade []string
}

func newExtractor(dir string) *extractor {
	return &extractor{dir: dir, root: os.Geteuid() == 0, dirs: map[string]bool{".": true}, n: map[byte]int{}}
}

func (x *extractor) entry(h *tar.Header, body io.Reader) error {
	name := strings.TrimSuffix(h.Name, "/")
	if name == "." {
		x.fixDirs = append(x.fixDirs, h)
		return nil
	}
	if !x.dirs[parentName(name)] {
		return fmt.Errorf("%s: its directory is not in the tree stream", name)
	}
	p := filepath.Join(x.dir, name)
	mode := uint32(h.Mode & 0o7777)
	if _, ok := h.PAXRecords[turnctl.PAXLost]; ok {
		x.lost = append(x.lost, name)
		return nil
	}
	if _, ok := h.PAXRecords[turnctl.PAXDeleted]; ok {
		return nil
	}
	var err error
	kind := h.Typeflag
	switch {
	case h.PAXRecords[turnctl.PAXSocket] != "":
		err, kind = x.node(p, name, unix.S_IFSOCK|mode, 0), tar.TypeFifo
	case h.Typeflag == tar.TypeDir:
		if err = os.Mkdir(p, 0o700); err == nil {
			x.dirs[name] = true
			x.fixDirs = append(x.fixDirs, h)
		}
	case h.Typeflag == tar.TypeReg:
		err = x.file(p, h, body)
	case h.Typeflag == tar.TypeSymlink:
		if err = os.Symlink(h.Linkname, p); err == nil && x.root {
			err = os.Lchown(p, h.Uid, h.Gid)
		}
	case h.Typeflag == tar.TypeLink:
		if !turnctl.ValidTreeName(h.Linkname) {
			return fmt.Errorf("%s: a hard link to a bad name %q", name, h.Linkname)
		}
		err = unix.Linkat(unix.AT_FDCWD, filepath.Join(x.dir, h.Linkname), unix.AT_FDCWD, p, 0)
	case h.Typeflag == tar.TypeFifo:
		err = x.node(p, name, unix.S_IFIFO|mode, 0)
	case h.Typeflag == tar.TypeChar, h.Typeflag == tar.TypeBlock:
		t := uint32(unix.S_IFCHR)
		if h.Typeflag == tar.TypeBlock {
			t = unix.S_IFBLK
		}
		err = x.node(p, name, t|mode, unix.Mkdev(uint32(h.Devmajor), uint32(h.Devminor)))
	default:
		return fmt.Errorf("%s: an entry of unknown type %q", name, h.Typeflag)
	}
	if err != nil {
		return err
	}
	x.n[kind]++
	return nil
}

// file writes a regular file: its bytes, then its owner, then its mode
// (a chown clears the setuid bits).
func (x *extractor) file(p string, h *tar.Header, body io.Reader) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, body)
	if err == nil && x.root {
		err = f.Chown(h.Uid, h.Gid)
	}
	if err == nil {
		err = unix.Fchmod(int(f.Fd()), uint32(h.Mode&0o7777))
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// node makes a FIFO, socket or device node; one the kernel does not let
// us make (a device as anyone but root) is named, not an error.
func (x *extractor) node(p, name string, mode uint32, dev uint64) error {
	err := unix.Mknod(p, mode, int(dev))
	if errors.Is(err, unix.EPERM) && mode&unix.S_IFMT != unix.S_IFIFO && mode&unix.S_IFMT != unix.S_IFSOCK {
		x.notMade = append(x.notMade, name)
		return nil
	}
	if err != nil {
		return err
	}
	return x.meta(p, mode&0o7777, -1, -1)
}

// meta sets a path's owner (as root, uid >= 0) and then its exact mode.
func (x *extractor) meta(p string, mode uint32, uid, gid int) error {
	if x.root && uid >= 0 {
		if err := os.Lchown(p, uid, gid); err != nil {
			return err
		}
	}
	return unix.Fchmodat(unix.AT_FDCWD, p, mode, 0)
}

// finish sets the directories' owners and modes, children first, the
// root's last.
func (x *extractor) finish() error {
	for i := len(x.fixDirs) - 1; i >= 0; i-- {
		h := x.fixDirs[i]
		p := filepath.Join(x.dir, strings.TrimSuffix(h.Name, "/"))
		if err := x.meta(p, uint32(h.Mode&0o7777), h.Uid, h.Gid); err != nil {
			return err
		}
	}
	return nil
}

// counts says what was written: "3 files, 2 directories, 1 symlink".
func (x *extractor) counts() string {
	var parts []string
	add := func(n int, what string) {
		if n > 0 {
			parts = append(parts, plural(n, what))
		}
	}
	add(x.n[tar.TypeReg], "file")
	if d := x.n[tar.TypeDir]; d == 1 {
		parts = append(parts, "1 directory")
	} else if d > 1 {
		parts = append(parts, fmt.Sprintf("%d directories", d))
	}
	add(x.n[tar.TypeSymlink], "symlink")
	add(x.n[tar.TypeLink], "hard link")
	add(x.n[tar.TypeFifo]+x.n[tar.TypeChar]+x.n[tar.TypeBlock], "FIFO, socket or device node")
	if len(parts) == 0 {
		return "empty"
	}
	return strings.Join(parts, ", ")
}

func parentName(name string) string {
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		return name[:i]
	}
	return "."
}
