package fusefs

import (
	"slices"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"ckptfs/internal/backing"
)

// A write (or chmod, chown) through one name of a file with several hard
// links changes every name, so its capture must cover them all; but the
// kernel tells the daemon only the names it looks up. linkNames remembers,
// by root-relative path, every name the overlay has seen of an inode (of
// any type but a directory: linkable) that had more than one link
// (and those a walk of the tree found at mount: NoteLink), keyed by inode
// number. It outlives the inode's node: a node the kernel forgot and looked
// up again under one name still finds the others.
// Renames move the remembered paths with them. An entry may go stale (a
// name unlinked, or replaced by another file): every remembered path is
// checked against the backing tree before a capture uses it.
type linkNames struct {
	mu    sync.Mutex
	root  linkNode                      // the tree of remembered paths
	names map[uint64]map[*linkNode]bool // inode number → its remembered paths
}

// linkNode is one element of a remembered path; ino is set on the last
// element of a path that names a file (0 on directories on the way). A
// rename moves a subtree in O(depth), whatever it holds.
type linkNode struct {
	parent   *linkNode
	name     string
	children map[string]*linkNode
	ino      uint64
}

// find returns the node of p, creating it (and its parents) with create.
func (l *linkNames) find(p string, create bool) *linkNode {
	n := &l.root
	if p == "" {
		return n
	}
	for _, el := range strings.Split(p, "/") {
		c := n.children[el]
		if c == nil {
			if !create {
				return nil
			}
			if n.children == nil {
				n.children = map[string]*linkNode{}
			}
			c = &linkNode{parent: n, name: el}
			n.children[el] = c
		}
		n = c
	}
	return n
}

// path is the root-relative path of n.
func (n *linkNode) path() string {
	var els []string
	for ; n.parent != nil; n = n.parent {
		els = append(els, n.name)
	}
	slices.Reverse(els)
	return strings.Join(els, "/")
}

// prune removes n and its parents while they hold nothing.
func (l *linkNames) prune(n *linkNode) {
	for n.parent != nil && n.ino == 0 && len(n.children) == 0 {
		delete(n.parent.children, n.name)
		n = n.parent
	}
}

// unname drops the file remembered at n from names.
func (l *linkNames) unname(n *linkNode) {
	if n.ino == 0 {
		return
	}
	delete(l.names[n.ino], n)
	if len(l.names[n.ino]) == 0 {
		delete(l.names, n.ino)
	}
	n.ino = 0
}

// forgetBelow drops every file remembered at or below n.
func (l *linkNames) forgetBelow(n *linkNode) {
	l.unname(n)
	for _, c := range n.children {
		l.forgetBelow(c)
	}
}

// add remembers p as a name of inode ino.
func (l *linkNames) add(ino uint64, p string) {
	if p == "" {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	n := l.find(p, true)
	if n.ino == ino {
		return
	}
	l.unname(n)
	n.ino = ino
	if l.names == nil {
		l.names = map[uint64]map[*linkNode]bool{}
	}
	if l.names[ino] == nil {
		l.names[ino] = map[*linkNode]bool{}
	}
	l.names[ino][n] = true
}

// has reports whether the overlay remembers names of inode ino.
func (l *linkNames) has(ino uint64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.names[ino]) > 0
}

// list returns the remembered names of inode ino.
func (l *linkNames) list(ino uint64) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]string, 0, len(l.names[ino]))
	for n := range l.names[ino] {
		out = append(out, n.path())
	}
	return out
}

// drop forgets the name p of inode ino (found stale).
func (l *linkNames) drop(ino uint64, p string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := l.find(p, false)
	if n == nil || n.ino != ino {
		return
	}
	l.unname(n)
	l.prune(n)
}

// renamed moves the names at or below from to the same place below to
// (what was remembered at or below to is gone: replaced), and with
// exchange those below to back to from. It costs the depth of the paths
// (and the names replaced), not the number of names remembered.
func (l *linkNames) renamed(from, to string, exchange bool) {
	if from == "" || to == "" || from == to {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	src, dst := l.find(from, false), l.find(to, false)
	if src == nil && dst == nil {
		return
	}
	var oldParents []*linkNode
	for _, n := range []*linkNode{src, dst} {
		if n != nil {
			delete(n.parent.children, n.name)
			oldParents = append(oldParents, n.parent)
		}
	}
	if !exchange && dst != nil {
		l.forgetBelow(dst) // replaced by the rename
		dst = nil
	}
	attach := func(n *linkNode, p string) {
		if n == nil {
			return
		}
		parent, name := &l.root, p
		if i := strings.LastIndexByte(p, '/'); i >= 0 {
			parent, name = l.find(p[:i], true), p[i+1:]
		}
		if parent.children == nil {
			parent.children = map[string]*linkNode{}
		}
		n.parent, n.name = parent, name
		parent.children[name] = n
	}
	attach(src, to)
	attach(dst, from)
	for _, n := range oldParents {
		l.prune(n)
	}
}

// linkable reports whether the inode of stat mode m can have several names:
// anything but a directory.
func linkable(m uint32) bool {
	f := m & unix.S_IFMT
	return f != 0 && f != unix.S_IFDIR
}

// NoteLink tells the overlay, before it serves, that the file at the
// root-relative path p has inode number ino and more than one link: a walk
// of the tree at mount finds the names no lookup has shown yet.
func (r *Root) NoteLink(ino uint64, p string) { r.links.add(ino, p) }

// lstatPath stats the root-relative path p in the backing tree without
// following any symlink on the way.
func (r *Root) lstatPath(p string) (backing.Stat, error) {
	dir, name := "", p
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		dir, name = p[:i], p[i+1:]
	}
	dfd := r.root.fd
	if dir != "" {
		fd, err := backing.OpenBeneath(r.root.fd, dir, unix.O_PATH|unix.O_DIRECTORY, 0)
		if err != nil {
			return backing.Stat{}, err
		}
		defer unix.Close(fd)
		dfd = fd
	}
	return backing.Lstatat(dfd, name)
}

// namesOf returns the remembered names (linkNames) that still name the
// file st describes, dropping those found stale.
func (r *Root) namesOf(st *backing.Stat) []string {
	var out []string
	for _, p := range r.links.list(st.Ino) {
		lst, err := r.lstatPath(p)
		if err != nil || lst.Ino != st.Ino || lst.Dev != st.Dev {
			r.links.drop(st.Ino, p)
			continue
		}
		out = append(out, p)
	}
	return out
}

// otherNames is names without p and without the unversioned ones: the
// other names a capture of p lists (ckpt.Capture.Links).
func (r *Root) otherNames(names []string, p string) []string {
	var out []string
	for _, q := range names {
		if q != p && !r.excluded(q, false) && !slices.Contains(out, q) {
			out = append(out, q)
		}
	}
	return out
}

// LinkNames returns the versioned names the overlay remembers for inode
// number ino (ckpt.LinkNamer, through the control server's tree): the
// history store checks each one.
func (r *Root) LinkNames(ino uint64) []string {
	var out []string
	for _, p := range r.links.list(ino) {
		if !r.excluded(p, false) {
			out = append(out, p)
		}
	}
	return out
}
