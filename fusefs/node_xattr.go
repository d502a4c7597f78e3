package fusefs

import (
	"context"
	"syscall"

	"golang.org/x/sys/unix"

	"ckptfs/internal/backing"
)

// node_xattr.go owns extended attributes. They pass through unversioned
// (doc/SPEC.md §3: they may come later).
// They act on the inode through /proc/self/fd, which lands on the inode
// itself (also a symlink's) without resolving any name.

func (n *Node) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	sz, err := unix.Getxattr(backing.ProcPath(n.fd), attr, dest)
	return uint32(max(sz, 0)), errno(err)
}

func (n *Node) Listxattr(ctx context.Context, dest []byte) (uint32, syscall.Errno) {
	sz, err := unix.Listxattr(backing.ProcPath(n.fd), dest)
	return uint32(max(sz, 0)), errno(err)
}

func (n *Node) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) syscall.Errno {
	n.r.gate.RLock()
	defer n.r.gate.RUnlock()
	return errno(unix.Setxattr(backing.ProcPath(n.fd), attr, data, int(flags)))
}

func (n *Node) Removexattr(ctx context.Context, attr string) syscall.Errno {
	n.r.gate.RLock()
	defer n.r.gate.RUnlock()
	return errno(unix.Removexattr(backing.ProcPath(n.fd), attr))
}
