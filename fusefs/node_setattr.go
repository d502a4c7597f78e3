package fusefs

import (
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"ckptfs/internal/backing"
	"ckptfs/internal/ckpt"
)

// node_setattr.go owns Setattr: chmod, chown, truncate and utimens.

// Setattr: chmod/chown capture the mode and owner (MetaOnly for regular
// files), truncate captures the content, utimens is not versioned.
func (n *Node) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	r := n.r
	r.gate.RLock()
	defer r.gate.RUnlock()
	wfd := -1 // the fd of f when it is a writable handle
	if h, ok := f.(interface {
		fdOf() int
		isWritable() bool
	}); ok && h.isWritable() {
		wfd = h.fdOf()
	}
	isLink := n.StableAttr().Mode&unix.S_IFMT == unix.S_IFLNK

	mode, mok := in.GetMode()
	uid, uok := in.GetUID()
	gid, gok := in.GetGID()
	if mok || uok || gok {
		if eno := n.captureSelf(ctx, true, nil); eno != 0 {
			return eno
		}
	}
	if mok && !isLink {
		if err := backing.Retry(func() error { return unix.Fchmodat(unix.AT_FDCWD, backing.ProcPath(n.fd), mode&07777, 0) }); err != nil {
			return errno(err)
		}
	}
	if uok || gok {
		su, sg := -1, -1
		if uok {
			su = int(uid)
		}
		if gok {
			sg = int(gid)
		}
		if err := backing.Retry(func() error { return unix.Fchownat(n.fd, "", su, sg, unix.AT_EMPTY_PATH) }); err != nil {
			return errno(err)
		}
	}
	if sz, ok := in.GetSize(); ok {
		if wfd < 0 {
			// Not through a writable handle: not if the inode went to the
			// attic (attic.go).
			release, eno := n.holdWrite()
			if eno != 0 {
				return eno
			}
			defer release()
		}
		// A truncate changes the bytes from the new size on. Growing,
		// it zeroes those from the current end: if that is below the
		// size the turn began with, a truncate of this turn cut there
		// and its capture holds them.
		if eno := n.captureRangeLocked(ctx, int64(sz), ckpt.ToTheEnd); eno != 0 {
			return eno
		}
		fd := wfd
		if fd < 0 {
			nfd, err := backing.Reopen(n.fd, unix.O_WRONLY)
			if err != nil {
				return errno(err)
			}
			defer unix.Close(nfd)
			fd = nfd
		}
		if err := backing.Retry(func() error { return unix.Ftruncate(fd, int64(sz)) }); err != nil {
			return errno(err)
		}
	}
	if in.Valid&fuse.FATTR_KILL_SUIDGID != 0 && !mok {
		// An unprivileged truncate or chown (HANDLE_KILLPRIV_V2); the
		// captures above covered the mode.
		if err := killSuidgid(n.fd); err != nil {
			return errno(err)
		}
	}
	mtime, mok2 := in.GetMTime()
	atime, aok := in.GetATime()
	if mok2 || aok {
		ts := []unix.Timespec{{Nsec: unix.UTIME_OMIT}, {Nsec: unix.UTIME_OMIT}}
		if aok {
			ts[0] = unix.NsecToTimespec(atime.UnixNano())
		}
		if mok2 {
			ts[1] = unix.NsecToTimespec(mtime.UnixNano())
		}
		if in.Valid&fuse.FATTR_ATIME_NOW != 0 {
			ts[0] = unix.Timespec{Nsec: unix.UTIME_NOW}
		}
		if in.Valid&fuse.FATTR_MTIME_NOW != 0 {
			ts[1] = unix.Timespec{Nsec: unix.UTIME_NOW}
		}
		var err error
		if isLink {
			// A symlink's times: through its parent and name, not
			// following it (/proc/self/fd cannot name a symlink without
			// following it here).
			name, parent := n.Parent()
			if parent == nil {
				return syscall.ENOENT
			}
			pn := parent.Operations().(*Node)
			err = unix.UtimesNanoAt(pn.fd, name, ts, unix.AT_SYMLINK_NOFOLLOW)
		} else {
			err = unix.UtimesNanoAt(unix.AT_FDCWD, backing.ProcPath(n.fd), ts, 0)
		}
		if err != nil {
			return errno(err)
		}
	}
	st, err := backing.Fstat(n.fd)
	if err != nil {
		return errno(err)
	}
	out.FromStat(&st.Stat_t)
	return 0
}
