package fusefs

import (
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// mount.go owns mounting: go-fuse's options, the mount flags mirrored from
// the backing filesystem, and the kernel cache timeouts.

// Cache timeouts. Long timeouts are what make a FUSE overlay cheap
// (doc/BENCH.md: against native, extract 6.3× → 2.7×, git status 15× →
// 2.8×). They are safe
// only because nothing but this daemon changes the backing tree while it is
// mounted: the mount covers the directory, and the history store's rewinds
// run inside Root.Exclusive and call Root.Invalidate for every path they
// change.
const (
	entryTimeout    = time.Hour
	attrTimeout     = time.Hour
	negativeTimeout = time.Hour
)

// Mount mounts the overlay on dir (normally the backing directory itself)
// and returns once the mount is live.
func (r *Root) Mount(dir string, debug bool) (*fuse.Server, error) {
	r.mountDir = dir
	et, at, nt := entryTimeout, attrTimeout, negativeTimeout
	var bst unix.Statfs_t
	flags := uintptr(0)
	if err := unix.Fstatfs(r.root.fd, &bst); err == nil {
		r.noFlush = closeIsNoop(bst.Type)
		// Mirror the backing mount's nosuid/nodev/noexec: the directory
		// must behave as it did before it was covered.
		if bst.Flags&unix.ST_NOSUID != 0 {
			flags |= syscall.MS_NOSUID
		}
		if bst.Flags&unix.ST_NODEV != 0 {
			flags |= syscall.MS_NODEV
		}
		if bst.Flags&unix.ST_NOEXEC != 0 {
			flags |= syscall.MS_NOEXEC
		}
	}
	if flags == 0 {
		flags = syscall.MS_MGC_VAL // zero flags, not go-fuse's nosuid,nodev default
	}
	// default_permissions: the kernel checks every caller as the
	// backing filesystem would, on every name of a path, also those it
	// resolves from its cache without asking the daemon (with
	// allow_other, every user who could use the directory before can
	// use it now; a private mount's one user loses search permission
	// in a directory it made 0600 at once, not once the entry expires).
	options := []string{"default_permissions"}
	// Root mounts with mount(2) itself, mirroring the flags; anyone else
	// through the set-user-ID fusermount3, which always adds nosuid and
	// nodev for them (noexec is passed on).
	direct := os.Geteuid() == 0
	if !direct && flags&syscall.MS_NOEXEC != 0 {
		options = append(options, "noexec")
	}
	var disabled uint64
	if !r.opts.ReadPassthrough && !r.opts.WritePassthrough {
		// Not negotiated when unused: a passthrough-capable mount also
		// limits what may be stacked on it (s_stack_depth).
		disabled |= fuse.CAP_PASSTHROUGH
	}
	opts := &fs.Options{
		MountOptions: fuse.MountOptions{
			AllowOther:        !r.opts.Private,
			Options:           options,
			Name:              "ckptfs",
			FsName:            dir,
			DirectMountStrict: direct,
			DirectMountFlags:  flags,
			Debug:             debug,
			MaxWrite:          1 << 20,
			MaxBackground:     64,
			EnableLocks:       true,
			// HANDLE_KILLPRIV_V2: the kernel does not ask GETXATTR
			// security.capability before every write (one round trip per
			// write; 4 KiB writes measured 81 → 550 MB/s); in exchange the
			// daemon clears set-ID bits itself when a write or truncate
			// says so (file.Write, Node.Setattr).
			//
			// NO_OPENDIR_SUPPORT: OPENDIR is answered ENOSYS, after which
			// the kernel opens directories without asking (rawFS.OpenDir).
			ExtraCapabilities:    fuse.CAP_HANDLE_KILLPRIV_V2 | fuse.CAP_NO_OPENDIR_SUPPORT,
			DisabledCapabilities: disabled,
			// With the page cache kept, the kernel must not drop a file's
			// pages whenever it sees a new mtime (auto_inval_data), which
			// every write through the mount makes: the pages are coherent
			// already (see Options.KeepCache), and the daemon invalidates
			// what it changes itself.
			ExplicitDataCacheControl: r.keepCache(),
			// No writeback cache: every write reaches us before it returns,
			// so turn boundaries are exact.
		},
		EntryTimeout:    &et,
		AttrTimeout:     &at,
		NegativeTimeout: &nt,
		NullPermissions: true,
		RootStableAttr:  &fs.StableAttr{Ino: 1},
	}
	raw := &rawFS{RawFileSystem: fs.NewNodeFS(r.root, opts), r: r}
	srv, err := fuse.NewServer(raw, dir, &opts.MountOptions)
	if err != nil {
		return nil, fmt.Errorf("fusefs: mount %s: %w", dir, err)
	}
	raw.srv = srv
	r.backing.Store(srv)
	go srv.Serve()
	if err := srv.WaitMount(); err != nil {
		srv.Unmount()
		return nil, fmt.Errorf("fusefs: mount %s: %w", dir, err)
	}
	mode, err := reliefModeFor(srv)
	if err != nil {
		srv.Unmount()
		return nil, err
	}
	done := make(chan struct{})
	go func() { srv.Wait(); close(done) }()
	go r.runRelief(mode, done)
	return srv, nil
}

// closeIsNoop reports whether closing a file of a filesystem of type
// fsType (statfs f_type) does nothing a FLUSH would have to pass on: local
// filesystems with no flush operation. On them a FLUSH, the daemon closing
// a dup of the backing fd, has no effect, and is answered ENOSYS once so
// that the kernel sends none again (rawFS.Flush). Network and stacked
// filesystems (NFS writes back at close) keep it.
func closeIsNoop(fsType int64) bool {
	switch uint32(fsType) {
	case unix.EXT4_SUPER_MAGIC, unix.XFS_SUPER_MAGIC, unix.BTRFS_SUPER_MAGIC, unix.TMPFS_MAGIC:
		return true
	}
	return false
}
