package backing

import (
	"encoding/binary"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Extent is one extent of a file as FIEMAP tells it.
type Extent struct {
	Logical, Physical, Length uint64
	Flags                     uint32
}

// FIEMAP's extent flags (linux/fiemap.h).
const (
	ExtentLast    = 0x1    // the file's last extent
	ExtentUnknown = 0x2    // its place on the disk is not known yet
	ExtentDelay   = 0x4    // delayed allocation: no place yet
	ExtentShared  = 0x2000 // shared with another file (a clone)
)

// Extents calls fn for every extent of the file open at fd, in order
// (sync: flush its dirty pages first, so that none is delayed).
func Extents(fd int, sync bool, fn func(Extent)) error {
	const (
		fsIocFiemap = 0xC020660B // _IOWR('f', 11, struct fiemap)
		flagSync    = 0x1        // FIEMAP_FLAG_SYNC
		perCall     = 256
		header      = 32 // struct fiemap
		extent      = 56 // struct fiemap_extent
	)
	buf := make([]byte, header+perCall*extent)
	for start := uint64(0); ; {
		clear(buf)
		binary.NativeEndian.PutUint64(buf[0:], start)
		binary.NativeEndian.PutUint64(buf[8:], ^uint64(0)-start)
		if sync {
			binary.NativeEndian.PutUint32(buf[16:], flagSync)
		}
		binary.NativeEndian.PutUint32(buf[24:], perCall)
		if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), fsIocFiemap, uintptr(unsafe.Pointer(&buf[0]))); e != 0 {
			return e
		}
		n := int(binary.NativeEndian.Uint32(buf[20:]))
		if n == 0 {
			return nil
		}
		for i := 0; i < n; i++ {
			e := buf[header+i*extent:]
			x := Extent{Logical: binary.NativeEndian.Uint64(e[0:]), Physical: binary.NativeEndian.Uint64(e[8:]),
				Length: binary.NativeEndian.Uint64(e[16:]), Flags: binary.NativeEndian.Uint32(e[40:])}
			fn(x)
			if x.Flags&ExtentLast != 0 {
				return nil
			}
			start = x.Logical + x.Length
		}
	}
}
