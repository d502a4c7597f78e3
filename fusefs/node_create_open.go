package fusefs

import (
	"context"
	"os"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"ckptfs/internal/backing"
	"ckptfs/internal/ckpt"
)

// node_create_open.go owns the operations that make a new name (create,
// mknod, symlink, link; mkdir is with the directory operations) and open.

var (
	isRoot = os.Geteuid() == 0
	euid   = os.Geteuid()
	egid   = os.Getegid()
)

// setOwner gives a new entry the caller's uid (and gid, unless the parent
// directory is set-group-ID, whose group new entries inherit), then puts
// back set-user/group-ID bits that the chown cleared. Only root can chown.
// A name "" is the file open as fd (O_TMPFILE's, which has none); else
// fd is n's.
func (n *Node) setOwner(ctx context.Context, fd int, name string, mode uint32, isLink bool) {
	if !isRoot {
		return
	}
	c, ok := fuse.FromContext(ctx)
	if !ok || int(c.Uid) == euid && int(c.Gid) == egid {
		// Created as the caller would have been (a set-group-ID parent
		// gives its group either way): nothing to change.
		return
	}
	gid := int(c.Gid)
	if pst, err := backing.Fstat(n.fd); err == nil && pst.Mode&unix.S_ISGID != 0 {
		gid = -1
	}
	flags := unix.AT_SYMLINK_NOFOLLOW
	if name == "" {
		flags = unix.AT_EMPTY_PATH
	}
	if err := unix.Fchownat(fd, name, int(c.Uid), gid, flags); err != nil {
		n.r.logf("ckptfs: chown %q: %v", name, err)
	}
	if !isLink && mode&(unix.S_ISUID|unix.S_ISGID) != 0 {
		if name == "" {
			unix.Fchmod(fd, mode&07777)
		} else {
			unix.Fchmodat(fd, name, mode&07777, 0)
		}
	}
}

// finishCreate opens the new entry name as a node and fills out. undo
// removes the entry if that fails.
func (n *Node) finishCreate(ctx context.Context, name string, mode uint32, out *fuse.EntryOut, undo func()) (*fs.Inode, syscall.Errno) {
	n.setOwner(ctx, n.fd, name, mode, mode&unix.S_IFMT == unix.S_IFLNK)
	fd, err := backing.OpenPath(n.fd, name)
	if err != nil {
		undo()
		return nil, errno(err)
	}
	st, err := backing.Fstat(fd)
	if err != nil {
		unix.Close(fd)
		undo()
		return nil, errno(err)
	}
	return n.newChild(ctx, name, fd, &st, out), 0
}

func (n *Node) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	if n.r.hiddenName(n, name) {
		return nil, nil, 0, syscall.EPERM
	}
	n.r.gate.RLock()
	defer n.r.gate.RUnlock()
	if eno := n.captureChild(ctx, name, nil); eno != 0 {
		return nil, nil, 0, eno
	}
	// O_TRUNC waits until the handle is registered (a claimed inode is
	// not truncated, see attic.go).
	trunc := flags&unix.O_TRUNC != 0
	oflags := int(flags)&^(unix.O_APPEND|unix.O_TRUNC|fuse.FMODE_EXEC) | unix.O_CREAT | unix.O_NOFOLLOW | unix.O_CLOEXEC
	// created: this open made the file (a name the kernel thought free
	// may hold one made behind the mount's back, whose owner stays).
	fd, created := -1, true
	err := backing.Retry(func() error {
		var err error
		fd, err = unix.Openat(n.fd, name, oflags|unix.O_EXCL, mode&07777)
		if err == unix.EEXIST && oflags&unix.O_EXCL == 0 {
			created = false
			fd, err = unix.Openat(n.fd, name, oflags, mode&07777)
		}
		return err
	})
	if err != nil {
		return nil, nil, 0, errno(err)
	}
	if created {
		n.setOwner(ctx, n.fd, name, mode, false)
	}
	ch, st, eno := n.fileChild(ctx, name, fd, out)
	if eno != 0 {
		return nil, nil, 0, eno
	}
	child := ch.Operations().(*Node)
	// The new node is linked under name only after Create returns.
	var held bool
	n.r.settled(func() {
		p, ok := n.childPath(name)
		held = ok && n.r.priorRecorded(p, &st)
	})
	h, eno := child.newHandle(ctx, fd, int(flags), held, created && n.r.directWrites(int(flags)))
	if eno != 0 {
		return nil, nil, 0, eno
	}
	if trunc && st.Size > 0 {
		if err := backing.Retry(func() error { return unix.Ftruncate(fd, 0) }); err != nil {
			h.(interface{ release() }).release()
			return nil, nil, 0, errno(err)
		}
	}
	n.r.creditPassthrough(ctx, h)
	return ch, h, n.r.openFlags(h), 0
}

