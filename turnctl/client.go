package turnctl

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"
)

// Client speaks the control protocol to a daemon's socket. It implements
// Handler.
type Client struct {
	socket string
	http   *http.Client
}

var _ Handler = (*Client)(nil)

// Dial returns a Client for the socket at path. It connects once to check
// that a daemon answers.
func Dial(path string) (*Client, error) {
	c, err := net.DialTimeout("unix", path, 5*time.Second)
	if err != nil {
		return nil, fmt.Errorf("cannot reach the ckptfs daemon at %s: %w", path, err)
	}
	c.Close()
	return NewClient(path), nil
}

// NewClient returns a Client for the socket at path without connecting.
func NewClient(path string) *Client {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		},
		MaxIdleConns:    1,
		IdleConnTimeout: 10 * time.Second,
	}
	return &Client{socket: path, http: &http.Client{Transport: tr}}
}

// Close releases idle connections.
func (c *Client) Close() error {
	c.http.CloseIdleConnections()
	return nil
}

// post sends req to /v1/name and returns the response, or the daemon's
// *Error for a non-200 reply.
func (c *Client) post(ctx context.Context, name string, req any) (*http.Response, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://ckptfs/v1/"+name, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	hreq.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(hreq)
	if err != nil {
		return nil, fmt.Errorf("ckptfs daemon at %s: %w", c.socket, err)
	}
	if resp.StatusCode == http.StatusOK {
		return resp, nil
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, MaxRequestBytes))
	var e Error
	if json.Unmarshal(data, &e) != nil || e.Message == "" {
		return nil, fmt.Errorf("ckptfs daemon: %s", resp.Status)
	}
	return nil, &e
}

// call posts req and decodes the JSON reply into a new Rep.
func call[Rep any](ctx context.Context, c *Client, name string, req any) (*Rep, error) {
	resp, err := c.post(ctx, name, req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	rep := new(Rep)
	if err := json.NewDecoder(resp.Body).Decode(rep); err != nil {
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

func (c *Client) Verify(ctx context.Context, req VerifyRequest) (*VerifyReply, error) {
	return call[VerifyReply](ctx, c, "verify", req)
}

// Cat streams the file's bytes; the caller closes rep.Body.
func (c *Client) Cat(ctx context.Context, req CatRequest) (*CatReply, error) {
	resp, err := c.post(ctx, "cat", req)
	if err != nil {
		return nil, err
	}
	rep := &CatReply{Body: resp.Body, State: FileState{Type: "file", Mode: resp.Header.Get("Ckptfs-Mode")}}
	rep.Turn, _ = strconv.ParseUint(resp.Header.Get("Ckptfs-Turn"), 10, 64)
	rep.State.Size, _ = strconv.ParseInt(resp.Header.Get("Ckptfs-Size"), 10, 64)
	return rep, nil
}
