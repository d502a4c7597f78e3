package rawfuse

// FUSE over io_uring (Documentation/filesystems/fuse-io-uring.rst,
// fs/fuse/dev_uring.c), without liburing.
//
// The kernel has one queue per possible CPU and puts a request on the queue
// of the CPU its caller runs on. The server gives each queue ring entries:
// a header buffer and a payload buffer, registered with an
// IORING_OP_URING_CMD SQE (cmd_op FUSE_IO_URING_CMD_REGISTER). A request
// arrives as the completion (CQE) of that SQE, its fuse_in_header and fixed
// argument in the header buffer, the rest in the payload; the server writes
// fuse_out_header into the header buffer and the reply into the payload and
// submits FUSE_IO_URING_CMD_COMMIT_AND_FETCH, which completes the request
// and waits for the next one: one io_uring_enter(2) per request, against a
// read(2) and a write(2) on /dev/fuse. Requests use the ring once every
// queue has an entry registered; until then, and always for FORGET and
// INTERRUPT, they come through /dev/fuse, which must still be served.
//
// Each queue here has its own ring, driven by one goroutine locked to its
// thread (completions are delivered as task work to the thread that
// submitted the command) and, if asked, pinned to the queue's CPU, as
// libfuse does: a request then wakes a server on the CPU it came from.

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// io_uring ABI (include/uapi/linux/io_uring.h).
const (
	setupCQSize      = 1 << 3
	setupSQE128      = 1 << 10 // 128-byte SQEs: URING_CMD gets 80 bytes of command
	enterGetEvents   = 1 << 0
	featSingleMmap   = 1 << 0
	offSQRing        = 0
	offCQRing        = 0x8000000
	offSQEs          = 0x10000000
	opURingCmd       = 46 // IORING_OP_URING_CMD
	sqeSize          = 128
	cqeSize          = 16
	uringParamsBytes = 120
)

// SQE byte offsets (struct io_uring_sqe).
const (
	sqeOpcode   = 0  // u8
	sqeFd       = 4  // s32
	sqeCmdOp    = 8  // u32 (union with off)
	sqeAddr     = 16 // u64
	sqeLen      = 24 // u32
	sqeUserData = 32 // u64
	sqeCmd      = 48 // the command area, 80 bytes with SQE128
)

// FUSE over io_uring ABI (include/uapi/linux/fuse.h, 7.42+).
const (
	cmdRegister       = 1 // FUSE_IO_URING_CMD_REGISTER
	cmdCommitAndFetch = 2 // FUSE_IO_URING_CMD_COMMIT_AND_FETCH

	// struct fuse_uring_cmd_req in the SQE's command area:
	//	0 flags u64 | 8 commit_id u64 | 16 qid u16 | 18 padding[6]
	cmdReqCommitID = 8
	cmdReqQID      = 16

	// struct fuse_uring_req_header, 288 bytes:
	//	0   in_out[128]  fuse_in_header, then fuse_out_header
	//	128 op_in[128]   the fixed per-opcode argument (in_args[0])
	//	256 ring_ent_in_out: flags u64 | commit_id u64 |
	//	    payload_sz u32 | padding u32 | reserved u64
	ringHeaderSize = 288
	hdrOpIn        = 128
	hdrOpInSize    = 128
	hdrCommitID    = 256 + 8
	hdrPayloadSz   = 256 + 16
)

// uringParams is struct io_uring_params, with struct io_sqring_offsets and
// struct io_cqring_offsets inline.
type uringParams struct {
	sqEntries, cqEntries, flags, sqThreadCPU, sqThreadIdle, features, wqFd uint32
	resv                                                                   [3]uint32
	// io_sqring_offsets
	sqHead, sqTail, sqRingMask, sqRingEntries, sqFlags, sqDropped, sqArray, sqResv1 uint32
	sqUserAddr                                                                      uint64
	// io_cqring_offsets
	cqHead, cqTail, cqRingMask, cqRingEntries, cqOverflow, cqCqes, cqFlags, cqResv1 uint32
	cqUserAddr                                                                      uint64
}

var _ [uringParamsBytes - unsafe.Sizeof(uringParams{})]struct{} // the size is ABI

