package fusefs

import (
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"ckptfs/internal/fsstate"
)

// A write through one name of a file with several hard links changes every
// name, so its capture must cover them all; but the kernel tells the daemon
// only the names it looks up. linkNames remembers, by root-relative path,
// every name the overlay has seen of an inode that had more than one link
// (and those a walk of the tree found at mount: NoteLink), keyed by inode
// number. It outlives the inode's node: a node the kernel forgot and looked
// up again under one name still finds the others.
// Renames move the remembered paths with them. An entry may go stale (a
// name unlinked, or replaced by another file): every remembered path is
// checked against the backing tree before a capture uses it.
type linkNames struct {
	mu    sync.Mutex
	names map[uint64]map[string]bool // inode number → paths
}

// add remembers p as a name of the inode id.
func (l *linkNames) add(id uint64, p string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.names == nil {
		l.names = map[uint64]map[string]bool{}
	}
	set := l.names[id]
	if set == nil {
		set = map[string]bool{}
		l.names[id] = set
	}
	set[p] = true
}

// has reports whether id ever had several names the overlay saw.
func (l *linkNames) has(id uint64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.names[id]) > 0
}

// list returns the remembered names of id.
func (l *linkNames) list(id uint64) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]string, 0, len(l.names[id]))
	for p := range l.names[id] {
		out = append(out, p)
	}
	return out
}

// drop forgets the name p of id (stale), or every name with p "".
func (l *linkNames) drop(id uint64, p string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if p == "" {
		delete(l.names, id)
		return
	}
	delete(l.names[id], p)
	if len(l.names[id]) == 0 {
		delete(l.names, id)
	}
}

// renamed moves the names at or below from to the same place below to,
// and with exchange those below to back to from. Its cost grows with the
// number of remembered names, not with the tree.
func (l *linkNames) renamed(from, to string, exchange bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	move := func(p string) (string, bool) {
		if rest, ok := fsstate.Under(p, from); ok {
			return join(to, rest), true
		}
		if exchange {
			if rest, ok := fsstate.Under(p, to); ok {
				return join(from, rest), true
			}
		}
		return p, false
	}
	for _, set := range l.names {
		var moved []string
		for p := range set {
			if q, ok := move(p); ok {
				delete(set, p)
				moved = append(moved, q)
			}
		}
		for _, q := range moved {
			set[q] = true
		}
	}
}

func join(dir, rest string) string {
	if rest == "" {
		return dir
	}
	return fsstate.Join(dir, rest)
}

// NoteLink tells the overlay, before it serves, that the file at the
// root-relative path p has inode number ino and more than one link: a walk
// of the tree at mount finds the names no lookup has shown yet.
func (r *Root) NoteLink(ino uint64, p string) { r.links.add(ino, p) }

// lstatPath stats the root-relative path p in the backing tree without
// following any symlink on the way.
func (r *Root) lstatPath(p string) (stat, error) {
	dir, name := "", p
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		dir, name = p[:i], p[i+1:]
	}
	dfd := r.root.fd
	if dir != "" {
		fd, err := unix.Openat2(r.root.fd, dir, &unix.OpenHow{
			Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
		})
		if err != nil {
			return stat{}, err
		}
		defer unix.Close(fd)
		dfd = fd
	}
	return lstatAt(dfd, name)
}
