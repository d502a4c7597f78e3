// Package rawfuse is a minimal FUSE server speaking the kernel protocol
// directly on /dev/fuse, for measuring request round trips without a
// library in the way (ckptfs-bench fuse-rtt). It serves a fixed tree, a root
// directory holding one empty file "f", and answers only what stat, open,
// fstat and close need: INIT, LOOKUP, GETATTR, OPEN, FLUSH, RELEASE,
// STATFS, FORGET, DESTROY; anything else gets ENOSYS.
//
// Two transports carry the same handler:
//
//   - ServeDev: the classic loop, one read(2) of a request and one write(2)
//     of its reply on /dev/fuse per request (what go-fuse does).
//   - ServeUring: FUSE over io_uring (Linux 6.14+, CONFIG_FUSE_IO_URING,
//     /sys/module/fuse/parameters/enable_uring): one ring per CPU, each
//     request fetched and its reply committed with IORING_OP_URING_CMD
//     SQEs, one io_uring_enter per request (see uring.go).
//
// Every attribute and entry reply has a zero timeout unless Tree says
// otherwise, so each stat reaches the server.
//
// Files: proto.go (wire layouts and the handler), mount.go (mount(2) with
// fd=N), dev.go (the read/write transport), uring.go (io_uring).
package rawfuse

import (
	"encoding/binary"
	"sync"
	"sync/atomic"
	"syscall"
)

// Opcodes of include/uapi/linux/fuse.h that the handler knows.
const (
	opLookup      = 1
	opForget      = 2
	opGetattr     = 3
	opOpen        = 14
	opStatfs      = 17
	opRelease     = 18
	opFlush       = 25
	opInit        = 26
	opInterrupt   = 36
	opDestroy     = 38
	opBatchForget = 42
)

// INIT flags (fuse_init_in.flags; bits 32 and up travel in flags2).
const (
	initExt       = 1 << 30 // flags2 is valid
	initOverUring = 1 << 41 // FUSE_OVER_IO_URING
	kernelMajor   = 7
	maxMinor      = 45 // the newest protocol minor this file was written against
	rootID        = 1
	fileID        = 2
	inHeaderSize  = 40 // struct fuse_in_header
	outHeaderSize = 16 // struct fuse_out_header
	initInSize    = 64 // struct fuse_init_in (7.36+)
	initOutSize   = 64 // struct fuse_init_out (7.23+)
	attrSize      = 88 // struct fuse_attr
	attrOutSize   = 16 + attrSize
	entryOutSize  = 40 + attrSize
	openOutSize   = 16
	statfsOutSize = 80
	maxWrite      = 128 << 10
)

// le is the byte order of the protocol on the machines we run on.
var le = binary.LittleEndian

// inHeader is struct fuse_in_header.
//
//	0 len u32 | 4 opcode u32 | 8 unique u64 | 16 nodeid u64 |
//	24 uid u32 | 28 gid u32 | 32 pid u32 | 36 total_extlen u16 | 38 pad
type inHeader struct {
	Len    uint32
	Opcode uint32
	Unique uint64
	NodeID uint64
}

func parseInHeader(b []byte) (h inHeader, ok bool) {
	if len(b) < inHeaderSize {
		return h, false
	}
	h.Len = le.Uint32(b[0:])
	h.Opcode = le.Uint32(b[4:])
	h.Unique = le.Uint64(b[8:])
	h.NodeID = le.Uint64(b[16:])
	return h, true
}

// putOutHeader writes struct fuse_out_header: len u32, error i32 (a
// negative errno or 0), unique u64.
func putOutHeader(b []byte, n int, errno syscall.Errno, unique uint64) {
	le.PutUint32(b[0:], uint32(outHeaderSize+n))
	le.PutUint32(b[4:], uint32(-int32(errno)))
	le.PutUint64(b[8:], unique)
}

// arg0Size is the size of the fixed per-opcode struct that precedes the
// variable arguments of a request (the kernel's in_args[0]): FUSE over
// io_uring carries it apart from the rest (op_in), /dev/fuse right after
// the header. 0 for opcodes whose arguments are all variable (LOOKUP's name).
func arg0Size(op uint32) int {
	switch op {
	case opGetattr:
		return 16 // fuse_getattr_in
	case opRelease, opFlush:
		return 24 // fuse_release_in, fuse_flush_in
	case opOpen, opForget, opInterrupt, opBatchForget:
		return 8
	case opInit:
		return initInSize
	}
	return 0
}

// Tree is the served tree and the handler of its requests. Its methods may
// be called from several goroutines at once.
type Tree struct {
	uring bool // ask the kernel for FUSE_OVER_IO_URING at INIT

	// AttrValidNs and EntryValidNs are the attribute and entry timeouts
	// of every reply, in nanoseconds (0: the kernel asks again each time).
	// Set them before mounting.
	AttrValidNs, EntryValidNs uint64

	// Counts, by transport: requests served over /dev/fuse and over the
	// ring, and GETATTRs (of either).
	DevRequests, RingRequests, Getattrs atomic.Int64

	initOnce sync.Once
	initDone chan struct{}
	gotUring bool // INIT agreed on FUSE_OVER_IO_URING; read after initDone
}

// NewTree returns the tree; uring asks for FUSE over io_uring at INIT.
func NewTree(uring bool) *Tree {
	return &Tree{uring: uring, initDone: make(chan struct{})}
}