// ring is one io_uring instance with its shared rings mapped.
type ring struct {
	fd                    int
	single                bool // one mapping holds both rings (cqMap == sqMap)
	sqMap, cqMap, sqesMap []byte
	sqHead, sqTail        *uint32 // the kernel moves head, we move tail
	sqMask                uint32
	sqArray               []uint32
	cqHead, cqTail        *uint32 // we move head, the kernel moves tail
	cqMask                uint32
	cqes                  []byte
}

func newRing(entries, cqEntries uint32) (*ring, error) {
	var p uringParams
	p.flags = setupSQE128 | setupCQSize
	p.cqEntries = cqEntries
	fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, uintptr(entries), uintptr(unsafe.Pointer(&p)), 0)
	if errno != 0 {
		return nil, fmt.Errorf("io_uring_setup: %w", errno)
	}
	r := &ring{fd: int(fd)}
	sqSize := int(p.sqArray + p.sqEntries*4)
	cqSize := int(p.cqCqes + p.cqEntries*cqeSize)
	mmap := func(off int64, size int) ([]byte, error) {
		return unix.Mmap(r.fd, off, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	}
	var err error
	if p.features&featSingleMmap != 0 {
		if r.sqMap, err = mmap(offSQRing, max(sqSize, cqSize)); err != nil {
			r.close()
			return nil, fmt.Errorf("io_uring mmap: %w", err)
		}
		r.cqMap, r.single = r.sqMap, true
	} else {
		if r.sqMap, err = mmap(offSQRing, sqSize); err == nil {
			r.cqMap, err = mmap(offCQRing, cqSize)
		}
		if err != nil {
			r.close()
			return nil, fmt.Errorf("io_uring mmap: %w", err)
		}
	}
	if r.sqesMap, err = mmap(offSQEs, int(p.sqEntries)*sqeSize); err != nil {
		r.close()
		return nil, fmt.Errorf("io_uring mmap of SQEs: %w", err)
	}
	u32 := func(b []byte, off uint32) *uint32 { return (*uint32)(unsafe.Pointer(&b[off])) }
	r.sqHead, r.sqTail, r.sqMask = u32(r.sqMap, p.sqHead), u32(r.sqMap, p.sqTail), *u32(r.sqMap, p.sqRingMask)
	r.sqArray = unsafe.Slice(u32(r.sqMap, p.sqArray), p.sqEntries)
	r.cqHead, r.cqTail, r.cqMask = u32(r.cqMap, p.cqHead), u32(r.cqMap, p.cqTail), *u32(r.cqMap, p.cqRingMask)
	r.cqes = r.cqMap[p.cqCqes : p.cqCqes+p.cqEntries*cqeSize]
	return r, nil
}

func (r *ring) close() {
	if r.single {
		r.cqMap = nil
	}
	for _, m := range [][]byte{r.sqesMap, r.cqMap, r.sqMap} {
		if m != nil {
			unix.Munmap(m)
		}
	}
	unix.Close(r.fd)
}

// nextSQE returns the next free SQE, zeroed, and publishes it in the SQ
// ring (the kernel takes it at the next enter). Only the ring's own
// goroutine calls it, and never queues more than the ring's entries.
func (r *ring) nextSQE() []byte {
	tail := *r.sqTail
	i := tail & r.sqMask
	sqe := r.sqesMap[int(i)*sqeSize : int(i+1)*sqeSize]
	clear(sqe)
	r.sqArray[i] = i
	atomic.StoreUint32(r.sqTail, tail+1)
	return sqe
}

// unsubmitted is the number of SQEs the kernel has not consumed yet.
func (r *ring) unsubmitted() uint32 { return *r.sqTail - atomic.LoadUint32(r.sqHead) }

// enter submits what is queued and, with wait, sleeps until at least one
// completion is there.
func (r *ring) enter(wait bool) error {
	var minComplete, flags uintptr
	if wait {
		minComplete, flags = 1, enterGetEvents
	}
	_, _, errno := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd), uintptr(r.unsubmitted()), minComplete, flags, 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}