// fileChild makes the node of a file just opened as fd, named name in n
// ("" for none). The node's O_PATH fd is the file's own inode, not
// whatever name holds it now: a capture through the handle reads the
// node's file. fd is closed if it fails.
func (n *Node) fileChild(ctx context.Context, name string, fd int, out *fuse.EntryOut) (*fs.Inode, backing.Stat, syscall.Errno) {
	st, err := backing.Fstat(fd)
	if err != nil {
		unix.Close(fd)
		return nil, st, errno(err)
	}
	pfd, err := backing.Reopen(fd, unix.O_PATH)
	if err != nil {
		unix.Close(fd)
		return nil, st, errno(err)
	}
	return n.newChild(ctx, name, pfd, &st, out), st, 0
}

// Tmpfile makes a file with no name in the directory, as open(2) with
// O_TMPFILE does. Nothing is recorded for it: no name holds it. A link
// that names it later (linkat of /proc/self/fd/N) comes as a LINK of its
// node, which records that name's prior state as any new name's.
func (n *Node) Tmpfile(ctx context.Context, flags uint32, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	n.r.gate.RLock()
	defer n.r.gate.RUnlock()
	oflags := int(flags)&^(unix.O_APPEND|unix.O_TRUNC|unix.O_CREAT|fuse.FMODE_EXEC) | unix.O_TMPFILE | unix.O_CLOEXEC
	var fd int
	err := backing.Retry(func() error {
		var err error
		fd, err = unix.Openat(n.fd, ".", oflags, mode&07777)
		return err
	})
	if err != nil {
		return nil, nil, 0, errno(err)
	}
	n.setOwner(ctx, fd, "", mode, false)
	ch, _, eno := n.fileChild(ctx, "", fd, out)
	if eno != 0 {
		return nil, nil, 0, eno
	}
	h, eno := ch.Operations().(*Node).newHandle(ctx, fd, int(flags), false, n.r.directWrites(int(flags)))
	if eno != 0 {
		return nil, nil, 0, eno
	}
	n.r.creditPassthrough(ctx, h)
	return ch, h, n.r.openFlags(h), 0
}

func (n *Node) Mknod(ctx context.Context, name string, mode uint32, dev uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if n.r.hiddenName(n, name) {
		return nil, syscall.EPERM
	}
	n.r.gate.RLock()
	defer n.r.gate.RUnlock()
	if eno := n.captureChild(ctx, name, nil); eno != 0 {
		return nil, eno
	}
	if err := backing.Retry(func() error { return unix.Mknodat(n.fd, name, mode, int(dev)) }); err != nil {
		return nil, errno(err)
	}
	return n.finishCreate(ctx, name, mode, out, func() { unix.Unlinkat(n.fd, name, 0) })
}

func (n *Node) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if n.r.hiddenName(n, name) {
		return nil, syscall.EPERM
	}
	n.r.gate.RLock()
	defer n.r.gate.RUnlock()
	if eno := n.captureChild(ctx, name, nil); eno != 0 {
		return nil, eno
	}
	if err := backing.Retry(func() error { return unix.Symlinkat(target, n.fd, name) }); err != nil {
		return nil, errno(err)
	}
	return n.finishCreate(ctx, name, unix.S_IFLNK|0o777, out, func() { unix.Unlinkat(n.fd, name, 0) })
}

