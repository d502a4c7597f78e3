package ckpt

import (
	"errors"
	"io"
	"os"
	"strings"
	"syscall"
)

// ErrStoreFull is the cause of a failed capture when the history store
// has no room for it: the change the capture guards must not land (the
// overlay answers ENOSPC), and nothing is lost.
var ErrStoreFull = errors.New("store full")

// Type is the kind of object at a path.
type Type uint8

const (
	Absent  Type = iota // nothing at the path
	Regular             // a regular file
	Dir                 // a directory
	Symlink             // a symbolic link
	// Special is what stores written before special files were versioned
	// recorded for a device, FIFO or socket: its kind is unknown, and a
	// rewind leaves such a path as it finds it.
	Special
	FIFO        // a named pipe
	Socket      // a unix socket's inode (bound or not, it is only a name)
	CharDevice  // a character device node (Rdev)
	BlockDevice // a block device node (Rdev)
)

func (t Type) String() string {
	switch t {
	case Absent:
		return "absent"
	case Regular:
		return "file"
	case Dir:
		return "dir"
	case Symlink:
		return "symlink"
	case Special:
		return "special"
	case FIFO:
		return "fifo"
	case Socket:
		return "socket"
	case CharDevice:
		return "chardev"
	case BlockDevice:
		return "blockdev"
	}
	return "unknown"
}

// ParseType is the inverse of Type.String, for the names of every type;
// false for any other string.
func ParseType(name string) (Type, bool) {
	for t := Absent; t <= BlockDevice; t++ {
		if t.String() == name {
			return t, true
		}
	}
	return Absent, false
}

// IsNode reports whether t is made by mknod(2): a FIFO, socket or device.
func (t Type) IsNode() bool { return t >= FIFO && t <= BlockDevice }

// Linkable reports whether paths of type t can be hard links of one
// another: a regular file, symlink, FIFO, socket or device node (not a
// directory, nor Special, whose kind is unknown).
func (t Type) Linkable() bool { return t == Regular || t == Symlink || t.IsNode() }

// Format is the S_IFMT bits of a file of type t (0 for Absent and
// Special, which have none).
func (t Type) Format() uint32 {
	switch t {
	case Regular:
		return syscall.S_IFREG
	case Dir:
		return syscall.S_IFDIR
	case Symlink:
		return syscall.S_IFLNK
	case FIFO:
		return syscall.S_IFIFO
	case Socket:
		return syscall.S_IFSOCK
	case CharDevice:
		return syscall.S_IFCHR
	case BlockDevice:
		return syscall.S_IFBLK
	}
	return 0
}

// NodeState is the Type and Rdev of a FIFO, socket or device node whose
// stat(2) mode is m and device rdev (Special for any other mode).
func NodeState(m uint32, rdev uint64) (Type, uint64) {
	switch m & syscall.S_IFMT {
	case syscall.S_IFIFO:
		return FIFO, 0
	case syscall.S_IFSOCK:
		return Socket, 0
	case syscall.S_IFCHR:
		return CharDevice, rdev
	case syscall.S_IFBLK:
		return BlockDevice, rdev
	}
	return Special, 0
}

// State is the versioned part of one path's state at one moment.
type State struct {
	Type   Type
	Mode   uint32 // permission bits with setuid/setgid/sticky (st_mode & 07777)
	UID    uint32
	GID    uint32
	Size   int64  // Regular only
	Target string // Symlink only
	Rdev   uint64 `json:",omitempty"` // CharDevice and BlockDevice only
}

// Stamp is what tells, without reading its bytes, whether an object
// changed: a new inode, or new content in the same one (mtime, and ctime,
// which no user can set back), which a State alone cannot show for a
// regular file of the same size.
type Stamp struct {
	Ino   uint64 `json:"i"`
	Mtime int64  `json:"t"` // nanoseconds since the epoch
	// Ctime (ns) changes with every write and every change of the inode's
	// metadata (a chmod, a link, a rename), and cannot be set: a write
	// whose mtime was put back (touch -r, rsync --inplace -t) still shows.
	// Btime (ns) is the inode's birth: a number reused by a new inode
	// shows. Zero: not known (a stamp of an older store).
	Ctime int64 `json:"c,omitempty"`
	Btime int64 `json:"b,omitempty"`
	// Nlink comes with a walk (which names share an inode); it is not part
	// of the comparison: a link made elsewhere changes it alone.
	Nlink uint32 `json:"-"`
}

