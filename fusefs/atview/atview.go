// Package atview is the read-only view of a project's tree at the end of
// one turn (`ckptfs mount --at TURN PROJECT MOUNTPOINT`): a FUSE
// filesystem of a fixed list of entries, whose regular files' bytes come
// from a Source. The project's daemon serves it in its own process (the
// only one that may open the history store), beside the project's mount,
// which stays in use; a project that is not mounted gets a daemon for the
// view alone, which holds the store while the view is mounted.
//
// # The contract
//
//   - The list is frozen when the view is mounted: every path, its type,
//     mode, owner, size, symlink target, device number, and which paths
//     are hard links of one another, exactly as `turnctl checkout TURN`
//     and a rewind to TURN would leave them (the store's TreeAt). Nothing
//     the project does later changes it.
//   - A file's bytes are read when asked for and are TURN's, whatever the
//     project did since: the Source reads a file that is unchanged since
//     TURN from the live backing file by fd, and checks after each read
//     that no change of it was recorded meanwhile; a file changed since
//     (before or after the mount) is read from the store (see
//     versionstore.ViewFile). Where the project is not mounted nothing
//     records its changes: a live file changed on disk after the view was
//     mounted fails with EIO (its bytes at TURN were never captured)
//     instead of showing other bytes.
//   - Everything that writes (write, create, mkdir, mknod, symlink, link,
//     unlink, rmdir, rename, setattr, setxattr, removexattr) fails with
//     EROFS: the mount is read-only (MS_RDONLY) and the nodes refuse too.
//   - Times are not versioned: every path shows the turn's end as its
//     mtime, ctime and atime. Inode numbers are the view's own (1 for the
//     root); paths that shared an inode at TURN share one here, with its
//     link count.
//   - Permissions are checked by the kernel against the modes and owners
//     shown (default_permissions), as in a checkout.
//   - A file whose bytes at TURN were never captured (changed while the
//     project was not mounted) is listed, but opening it fails with EIO.
//
// Since nothing in a view ever changes, the kernel may cache its entries,
// attributes and pages for as long as it likes.
package atview

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"ckptfs/internal/ckpt"
	"ckptfs/internal/rundir"
)

// FSType is the filesystem type views show in /proc/mounts: not a
// project mount (rundir.FSType), so nothing takes one for a project.
const FSType = rundir.ViewFSType

// Entry is one path of a view.
type Entry struct {
	Path  string // root-relative, "" the root; parents come before children
	State ckpt.State
	// Link is the index of the first entry of its hard-link group: the
	// entry's own index when it has no other name in the view.
	Link int
}

// File reads the bytes of one regular file.
type File interface {
	io.ReaderAt
	io.Closer
}

// Source opens the regular file entries' bytes.
type Source interface {
	// Open opens entry i (a regular file) for reads.
	Open(i int) (File, error)
}

// Options are a view's mount options.
type Options struct {
	// Time is every path's mtime, ctime and atime (the turn's end).
	Time time.Time
	// Private: only the mounting user may enter the view (no
	// allow_other), as for a user's project mount.
	Private bool
	// Name is the mount's source field in /proc/mounts
	// ("PROJECT@TURN").
	Name  string
	Debug bool
	Logf  func(format string, args ...any)
}

// cacheTimeout: a view never changes, so the kernel may keep what it
// learnt of it.
const cacheTimeout = 24 * time.Hour

type view struct {
	entries []Entry
	src     Source
	opts    Options
	nlink   []uint32 // by entry: the links of its inode
}

