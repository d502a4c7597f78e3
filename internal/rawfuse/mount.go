package rawfuse

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// Mount opens /dev/fuse and mounts it on mnt with mount(2) (root only: no
// fusermount), as fs type "fuse.ckptfs-rtt". It returns the device fd that
// serves the mount. The kernel sends INIT at once; requests made on mnt
// before the answer wait for it. The caller must Unmount, even on failure
// after this returns.
func Mount(mnt string) (int, error) {
	fd, err := unix.Open("/dev/fuse", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("rawfuse: open /dev/fuse: %w", err)
	}
	opts := fmt.Sprintf("fd=%d,rootmode=40000,user_id=0,group_id=0", fd)
	if err := unix.Mount("ckptfs-rtt", mnt, "fuse.ckptfs-rtt", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("rawfuse: mount %s: %w", mnt, err)
	}
	return fd, nil
}

// Unmount unmounts mnt, lazily (MNT_DETACH) if it is busy. Not mounted is
// not an error.
func Unmount(mnt string) error {
	err := unix.Unmount(mnt, 0)
	if errors.Is(err, unix.EBUSY) {
		err = unix.Unmount(mnt, unix.MNT_DETACH)
	}
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
		return nil
	}
	return err
}
