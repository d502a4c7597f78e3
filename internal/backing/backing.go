// Package backing changes the backing directory of a ckptfs mount on behalf of
// the history store (rewind, restore, reading the live state). It implements
// ckpt.Tree.
//
// Every operation starts from a directory fd opened before the mount covered
// the directory, and resolves the parent of the target with openat2
// (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS): a symlink anywhere in a path is an
// error, never followed, so a symlink planted where a directory used to be
// cannot redirect a write outside the project. The final element is acted on
// with *at calls that do not follow it either.
//
// The syscall primitives Tree is made of (syscalls.go: the EINTR retry, stat
// and its conversion into ckpt, opens and readlinks relative to a
// directory fd) are exported for the overlay (fusefs), which reaches the
// same backing tree through the fds of its nodes: one syscall layer for both.
package backing

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"syscall"

	"golang.org/x/sys/unix"

	"ckptfs/internal/ckpt"
	"ckptfs/internal/crashpoint"
)

// Tree is a backing directory. Its methods are safe for concurrent use.
type Tree struct {
	root  *os.File
	owned bool
}

var _ ckpt.Tree = (*Tree)(nil)

// New returns a Tree on an open directory; the caller keeps ownership of root.
func New(root *os.File) *Tree { return &Tree{root: root} }

// Open opens dir and returns a Tree on it; Close releases it.
func Open(dir string) (*Tree, error) {
	f, err := os.OpenFile(dir, os.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, err
	}
	return &Tree{root: f, owned: true}, nil
}

// Close closes the root if Open opened it.
func (t *Tree) Close() error {
	if t.owned {
		return t.root.Close()
	}
	return nil
}

// Root returns the root directory file.
func (t *Tree) Root() *os.File { return t.root }

// Avail returns the bytes free to unprivileged users on the tree's
// filesystem, and its device number.
func (t *Tree) Avail() (int64, uint64, error) {
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(t.root.Fd()), &st); err != nil {
		return 0, 0, err
	}
	var x unix.Stat_t
	if err := unix.Fstat(int(t.root.Fd()), &x); err != nil {
		return 0, 0, err
	}
	return int64(st.Bavail) * int64(st.Bsize), x.Dev, nil
}

// openat2 opens rel beneath the root without following any symlink.
func (t *Tree) openat2(rel string, flags int, mode uint32) (int, error) {
	return OpenBeneath(int(t.root.Fd()), rel, flags, mode)
}

// parent opens the parent directory of p (O_PATH) and returns it with p's
// last element. For the root itself it returns an error.
func (t *Tree) parent(p string) (int, string, error) {
	p, ok := ckpt.Clean(p)
	if !ok || p == "" {
		return -1, "", fmt.Errorf("backing: bad path %q: %w", p, syscall.EINVAL)
	}
	dir, name := path.Split(p)
	fd, err := t.openat2(dir, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return -1, "", &os.PathError{Op: "open", Path: dir, Err: err}
	}
	return fd, name, nil
}

// nodeFormat is the S_IFMT bits mknod(2) takes for t.
func nodeFormat(t ckpt.Type) (uint32, bool) {
	return t.Format(), t.IsNode()
}

func absent(err error) bool {
	return errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.ELOOP)
}

// Lstat returns the state at p; Absent when nothing is there, when a parent
// is missing, or when a parent is not a directory (a symlink counts as not).
func (t *Tree) Lstat(p string) (ckpt.State, error) {
	s, _, err := t.LstatInode(p)
	return s, err
}

