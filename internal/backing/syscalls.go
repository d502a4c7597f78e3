package backing

import (
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"ckptfs/internal/ckpt"
)

// syscalls.go holds the syscall primitives every access to a backing tree
// is made of, for Tree and for the overlay (fusefs) alike: the EINTR retry,
// stat with the birth time, the conversion of a stat result into the
// versioned state, and opens, stats and readlinks relative to a directory
// fd (or an O_PATH fd of the object itself) that never follow a symlink.
// No absolute path is ever built: under a mount, one would loop back into
// the mount that covers the backing directory.
//
// What stays apart does so because the two reach an object differently:
// Tree has root-relative paths and acts on a name in its parent (openat2
// beneath the root, then *at calls; fchmodat2 for a chmod that must not
// follow), while the overlay holds an O_PATH fd of every inode it knows
// and acts on the inode itself through /proc/self/fd (chmod, truncate,
// xattrs). And failures become *os.PathError here, FUSE errnos in fusefs.

// Retry runs fn until it does not fail with EINTR.
func Retry(fn func() error) error {
	for {
		err := fn()
		if err != unix.EINTR {
			return err
		}
	}
}

// resolve is how OpenBeneath resolves a path: beneath its directory, and
// with no symlink (nor /proc magic link) on the way.
const resolve = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS

// maxPathArg is the longest path OpenBeneath hands to one openat2: the
// kernel takes up to PATH_MAX (4096) bytes with the NUL.
const maxPathArg = 4000

// OpenBeneath opens rel ("" for dirfd itself) beneath dirfd with openat2,
// following no symlink anywhere in rel: a symlink on the way is an error.
// A path longer than PATH_MAX, which the tree may hold (it is made a name
// at a time), and one through a directory of the user's own without
// search permission are opened a name at a time (openNames).
func OpenBeneath(dirfd int, rel string, flags int, mode uint32) (int, error) {
	if rel == "" {
		rel = "."
	}
	if len(rel) > maxPathArg {
		return openNames(dirfd, rel, flags, mode)
	}
	fd, err := openat2(dirfd, rel, flags, mode)
	if err == unix.EACCES && unix.Geteuid() != 0 && strings.Contains(rel, "/") {
		return openNames(dirfd, rel, flags, mode)
	}
	return fd, err
}

// openat2 is one openat2(2) of rel beneath dirfd, following no symlink.
func openat2(dirfd int, rel string, flags int, mode uint32) (int, error) {
	how := unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC), Mode: uint64(mode), Resolve: resolve}
	var fd int
	err := Retry(func() error {
		var err error
		fd, err = unix.Openat2(dirfd, rel, &how)
		return err
	})
	return fd, err
}

// openNames is OpenBeneath a name at a time, each beneath the directory
// before it (RESOLVE_BENEATH refuses a "..", which would climb out of it). A user's
// daemon cannot pass a directory of its own without search permission
// (0600), though the user may chmod it: each directory is given search
// permission for the moment of the open of the next name (ownDirPerm; as
// root, nothing). The last name's own refusal stands.
func openNames(dirfd int, rel string, flags int, mode uint32) (int, error) {
	els := strings.FieldsFunc(rel, func(r rune) bool { return r == '/' }) // "a/b/", a parent's: a, b
	if len(els) == 0 {
		return openat2(dirfd, ".", flags, mode)
	}
	cur := dirfd
	defer func() {
		if cur != dirfd {
			unix.Close(cur)
		}
	}()
	for i, el := range els {
		fl, m := unix.O_PATH|unix.O_DIRECTORY, uint32(0)
		if i == len(els)-1 {
			fl, m = flags, mode
		}
		var next int
		err := ownDirPerm(cur, 0o100, func() (err error) { next, err = openat2(cur, el, fl, m); return err })
		if err != nil {
			return -1, err
		}
		if i == len(els)-1 {
			return next, nil
		}
		if cur != dirfd {
			unix.Close(cur)
		}
		cur = next
	}
	return -1, unix.EINVAL // not reached: els has at least one name
}

