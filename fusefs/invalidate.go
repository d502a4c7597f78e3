package fusefs

import (
	"context"
	"strings"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"ckptfs/internal/backing"
	"ckptfs/internal/ckpt"
)

// invalidate.go owns telling go-fuse and the kernel what changed in the
// backing tree underneath the mount (a rewind): Invalidate and Moved, and
// the notifications deferred until Exclusive ends.

// Moved says a rename (or exchange) moved from to to in the backing tree
// underneath us (rewind). go-fuse's tree follows, so that every node keeps
// the path its inode has (a process may hold a file below a directory the
// rewind moves, and its writes are captured under the node's path), and
// the names of hard-linked files remembered below them move along. When
// go-fuse has a node to move but not the directories of its new path (the
// rewind made them, the kernel never looked them up), they are looked up
// here first. Like Invalidate, it does not take the mutation lock.
func (r *Root) Moved(from, to string, exchange bool) {
	f, ok1 := ckpt.Clean(from)
	t, ok2 := ckpt.Clean(to)
	if !ok1 || !ok2 || f == "" || t == "" {
		return
	}
	r.links.renamed(f, t, exchange)
	r.order.mu.Lock()
	defer r.order.mu.Unlock()
	fp, fname := r.treeParent(f)
	tp, tname := r.treeParent(t)
	if fp != nil && tp == nil && fp.GetChild(fname) != nil {
		tp = r.lookUpParent(t)
	} else if exchange && tp != nil && fp == nil && tp.GetChild(tname) != nil {
		fp = r.lookUpParent(f)
	}
	switch {
	case fp != nil && tp != nil && exchange:
		fp.ExchangeChild(fname, tp, tname)
	case fp != nil && tp != nil:
		fp.MvChild(fname, tp, tname, true)
	default:
		if fp != nil {
			fp.RmChild(fname)
		}
		if tp != nil {
			tp.RmChild(tname)
		}
	}
}

// lookUpParent returns go-fuse's node of the directory holding p, adding
// the nodes go-fuse lacks on the way by looking them up in the backing
// tree as a LOOKUP would (the kernel has not seen them: go-fuse keeps them
// in its tree until their parent goes); nil if one is not a directory.
// The caller holds order's write lock.
func (r *Root) lookUpParent(p string) *fs.Inode {
	dir := ""
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		dir = p[:i]
	}
	parent := &r.root.Inode
	if dir == "" {
		return parent
	}
	for _, el := range strings.Split(dir, "/") {
		child := parent.GetChild(el)
		if child == nil {
			pn, ok := parent.Operations().(*Node)
			if !ok {
				return nil
			}
			var out fuse.EntryOut
			in, eno := pn.childAt(context.Background(), el, &out)
			if eno != 0 {
				return nil
			}
			parent.AddChild(el, in, true)
			child = in
		}
		if child.StableAttr().Mode&unix.S_IFMT != unix.S_IFDIR {
			return nil
		}
		parent = child
	}
	return parent
}

// treeParent returns go-fuse's node of the directory holding the clean,
// non-empty path p, and p's last name; nil if go-fuse has none.
func (r *Root) treeParent(p string) (*fs.Inode, string) {
	dir, name := "", p
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		dir, name = p[:i], p[i+1:]
	}
	parent := &r.root.Inode
	if dir != "" {
		for _, el := range strings.Split(dir, "/") {
			if parent = parent.GetChild(el); parent == nil {
				return nil, name
			}
		}
	}
	return parent, name
}

// Invalidate says the backing tree changed at path underneath us (rewind):
// it drops go-fuse's child entry for it and tells the kernel, so processes
// see the new state at once. It does not take the mutation lock (Exclusive's
// fn calls it).
func (r *Root) Invalidate(path string) {
	p, ok := ckpt.Clean(path)
	if !ok {
		return
	}
	if p == "" {
		r.notifyDir(&r.root.Inode)
		return
	}
	parent, name := r.treeParent(p)
	if parent == nil {
		return // the kernel cannot have cached anything below
	}
	child := parent.GetChild(name)
	if child != nil && !r.sameInode(parent, name, child) {
		// The name now holds another inode (or nothing): go-fuse must
		// forget the old one under this name. One that is still there
		// (a chmod) stays, so handles open on it keep a path and their
		// writes keep being captured.
		r.order.mu.Lock()
		parent.RmChild(name)
		r.order.mu.Unlock()
	}
	r.notify(func() {
		parent.NotifyEntry(name)
		if child != nil {
			child.NotifyContent(0, 0)
		}
	})
	// The kernel keeps directory listings (FOPEN_CACHE_DIR, see OpenDir)
	// and drops one only when it sees the directory change; a name it
	// never looked up changes nothing it sees. Once per directory.
	r.notifyDir(parent)
}

// notifyDir drops the kernel's cached listing and attributes of dir: once
// per directory while Exclusive runs, at once otherwise.
func (r *Root) notifyDir(dir *fs.Inode) {
	if r.exclusive.Load() {
		r.pendingMu.Lock()
		defer r.pendingMu.Unlock()
		if r.pendingDirs == nil {
			r.pendingDirs = map[*fs.Inode]bool{}
		}
		if !r.pendingDirs[dir] {
			r.pendingDirs[dir] = true
			r.pending = append(r.pending, func() { dir.NotifyContent(0, 0) })
		}
		return
	}
	dir.NotifyContent(0, 0)
}

// sameInode reports whether name in parent still is child's backing inode.
func (r *Root) sameInode(parent *fs.Inode, name string, child *fs.Inode) bool {
	pn, ok := parent.Operations().(*Node)
	if !ok {
		return false
	}
	st, err := backing.Lstatat(pn.fd, name)
	return err == nil && idOf(&st) == child.StableAttr()
}

func (r *Root) notify(fn func()) {
	if r.exclusive.Load() {
		r.pendingMu.Lock()
		r.pending = append(r.pending, fn)
		r.pendingMu.Unlock()
		return
	}
	fn()
}