// LstatInode is Lstat with the identity of the inode at p.
func (t *Tree) LstatInode(p string) (ckpt.State, ckpt.Inode, error) {
	if p == "" {
		st, err := Fstat(int(t.root.Fd()))
		if err != nil {
			return ckpt.State{}, ckpt.Inode{}, err
		}
		return StateOf(&st), InodeOf(&st), nil
	}
	pfd, name, err := t.parent(p)
	if err != nil {
		if absent(err) {
			return ckpt.State{}, ckpt.Inode{}, nil
		}
		return ckpt.State{}, ckpt.Inode{}, err
	}
	defer unix.Close(pfd)
	st, err := Lstatat(pfd, name)
	if err != nil {
		if absent(err) {
			return ckpt.State{}, ckpt.Inode{}, nil
		}
		return ckpt.State{}, ckpt.Inode{}, &os.PathError{Op: "lstat", Path: p, Err: err}
	}
	s := StateOf(&st)
	if s.Type == ckpt.Symlink {
		if err := inOwnDir(pfd, func() (err error) { s.Target, err = Readlinkat(pfd, name); return err }); err != nil {
			return s, ckpt.Inode{}, &os.PathError{Op: "readlink", Path: p, Err: err}
		}
	}
	return s, InodeOf(&st), nil
}

// Ident returns the inode number at p, 0 when nothing is there.
func (t *Tree) Ident(p string) (uint64, error) {
	if p == "" {
		st, err := Fstat(int(t.root.Fd()))
		if err != nil {
			return 0, err
		}
		return st.Ino, nil
	}
	pfd, name, err := t.parent(p)
	if err != nil {
		if absent(err) {
			return 0, nil
		}
		return 0, err
	}
	defer unix.Close(pfd)
	st, err := Lstatat(pfd, name)
	if err != nil {
		if absent(err) {
			return 0, nil
		}
		return 0, &os.PathError{Op: "lstat", Path: p, Err: err}
	}
	return st.Ino, nil
}

// Open opens the regular file at p read-only.
func (t *Tree) Open(p string) (*os.File, error) {
	fd, err := t.openat2(p, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err == unix.EACCES {
		fd, err = t.openOwn(p)
	}
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: p, Err: err}
	}
	f := os.NewFile(uintptr(fd), p)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		f.Close()
		return nil, &os.PathError{Op: "open", Path: p, Err: syscall.EINVAL}
	}
	return f, nil
}

// openOwn opens the regular file at p, whose mode does not let its owner
// read it, for its owner (ReopenRead).
func (t *Tree) openOwn(p string) (int, error) {
	pfd, err := t.openat2(p, unix.O_PATH|unix.O_NOFOLLOW, 0)
	if err != nil {
		return -1, err
	}
	defer unix.Close(pfd)
	return ReopenRead(pfd)
}

// ReadDir lists the names in the directory at p.
func (t *Tree) ReadDir(p string) ([]string, error) {
	open := func() (int, error) { return t.openat2(p, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0) }
	fd, err := open()
	if err == unix.EACCES && p != "" {
		// A directory of the user's own it may not list (0300): read
		// permission for the moment of the open (an open fd lists).
		if pfd, name, perr := t.parent(p); perr == nil {
			if release, gerr := grantOwn(pfd, name, 0o500); gerr == nil {
				fd, err = open()
				release(true)
			}
			unix.Close(pfd)
		}
	}
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: p, Err: err}
	}
	d := os.NewFile(uintptr(fd), p)
	defer d.Close()
	return d.Readdirnames(-1)
}

// Link hard-links the file at p to name in dir.
func (t *Tree) Link(p string, dir *os.File, name string) error {
	pfd, base, err := t.parent(p)
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	return pathErr("link", p, Retry(func() error { return unix.Linkat(pfd, base, int(dir.Fd()), name, 0) }))
}

// Hardlink makes to another name of the file at from, atomically: a link
// under a temporary name in to's directory (derived from to's name, so a
// step redone after a crash reuses its own leftover), renamed over to.
func (t *Tree) Hardlink(from, to string) error {
	pf, nf, err := t.parent(from)
	if err != nil {
		return err
	}
	defer unix.Close(pf)
	pt, nt, err := t.parent(to)
	if err != nil {
		return err
	}
	defer unix.Close(pt)
	return ownDir(pt, func() error { return hardlinkAt(pf, nf, pt, nt, from, to) })
}