// OpenPath opens name inside dirfd as an O_PATH handle that does not
// follow a final symlink.
func OpenPath(dirfd int, name string) (int, error) {
	var fd int
	err := Retry(func() error {
		var err error
		fd, err = unix.Openat(dirfd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		return err
	})
	return fd, err
}

// ProcPath names an open fd through /proc/self/fd; opening it reopens the
// inode itself (also for O_PATH fds), without resolving any name.
func ProcPath(fd int) string { return "/proc/self/fd/" + strconv.Itoa(fd) }

// Reopen opens the inode behind an O_PATH fd with real access flags.
func Reopen(fd int, flags int) (int, error) {
	var nfd int
	err := Retry(func() error {
		var err error
		// O_NOFOLLOW would refuse the /proc link itself; the inode is
		// already fixed by fd, so there is nothing left to follow.
		nfd, err = unix.Open(ProcPath(fd), flags&^unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		return err
	})
	return nfd, err
}

// ReopenRead opens the regular file behind the O_PATH fd read-only, also
// when its mode gives its owner no read permission (0000, 0200) and the
// caller is that owner: an ordinary user's daemon, and turnctl run as that
// user, have no CAP_DAC_OVERRIDE to read it as root does, yet must keep its
// bytes before a write, a truncate or an unlink, and read them back for a
// show or a rewind. Then the owner is given read permission for the moment
// of the open, and the mode is put back at once: the file is briefly
// readable by its owner alone (group and others gain nothing), and its
// ctime moves. Any other refusal is returned as it is, and so is this
// one where the chmod would clear the file's set-group-ID bit
// (chmodKeeps).
func ReopenRead(fd int) (int, error) {
	nfd, err := Reopen(fd, unix.O_RDONLY)
	if err != unix.EACCES {
		return nfd, err
	}
	ownerRead.Lock()
	defer ownerRead.Unlock()
	// Inside the lock, so that no other ReopenRead's temporary mode is
	// taken for the file's own.
	var st unix.Stat_t
	if Retry(func() error { return unix.Fstat(fd, &st) }) != nil {
		return -1, err
	}
	if st.Mode&0o400 != 0 {
		return Reopen(fd, unix.O_RDONLY) // its mode changed meanwhile
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Uid != uint32(unix.Geteuid()) || !chmodKeeps(&st) {
		return -1, err
	}
	mode := st.Mode & 0o7777
	if Retry(func() error { return unix.Chmod(ProcPath(fd), mode|0o400) }) != nil {
		return -1, err
	}
	nfd, err = Reopen(fd, unix.O_RDONLY)
	if rerr := Retry(func() error { return unix.Chmod(ProcPath(fd), mode) }); rerr != nil && err == nil {
		unix.Close(nfd)
		return -1, rerr
	}
	return nfd, err
}

// ownerRead serializes ReopenRead's changes of a mode.
var ownerRead sync.Mutex

// chmodKeeps reports whether the caller's chmod of the inode st describes
// (the caller's own) keeps its set-group-ID bit, so that a mode changed
// for a moment can be put back as it was: the kernel clears that bit in
// a chmod by a caller without CAP_FSETID who is not in the inode's group
// (a directory of yours whose group is another's, inherited from a
// set-group-ID parent or given by root). Where it would not, ReopenRead
// and ownDir leave the mode alone and the refusal stands.
func chmodKeeps(st *unix.Stat_t) bool {
	if st.Mode&unix.S_ISGID == 0 || unix.Geteuid() == 0 || st.Gid == uint32(unix.Getegid()) {
		return true
	}
	groups, err := unix.Getgroups()
	if err != nil {
		return false
	}
	for _, g := range groups {
		if uint32(g) == st.Gid {
			return true
		}
	}
	return false
}

// NoCopyOnWrite reports whether the file open at fd (a real open: the
// ioctl refuses an O_PATH fd) has the no-copy-on-write attribute (btrfs's
// chattr +C), which makes every clone of it fail.
func NoCopyOnWrite(fd int) bool {
	flags, err := unix.IoctlGetUint32(fd, unix.FS_IOC_GETFLAGS)
	return err == nil && flags&fsNoCOWFl != 0
}

// fsNoCOWFl is linux/fs.h's FS_NOCOW_FL, which x/sys/unix lacks.
const fsNoCOWFl = 0x00800000

// Stat is a stat result with the birth time, which tells a reused inode
// number from the inode that had it before.
type Stat struct {
	syscall.Stat_t
	// Btime is the birth time in nanoseconds; 1 where the filesystem does
	// not report one (so that it is never zero).
	Btime uint64
}

// Fstat stats an fd (O_PATH fds too), never following a symlink.
func Fstat(fd int) (Stat, error) {
	return statx(fd, "", unix.AT_EMPTY_PATH)
}

// Lstatat stats name inside dirfd without following it.
func Lstatat(dirfd int, name string) (Stat, error) {
	if len(name) <= maxPathArg {
		st, err := statx(dirfd, name, 0)
		if err != unix.EACCES || unix.Geteuid() == 0 {
			return st, err
		}
	}
	// Longer than PATH_MAX, or through a directory without search
	// permission: from its directory, opened by OpenBeneath, given search
	// permission for the moment if it is the user's own (ownDirPerm).
	pfd, base := dirfd, name
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		var err error
		if pfd, err = OpenBeneath(dirfd, name[:i], unix.O_PATH|unix.O_DIRECTORY, 0); err != nil {
			return Stat{}, err
		}
		defer unix.Close(pfd)
		base = name[i+1:]
	}
	var st Stat
	err := ownDirPerm(pfd, 0o100, func() (err error) { st, err = statx(pfd, base, 0); return err })
	return st, err
}

func statx(dirfd int, name string, flags int) (Stat, error) {
	var x unix.Statx_t
	var st Stat
	err := Retry(func() error {
		return unix.Statx(dirfd, name, flags|unix.AT_SYMLINK_NOFOLLOW|unix.AT_STATX_SYNC_AS_STAT,
			unix.STATX_BASIC_STATS|unix.STATX_BTIME, &x)
	})
	if err != nil {
		return st, err
	}
	st.Dev = unix.Mkdev(x.Dev_major, x.Dev_minor)
	st.Ino = x.Ino
	st.Nlink = uint64(x.Nlink)
	st.Mode = uint32(x.Mode)
	st.Uid = x.Uid
	st.Gid = x.Gid
	st.Rdev = unix.Mkdev(x.Rdev_major, x.Rdev_minor)
	st.Size = int64(x.Size)
	st.Blksize = int64(x.Blksize)
	st.Blocks = int64(x.Blocks)
	st.Atim = syscall.Timespec{Sec: x.Atime.Sec, Nsec: int64(x.Atime.Nsec)}
	st.Mtim = syscall.Timespec{Sec: x.Mtime.Sec, Nsec: int64(x.Mtime.Nsec)}
	st.Ctim = syscall.Timespec{Sec: x.Ctime.Sec, Nsec: int64(x.Ctime.Nsec)}
	st.Btime = 1
	if x.Mask&unix.STATX_BTIME != 0 && (x.Btime.Sec != 0 || x.Btime.Nsec != 0) {
		st.Btime = uint64(x.Btime.Sec)*1e9 + uint64(x.Btime.Nsec)
	}
	return st, nil
}

// Readlinkat reads the target of the symlink name inside dirfd; with name
// "", of the symlink an O_PATH fd refers to.
func Readlinkat(dirfd int, name string) (string, error) {
	for l := 256; ; l *= 2 {
		buf := make([]byte, l)
		n, err := unix.Readlinkat(dirfd, name, buf)
		if err != nil {
			return "", err
		}
		if n < l {
			return string(buf[:n]), nil
		}
	}
}

// StateOf converts a stat result into a State, without a symlink's
// target (the caller reads it, with the error handling it needs).
func StateOf(st *Stat) ckpt.State {
	s := ckpt.State{Mode: st.Mode & 0o7777, UID: st.Uid, GID: st.Gid}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		s.Type, s.Size = ckpt.Regular, st.Size
	case unix.S_IFDIR:
		s.Type = ckpt.Dir
	case unix.S_IFLNK:
		s.Type, s.Mode = ckpt.Symlink, 0o777
	default:
		s.Type, s.Rdev = ckpt.NodeState(st.Mode, st.Rdev)
	}
	return s
}

// InodeOf is the identity and link count of a stat result.
func InodeOf(st *Stat) ckpt.Inode {
	return ckpt.Inode{Dev: st.Dev, Ino: st.Ino, Nlink: uint32(st.Nlink)}
}

// stampOf is the quick identity a walk reports: inode, mtime, ctime,
// birth, links.
func stampOf(st *Stat) ckpt.Stamp {
	sp := ckpt.Stamp{Ino: st.Ino, Mtime: st.Mtim.Nano(), Ctime: st.Ctim.Nano(), Nlink: uint32(st.Nlink)}
	if st.Btime > 1 {
		sp.Btime = int64(st.Btime)
	}
	return sp
}