// Mount mounts the view of entries on dir and returns once it is live.
// It is unmounted from outside (umount, fusermount3 -u) or by
// Server.Unmount; Server.Wait returns then.
func Mount(dir string, entries []Entry, src Source, opts Options) (*fuse.Server, error) {
	if len(entries) == 0 || entries[0].Path != "" || entries[0].State.Type != ckpt.Dir {
		return nil, fmt.Errorf("atview: the view's root is not a directory")
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	v := &view{entries: entries, src: src, opts: opts, nlink: make([]uint32, len(entries))}
	for i, e := range entries {
		switch {
		case e.State.Type == ckpt.Dir:
			v.nlink[i] += 2
			if i > 0 {
				v.nlink[v.index(parentOf(e.Path))]++
			}
		default:
			v.nlink[e.Link]++
		}
	}
	for i, e := range entries {
		if e.State.Type != ckpt.Dir {
			v.nlink[i] = v.nlink[e.Link]
		}
	}
	t := cacheTimeout
	// Root mounts with mount(2), read-only by its flags; anyone else
	// through fusermount3, which takes "ro" as an option (and adds nosuid
	// and nodev itself).
	direct := os.Geteuid() == 0
	options := []string{"default_permissions"}
	if !direct {
		options = append(options, "ro")
	}
	mo := fuse.MountOptions{
		AllowOther:        !opts.Private,
		Options:           options,
		Name:              strings.TrimPrefix(FSType, "fuse."),
		FsName:            opts.Name,
		DirectMountStrict: direct,
		DirectMountFlags:  syscall.MS_RDONLY | syscall.MS_NOSUID | syscall.MS_NODEV,
		Debug:             opts.Debug,
		MaxReadAhead:      1 << 20,
		MaxWrite:          1 << 20, // also max_read: reads of 1 MiB
		// Neither the kernel's pages nor its attributes go stale.
		ExplicitDataCacheControl: true,
	}
	root := &node{v: v, i: 0}
	fopts := &fs.Options{
		MountOptions:    mo,
		EntryTimeout:    &t,
		AttrTimeout:     &t,
		NegativeTimeout: &t,
		RootStableAttr:  &fs.StableAttr{Ino: 1, Mode: fuse.S_IFDIR},
	}
	srv, err := fs.Mount(dir, root, fopts)
	if err != nil {
		return nil, fmt.Errorf("atview: mount %s: %w", dir, err)
	}
	return srv, nil
}

// index finds the entry of a directory path (the entries are sorted).
func (v *view) index(p string) int {
	lo, hi := 0, len(v.entries)
	for lo < hi {
		m := (lo + hi) / 2
		if v.entries[m].Path < p {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < len(v.entries) && v.entries[lo].Path == p {
		return lo
	}
	return 0
}

func parentOf(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[:i]
	}
	return ""
}

func baseOf(p string) string { return p[strings.LastIndexByte(p, '/')+1:] }

// node is one inode of the view: the entry it shows (the first of its
// hard-link group).
type node struct {
	fs.Inode
	v *view
	i int
}

// OnAdd builds the whole tree under the root when the view is mounted.
func (n *node) OnAdd(ctx context.Context) {
	if n.i != 0 {
		return
	}
	inodes := make([]*fs.Inode, len(n.v.entries))
	inodes[0] = &n.Inode
	for i, e := range n.v.entries {
		if i == 0 {
			continue
		}
		parent := inodes[n.v.index(parentOf(e.Path))]
		if parent == nil {
			n.v.opts.Logf("atview: BUG: %s has no parent directory in the view", e.Path)
			continue
		}
		ch := inodes[e.Link]
		if ch == nil || e.Link == i {
			ch = n.NewPersistentInode(ctx, &node{v: n.v, i: i}, fs.StableAttr{Mode: typeBits(e.State.Type), Ino: uint64(i) + 2})
			inodes[i] = ch
		}
		parent.AddChild(baseOf(e.Path), ch, false)
	}
}

func typeBits(t ckpt.Type) uint32 {
	if f := t.Format(); f != 0 {
		return f
	}
	return syscall.S_IFREG
}

func (n *node) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	e := n.v.entries[n.i]
	a := &out.Attr
	a.Ino = n.StableAttr().Ino
	a.Mode = typeBits(e.State.Type) | e.State.Mode&0o7777
	a.Nlink = n.v.nlink[n.i]
	a.Uid, a.Gid = e.State.UID, e.State.GID
	switch e.State.Type {
	case ckpt.Regular:
		a.Size = uint64(e.State.Size)
	case ckpt.Symlink:
		a.Size = uint64(len(e.State.Target))
	case ckpt.CharDevice, ckpt.BlockDevice:
		a.Rdev = uint32(e.State.Rdev)
	case ckpt.Dir:
		a.Size = 4096
	}
	a.Blocks = (a.Size + 511) / 512
	a.Blksize = 4096
	a.SetTimes(&n.v.opts.Time, &n.v.opts.Time, &n.v.opts.Time)
	out.SetTimeout(cacheTimeout)
	return 0
}

// Readdir lists a directory's children (built by OnAdd), by name, after
// "." and "..", as the live mount and local filesystems list them
// (go-fuse's default lists the children alone).
func (n *node) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	up := &n.Inode
	if _, p := n.Parent(); p != nil {
		up = p
	}
	kids := n.Children()
	ents := make([]fuse.DirEntry, 0, len(kids)+2)
	ents = append(ents,
		fuse.DirEntry{Name: ".", Mode: fuse.S_IFDIR, Ino: n.StableAttr().Ino},
		fuse.DirEntry{Name: "..", Mode: fuse.S_IFDIR, Ino: up.StableAttr().Ino})
	for name, ch := range kids {
		ents = append(ents, fuse.DirEntry{Name: name, Mode: ch.Mode(), Ino: ch.StableAttr().Ino})
	}
	slices.SortFunc(ents[2:], func(a, b fuse.DirEntry) int { return strings.Compare(a.Name, b.Name) })
	return fs.NewListDirStream(ents), 0
}