// SameBytes reports whether nothing wrote to the object between the two
// stamps, as far as stat can tell: the same inode, mtime and (where both
// are known) ctime. A change of the inode's metadata alone (a chmod, a
// link) counts as a write: stat cannot tell it from one.
func (s Stamp) SameBytes(o Stamp) bool {
	return s.Ino == o.Ino && s.Mtime == o.Mtime && (s.Ctime == 0 || o.Ctime == 0 || s.Ctime == o.Ctime)
}

// SameObject reports whether the two stamps are of one inode, not of two
// that had the same number one after the other: the same number and
// (where both are known) birth time.
func (s Stamp) SameObject(o Stamp) bool {
	return s.Ino == o.Ino && (s.Btime == 0 || o.Btime == 0 || s.Btime == o.Btime)
}

// Exists reports whether anything is at the path.
func (s State) Exists() bool { return s.Type != Absent }

// Inode is the identity of the inode at a path at one moment: its device
// and inode number, which no two inodes that exist at the same time share,
// and its link count then (not part of the identity). It is kept apart
// from State: two paths in the same State may or may not share an inode,
// and the comparisons of States elsewhere must not see it.
type Inode struct {
	Dev   uint64 `json:"d,omitempty"`
	Ino   uint64 `json:"i"`
	Nlink uint32 `json:"n,omitempty"`
}

// Known reports whether i names an inode (a zero Inode: not known).
func (i Inode) Known() bool { return i.Ino != 0 }

// Same reports whether i and j name the same inode. Inode numbers are
// reused once an inode is gone, so this holds only for two Inodes seen at
// moments when both inodes existed (see versionstore/doc.go).
func (i Inode) Same(j Inode) bool { return i.Known() && i.Dev == j.Dev && i.Ino == j.Ino }

// Capture describes the state a path had just before a mutation, as the
// overlay hands it to the store. The store decides how to keep the bytes.
type Capture struct {
	// Path is slash-separated and relative to the tree root ("a/b.txt");
	// "" is the root directory itself.
	Path string
	// Prior is the path's state right now, before the mutation lands.
	Prior State
	// MetaOnly says the mutation changes only mode or ownership of a
	// regular file (chmod, chown): its bytes need not be copied.
	MetaOnly bool
	// Open returns a fresh read-only handle on the prior bytes (Regular,
	// !MetaOnly). The store reads it to the end and closes it.
	Open func() (*os.File, error)
	// ReadAt, if set, reads the prior bytes at an offset (as
	// io.ReaderAt) through a handle the caller holds open for the
	// mutation: a range capture reads its few blocks with it instead of
	// opening the file again.
	ReadAt func(p []byte, off int64) (int, error)
	// Link, if set, hard-links the file's inode to name inside dir, so the
	// store keeps the prior bytes without copying them. It is offered only
	// when the caller is about to remove its own name for the inode
	// (unlink, rename over it) and nothing else can change the inode's
	// bytes afterwards (no other hard link, no open writer). The store falls
	// back to Open when linking fails (for example EXDEV).
	Link func(dir *os.File, name string) error
	// Inode is the identity of the inode at the capture of anything that
	// can be hard-linked (Type.Linkable: all but directories; zero if not
	// known), and Links the other names it has then, when it has more
	// than one (root-relative, as Path): a rewind finds through them the
	// names it shared the inode with that have no record of their own.
	Inode Inode
	Links []string
	// Range, on a capture of a regular file's content (!MetaOnly), bounds
	// what the mutation may change: the bytes at [Range.Off, Range.End)
	// (a write), or at Range.Off and after (a truncate: End is
	// ToTheEnd). The store may then keep only the prior bytes of that
	// range; nil: anything in the file may change.
	Range *ByteRange
}

// ByteRange is a range of byte offsets in a file: [Off, End).
type ByteRange struct{ Off, End int64 }

// ToTheEnd is the End of a ByteRange that runs to the end of the file.
const ToTheEnd = int64(1<<63 - 1)

// Program names the process that made a change.
type Program struct {
	PID  uint32
	Comm string // /proc/PID/comm
}

// Clean checks that p is a clean, relative, slash-separated path inside the
// tree ("" for the root) and returns it. It rejects "..", absolute paths,
// empty elements and NUL bytes.
func Clean(p string) (string, bool) {
	p = strings.TrimPrefix(p, "./")
	p = strings.TrimSuffix(p, "/")
	if p == "" || p == "." {
		return "", true
	}
	if strings.HasPrefix(p, "/") || strings.ContainsRune(p, 0) {
		return "", false
	}
	for _, el := range strings.Split(p, "/") {
		if el == "" || el == "." || el == ".." {
			return "", false
		}
	}
	return p, true
}