func (n *Node) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if n.r.hiddenName(n, name) {
		return nil, syscall.EPERM
	}
	t, ok := target.(*Node)
	if !ok {
		return nil, syscall.EXDEV
	}
	n.r.gate.RLock()
	defer n.r.gate.RUnlock()
	if t.StableAttr().Mode&unix.S_IFMT == unix.S_IFREG {
		// A new name would make an attic inode writable again.
		release, eno := t.holdWrite()
		if eno != 0 {
			return nil, eno
		}
		defer release()
	}
	if eno := n.captureChild(ctx, name, nil); eno != 0 {
		return nil, eno
	}
	// Through /proc/self/fd with AT_SYMLINK_FOLLOW: links the inode itself
	// (what linkat(fd, "", AT_EMPTY_PATH) does, without needing
	// CAP_DAC_READ_SEARCH).
	err := backing.Retry(func() error {
		return unix.Linkat(unix.AT_FDCWD, backing.ProcPath(t.fd), n.fd, name, unix.AT_SYMLINK_FOLLOW)
	})
	if err != nil {
		return nil, errno(err)
	}
	if p, ok := t.path(); ok && linkable(t.StableAttr().Mode) {
		n.r.links.add(t.StableAttr().Ino, p) // the new name is added by childAt
	}
	return n.childAt(ctx, name, out)
}

// Open reopens the backing inode. Read-only opens use FUSE passthrough
// when Options.ReadPassthrough is set
// (reads at native speed) unless the file is open through the daemon: the
// kernel does not let one inode mix passthrough and cached opens. A
// writable open uses passthrough too when the file has passthrough readers,
// or (with Options.WritePassthrough) when the file's prior state in this
// turn is recorded already (truncated now, created or written earlier in
// the turn) or its capture would be a clone (the store clones: the prior
// state is then recorded at the open, at no cost); its writes then
// bypass the daemon, so its content is captured now (if it was not) and
// again at every turn boundary while it stays open.
func (n *Node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	flags &^= uint32(unix.O_APPEND | fuse.FMODE_EXEC | unix.O_CREAT | unix.O_EXCL | unix.O_NOCTTY)
	trunc := flags&unix.O_TRUNC != 0
	flags &^= unix.O_TRUNC
	acc := flags & unix.O_ACCMODE
	if acc == unix.O_RDONLY && !trunc {
		if n.r.opts.ReadPassthrough {
			if h, ok := n.openLingering(ctx, int(flags)); ok {
				return h, n.r.openFlags(h), 0
			}
		}
		fd, err := backing.Reopen(n.fd, int(flags))
		if err != nil {
			return nil, 0, errno(err)
		}
		h, eno := n.newHandle(ctx, fd, int(flags), n.r.opts.ReadPassthrough, false)
		return h, n.r.openFlags(h), eno
	}
	n.r.gate.RLock()
	defer n.r.gate.RUnlock()
	if trunc {
		if eno := n.captureRangeLocked(ctx, 0, ckpt.ToTheEnd); eno != 0 {
			return nil, 0, eno
		}
	}
	fd, err := backing.Reopen(n.fd, int(flags))
	if err != nil {
		return nil, 0, errno(err)
	}
	wantPT := false
	if n.r.opts.WritePassthrough {
		if st, err := backing.Fstat(fd); err == nil {
			n.r.settled(func() {
				p, ok := n.path()
				wantPT = ok && (n.r.priorRecorded(p, &st) || n.r.clonesUpFront(p, fd, &st))
			})
		}
	}
	// The handle is registered before the truncate: a claimed inode (see
	// attic.go) is refused untouched.
	h, eno := n.newHandle(ctx, fd, int(flags), wantPT, false)
	if eno != 0 {
		return nil, 0, eno
	}
	if trunc {
		if err := backing.Retry(func() error { return unix.Ftruncate(fd, 0) }); err != nil {
			h.(interface{ release() }).release()
			return nil, 0, errno(err)
		}
	}
	if _, ok := h.(*ptFile); ok {
		if eno := n.captureContentLocked(ctx); eno != 0 {
			h.(*ptFile).release()
			return nil, 0, eno
		}
		n.r.creditPassthrough(ctx, h)
	}
	return h, n.r.openFlags(h), 0
}