// reap calls f for each completion (user_data, res) and frees them.
func (r *ring) reap(f func(userData uint64, res int32)) {
	head := *r.cqHead
	for tail := atomic.LoadUint32(r.cqTail); head != tail; head++ {
		c := r.cqes[int(head&r.cqMask)*cqeSize:]
		f(le.Uint64(c[0:]), int32(le.Uint32(c[8:])))
	}
	atomic.StoreUint32(r.cqHead, head)
}

// ringEntry is one registered request buffer pair.
type ringEntry struct {
	hdr, payload []byte
	iov          []unix.Iovec // [header, payload], read by the kernel at REGISTER
}

// Uring serves a connection's ring queues; see StartUring.
type Uring struct {
	wg   sync.WaitGroup
	mu   sync.Mutex
	errs []error
}

// StartUring registers depth entries on each of the kernel's queues (one
// per possible CPU) of the connection on the /dev/fuse fd and serves them
// in the background, each queue's thread pinned to its CPU if pin. Call it once INIT has agreed on FUSE over io_uring
// (t.InitDone, t.UringNegotiated): the kernel refuses REGISTER before
// (EAGAIN). It returns once every queue has registered, after which the
// kernel sends requests through the rings; /dev/fuse must still be served.
func StartUring(fd int, t *Tree, depth int, pin bool) (*Uring, error) {
	if !t.UringNegotiated() {
		return nil, errors.New("rawfuse: INIT did not agree on FUSE_OVER_IO_URING (is /sys/module/fuse/parameters/enable_uring Y?)")
	}
	nq, err := possibleCPUs()
	if err != nil {
		return nil, err
	}
	u := &Uring{}
	registered := make(chan error, nq)
	for qid := range nq {
		u.wg.Add(1)
		go func() {
			defer u.wg.Done()
			if err := serveQueue(fd, t, qid, depth, pin, registered); err != nil {
				u.mu.Lock()
				u.errs = append(u.errs, fmt.Errorf("queue %d: %w", qid, err))
				u.mu.Unlock()
			}
		}()
	}
	var errs []error
	for range nq {
		if err := <-registered; err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return u, fmt.Errorf("rawfuse: io_uring register: %w", errors.Join(errs...))
	}
	return u, nil
}

// Wait returns when every queue has stopped (the connection ended), with
// the errors that stopped them.
func (u *Uring) Wait() error {
	u.wg.Wait()
	u.mu.Lock()
	defer u.mu.Unlock()
	return errors.Join(u.errs...)
}

