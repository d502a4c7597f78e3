package rawfuse

import (
	"syscall"
	"testing"
)

// initIn is a fuse_init_in as the kernel sends it: 7.45, FUSE_INIT_EXT,
// and FUSE_OVER_IO_URING in flags2 when offered.
func initIn(uring bool) []byte {
	b := make([]byte, initInSize)
	le.PutUint32(b[0:], 7)
	le.PutUint32(b[4:], 45)
	le.PutUint32(b[8:], 128<<10)
	le.PutUint32(b[12:], initExt|1) // and FUSE_ASYNC_READ, which we do not take
	if uring {
		le.PutUint32(b[16:], initOverUring>>32)
	}
	return b
}

func TestInitNegotiatesUring(t *testing.T) {
	for _, tc := range []struct {
		ask, offer, want bool
	}{
		{false, true, false},
		{true, false, false},
		{true, true, true},
	} {
		tr := NewTree(tc.ask)
		out := make([]byte, 4096)
		n, errno, reply := tr.handle(inHeader{Opcode: opInit, Unique: 1}, initIn(tc.offer), nil, out)
		if n != initOutSize || errno != 0 || !reply {
			t.Fatalf("INIT: n %d errno %v reply %v", n, errno, reply)
		}
		flags := uint64(le.Uint32(out[12:])) | uint64(le.Uint32(out[32:]))<<32
		if got := flags&initOverUring != 0; got != tc.want || tr.UringNegotiated() != tc.want {
			t.Errorf("ask %v offer %v: FUSE_OVER_IO_URING %v, negotiated %v, want %v", tc.ask, tc.offer, got, tr.UringNegotiated(), tc.want)
		}
		if flags&1 != 0 {
			t.Errorf("took FUSE_ASYNC_READ: %#x", flags)
		}
		if le.Uint32(out[0:]) != 7 || le.Uint32(out[4:]) != 45 || le.Uint32(out[20:]) != maxWrite {
			t.Errorf("major %d minor %d max_write %d", le.Uint32(out[0:]), le.Uint32(out[4:]), le.Uint32(out[20:]))
		}
	}
}

func TestLookupAndGetattr(t *testing.T) {
	tr := NewTree(false)
	tr.EntryValidNs = 1_500_000_000
	out := make([]byte, 4096)
	n, errno, _ := tr.handle(inHeader{Opcode: opLookup, NodeID: rootID}, nil, []byte("f\x00"), out)
	if n != entryOutSize || errno != 0 {
		t.Fatalf("LOOKUP f: n %d errno %v", n, errno)
	}
	if id, sec, nsec := le.Uint64(out[0:]), le.Uint64(out[16:]), le.Uint32(out[32:]); id != fileID || sec != 1 || nsec != 500_000_000 {
		t.Errorf("entry: nodeid %d entry_valid %d.%09d", id, sec, nsec)
	}
	if mode := le.Uint32(out[40+60:]); mode != syscall.S_IFREG|0o644 {
		t.Errorf("entry mode %o", mode)
	}
	if _, errno, _ := tr.handle(inHeader{Opcode: opLookup, NodeID: rootID}, nil, []byte("g\x00"), out); errno != syscall.ENOENT {
		t.Errorf("LOOKUP g: %v", errno)
	}
	n, errno, _ = tr.handle(inHeader{Opcode: opGetattr, NodeID: rootID}, make([]byte, 16), nil, out)
	if n != attrOutSize || errno != 0 {
		t.Fatalf("GETATTR: n %d errno %v", n, errno)
	}
	if valid, ino, mode := le.Uint64(out[0:]), le.Uint64(out[16:]), le.Uint32(out[16+60:]); valid != 0 || ino != rootID || mode != syscall.S_IFDIR|0o755 {
		t.Errorf("attr_out: valid %d ino %d mode %o", valid, ino, mode)
	}
	if tr.Getattrs.Load() != 1 {
		t.Errorf("getattrs %d", tr.Getattrs.Load())
	}
	if _, errno, _ := tr.handle(inHeader{Opcode: 9999}, nil, nil, out); errno != syscall.ENOSYS {
		t.Errorf("unknown opcode: %v", errno)
	}
	if _, _, reply := tr.handle(inHeader{Opcode: opForget}, make([]byte, 8), nil, out); reply {
		t.Error("FORGET answered")
	}
}

func TestOutHeader(t *testing.T) {
	b := make([]byte, outHeaderSize)
	putOutHeader(b, 104, syscall.ENOENT, 0x1122334455)
	if le.Uint32(b[0:]) != 120 || int32(le.Uint32(b[4:])) != -int32(syscall.ENOENT) || le.Uint64(b[8:]) != 0x1122334455 {
		t.Errorf("out header % x", b)
	}
}

func TestCmdSQE(t *testing.T) {
	sqe := make([]byte, sqeSize)
	putCmdSQE(sqe, 7, cmdCommitAndFetch, 3, 1, 0xabc)
	if sqe[0] != 46 || le.Uint32(sqe[4:]) != 7 || le.Uint32(sqe[8:]) != cmdCommitAndFetch ||
		le.Uint64(sqe[32:]) != 3 || le.Uint64(sqe[48:]) != 0 || le.Uint64(sqe[56:]) != 0xabc || le.Uint16(sqe[64:]) != 1 {
		t.Errorf("sqe % x", sqe[:72])
	}
}

func TestParseCPUList(t *testing.T) {
	for s, want := range map[string]int{"0\n": 1, "0-1\n": 2, "0-3,8": 9, "0,2-5": 6} {
		if n, err := parseCPUList(s); err != nil || n != want {
			t.Errorf("%q: %d %v, want %d", s, n, err, want)
		}
	}
	if _, err := parseCPUList("x"); err == nil {
		t.Error("x: no error")
	}
}
