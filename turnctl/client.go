package turnctl

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/textproto"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"ckptfs/internal/bytejson"
	"ckptfs/internal/ckpt"
)

// Client speaks the control protocol to a daemon's socket. It implements
// Handler, and is safe for concurrent use: every call is one request on a
// connection of its own.
//
// It is a minimal HTTP/1.1 client (a POST with a JSON body; a reply with
// Content-Length or chunked), not net/http's: linking net/http (and
// crypto/tls) costs every start of turnctl, which agents' hooks run at
// every prompt, milliseconds of initialisation and page faults. The daemon
// serves with net/http, so curl works too.
type Client struct {
	socket string
}

var _ Handler = (*Client)(nil)

// Dial returns a Client for the socket at path. It connects once to check
// that a daemon answers.
func Dial(path string) (*Client, error) {
	c, err := net.DialTimeout("unix", path, 5*time.Second)
	if err != nil {
		return nil, fmt.Errorf("cannot reach the ckptfs daemon at %s: %w", path, err)
	}
	defer c.Close()
	if err := checkPeer(c); err != nil {
		return nil, fmt.Errorf("ckptfs daemon at %s: %w", path, err)
	}
	return NewClient(path), nil
}

// checkPeer refuses a socket whose other end is not run by the caller's
// own user or by root: a daemon runs as the user who mounted, so any
// other owner is someone else's process posing as the daemon, to which
// no prompt or command may go.
func checkPeer(c net.Conn) error {
	cred, err := PeerCred(c)
	if err != nil {
		return fmt.Errorf("who is at the socket: %w", err)
	}
	if me := os.Geteuid(); int(cred.Uid) != me && cred.Uid != 0 {
		return fmt.Errorf("the socket is served by uid %d (pid %d), not by you (uid %d) or root: not a ckptfs daemon of yours", cred.Uid, cred.Pid, me)
	}
	return nil
}

// PeerCred is what the kernel says (SO_PEERCRED) about the process at the
// other end of a unix socket connection.
func PeerCred(c net.Conn) (*unix.Ucred, error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return nil, errors.New("not a unix socket connection")
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return nil, err
	}
	return cred, cerr
}

// NewClient returns a Client for the socket at path without connecting.
func NewClient(path string) *Client {
	return &Client{socket: path}
}

// Close releases the Client's resources (it holds none between calls).
func (c *Client) Close() error { return nil }

// response is a reply's status and headers, and its body.
type response struct {
	status     int
	statusText string // "404 Not Found"
	header     textproto.MIMEHeader
	body       io.ReadCloser
}

// post sends req to /v1/name and returns the response, or the daemon's
// *Error for a non-200 reply.
func (c *Client) post(ctx context.Context, name string, req any) (*response, error) {
	body, err := bytejson.Marshal(req)
	if err != nil {
		return nil, err
	}
	resp, err := c.roundTrip(ctx, name, body)
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
		return nil, fmt.Errorf("ckptfs daemon at %s: %s: %w", c.socket, name, err)
	}
	if resp.status == 200 {
		return resp, nil
	}
	defer resp.body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.body, MaxRequestBytes))
	var e Error
	if bytejson.Unmarshal(data, &e) != nil || e.Message == "" {
		return nil, fmt.Errorf("ckptfs daemon: %s", resp.statusText)
	}
	return nil, &e
}

