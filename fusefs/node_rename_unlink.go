package fusefs

import (
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"golang.org/x/sys/unix"
)

// hasWriterChild reports whether the node go-fuse knows for name has a
// handle open for writing (its bytes can still change, so the store must
// not keep them by hard link).
func (n *Node) hasWriterChild(name string) bool {
	ch := n.GetChild(name)
	if ch == nil {
		return false
	}
	c, ok := ch.Operations().(*Node)
	if !ok {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.writers+c.ptWriters > 0
}

func (n *Node) Unlink(ctx context.Context, name string) syscall.Errno {
	if n.r.hiddenName(n, name) {
		return syscall.EPERM
	}
	n.r.gate.RLock()
	defer n.r.gate.RUnlock()
	if eno := n.captureChild(ctx, name, !n.hasWriterChild(name)); eno != 0 {
		return eno
	}
	return errno(retry(func() error { return unix.Unlinkat(n.fd, name, 0) }))
}

func (n *Node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	np, ok := newParent.(*Node)
	if !ok {
		return syscall.EXDEV
	}
	r := n.r
	if r.hiddenName(n, name) || r.hiddenName(np, newName) {
		return syscall.EPERM
	}
	if flags&unix.RENAME_WHITEOUT != 0 {
		return syscall.EINVAL
	}
	exchange := flags&unix.RENAME_EXCHANGE != 0
	r.gate.RLock()
	defer r.gate.RUnlock()

	sst, err := lstatAt(n.fd, name)
	if err != nil {
		return errno(err)
	}
	dst, derr := lstatAt(np.fd, newName)
	dstExists := derr == nil
	if derr != nil && derr != unix.ENOENT {
		return errno(derr)
	}
	if flags&unix.RENAME_NOREPLACE != 0 && dstExists {
		return syscall.EEXIST
	}
	if exchange && !dstExists {
		return syscall.ENOENT
	}
	if dstExists && dst.Ino == sst.Ino && dst.Dev == sst.Dev && !exchange {
		return 0 // two names of one inode: rename does nothing
	}
	srcPath, sok := n.childPath(name)
	dstPath, dok := np.childPath(newName)
	srcDir := sst.Mode&unix.S_IFMT == unix.S_IFDIR
	dstDir := srcDir
	if exchange {
		dstDir = dst.Mode&unix.S_IFMT == unix.S_IFDIR
	}
	srcVer := sok && !r.excluded(srcPath, srcDir)
	dstVer := dok && !r.excluded(dstPath, dstDir)

	commit := func(bool) {}
	switch {
	case exchange && srcVer && dstVer:
		c, err := r.rec.RecordRename(srcPath, dstPath, true, r.caller(ctx))
		if err != nil {
			return r.recordErrno(srcPath, err)
		}
		commit = c
	case exchange:
		// One side is unversioned: each versioned name gets new content.
		if srcVer {
			if eno := r.captureName(ctx, n.fd, name, srcPath, false); eno != 0 {
				return eno
			}
		}
		if dstVer {
			if eno := r.captureName(ctx, np.fd, newName, dstPath, false); eno != 0 {
				return eno
			}
		}
	default:
		if dstVer && (dstExists || !srcVer) {
			// Whatever the destination held goes away. (An absent
			// destination needs a record only when the name does not
			// arrive by a recorded rename.)
			if eno := r.captureName(ctx, np.fd, newName, dstPath, dstExists && !np.hasWriterChild(newName)); eno != 0 {
				return eno
			}
		}
		switch {
		case srcVer && dstVer:
			c, err := r.rec.RecordRename(srcPath, dstPath, false, r.caller(ctx))
			if err != nil {
				return r.recordErrno(srcPath, err)
			}
			commit = c
		case srcVer:
			// Moving out of the versioned tree: as good as a delete.
			if eno := r.captureName(ctx, n.fd, name, srcPath, false); eno != 0 {
				return eno
			}
		}
	}
	srcNode, dstNode := childNode(n, name), childNode(np, newName)
	err = retry(func() error { return unix.Renameat2(n.fd, name, np.fd, newName, uint(flags)) })
	commit(err == nil)
	if err == nil {
		if srcNode != nil {
			srcNode.addLink(np, newName)
		}
		if exchange && dstNode != nil {
			dstNode.addLink(n, name)
		}
	}
	return errno(err)
}

// childNode returns the regular-file node go-fuse knows for name in n.
func childNode(n *Node, name string) *Node {
	ch := n.GetChild(name)
	if ch == nil || ch.StableAttr().Mode&unix.S_IFMT != unix.S_IFREG {
		return nil
	}
	c, _ := ch.Operations().(*Node)
	return c
}
