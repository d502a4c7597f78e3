package main

import (
	"strings"
	"testing"
)

func TestExt4DeviceOf(t *testing.T) {
	const mountinfo = `22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw,discard
31 22 0:26 / /tmp rw shared:2 - tmpfs tmpfs rw
40 22 7:0 / /mnt/e\0404 rw,relatime shared:3 - ext4 /dev/loop0 rw
41 22 7:1 / /mnt/x rw shared:4 - xfs /dev/loop1 rw
`
	for _, c := range []struct{ dir, want string }{
		{"/var/tmp/bench", "vda"},
		{"/", "vda"},
		{"/tmp/bench", ""},      // tmpfs
		{"/mnt/e 4/b", "loop0"}, // an escaped mount point
		{"/mnt/e 45", "vda"},    // not under /mnt/e 4
		{"/mnt/x/y", ""},        // xfs
	} {
		if got := ext4DeviceOf(strings.NewReader(mountinfo), c.dir); got != c.want {
			t.Errorf("ext4DeviceOf(%q) = %q, want %q", c.dir, got, c.want)
		}
	}
}