// roundTrip sends one request on a new connection and reads the reply's
// head; the body reads from the connection, and closing it closes the
// connection.
func (c *Client) roundTrip(ctx context.Context, name string, body []byte) (*response, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", c.socket)
	if err != nil {
		return nil, err
	}
	if err := checkPeer(conn); err != nil {
		conn.Close()
		return nil, err
	}
	// Cancelling ctx aborts whatever the call is waiting for.
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	fail := func(err error) (*response, error) {
		stop()
		conn.Close()
		return nil, err
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "POST /v1/%s HTTP/1.1\r\nHost: ckptfs\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n", name, len(body))
	if id := Op(ctx); id != "" && validOp(id) {
		fmt.Fprintf(&b, "%s: %s\r\n", OpHeader, id)
	}
	b.WriteString("\r\n")
	b.Write(body)
	if _, err := conn.Write(b.Bytes()); err != nil {
		return fail(err)
	}
	br := bufio.NewReader(conn)
	tp := textproto.NewReader(br)
	line, err := tp.ReadLine()
	if err != nil {
		return fail(fmt.Errorf("reading reply: %w", eofIsUnexpected(err)))
	}
	proto, status, ok := strings.Cut(line, " ")
	code, cerr := strconv.Atoi(strings.SplitN(status, " ", 2)[0])
	if !ok || !strings.HasPrefix(proto, "HTTP/1.") || cerr != nil || code < 100 || code > 999 {
		return fail(fmt.Errorf("malformed reply %q", line))
	}
	h, err := tp.ReadMIMEHeader()
	if err != nil {
		return fail(fmt.Errorf("reading reply: %w", eofIsUnexpected(err)))
	}
	resp := &response{status: code, statusText: status, header: h}
	cl := &connBody{conn: conn, stop: stop}
	switch te := strings.ToLower(h.Get("Transfer-Encoding")); {
	case te == "chunked":
		cl.r = &chunkedReader{r: br}
	case te != "" && te != "identity":
		return fail(fmt.Errorf("reply with unsupported Transfer-Encoding %q", te))
	case h.Get("Content-Length") != "":
		n, err := strconv.ParseInt(h.Get("Content-Length"), 10, 64)
		if err != nil || n < 0 {
			return fail(fmt.Errorf("reply with bad Content-Length %q", h.Get("Content-Length")))
		}
		cl.r = &exactReader{r: br, n: n}
	default:
		cl.r = br // until the daemon closes the connection
	}
	resp.body = cl
	return resp, nil
}

func eofIsUnexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// connBody is a reply's body; Close closes the connection.
type connBody struct {
	r    io.Reader
	conn net.Conn
	stop func() bool
}

func (b *connBody) Read(p []byte) (int, error) { return b.r.Read(p) }

func (b *connBody) Close() error {
	b.stop()
	return b.conn.Close()
}

// exactReader reads n bytes and then reports io.EOF; fewer is an error.
type exactReader struct {
	r io.Reader
	n int64
}