// serveQueue runs queue qid: registers depth entries, sends the outcome of
// the registration on registered, then answers requests until the kernel
// tears the queue down.
func serveQueue(fd int, t *Tree, qid, depth int, pin bool, registered chan<- error) error {
	runtime.LockOSThread() // completions come as task work to this thread
	defer runtime.UnlockOSThread()
	if pin {
		var cpus unix.CPUSet
		cpus.Set(qid)
		unix.SchedSetaffinity(0, &cpus) // best effort, as libfuse
	}

	r, err := newRing(uint32(depth), uint32(2*depth))
	if err != nil {
		registered <- err
		return nil
	}
	defer r.close()
	// One mapping for the queue's buffers: per entry a page for the
	// header (and its iovec pair), then the payload, which must hold the
	// largest request (max_write and max_pages, 128 KiB here).
	page := os.Getpagesize()
	stride := page + maxWrite
	mem, err := unix.Mmap(-1, 0, depth*stride, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE)
	if err != nil {
		registered <- fmt.Errorf("mmap: %w", err)
		return nil
	}
	defer unix.Munmap(mem)
	ents := make([]ringEntry, depth)
	for i := range ents {
		e := &ents[i]
		b := mem[i*stride : (i+1)*stride]
		e.hdr, e.payload = b[:ringHeaderSize], b[page:]
		e.iov = unsafe.Slice((*unix.Iovec)(unsafe.Pointer(&b[512])), 2)
		e.iov[0].Base, e.iov[1].Base = &e.hdr[0], &e.payload[0]
		e.iov[0].SetLen(len(e.hdr))
		e.iov[1].SetLen(len(e.payload))
		sqe := r.nextSQE()
		putCmdSQE(sqe, fd, cmdRegister, uint64(i), qid, 0)
		le.PutUint64(sqe[sqeAddr:], uint64(uintptr(unsafe.Pointer(&e.iov[0]))))
		le.PutUint32(sqe[sqeLen:], 2)
	}
	// Submit without waiting: REGISTER does not complete until a request
	// comes, but an error completes it at once.
	if err := r.enter(false); err != nil {
		registered <- fmt.Errorf("io_uring_enter: %w", err)
		return nil
	}
	var regErr error
	inKernel := depth
	r.reap(func(_ uint64, res int32) {
		inKernel--
		if res < 0 && regErr == nil {
			regErr = fmt.Errorf("FUSE_IO_URING_CMD_REGISTER: %w", unix.Errno(-res))
		}
	})
	registered <- regErr
	if regErr != nil {
		return nil
	}

	var scratch [256]byte
	stopping := false
	for {
		if err := r.enter(true); err != nil {
			if errors.Is(err, unix.EINTR) || errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EBUSY) {
				continue
			}
			return fmt.Errorf("io_uring_enter: %w", err)
		}
		var herr error
		r.reap(func(ud uint64, res int32) {
			inKernel--
			if res < 0 {
				// ENOTCONN, ECONNABORTED: the connection is being
				// torn down; the entries we do not hold come back so.
				stopping = true
				if e := unix.Errno(-res); e != unix.ENOTCONN && e != unix.ECONNABORTED && e != unix.ECANCELED && herr == nil {
					herr = fmt.Errorf("ring completion: %w", e)
				}
				return
			}
			if stopping || ud >= uint64(len(ents)) {
				return
			}
			e := &ents[ud]
			t.RingRequests.Add(1)
			h, _ := parseInHeader(e.hdr)
			commitID := le.Uint64(e.hdr[hdrCommitID:])
			psz := min(int(le.Uint32(e.hdr[hdrPayloadSz:])), len(e.payload))
			a0 := e.hdr[hdrOpIn : hdrOpIn+min(arg0Size(h.Opcode), hdrOpInSize)]
			// The reply goes into the payload: copy the request's part
			// of it out first (a name, here).
			rest := append(scratch[:0], e.payload[:psz]...)
			n, errno, _ := t.handle(h, a0, rest, e.payload)
			putOutHeader(e.hdr, n, errno, h.Unique)
			le.PutUint32(e.hdr[hdrPayloadSz:], uint32(n))
			putCmdSQE(r.nextSQE(), fd, cmdCommitAndFetch, ud, qid, commitID)
			inKernel++
		})
		if herr != nil {
			return herr
		}
		if stopping && inKernel == 0 {
			return nil
		}
	}
}

// putCmdSQE fills an IORING_OP_URING_CMD SQE on /dev/fuse with a
// struct fuse_uring_cmd_req.
func putCmdSQE(sqe []byte, fd, cmdOp int, userData uint64, qid int, commitID uint64) {
	sqe[sqeOpcode] = opURingCmd
	le.PutUint32(sqe[sqeFd:], uint32(fd))
	le.PutUint32(sqe[sqeCmdOp:], uint32(cmdOp))
	le.PutUint64(sqe[sqeUserData:], userData)
	le.PutUint64(sqe[sqeCmd+cmdReqCommitID:], commitID)
	le.PutUint16(sqe[sqeCmd+cmdReqQID:], uint16(qid))
}

// possibleCPUs is the number of CPUs the kernel may ever bring up
// (num_possible_cpus(), the number of FUSE ring queues).
func possibleCPUs() (int, error) {
	b, err := os.ReadFile("/sys/devices/system/cpu/possible")
	if err != nil {
		return 0, fmt.Errorf("rawfuse: %w", err)
	}
	return parseCPUList(string(b))
}

// parseCPUList returns one more than the highest CPU of a list like
// "0-3,8".
func parseCPUList(s string) (int, error) {
	n := 0
	for _, part := range strings.Split(strings.TrimSpace(s), ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err1 := strconv.Atoi(lo)
		z := a
		var err2 error
		if isRange {
			z, err2 = strconv.Atoi(hi)
		}
		if err1 != nil || err2 != nil || z < a {
			return 0, fmt.Errorf("rawfuse: bad CPU list %q", s)
		}
		n = max(n, z+1)
	}
	return n, nil
}
