package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"ckptfs/internal/ckpt"
	"ckptfs/turnctl"
)

// serve starts a server for h on a socket in a temporary directory and
// returns its path; it stops when the test ends.
func serve(t *testing.T, h turnctl.Handler) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "ctl.sock")
	ln, err := Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- Serve(ln, h) }()
	t.Cleanup(func() {
		ln.Close()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve returned %v after Close", err)
			}
		case <-time.After(5 * time.Second):
			t.Error("Serve did not return after Close")
		}
	})
	return sock
}

// raw sends one HTTP request on the socket and returns status and body.
func raw(t *testing.T, sock, method, path, body string) (int, string) {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
	}}
	defer c.CloseIdleConnections()
	req, _ := http.NewRequest(method, "http://ckptfs"+path, strings.NewReader(body))
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data)
}

func TestProtocolRoundTrip(t *testing.T) {
	f := newFixture(t)
	sock := serve(t, f.svc)
	c, err := turnctl.Dial(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	b, err := c.Begin(ctx, turnctl.BeginRequest{Label: "one", Ref: "m1"})
	if err != nil || b.Turn.Num != 1 {
		t.Fatalf("begin: %+v %v", b, err)
	}
	f.ov.Write("a.txt", "hello\n")
	e, err := c.End(ctx, turnctl.EndRequest{})
	if err != nil || e.Summary != "turn 1 closed: 1 file (+1 -0) by test" {
		t.Fatalf("end: %+v %v", e, err)
	}
	l, err := c.Log(ctx, turnctl.LogRequest{})
	if err != nil || len(l.Turns) != 2 || l.Turns[0].Stats == nil {
		t.Fatalf("log: %+v %v", l, err)
	}
	cat, err := c.Cat(ctx, turnctl.CatRequest{Turn: "ref:m1", Path: "a.txt"})
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(cat.Body)
	cat.Body.Close()
	if string(data) != "hello\n" || cat.Turn != 1 || cat.State.Mode != "0644" {
		t.Errorf("cat: %q %+v", data, cat)
	}
	// Errors arrive as *Error with their code and message.
	_, err = c.Show(ctx, turnctl.ShowRequest{Turn: "7"})
	var te *turnctl.Error
	if !errors.As(err, &te) || te.Code != turnctl.CodeBadRequest || te.Message != "no turn 7 (turns are 0-1)" {
		t.Errorf("show 7: %#v", err)
	}
	if _, err := c.Cat(ctx, turnctl.CatRequest{Turn: "0", Path: "a.txt"}); !isCode(err, turnctl.CodeNotFound) {
		t.Errorf("cat of a file absent at turn 0: %v", err)
	}
	// curl-style GET works for log and status.
	if code, body := raw(t, sock, "GET", "/v1/log", ""); code != 200 || !strings.Contains(body, `"turns"`) {
		t.Errorf("GET /v1/log: %d %s", code, body)
	}
}

func TestProtocolBadRequests(t *testing.T) {
	f := newFixture(t)
	sock := serve(t, f.svc)
	cases := []struct {
		method, path, body string
		status             int
		code               string
	}{
		{"POST", "/v1/begin", "{bad json", 400, turnctl.CodeBadRequest},
		{"POST", "/v1/begin", `{"label": 3}`, 400, turnctl.CodeBadRequest},
		{"POST", "/v1/begin", `{"lable": "x"}`, 400, turnctl.CodeBadRequest},
		{"POST", "/v1/begin", `{} {}`, 400, turnctl.CodeBadRequest},
		{"POST", "/v1/begin", `{"label": "` + strings.Repeat("x", ckpt.MaxText+1) + `"}`, 400, turnctl.CodeBadRequest},
		{"POST", "/v1/log", `{"paths": ["../x"]}`, 400, turnctl.CodeBadRequest},
		{"POST", "/v1/show", `{"turn": "0", "paths": ["/abs"]}`, 400, turnctl.CodeBadRequest},
		{"POST", "/v1/show", `{}`, 400, turnctl.CodeBadRequest},
		{"POST", "/v1/show", `{"turn": "abc"}`, 400, turnctl.CodeBadRequest},
		{"POST", "/v1/cat", `{"turn": "0", "path": "../../etc/passwd"}`, 400, turnctl.CodeBadRequest},
		{"POST", "/v1/diff", `{"from": "0", "paths": ["/abs"]}`, 400, turnctl.CodeBadRequest},
		{"POST", "/v1/nope", `{}`, 404, turnctl.CodeNotFound},
		{"GET", "/", "", 404, turnctl.CodeNotFound},
		{"GET", "/v1/begin", "", 405, turnctl.CodeMethod},
		{"DELETE", "/v1/log", "", 405, turnctl.CodeMethod},
		{"POST", "/v1/end", `{}`, 409, turnctl.CodeConflict},
		{"POST", "/v1/log", `{"n": -1}`, 400, turnctl.CodeBadRequest},
		{"POST", "/v1/begin", `{"label":"` + strings.Repeat("x", turnctl.MaxRequestBytes) + `"}`, 413, turnctl.CodeTooLarge},
	}
	for _, c := range cases {
		status, body := raw(t, sock, c.method, c.path, c.body)
		var e turnctl.Error
		if err := json.Unmarshal([]byte(body), &e); err != nil || status != c.status || e.Code != c.code || e.Message == "" {
			t.Errorf("%s %s %.40q: %d %s; want %d %s", c.method, c.path, c.body, status, body, c.status, c.code)
		}
	}
	// The daemon still serves.
	if status, _ := raw(t, sock, "POST", "/v1/status", ""); status != 200 {
		t.Errorf("status after bad requests: %d", status)
	}
}

// panicky is a Handler whose Log panics.
type panicky struct{ *Service }

func (panicky) Log(context.Context, turnctl.LogRequest) (*turnctl.LogReply, error) { panic("boom") }

func TestProtocolPanicIs500(t *testing.T) {
	var logged strings.Builder
	log.SetOutput(&logged)
	defer log.SetOutput(os.Stderr)
	f := newFixture(t)
	sock := serve(t, panicky{f.svc})
	status, body := raw(t, sock, "POST", "/v1/log", "{}")
	if status != 500 || !strings.Contains(body, turnctl.CodeInternal) {
		t.Errorf("panicking handler: %d %s", status, body)
	}
	if status, _ := raw(t, sock, "POST", "/v1/status", "{}"); status != 200 {
		t.Errorf("after a panic: %d", status)
	}
	if !strings.Contains(logged.String(), "BUG: panic serving /v1/log: boom") {
		t.Errorf("panic not logged: %q", logged.String())
	}
}

func TestPeerCheck(t *testing.T) {
	me := os.Getuid()
	if err := checkPeer(peer{uid: uint32(me)}, me); err != nil {
		t.Errorf("own uid refused: %v", err)
	}
	err := checkPeer(peer{uid: uint32(me + 1)}, me)
	if err == nil || err.Code != turnctl.CodeForbidden || httpStatus(err) != 403 {
		t.Errorf("other uid: %v", err)
	}
	if err := checkPeer(peer{err: errors.New("no creds")}, me); err == nil || err.Code != turnctl.CodeForbidden {
		t.Errorf("unknown peer: %v", err)
	}
	// The credentials of a real connection are our own.
	sock := filepath.Join(t.TempDir(), "s")
	ln, err2 := net.Listen("unix", sock)
	if err2 != nil {
		t.Fatal(err2)
	}
	defer ln.Close()
	go func() {
		c, err := net.Dial("unix", sock)
		if err == nil {
			time.Sleep(100 * time.Millisecond)
			c.Close()
		}
	}()
	c, err2 := ln.Accept()
	if err2 != nil {
		t.Fatal(err2)
	}
	defer c.Close()
	if p := peerOf(c); p.err != nil || int(p.uid) != me || p.pid != int32(os.Getpid()) {
		t.Errorf("peerOf: %+v", p)
	}
	// A handler serving another uid answers 403 with a JSON error.
	f := newFixture(t)
	h := NewHTTPHandler(f.svc, me+1)
	srv := &http.Server{Handler: h, ConnContext: func(ctx context.Context, c net.Conn) context.Context {
		return context.WithValue(ctx, peerKey, peerOf(c))
	}}
	sock2 := filepath.Join(t.TempDir(), "s2")
	ln2, _ := net.Listen("unix", sock2)
	go srv.Serve(ln2)
	defer srv.Close()
	status, body := raw(t, sock2, "POST", "/v1/log", "{}")
	if status != 403 || !strings.Contains(body, turnctl.CodeForbidden) {
		t.Errorf("foreign uid: %d %s", status, body)
	}
}

func TestSilentClientDoesNotBlockOthers(t *testing.T) {
	f := newFixture(t)
	sock := serve(t, f.svc)
	// One client connects and sends nothing; another sends half a request.
	idle, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	half, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer half.Close()
	fmt.Fprintf(half, "POST /v1/begin HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
	start := time.Now()
	for i := 0; i < 5; i++ {
		if status, _ := raw(t, sock, "POST", "/v1/log", "{}"); status != 200 {
			t.Fatalf("log while others hang: %d", status)
		}
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("served slowly while others hang: %v", d)
	}
}

func TestConcurrentClients(t *testing.T) {
	f := newFixture(t)
	sock := serve(t, f.svc)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			c := turnctl.NewClient(sock)
			defer c.Close()
			for j := 0; j < 5; j++ {
				var err error
				switch (i + j) % 4 {
				case 0:
					_, err = c.Begin(ctx, turnctl.BeginRequest{Label: fmt.Sprint(i, j)})
				case 1:
					_, err = c.End(ctx, turnctl.EndRequest{})
					if isCode(err, turnctl.CodeConflict) {
						err = nil // another client ended it first
					}
				case 2:
					_, err = c.Log(ctx, turnctl.LogRequest{N: 3})
				case 3:
					_, err = c.Status(ctx, turnctl.StatusRequest{})
				}
				if err != nil {
					errs <- err
				}
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestListen(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "ctl.sock")
	ln, err := Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(sock)
	if err != nil || fi.Mode().Perm() != 0o600 || fi.Mode().Type() != os.ModeSocket {
		t.Fatalf("socket: %v %v", fi.Mode(), err)
	}
	// A live daemon answers: refuse.
	if _, err := Listen(sock); err == nil || !strings.Contains(err.Error(), "already listening") {
		t.Errorf("second Listen on a live socket: %v", err)
	}
	ln.Close()
	// Stale now (nobody accepts): replaced.
	ln2, err := Listen(sock)
	if err != nil {
		t.Fatalf("Listen over a stale socket: %v", err)
	}
	ln2.Close()
	// Not a socket: refuse rather than delete someone's file.
	plain := filepath.Join(dir, "file")
	os.WriteFile(plain, nil, 0o600)
	if _, err := Listen(plain); err == nil {
		t.Error("Listen over a regular file succeeded")
	}
	if names, _ := os.ReadDir(dir); len(names) != 2 {
		t.Errorf("Listen left files behind: %v", names)
	}
}