func (n *node) Readlink(ctx context.Context) ([]byte, syscall.Errno) {
	e := n.v.entries[n.i]
	if e.State.Type != ckpt.Symlink {
		return nil, syscall.EINVAL
	}
	return []byte(e.State.Target), 0
}

func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if flags&(syscall.O_WRONLY|syscall.O_RDWR|syscall.O_TRUNC|syscall.O_APPEND|syscall.O_CREAT) != 0 {
		return nil, 0, syscall.EROFS
	}
	e := n.v.entries[n.i]
	if e.State.Type != ckpt.Regular {
		return nil, 0, syscall.EINVAL
	}
	f, err := n.v.src.Open(n.i)
	if err != nil {
		n.v.opts.Logf("atview: open %s: %v", e.Path, err)
		return nil, 0, syscall.EIO
	}
	return &handle{n: n, f: f}, fuse.FOPEN_KEEP_CACHE, 0
}

func (n *node) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	out.Bsize, out.Frsize = 4096, 4096
	out.NameLen = 255
	out.Files = uint64(len(n.v.entries))
	return 0
}

// handle is an open regular file.
type handle struct {
	n  *node
	mu sync.Mutex
	f  File
}

func (h *handle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	h.mu.Lock()
	f := h.f
	h.mu.Unlock()
	if f == nil {
		return nil, syscall.EBADF
	}
	n, err := f.ReadAt(dest, off)
	if err != nil && err != io.EOF {
		h.n.v.opts.Logf("atview: read %s at %d: %v", h.n.v.entries[h.n.i].Path, off, err)
		return nil, syscall.EIO
	}
	return fuse.ReadResultData(dest[:n]), 0
}

func (h *handle) Release(ctx context.Context) syscall.Errno {
	h.mu.Lock()
	f := h.f
	h.f = nil
	h.mu.Unlock()
	if f != nil {
		f.Close()
	}
	return 0
}

// Everything that would write refuses: EROFS. (The kernel refuses first,
// the mount being read-only; these answer a request that reaches us all
// the same.)

func (n *node) Setattr(ctx context.Context, fh fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	return syscall.EROFS
}

func (n *node) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	return nil, nil, 0, syscall.EROFS
}

func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}

func (n *node) Mknod(ctx context.Context, name string, mode uint32, dev uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}

func (n *node) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}

func (n *node) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}

func (n *node) Unlink(ctx context.Context, name string) syscall.Errno { return syscall.EROFS }

func (n *node) Rmdir(ctx context.Context, name string) syscall.Errno { return syscall.EROFS }

func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	return syscall.EROFS
}

func (n *node) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) syscall.Errno {
	return syscall.EROFS
}

func (n *node) Removexattr(ctx context.Context, attr string) syscall.Errno { return syscall.EROFS }

// What a view's node implements: every read, and every write only to
// refuse it.
var (
	_ = (fs.NodeOnAdder)((*node)(nil))
	_ = (fs.NodeGetattrer)((*node)(nil))
	_ = (fs.NodeReadlinker)((*node)(nil))
	_ = (fs.NodeReaddirer)((*node)(nil))
	_ = (fs.NodeOpener)((*node)(nil))
	_ = (fs.NodeStatfser)((*node)(nil))
	_ = (fs.FileReader)((*handle)(nil))
	_ = (fs.FileReleaser)((*handle)(nil))

	_ = (fs.NodeSetattrer)((*node)(nil))
	_ = (fs.NodeCreater)((*node)(nil))
	_ = (fs.NodeMkdirer)((*node)(nil))
	_ = (fs.NodeMknoder)((*node)(nil))
	_ = (fs.NodeSymlinker)((*node)(nil))
	_ = (fs.NodeLinker)((*node)(nil))
	_ = (fs.NodeUnlinker)((*node)(nil))
	_ = (fs.NodeRmdirer)((*node)(nil))
	_ = (fs.NodeRenamer)((*node)(nil))
	_ = (fs.NodeSetxattrer)((*node)(nil))
	_ = (fs.NodeRemovexattrer)((*node)(nil))
)

// Not implemented, so go-fuse's defaults answer: lookup (the children
// built by OnAdd), getxattr and listxattr (no xattrs: they are
// not versioned), access (default_permissions: the kernel checks).