func (e *exactReader) Read(p []byte) (int, error) {
	if e.n <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > e.n {
		p = p[:e.n]
	}
	n, err := e.r.Read(p)
	e.n -= int64(n)
	if err == io.EOF && e.n > 0 {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

// chunkedReader decodes a chunked body (RFC 9112 §7.1).
type chunkedReader struct {
	r    *bufio.Reader
	left int64 // bytes left in the current chunk
	done bool
	err  error
}

func (c *chunkedReader) Read(p []byte) (int, error) {
	for c.left == 0 && !c.done && c.err == nil {
		c.err = c.next()
	}
	if c.err != nil {
		return 0, c.err
	}
	if c.done {
		return 0, io.EOF
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	if c.left == 0 && err == nil {
		err = c.crlf()
	}
	if err != nil {
		c.err = eofIsUnexpected(err)
		if n > 0 {
			return n, nil
		}
		return 0, c.err
	}
	return n, nil
}

// next reads a chunk-size line; after the last chunk, the trailers.
func (c *chunkedReader) next() error {
	line, err := c.line()
	if err != nil {
		return err
	}
	size, _, _ := strings.Cut(line, ";")
	n, err := strconv.ParseInt(strings.TrimSpace(size), 16, 64)
	if err != nil || n < 0 {
		return fmt.Errorf("malformed chunk size %q", line)
	}
	if n > 0 {
		c.left = n
		return nil
	}
	for { // trailers, up to the empty line
		line, err := c.line()
		if err != nil {
			return err
		}
		if line == "" {
			c.done = true
			return nil
		}
	}
}

func (c *chunkedReader) line() (string, error) {
	s, err := c.r.ReadSlice('\n')
	if err != nil {
		if errors.Is(err, bufio.ErrBufferFull) {
			return "", errors.New("chunk header line too long")
		}
		return "", eofIsUnexpected(err)
	}
	return strings.TrimRight(string(s), "\r\n"), nil
}

func (c *chunkedReader) crlf() error {
	s, err := c.line()
	if err != nil {
		return err
	}
	if s != "" {
		return errors.New("malformed chunked body: no CRLF after a chunk")
	}
	return nil
}

// call posts req and decodes the JSON reply into a new Rep.
func call[Rep any](ctx context.Context, c *Client, name string, req any) (*Rep, error) {
	resp, err := c.post(ctx, name, req)
	if err != nil {
		return nil, err
	}
	defer resp.body.Close()
	rep := new(Rep)
	data, err := io.ReadAll(resp.body)
	if err == nil {
		err = bytejson.Unmarshal(data, rep)
	}
	if err != nil {
		return nil, fmt.Errorf("ckptfs daemon: bad reply to %s: %w", name, err)
	}
	return rep, nil
}

func (c *Client) Begin(ctx context.Context, req BeginRequest) (*BeginReply, error) {
	return call[BeginReply](ctx, c, "begin", req)
}

func (c *Client) End(ctx context.Context, req EndRequest) (*EndReply, error) {
	return call[EndReply](ctx, c, "end", req)
}

func (c *Client) Status(ctx context.Context, req StatusRequest) (*StatusReply, error) {
	return call[StatusReply](ctx, c, "status", req)
}

func (c *Client) Log(ctx context.Context, req LogRequest) (*LogReply, error) {
	return call[LogReply](ctx, c, "log", req)
}

func (c *Client) Show(ctx context.Context, req ShowRequest) (*ShowReply, error) {
	return call[ShowReply](ctx, c, "show", req)
}

func (c *Client) Diff(ctx context.Context, req DiffRequest) (*DiffReply, error) {
	return call[DiffReply](ctx, c, "diff", req)
}

func (c *Client) Rewind(ctx context.Context, req RewindRequest) (*RewindReply, error) {
	return call[RewindReply](ctx, c, "rewind", req)
}

func (c *Client) Undo(ctx context.Context, req UndoRequest) (*RewindReply, error) {
	return call[RewindReply](ctx, c, "undo", req)
}

func (c *Client) Restore(ctx context.Context, req RestoreRequest) (*RewindReply, error) {
	return call[RewindReply](ctx, c, "restore", req)
}

func (c *Client) Revert(ctx context.Context, req RevertRequest) (*RewindReply, error) {
	return call[RewindReply](ctx, c, "revert", req)
}

func (c *Client) Verify(ctx context.Context, req VerifyRequest) (*VerifyReply, error) {
	return call[VerifyReply](ctx, c, "verify", req)
}

func (c *Client) Forget(ctx context.Context, req ForgetRequest) (*ForgetReply, error) {
	return call[ForgetReply](ctx, c, "forget", req)
}

func (c *Client) Step(ctx context.Context, req StepRequest) (*StepReply, error) {
	return call[StepReply](ctx, c, "step", req)
}

func (c *Client) Pin(ctx context.Context, req PinRequest) (*PinReply, error) {
	return call[PinReply](ctx, c, "pin", req)
}

func (c *Client) Unpin(ctx context.Context, req UnpinRequest) (*UnpinReply, error) {
	return call[UnpinReply](ctx, c, "unpin", req)
}

func (c *Client) GC(ctx context.Context, req GCRequest) (*GCReply, error) {
	return call[GCReply](ctx, c, "gc", req)
}

func (c *Client) Policy(ctx context.Context, req PolicyRequest) (*PolicyReply, error) {
	return call[PolicyReply](ctx, c, "policy", req)
}

func (c *Client) Du(ctx context.Context, req DuRequest) (*DuReply, error) {
	return call[DuReply](ctx, c, "du", req)
}

func (c *Client) MountAt(ctx context.Context, req MountAtRequest) (*MountAtReply, error) {
	return call[MountAtReply](ctx, c, "mount-at", req)
}

func (c *Client) Progress(ctx context.Context, req ProgressRequest) (*ProgressReply, error) {
	return call[ProgressReply](ctx, c, "progress", req)
}

// validOp: a command ID fits in a header line (letters, digits, '-').
func validOp(id string) bool {
	if len(id) > 64 {
		return false
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-') {
			return false
		}
	}
	return true
}

// Cat streams the file's bytes; the caller closes rep.Body.
func (c *Client) Cat(ctx context.Context, req CatRequest) (*CatReply, error) {
	resp, err := c.post(ctx, "cat", req)
	if err != nil {
		return nil, err
	}
	rep := &CatReply{Body: resp.body, State: FileState{Type: ckpt.Regular, Mode: resp.header.Get("Ckptfs-Mode")}}
	rep.Turn, _ = strconv.ParseUint(resp.header.Get("Ckptfs-Turn"), 10, 64)
	rep.State.Size, _ = strconv.ParseInt(resp.header.Get("Ckptfs-Size"), 10, 64)
	return rep, nil
}

// Tree streams the tree at the end of a turn; the caller closes rep.Body.
func (c *Client) Tree(ctx context.Context, req TreeRequest) (*TreeReply, error) {
	resp, err := c.post(ctx, "tree", req)
	if err != nil {
		return nil, err
	}
	rep := &TreeReply{Body: resp.body}
	rep.Turn, _ = strconv.ParseUint(resp.header.Get("Ckptfs-Turn"), 10, 64)
	rep.Step, _ = strconv.Atoi(resp.header.Get("Ckptfs-Step"))
	return rep, nil
}