// hardlinkAt is Hardlink from the directory pf to pt.
func hardlinkAt(pf int, nf string, pt int, nt, from, to string) error {
	src, err := Lstatat(pf, nf)
	if err != nil {
		return pathErr("link", from, err)
	}
	if src.Mode&unix.S_IFMT == unix.S_IFDIR {
		return pathErr("link", from, syscall.EISDIR)
	}
	if dst, err := Lstatat(pt, nt); err == nil && dst.Dev == src.Dev && dst.Ino == src.Ino {
		return nil // rename(2) of two names of one inode would do nothing
	}
	tmp := tempName(nt)
	link := func() error { return Retry(func() error { return unix.Linkat(pf, nf, pt, tmp, 0) }) }
	err = link()
	if errors.Is(err, syscall.EEXIST) {
		if err = removeAt(pt, tmp); err == nil {
			err = link()
		}
	}
	if err != nil {
		return pathErr("link", to, err)
	}
	crashpoint.Hit("tree.link.tmp")
	err = Retry(func() error { return unix.Renameat(pt, tmp, pt, nt) })
	if errors.Is(err, syscall.EISDIR) || errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST) {
		if err = removeAt(pt, nt); err == nil {
			err = Retry(func() error { return unix.Renameat(pt, tmp, pt, nt) })
		}
	}
	if err != nil {
		unix.Unlinkat(pt, tmp, 0)
		return pathErr("rename", to, err)
	}
	return changed(nil)
}

// tempName is the temporary name WriteFile and Hardlink use in the
// directory of name.
func tempName(name string) string {
	sum := sha256.Sum256([]byte(name))
	return TempPrefix + hex.EncodeToString(sum[:8])
}

func pathErr(op, p string, err error) error {
	if err == nil {
		return nil
	}
	return &os.PathError{Op: op, Path: p, Err: err}
}

// RemoveAll removes whatever is at p, directories recursively.
func (t *Tree) RemoveAll(p string) error {
	pfd, name, err := t.parent(p)
	if err != nil {
		if absent(err) {
			return nil
		}
		return err
	}
	defer unix.Close(pfd)
	return changed(pathErr("remove", p, ownDir(pfd, func() error { return removeAt(pfd, name) })))
}

// ownDir runs op, a change of the entries of the directory dirfd (an
// O_PATH fd will do). Root changes entries whatever a directory's mode;
// an ordinary user (a private mount's daemon, turnctl run without a
// mount) may not change them in a directory whose mode denies its owner
// write or search permission (0555: a tree made read-only, Go's module
// cache), although the user may chmod it: where the directory is the
// caller's own, ownDir gives its owner those permissions for the moment
// of op and puts the mode back after, so that a rewind restores or
// removes what is in it as root's would. Not where that chmod would clear
// the directory's set-group-ID bit for good (chmodKeeps): op then fails
// as it would have.
func ownDir(dirfd int, op func() error) error { return ownDirPerm(dirfd, 0o300, op) }

// ownDirPerm is ownDir giving the owner the permission bits perm.
func ownDirPerm(dirfd int, perm uint32, op func() error) error {
	restore, ok := grant(dirfd, perm)
	err := op()
	if ok {
		if rerr := restore(); err == nil {
			err = rerr
		}
	}
	return err
}

// grantOwn is grant of name in dirfd; release(back) puts the mode back if
// back, and must be called. Its error is EACCES where grant gives nothing.
func grantOwn(dirfd int, name string, perm uint32) (release func(back bool), err error) {
	fd, err := OpenPath(dirfd, name)
	if err != nil {
		return nil, err
	}
	restore, ok := grant(fd, perm)
	if !ok {
		unix.Close(fd)
		return nil, unix.EACCES
	}
	return func(back bool) {
		if back {
			restore()
		}
		unix.Close(fd)
	}, nil
}

