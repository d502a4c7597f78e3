package fusefs

import (
	"github.com/hanwen/go-fuse/v2/fs"
	"golang.org/x/sys/unix"

	"ckptfs/internal/backing"
)

// registry.go owns the registry of live nodes by backing identity: a
// lookup of an inode that has a live node reuses it.

// lookupNode returns the live node for an identity, or registers n.
func (r *Root) lookupNode(id fs.StableAttr, n *Node) *Node {
	r.nodesMu.Lock()
	defer r.nodesMu.Unlock()
	if old := r.nodes[id]; old != nil && !old.Forgotten() {
		return old
	}
	r.nodes[id] = n
	r.relief.note(len(r.nodes))
	return n
}

func (r *Root) forgetNode(id fs.StableAttr, n *Node) {
	r.nodesMu.Lock()
	if r.nodes[id] == n {
		delete(r.nodes, id)
		delete(r.attic, id)
		r.relief.live.Store(int64(len(r.nodes)))
	}
	r.nodesMu.Unlock()
}

// idOf is the go-fuse identity of a backing inode: its inode number, and
// its birth time as generation so that a reused inode number is a new node.
func idOf(st *backing.Stat) fs.StableAttr {
	return fs.StableAttr{Mode: st.Mode & unix.S_IFMT, Ino: st.Ino, Gen: st.Btime}
}
