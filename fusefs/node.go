package fusefs

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"ckptfs/internal/backing"
)

// node.go owns Node and where it is: its backing fd, its paths in go-fuse's
// tree (with every remembered name of a hard-linked file, see links.go),
// its creation and forgetting, and the operations that only read it
// (Lookup, Getattr, Readlink, Statfs).

// Node is one inode of the overlay. It holds an O_PATH|O_NOFOLLOW fd of
// its backing inode (virtiofsd style): attributes and opens go through
// that fd, directory operations use it as the dirfd, so no operation ever
// resolves a path longer than one name.
type Node struct {
	fs.Inode
	r  *Root
	fd int // O_PATH fd of the backing inode; closed in OnForget

	mu        sync.Mutex
	readers   int   // open read-only handles served by the daemon
	writers   int   // open writable handles served by the daemon
	ptReaders int   // open handles using FUSE passthrough (read-only)
	ptWriters int   // writable handles using FUSE passthrough
	ptID      int32 // their shared backing ID (while ptReaders+ptWriters > 0, or ptLinger)
	// ptLinger: ptID was registered from a read-only handle and stays
	// registered until the node is forgotten, so that the next
	// passthrough open of the file costs no syscall (a registration from
	// a writable one goes with its last handle: it would keep the file
	// open for writing, and its execution refused with ETXTBSY).
	ptLinger bool
	// directs counts the open direct handles (file.direct): while any
	// is open, every new read-write daemon-served handle of the node is
	// direct too; directShared says another handle was made meanwhile
	// (file.release).
	directs      int
	directShared bool

	// used orders nodes by their last lookup for fdrelief.go (Root.useSeq
	// when go-fuse last handed the node to the kernel); 0 until go-fuse
	// has initialized the Inode.
	used atomic.Uint64
}

// path returns the node's root-relative slash path, false when the node is
// in no directory any more (unlinked while open, or dropped by Invalidate).
func (n *Node) path() (string, bool) {
	if n.IsRoot() {
		return "", true
	}
	var segs []string
	var in *fs.Inode = &n.Inode
	for !in.IsRoot() {
		name, parent := in.Parent()
		if parent == nil {
			return "", false
		}
		segs = append(segs, name)
		in = parent
	}
	l := 0
	for _, s := range segs {
		l += len(s) + 1
	}
	b := make([]byte, 0, l)
	for i := len(segs) - 1; i >= 0; i-- {
		b = append(b, segs[i]...)
		if i > 0 {
			b = append(b, '/')
		}
	}
	return string(b), true
}

// childPath is the path of name inside n.
func (n *Node) childPath(name string) (string, bool) {
	p, ok := n.path()
	if !ok {
		return "", false
	}
	if p == "" {
		return name, true
	}
	return p + "/" + name, true
}

// newChild wraps the O_PATH fd of a child into an Inode (reusing the live
// node of the same identity, in which case fd is closed) and fills out.
func (n *Node) newChild(ctx context.Context, name string, fd int, st *backing.Stat, out *fuse.EntryOut) *fs.Inode {
	out.Attr.FromStat(&st.Stat_t)
	id := idOf(st)
	nn := &Node{r: n.r, fd: fd}
	got := n.r.lookupNode(id, nn)
	if got != nn {
		unix.Close(fd)
	}
	if linkable(st.Mode) && st.Nlink >= 2 {
		if p, ok := n.childPath(name); ok {
			n.r.links.add(st.Ino, p)
		}
	}
	if got != nn {
		if old := got.used.Load(); old != 0 {
			got.used.CompareAndSwap(old, n.r.useSeq.Add(1))
		}
		return &got.Inode
	}
	in := n.NewInode(ctx, nn, id)
	nn.used.Store(n.r.useSeq.Add(1))
	return in
}

// paths returns the root-relative paths of the node: its go-fuse path and,
// for a file (anything but a directory) with several links, every other
// remembered name (linkNames) that still refers to the same inode. A file
// with no go-fuse path (the name the kernel knew it by was removed, while
// a handle kept it) is looked for among the remembered names whatever its
// link count: the last name left of a hard-linked file holds it.
func (n *Node) paths(st *backing.Stat) []string {
	var out []string
	if p, ok := n.path(); ok {
		out = append(out, p)
	}
	if !linkable(st.Mode) {
		return out
	}
	if st.Nlink < 2 && len(out) > 0 {
		// (The names stay remembered: a link made meanwhile may be
		// among them, and each is checked before use anyway.)
		return out
	}
	for _, p := range n.r.namesOf(st) {
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// OnForget closes the backing fd once the kernel and the tree forget us.
func (n *Node) OnForget() {
	if n.IsRoot() {
		return
	}
	n.r.forgetNode(n.StableAttr(), n)
	n.mu.Lock()
	fd := n.fd
	n.fd = -1
	if n.ptID != 0 && n.ptReaders+n.ptWriters == 0 {
		if srv := n.r.backing.Load(); srv != nil {
			srv.UnregisterBackingFd(n.ptID)
		}
		n.ptID, n.ptLinger = 0, false
	}
	n.mu.Unlock()
	if fd >= 0 {
		unix.Close(fd)
	}
}

func (n *Node) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if n.r.hiddenName(n, name) {
		return nil, syscall.ENOENT
	}
	if n.r.relief.over() && bareListing(ctx) {
		// No node for a READDIRPLUS entry: the kernel takes the name
		// alone (fdrelief.go).
		return nil, syscall.EMFILE
	}
	return n.childAt(ctx, name, out)
}

// childAt opens name in n as its node (a lookup, or a new hard link).
func (n *Node) childAt(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	fd, err := backing.OpenPath(n.fd, name)
	if err != nil {
		return nil, errno(err)
	}
	st, err := backing.Fstat(fd)
	if err != nil {
		unix.Close(fd)
		return nil, errno(err)
	}
	return n.newChild(ctx, name, fd, &st, out), 0
}

func (n *Node) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	fd := n.fd
	if h, ok := f.(interface{ statFd() int }); ok {
		fd = h.statFd()
	}
	st, err := backing.Fstat(fd)
	if err != nil {
		return errno(err)
	}
	out.FromStat(&st.Stat_t)
	return 0
}

func (n *Node) Readlink(ctx context.Context) ([]byte, syscall.Errno) {
	t, err := backing.Readlinkat(n.fd, "")
	if err != nil {
		return nil, errno(err)
	}
	return []byte(t), 0
}

func (n *Node) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	var s unix.Statfs_t
	if err := backing.Retry(func() error { return unix.Fstatfs(n.fd, &s) }); err != nil {
		return errno(err)
	}
	out.Blocks = s.Blocks
	out.Bfree = s.Bfree
	out.Bavail = s.Bavail
	out.Files = s.Files
	out.Ffree = s.Ffree
	out.Bsize = uint32(s.Bsize)
	out.NameLen = uint32(s.Namelen)
	out.Frsize = uint32(s.Frsize)
	return 0
}