// grant gives the owner of the directory open as fd, the caller's own,
// the permission bits perm, and returns how to put its mode back (unless
// changed meanwhile: restoreMode); a no-op where it has them already. ok
// is false, and nothing changed, as root, who needs none, for another's
// directory, and where the chmod would clear a set-group-ID bit
// (chmodKeeps).
func grant(fd int, perm uint32) (restore func() error, ok bool) {
	euid := unix.Geteuid()
	if euid == 0 {
		return nil, false
	}
	var st unix.Stat_t
	if Retry(func() error { return unix.Fstat(fd, &st) }) != nil || st.Uid != uint32(euid) ||
		st.Mode&unix.S_IFMT != unix.S_IFDIR || !chmodKeeps(&st) {
		return nil, false
	}
	if st.Mode&perm == perm {
		return func() error { return nil }, true
	}
	mode := st.Mode & 0o7777
	if Retry(func() error { return unix.Chmod(ProcPath(fd), mode|perm) }) != nil {
		return nil, false
	}
	return func() error { return restoreMode(fd, mode, mode|perm) }, true
}

// restoreMode puts back mode on the inode open as fd, which was given
// granted for a moment, unless its mode is no longer granted: a chmod made
// meanwhile stands.
func restoreMode(fd int, mode, granted uint32) error {
	var st unix.Stat_t
	if err := Retry(func() error { return unix.Fstat(fd, &st) }); err != nil {
		return err
	}
	if st.Mode&0o7777 != granted {
		return nil
	}
	return Retry(func() error { return unix.Chmod(ProcPath(fd), mode) })
}

// inOwnDir runs op, an operation on a name in the directory pfd; refused
// for want of search permission in a directory of the user's own (0600),
// it runs again with that permission given for the moment (ownDirPerm).
func inOwnDir(pfd int, op func() error) error {
	err := op()
	if err == unix.EACCES && unix.Geteuid() != 0 {
		return ownDirPerm(pfd, 0o100, op)
	}
	return err
}

// changed passes err on, and marks the moment after a change of the tree
// (a crash point) when it is nil.
func changed(err error) error {
	if err == nil {
		crashpoint.Hit("tree.changed")
	}
	return err
}

func removeAt(dirfd int, name string) error {
	err := Retry(func() error { return unix.Unlinkat(dirfd, name, 0) })
	if err == nil || errors.Is(err, syscall.ENOENT) {
		return nil
	}
	if !errors.Is(err, syscall.EISDIR) && !errors.Is(err, syscall.EPERM) {
		return err
	}
	open := func() (fd int, err error) {
		return unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	}
	fd, err := open()
	if err == unix.EACCES {
		// A directory of the user's own it may not list (0300, 0000),
		// which is going: its owner is given read and search
		// permission to empty it, and loses them again if that fails.
		if release, gerr := grantOwn(dirfd, name, 0o700); gerr == nil {
			fd, err = open()
			defer func() { release(err != nil) }()
		}
	}
	if err != nil {
		return err
	}
	d := os.NewFile(uintptr(fd), name)
	err = ownDir(fd, func() error {
		for {
			names, rerr := d.Readdirnames(256)
			for _, n := range names {
				if err := removeAt(fd, n); err != nil {
					return err
				}
				crashpoint.Hit("tree.remove.part")
			}
			if rerr == io.EOF || len(names) == 0 {
				return nil
			}
			if rerr != nil {
				return rerr
			}
			// Entries were removed under the iterator: restart from the top.
			if _, err := d.Seek(0, io.SeekStart); err != nil {
				return err
			}
		}
	})
	d.Close()
	if err != nil {
		return err
	}
	err = Retry(func() error { return unix.Unlinkat(dirfd, name, unix.AT_REMOVEDIR) })
	if errors.Is(err, syscall.ENOENT) {
		return nil
	}
	return err
}

