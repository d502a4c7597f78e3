// Package fusefs is the ckptfs overlay: a FUSE filesystem mounted over a
// directory in place, which records the prior state of every path into the
// history store (through the Recorder interface) before any mutation lands
// in the backing directory.
//
// The backing tree is reached only through directory fds opened before the
// mount covered it: each Node holds an O_PATH|O_NOFOLLOW fd of its backing
// inode, directory operations are *at calls on the parent's fd with one
// name, and files are reopened through /proc/self/fd. No absolute path is
// ever built (it would loop into our own mount), so depth is unlimited and
// no symlink in the tree is ever followed by the daemon. The syscall
// primitives (EINTR retry, statx, the stat-to-ckpt conversion, the
// fd-relative opens) are internal/backing's, shared with the history
// store's Tree.
//
// # Capture before every mutation
//
// Every mutating operation holds the gate's read lock (Root.gate) from the
// capture through its syscall; Root.Exclusive takes the write lock, so a
// turn boundary or a rewind never falls between a capture and the change it
// covers. When Record fails the operation fails (EIO, or ENOSPC for a full
// store) and the backing tree is left untouched. Excluded paths are not
// captured.
//
//	operation                       captured first (paths root-relative)
//	------------------------------  --------------------------------------------
//	write, fallocate,               the file's content (Prior + Open), once per
//	copy_file_range (dst),          turn (NeedsCapture)
//	truncate (setattr size),
//	open O_TRUNC
//	chmod, chown                    regular file: MetaOnly; dir/symlink: Prior
//	utimens                         nothing (times are not versioned)
//	create, mknod, mkdir,           the new name's prior state (normally Absent)
//	symlink, link
//	unlink                          Prior + Open, and Link (a hard link into the
//	                                store instead of a copy) when nlink == 1 and
//	                                no handle has it open for writing
//	rmdir                           Prior (a directory)
//	rename                          the destination as for unlink if it exists
//	                                (Absent otherwise), then RecordRename; the
//	                                record is committed only if the syscall
//	                                succeeded. NOREPLACE onto an existing name
//	                                fails EEXIST before any capture.
//	rename EXCHANGE                 RecordExchange(a, b, and their inode numbers)
//	rename across the exclude line  moving out: the source as if deleted;
//	                                moving in: the destination's prior state
//	setxattr, removexattr           nothing (xattrs are not versioned yet)
//
// A file open for writing whose writes arrive as FUSE WRITE requests is
// captured on its first write in each turn. With Options.ReadPassthrough
// (the daemon's default), read-only opens use FUSE passthrough, and, with
// Options.WritePassthrough (the daemon's default too), so do writable
// opens of a file whose prior state in the
// current turn is recorded already (created, truncated or written earlier
// in the turn), or whose capture would be a clone (Recorder.CapturesByClone:
// it is then captured at the open): their writes go from the kernel to the
// backing file without a round trip through the daemon. Because the kernel forbids mixing
// passthrough and daemon-served opens of one inode, a file opened for
// writing while it has passthrough readers is opened through passthrough as
// well, captured at open. Every file open for writing through passthrough
// is captured again at each turn boundary (Root.Exclusive) while it stays
// open, so the new turn holds its prior state before any such write lands.
// A write racing with the boundary itself may be seen by that capture in
// part (passthrough writes do not wait for the daemon's lock); writes that
// returned before the boundary began, and writes issued after it returned,
// land in their own turns. A backing file registered for passthrough by a
// read-only open stays registered while the kernel remembers the inode:
// later read-only opens then cost the daemon no syscall, and a handle
// opens its own fd only for an operation that needs one (a lock, fsync).
//
// A node's path is its position in go-fuse's tree. A regular file with
// several links is captured under every name the overlay knows of it
// (links.go: names seen by lookups and links, and found by the walk at
// mount), since a write through one name changes them all. Every capture
// of a regular file names its inode and its other versioned names
// (ckpt.Capture.Inode, Links): that is how a rewind gives back which
// paths share an inode. A node in no directory (unlinked while open) is
// not part of the tree and is not captured. Renames are ordered against
// the captures that name paths (Root.ns, moves.go): a capture is recorded
// before a rename under the old path or after it under the new one, never
// after it under the old one.
//
// # The store stays invisible
//
// Options.Hidden names (the store directory) are left out of Readdir, Lookup
// answers ENOENT, and creating, renaming or removing them answers EPERM.
//
// # Kernel caches
//
// Entry, attribute and negative-entry timeouts are one hour (see mount.go):
// only this daemon changes the backing tree while mounted, and rewinds
// report what they change through Root.Invalidate.
//
// # Requests the kernel need not send
//
// OPENDIR and, where the backing filesystem does nothing at a close
// (ext4, XFS, btrfs, tmpfs), FLUSH are answered ENOSYS once (rawfs.go):
// the kernel then opens directories and closes files without asking. It
// still writes a file's dirty pages back at close (a shared mmap's), so
// those writes are captured before close returns; directories are then
// read without a handle, each request listed afresh from its offset.
package fusefs
