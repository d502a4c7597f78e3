package versionstore

import (
	"io"
	"os"

	"github.com/cockroachdb/pebble/v2/vfs"
	"golang.org/x/sys/unix"
)

// private_fs.go keeps the store's Pebble files its owner's alone. Pebble
// makes files 0666 and directories 0755, less the umask, and the daemon
// runs with umask 0 (it makes the tree's files with their callers'
// modes): in a store directory others may enter (--store at an existing
// 0755 directory), anyone could have rewritten the history a rewind
// replays.

// privateFS makes every directory Pebble makes 0700 and every file it
// creates (its lock file too) 0600.
type privateFS struct{ vfs.FS }

func (p privateFS) MkdirAll(dir string, _ os.FileMode) error { return p.FS.MkdirAll(dir, 0o700) }

func (p privateFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	return ownerOnly(p.FS.Create(name, c))
}

func (p privateFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	return ownerOnly(p.FS.OpenReadWrite(name, c, opts...))
}

func (p privateFS) Lock(name string) (io.Closer, error) {
	c, err := p.FS.Lock(name)
	if err == nil {
		unix.Chmod(name, 0o600)
	}
	return c, err
}

func (p privateFS) Unwrap() vfs.FS { return p.FS }

func ownerOnly(f vfs.File, err error) (vfs.File, error) {
	if err == nil {
		if fd := f.Fd(); fd != vfs.InvalidFd {
			unix.Fchmod(int(fd), 0o600)
		}
	}
	return f, err
}

// privateDB makes a store's existing Pebble directory (of a store made
// before privateFS) 0700, so that no one else reaches its files.
func privateDB(dir string) error {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil || st.Mode&0o077 == 0 {
		return nil
	}
	return unix.Chmod(dir, 0o700)
}
