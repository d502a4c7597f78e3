package rawfuse

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// ServeDev serves requests on the /dev/fuse fd with the classic transport:
// read(2) one request, write(2) its reply, until the connection ends
// (unmount: ENODEV), which returns nil. Several goroutines may call it on
// the same fd; each blocks in its own read.
func ServeDev(fd int, t *Tree) error {
	// The kernel wants room for a WRITE of max_write bytes in every read.
	in := make([]byte, maxWrite+4096)
	out := make([]byte, outHeaderSize+4096)
	for {
		n, err := unix.Read(fd, in)
		switch {
		case err == nil:
		case errors.Is(err, unix.EINTR), errors.Is(err, unix.ENOENT), errors.Is(err, unix.EAGAIN):
			continue // interrupted, or the request was aborted before we got it
		case errors.Is(err, unix.ENODEV):
			return nil // unmounted
		default:
			return fmt.Errorf("rawfuse: read /dev/fuse: %w", err)
		}
		h, ok := parseInHeader(in[:n])
		if !ok {
			return fmt.Errorf("rawfuse: short read of %d bytes from /dev/fuse", n)
		}
		t.DevRequests.Add(1)
		body := in[inHeaderSize:n]
		a0 := min(arg0Size(h.Opcode), len(body))
		m, errno, reply := t.handle(h, body[:a0], body[a0:], out[outHeaderSize:])
		if !reply {
			continue
		}
		putOutHeader(out, m, errno, h.Unique)
		if _, err := unix.Write(fd, out[:outHeaderSize+m]); err != nil {
			if errors.Is(err, unix.ENOENT) {
				continue // the request was interrupted meanwhile
			}
			if errors.Is(err, unix.ENODEV) {
				return nil
			}
			return fmt.Errorf("rawfuse: write /dev/fuse (opcode %d): %w", h.Opcode, err)
		}
		if h.Opcode == opInit {
			t.markInit()
		}
	}
}