// Mkdir creates a directory with exactly mode.
func (t *Tree) Mkdir(p string, mode uint32) error {
	pfd, name, err := t.parent(p)
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	if err := changed(ownDir(pfd, func() error { return Retry(func() error { return unix.Mkdirat(pfd, name, mode&0o7777) }) })); err != nil {
		return pathErr("mkdir", p, err)
	}
	return changed(pathErr("chmod", p, fchmodat2(pfd, name, mode&0o7777)))
}

// fchmodat2 chmods name in dirfd without following a final symlink
// (fchmodat2(2), Linux 6.6+), in a directory of the user's own without
// search permission too (inOwnDir).
func fchmodat2(dirfd int, name string, mode uint32) error {
	b, err := unix.BytePtrFromString(name)
	if err != nil {
		return err
	}
	return inOwnDir(dirfd, func() error {
		return Retry(func() error {
			_, _, e := unix.Syscall6(unix.SYS_FCHMODAT2, uintptr(dirfd), uintptr(unsafePointer(b)), uintptr(mode), unix.AT_SYMLINK_NOFOLLOW, 0, 0)
			if e != 0 {
				return e
			}
			return nil
		})
	})
}

// Symlink creates a symlink at p.
func (t *Tree) Symlink(target, p string) error {
	pfd, name, err := t.parent(p)
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	return changed(pathErr("symlink", p, ownDir(pfd, func() error { return Retry(func() error { return unix.Symlinkat(target, pfd, name) }) })))
}

// Mknod creates a FIFO, socket or device node at p with exactly st's mode.
func (t *Tree) Mknod(p string, st ckpt.State) error {
	f, ok := nodeFormat(st.Type)
	if !ok {
		return pathErr("mknod", p, unix.EINVAL)
	}
	pfd, name, err := t.parent(p)
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	if err := changed(ownDir(pfd, func() error {
		return Retry(func() error { return unix.Mknodat(pfd, name, f|st.Mode&0o7777, int(st.Rdev)) })
	})); err != nil {
		return pathErr("mknod", p, err)
	}
	return changed(pathErr("chmod", p, fchmodat2(pfd, name, st.Mode&0o7777)))
}

// TempPrefix starts the names of the temporary files WriteFile creates.
const TempPrefix = ".ckptfs-tmp-"

// WriteFile atomically replaces p with a new regular file.
func (t *Tree) WriteFile(p string, st ckpt.State, r io.Reader) error {
	pfd, name, err := t.parent(p)
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	return ownDir(pfd, func() error { return writeFileAt(pfd, name, p, st, r) })
}

// writeFileAt is WriteFile in the directory pfd.
func writeFileAt(pfd int, name, p string, st ckpt.State, r io.Reader) error {
	// The temporary name derives from the target's, so a step redone after
	// a crash overwrites (and then renames away) its own leftover.
	tmp := tempName(name)
	fd, err := unix.Openat(pfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		// Something else sits there (a symlink, a directory): remove it.
		if rerr := removeAt(pfd, tmp); rerr != nil {
			return pathErr("create", p, err)
		}
		fd, err = unix.Openat(pfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return pathErr("create", p, err)
		}
	}
	f := os.NewFile(uintptr(fd), tmp)
	// Failures remove the temporary; a crash (no deferred function runs)
	// leaves it, for the redo to overwrite.
	fail := func(op string, err error) error {
		f.Close()
		unix.Unlinkat(pfd, tmp, 0)
		return pathErr(op, p, err)
	}
	if err := copySparse(f, r, st.Size); err != nil {
		return fail("write", err)
	}
	if os.Geteuid() == 0 {
		f.Chown(int(st.UID), int(st.GID)) // best effort; chown clears SUID, so chmod after
	}
	if err := unix.Fchmod(fd, st.Mode&0o7777); err != nil {
		return fail("chmod", err)
	}
	if err := f.Close(); err != nil {
		unix.Unlinkat(pfd, tmp, 0)
		return pathErr("close", p, err)
	}
	crashpoint.Hit("tree.write.tmp")
	err = Retry(func() error { return unix.Renameat(pfd, tmp, pfd, name) })
	if errors.Is(err, syscall.EISDIR) || errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST) {
		if err = removeAt(pfd, name); err == nil {
			err = Retry(func() error { return unix.Renameat(pfd, tmp, pfd, name) })
		}
	}
	if err != nil {
		unix.Unlinkat(pfd, tmp, 0)
		return pathErr("rename", p, err)
	}
	return changed(nil)
}

