package fusefs

import (
	"context"
	"errors"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"golang.org/x/sys/unix"

	"ckptfs/internal/backing"
	"ckptfs/internal/crashpoint"
)

// node_rename_unlink.go owns the operations that take a name away: unlink,
// and rename (exchange included).

func (n *Node) Unlink(ctx context.Context, name string) syscall.Errno {
	if n.r.hiddenName(n, name) {
		return syscall.EPERM
	}
	n.r.gate.RLock()
	defer n.r.gate.RUnlock()
	claim := n.r.claimForAttic(n.fd, name)
	if eno := n.captureChild(ctx, name, claim); eno != 0 {
		claim.done(false)
		return eno
	}
	err := crashpoint.Fail("fuse.unlink")
	if err == nil {
		err = backing.Retry(func() error { return unix.Unlinkat(n.fd, name, 0) })
	}
	claim.done(err == nil)
	return errno(err)
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
	// From its paths to its confirmation, no capture comes in between,
	// and none computes a path before go-fuse's tree shows it (moves.go).
	r.ns.Lock()
	defer r.ns.Unlock()
	r.settleMoves()

	sst, err := backing.Lstatat(n.fd, name)
	if err != nil {
		return errno(err)
	}
	dst, derr := backing.Lstatat(np.fd, newName)
	dstExists := derr == nil
	if derr != nil && !errors.Is(derr, unix.ENOENT) {
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
	point := ""           // "rename" or "exchange" when recorded as one (crash points)
	var claim *atticClaim // the destination, if its inode may go to the attic
	defer func() { claim.done(false) }()
	switch {
	case exchange && srcVer && dstVer:
		c, err := r.rec.RecordExchange(srcPath, dstPath, sst.Ino, dst.Ino, r.caller(ctx))
		if err != nil {
			return r.recordErrno(srcPath, err)
		}
		commit = c
		point = "exchange"
	case exchange:
		// One side is unversioned: each versioned name gets new content.
		if srcVer {
			if eno := r.captureName(ctx, n.fd, name, srcPath, nil); eno != 0 {
				return eno
			}
		}
		if dstVer {
			if eno := r.captureName(ctx, np.fd, newName, dstPath, nil); eno != 0 {
				return eno
			}
		}
	default:
		if dstVer && (dstExists || !srcVer) {
			// Whatever the destination held goes away. (An absent
			// destination needs a record only when the name does not
			// arrive by a recorded rename.)
			if dstExists {
				claim = r.claimForAttic(np.fd, newName)
			}
			if eno := r.captureName(ctx, np.fd, newName, dstPath, claim); eno != 0 {
				claim.done(false)
				return eno
			}
		}
		switch {
		case srcVer && dstVer:
			if err := crashpoint.Fail("fuse.rename.record"); err != nil {
				return r.recordErrno(srcPath, err)
			}
			c, err := r.rec.RecordRename(srcPath, dstPath, false, r.caller(ctx))
			if err != nil {
				return r.recordErrno(srcPath, err)
			}
			commit = c
			point = "rename"
		case srcVer:
			// Moving out of the versioned tree: as good as a delete.
			if eno := r.captureName(ctx, n.fd, name, srcPath, nil); eno != 0 {
				return eno
			}
		}
	}
	move := &pendingMove{from: &n.Inode, to: &np.Inode, fromName: name, toName: newName,
		a: n.GetChild(name), b: np.GetChild(newName), exchange: exchange}
	switch point {
	case "rename":
		crashpoint.Hit("fuse.rename.recorded")
	case "exchange":
		crashpoint.Hit("fuse.exchange.recorded")
	}
	err = backing.Retry(func() error { return unix.Renameat2(n.fd, name, np.fd, newName, uint(flags)) })
	switch point {
	case "rename":
		crashpoint.Hit("fuse.rename.done")
	case "exchange":
		crashpoint.Hit("fuse.exchange.done")
	}
	commit(err == nil)
	claim.done(err == nil)
	if err == nil {
		r.addMove(move)
	}
	if err == nil && sok && dok {
		r.links.renamed(srcPath, dstPath, exchange)
		if linkable(sst.Mode) && sst.Nlink > 1 {
			// Also when a capture racing the rename found the old
			// name gone and dropped it before it could move.
			r.links.add(sst.Ino, dstPath)
		}
	}
	return errno(err)
}
