package fusefs

import (
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"golang.org/x/sys/unix"

	"ckptfs/internal/backing"
)

// attic.go keeps writers off the inodes the store keeps by hard link. An
// unlink (or a rename over a file) whose prior content the store keeps by
// hard-linking the inode into its attic must be sure that nothing writes
// that inode afterwards: the attic copy is history. A writer that already
// has the file open makes the overlay copy the bytes instead
// (claimForAttic). A writer that arrives while or after the name goes away —
// an OPEN, a truncate by path or a LINK the kernel resolved before the
// unlink — would write straight into the attic, so it is refused with
// ENOENT, as if it had come after the unlink. Root.attic holds the claimed
// identities; a writer registers under the node's lock and checks the claim
// there (holdWrite, newHandle), the claimer sets the claim first and then
// counts writers under the same lock, so one of the two always sees the
// other.

// atticClaim keeps new writers off one inode while (and, once it is in the
// attic, after) its last name is dropped.
type atticClaim struct {
	r      *Root
	id     fs.StableAttr
	linked bool // the store hard-linked the inode
	ended  bool
}

// claimForAttic claims the regular file name in dirfd before an unlink or
// a rename over it. It returns nil when the store must copy the bytes
// instead: not a regular file with one link, or open for writing.
func (r *Root) claimForAttic(dirfd int, name string) *atticClaim {
	st, err := backing.Lstatat(dirfd, name)
	if err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Nlink != 1 {
		return nil
	}
	c := &atticClaim{r: r, id: idOf(&st)}
	r.nodesMu.Lock()
	node := r.nodes[c.id]
	r.attic[c.id]++
	r.nodesMu.Unlock()
	if node != nil {
		node.mu.Lock()
		busy := node.writers+node.ptWriters > 0
		node.mu.Unlock()
		if busy {
			c.done(false)
			return nil
		}
	}
	return c
}

// done ends the claim (again: a no-op). If the inode went into the attic
// and the name is gone (ok), the claim stays while a node of the inode is
// live (the kernel may still send requests for it); forgetNode drops it.
// If the store linked the inode but the change was not made (!ok), the
// tree still names it and a write would change history: the store copies
// the bytes first (UnshareAttic), while the claim still keeps writers off.
func (c *atticClaim) done(ok bool) {
	if c == nil || c.ended {
		return
	}
	c.ended = true
	r := c.r
	if !ok && c.linked {
		if err := r.rec.UnshareAttic(); err != nil {
			r.logf("the attic keeps a file the tree still names (a write to it would change its history): %v", err)
		}
	}
	r.nodesMu.Lock()
	defer r.nodesMu.Unlock()
	if ok && c.linked && r.nodes[c.id] != nil {
		return
	}
	if r.attic[c.id]--; r.attic[c.id] <= 0 {
		delete(r.attic, c.id)
	}
}

// claimedLocked reports whether n's inode is claimed by the attic; the
// caller holds n.mu.
func (n *Node) claimedLocked() bool {
	n.r.nodesMu.Lock()
	defer n.r.nodesMu.Unlock()
	return n.r.attic[n.StableAttr()] > 0
}

// holdWrite registers a change of n's inode that is not made through a
// handle (truncate by path, a new hard link) until release is called; it
// fails with ENOENT when the inode belongs to the attic.
func (n *Node) holdWrite() (release func(), eno syscall.Errno) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.claimedLocked() {
		return nil, syscall.ENOENT
	}
	n.writers++
	return func() {
		n.mu.Lock()
		n.writers--
		n.mu.Unlock()
	}, 0
}