// Join joins a directory path and a name, with "" as the root.
func Join(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

// Under reports whether p is dir or lies below it ("" covers everything).
// When it does, rest is p relative to dir ("" when p == dir).
func Under(p, dir string) (rest string, ok bool) {
	if dir == "" {
		return p, true
	}
	if p == dir {
		return "", true
	}
	if strings.HasPrefix(p, dir) && p[len(dir)] == '/' {
		return p[len(dir)+1:], true
	}
	return "", false
}

// Tree is the backing directory as the history store reads and changes it
// (rewind, restore, cat of the live state). Paths are as in Capture.Path.
// Implementations never follow a symlink in any element of a path: a
// symlink planted where a directory was is an error (or, for RemoveAll,
// removed itself), never a way out of the tree.
type Tree interface {
	// Lstat returns the state at path; Absent (and no error) when nothing
	// is there or a parent is missing or not a directory.
	Lstat(path string) (State, error)
	// Ident returns the inode number of what is at path (0, and no error,
	// when nothing is there): what tells two names apart across an
	// exchange, which leaves both names and their states in place.
	Ident(path string) (uint64, error)
	// LstatInode is Lstat, with the identity and link count of the inode
	// (zero when nothing is there).
	LstatInode(path string) (State, Inode, error)
	// ReadDir lists the names in the directory at path (unsorted).
	ReadDir(path string) ([]string, error)
	// Open opens a regular file read-only without following symlinks.
	Open(path string) (*os.File, error)
	// Link hard-links the regular file at path to name inside dir.
	Link(path string, dir *os.File, name string) error
	// Hardlink makes to another name of the file at from (anything but a
	// directory; a symlink itself, not its target), replacing whatever is
	// at to atomically (a temporary name, then a rename); nothing changes
	// when to is a name of that inode already.
	Hardlink(from, to string) error
	// RemoveAll removes whatever is at path, recursively; no error if absent.
	RemoveAll(path string) error
	// Mkdir creates a directory with exactly mode (umask not applied).
	Mkdir(path string, mode uint32) error
	// Symlink creates a symlink at path pointing to target.
	Symlink(target, path string) error
	// WriteFile replaces path with a new regular file holding r's bytes and
	// st's mode (and owner, best effort), atomically (temporary + rename).
	WriteFile(path string, st State, r io.Reader) error
	// PatchFile changes the regular file at path in place, keeping its
	// inode: the bytes of spans (offset, length pairs) are read from r at
	// their own offsets and written there, then the file is cut or
	// extended to size. Called again after a crash part-way, it completes.
	// It changes nothing and returns ErrWrittenPast when a process holds
	// the file open for writing past the caller (FUSE passthrough): those
	// writes would land in the changed file.
	PatchFile(path string, size int64, spans []int64, r io.ReaderAt) error
	// Chmod sets exactly mode on path (not following a final symlink).
	Chmod(path string, mode uint32) error
	// Lchown sets the owner of path (not following a final symlink).
	Lchown(path string, uid, gid uint32) error
	// Rename renames from to to, replacing a file or empty directory at to.
	Rename(from, to string) error
	// Exchange atomically swaps a and b (RENAME_EXCHANGE).
	Exchange(a, b string) error
	// Mknod creates a FIFO, socket or device node (st.Type.IsNode()) at
	// path with st's mode and Rdev.
	Mknod(path string, st State) error
	// Avail returns the bytes free to unprivileged users on the tree's
	// filesystem, and the filesystem's device number (st_dev).
	Avail() (free int64, dev uint64, err error)
	// Walk calls fn for every path at or below dir ("" for the whole tree,
	// the root itself left out), parents before their children, without
	// following symlinks; a path for which skip is true is left out with
	// everything below it.
	Walk(dir string, skip func(path string, isDir bool) bool, fn func(path string, st State, sp Stamp) error) error
}

// ErrWrittenPast: Tree.PatchFile refused a file that a process holds open
// for writing past the caller; it can only be replaced whole.
var ErrWrittenPast = errors.New("the file is open for writing past the daemon")

// LinkNamer is implemented by a Tree that knows cheaply the names of the
// files with more than one link (the mounted overlay does): LinkNames
// returns names that had inode number ino, some of them maybe stale or
// missing. The history store checks each one, and walks the tree for the
// rest when they do not add up to the link count.
type LinkNamer interface {
	LinkNames(ino uint64) []string
}

// Creds is implemented by a Tree that says whose permissions its changes
// are made with: the user ID and the group IDs (effective and
// supplementary). A Tree that does not is changed with the process's own
// (a private mount's daemon runs as its user). A rewind checks its plan
// against them before it changes anything.
type Creds interface {
	Creds() (uid uint32, gids []uint32)
}