// InitDone is closed once INIT has been answered.
func (t *Tree) InitDone() <-chan struct{} { return t.initDone }

// UringNegotiated says whether INIT agreed on FUSE over io_uring; valid once
// InitDone is closed.
func (t *Tree) UringNegotiated() bool { return t.gotUring }

// handle answers one request: arg0 is the fixed per-opcode struct (see
// arg0Size), rest the variable arguments. It writes the reply's argument
// into out and returns its length and errno; reply false for requests the
// kernel expects no answer to (FORGET, INTERRUPT).
func (t *Tree) handle(h inHeader, arg0, rest, out []byte) (n int, errno syscall.Errno, reply bool) {
	switch h.Opcode {
	case opInit:
		return t.init(arg0, out), 0, true
	case opLookup:
		name := rest
		if i := indexByte(name, 0); i >= 0 {
			name = name[:i]
		}
		if h.NodeID != rootID || string(name) != "f" {
			return 0, syscall.ENOENT, true
		}
		// struct fuse_entry_out: nodeid, generation, entry_valid,
		// attr_valid (u64), entry_valid_nsec, attr_valid_nsec (u32), attr.
		clear(out[:entryOutSize])
		le.PutUint64(out[0:], fileID)
		le.PutUint64(out[16:], t.EntryValidNs/1e9)
		le.PutUint64(out[24:], t.AttrValidNs/1e9)
		le.PutUint32(out[32:], uint32(t.EntryValidNs%1e9))
		le.PutUint32(out[36:], uint32(t.AttrValidNs%1e9))
		putAttr(out[40:], fileID)
		return entryOutSize, 0, true
	case opGetattr:
		if h.NodeID != rootID && h.NodeID != fileID {
			return 0, syscall.ENOENT, true
		}
		t.Getattrs.Add(1)
		// struct fuse_attr_out: attr_valid u64, attr_valid_nsec u32,
		// dummy u32, attr.
		clear(out[:attrOutSize])
		le.PutUint64(out[0:], t.AttrValidNs/1e9)
		le.PutUint32(out[8:], uint32(t.AttrValidNs%1e9))
		putAttr(out[16:], h.NodeID)
		return attrOutSize, 0, true
	case opOpen:
		if h.NodeID != fileID {
			return 0, syscall.EISDIR, true
		}
		clear(out[:openOutSize]) // fh 0, open_flags 0, backing_id 0
		return openOutSize, 0, true
	case opFlush, opRelease, opDestroy:
		return 0, 0, true
	case opStatfs:
		clear(out[:statfsOutSize])
		le.PutUint32(out[40:], 4096) // bsize
		le.PutUint32(out[44:], 255)  // namelen
		le.PutUint32(out[48:], 4096) // frsize
		return statfsOutSize, 0, true
	case opForget, opBatchForget, opInterrupt:
		return 0, 0, false
	}
	return 0, syscall.ENOSYS, true
}

// init answers INIT: the kernel's major and minor (capped at maxMinor),
// max_write 128 KiB, no optional feature but FUSE_OVER_IO_URING when
// NewTree asked for it and the kernel offers it.
func (t *Tree) init(in, out []byte) int {
	minor := le.Uint32(in[4:])
	readahead := le.Uint32(in[8:])
	flags := uint64(le.Uint32(in[12:]))
	if flags&initExt != 0 {
		flags |= uint64(le.Uint32(in[16:])) << 32
	}
	var want uint64
	if flags&initExt != 0 {
		want |= initExt
	}
	if t.uring && flags&initOverUring != 0 {
		want |= initOverUring
		t.gotUring = true
	}
	clear(out[:initOutSize])
	le.PutUint32(out[0:], kernelMajor)
	le.PutUint32(out[4:], min(minor, maxMinor))
	le.PutUint32(out[8:], readahead)
	le.PutUint32(out[12:], uint32(want))
	le.PutUint16(out[16:], 12) // max_background
	le.PutUint16(out[18:], 9)  // congestion_threshold
	le.PutUint32(out[20:], maxWrite)
	le.PutUint32(out[24:], 1) // time_gran
	le.PutUint32(out[32:], uint32(want>>32))
	return initOutSize
}

// markInit closes InitDone; called by a transport after it wrote INIT's
// reply, when the kernel has processed it.
func (t *Tree) markInit() { t.initOnce.Do(func() { close(t.initDone) }) }

// putAttr writes struct fuse_attr for node id: the root a directory 0755,
// the file an empty regular file 0644, both owned by root, times zero.
//
//	0 ino | 8 size | 16 blocks | 24 atime | 32 mtime | 40 ctime (u64)
//	48 atimensec | 52 mtimensec | 56 ctimensec | 60 mode | 64 nlink
//	68 uid | 72 gid | 76 rdev | 80 blksize | 84 flags (u32)
func putAttr(b []byte, id uint64) {
	clear(b[:attrSize])
	le.PutUint64(b[0:], id)
	mode, nlink := uint32(syscall.S_IFREG|0o644), uint32(1)
	if id == rootID {
		mode, nlink = syscall.S_IFDIR|0o755, 2
	}
	le.PutUint32(b[60:], mode)
	le.PutUint32(b[64:], nlink)
	le.PutUint32(b[80:], 4096)
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}