// PatchFile changes the regular file at p in place, keeping its inode:
// the bytes of spans (offset, length pairs) are read from r at their own
// offsets and written there, then the file is cut or extended to size. A
// crash part-way leaves some spans written; the same call completes it.
func (t *Tree) PatchFile(p string, size int64, spans []int64, r io.ReaderAt) error {
	fd, err := t.openat2(p, unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: p, Err: err}
	}
	f := os.NewFile(uintptr(fd), p)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return &os.PathError{Op: "open", Path: p, Err: syscall.EINVAL}
	}
	var total int64
	for i := 1; i < len(spans); i += 2 {
		total += spans[i]
	}
	buf := make([]byte, 0, min(total, 1<<20)) // a rewind patches many files by a few blocks
	for i := 0; i+1 < len(spans); i += 2 {
		for off, end := spans[i], spans[i]+spans[i+1]; off < end; {
			b := buf[:min(int64(cap(buf)), end-off)]
			n, err := r.ReadAt(b, off)
			if n < len(b) {
				if err == nil || err == io.EOF {
					err = io.ErrUnexpectedEOF
				}
				return pathErr("read", p, err)
			}
			// Past the file's end, blocks of zeros are left holes: the
			// truncate to size below reads them as zeros (a sparse
			// file grown back by a rewind stays sparse).
			if err := writeAtSparse(f, b, off, st.Size); err != nil {
				return pathErr("write", p, err)
			}
			changed(nil)
			off += int64(n)
		}
	}
	if err := Retry(func() error { return unix.Ftruncate(fd, size) }); err != nil {
		return pathErr("truncate", p, err)
	}
	return changed(nil)
}

// Chmod sets mode on p; a symlink at p is left alone.
func (t *Tree) Chmod(p string, mode uint32) error {
	if p == "" {
		return changed(pathErr("chmod", ".", unix.Fchmod(int(t.root.Fd()), mode&0o7777)))
	}
	pfd, name, err := t.parent(p)
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	err = fchmodat2(pfd, name, mode&0o7777)
	if errors.Is(err, syscall.EOPNOTSUPP) { // a symlink: it has no mode of its own
		return nil
	}
	return changed(pathErr("chmod", p, err))
}

// Lchown sets the owner of p without following a final symlink.
func (t *Tree) Lchown(p string, uid, gid uint32) error {
	if p == "" {
		return changed(pathErr("chown", ".", unix.Fchown(int(t.root.Fd()), int(uid), int(gid))))
	}
	pfd, name, err := t.parent(p)
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	return changed(pathErr("chown", p, inOwnDir(pfd, func() error {
		return unix.Fchownat(pfd, name, int(uid), int(gid), unix.AT_SYMLINK_NOFOLLOW)
	})))
}

// Rename renames from to to.
func (t *Tree) Rename(from, to string) error { return t.rename(from, to, 0) }

// Exchange swaps a and b atomically.
func (t *Tree) Exchange(a, b string) error { return t.rename(a, b, unix.RENAME_EXCHANGE) }

func (t *Tree) rename(from, to string, flags uint) error {
	pf, nf, err := t.parent(from)
	if err != nil {
		return err
	}
	defer unix.Close(pf)
	pt, nt, err := t.parent(to)
	if err != nil {
		return err
	}
	defer unix.Close(pt)
	return changed(pathErr("rename", from, ownDir(pf, func() error {
		return ownDir(pt, func() error { return Retry(func() error { return unix.Renameat2(pf, nf, pt, nt, flags) }) })
	})))
}
