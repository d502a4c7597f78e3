package turnctl

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/textproto"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fakeDaemon answers every request on a unix socket with reply (raw bytes)
// and returns the socket's path and the request lines it saw.
func fakeDaemon(t *testing.T, reply string, hang bool) (string, chan string) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "s")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	seen := make(chan string, 10)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				tp := textproto.NewReader(bufio.NewReader(c))
				line, _ := tp.ReadLine()
				h, _ := tp.ReadMIMEHeader()
				body := make([]byte, len(h.Get("Content-Length")))
				if n := h.Get("Content-Length"); n != "" {
					var size int
					for _, d := range n {
						size = size*10 + int(d-'0')
					}
					body = make([]byte, size)
					io.ReadFull(tp.R, body)
				}
				seen <- line + " " + string(body)
				if hang {
					time.Sleep(10 * time.Second)
					return
				}
				io.WriteString(c, reply)
			}()
		}
	}()
	return sock, seen
}

func TestClientReplies(t *testing.T) {
	const js = `{"turn":{"num":7,"kind":"agent","start":"2025-01-01T00:00:00Z","first_seq":1,"last_seq":0},"closed":null}`
	for _, c := range []struct {
		name, reply string
		ok          bool
	}{
		{"content-length", "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " + itoa(len(js)) + "\r\n\r\n" + js, true},
		{"chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;x=y\r\n" + js[:5] + "\r\n" + hex(len(js)-5) + "\r\n" + js[5:] + "\r\n0\r\nTrailer: 1\r\n\r\n", true},
		{"until close", "HTTP/1.1 200 OK\r\n\r\n" + js, true},
		{"truncated chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n400\r\n" + js[:20], false},
		{"truncated content-length", "HTTP/1.1 200 OK\r\nContent-Length: 999\r\n\r\n" + js[:20], false},
		{"no reply", "", false},
		{"garbage", "SSH-2.0-OpenSSH\r\n\r\n", false},
	} {
		sock, seen := fakeDaemon(t, c.reply, false)
		rep, err := NewClient(sock).Begin(context.Background(), BeginRequest{Label: "x"})
		if got := <-seen; got != `POST /v1/begin HTTP/1.1 {"label":"x"}` {
			t.Errorf("%s: the daemon saw %q", c.name, got)
		}
		if c.ok && (err != nil || rep.Turn.Num != 7) {
			t.Errorf("%s: %+v %v", c.name, rep, err)
		}
		if !c.ok && err == nil {
			t.Errorf("%s: no error", c.name)
		}
	}
}

func TestClientErrorReply(t *testing.T) {
	body := `{"code":"conflict","error":"no turn is open"}`
	sock, _ := fakeDaemon(t, "HTTP/1.1 409 Conflict\r\nContent-Length: "+itoa(len(body))+"\r\n\r\n"+body, false)
	_, err := NewClient(sock).End(context.Background(), EndRequest{})
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeConflict || e.Message != "no turn is open" {
		t.Errorf("409: %v", err)
	}
	sock, _ = fakeDaemon(t, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 2\r\n\r\nhi", false)
	if _, err := NewClient(sock).End(context.Background(), EndRequest{}); err == nil || err.Error() != "ckptfs daemon: 502 Bad Gateway" {
		t.Errorf("502: %v", err)
	}
}

func TestClientCancel(t *testing.T) {
	sock, _ := fakeDaemon(t, "", true)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := NewClient(sock).Status(ctx, StatusRequest{})
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 5*time.Second {
		t.Errorf("a daemon that does not answer: %v after %v", err, time.Since(start))
	}
	if _, err := NewClient(filepath.Join(t.TempDir(), "none")).Status(context.Background(), StatusRequest{}); err == nil || !strings.Contains(err.Error(), "ckptfs daemon at") {
		t.Errorf("no daemon: %v", err)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
func hex(n int) string  { return strconv.FormatInt(int64(n), 16) }

// TestClientRefusesAStrangersSocket: a socket served by another user
// (one who made the runtime directory first and put their own listener
// at the daemon's name) gets no request: the client refuses it before
// sending anything.
func TestClientRefusesAStrangersSocket(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("serving a socket as another user needs root")
	}
	dir := t.TempDir()
	os.Chmod(filepath.Dir(dir), 0o711)
	os.Chmod(dir, 0o777)
	sock := filepath.Join(dir, "s")
	// A listening socket answers with the credentials its listen was
	// made with: listen as uid 65534 for a moment.
	if err := syscall.Setresuid(-1, 65534, -1); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", sock)
	if err := syscall.Setresuid(-1, 0, -1); err != nil {
		panic(err) // the test binary must not go on as uid 65534
	}
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan string, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
			b, _ := io.ReadAll(c)
			if len(b) > 0 {
				got <- string(b)
			}
			c.Close()
		}
	}()
	if _, err := Dial(sock); err == nil || !strings.Contains(err.Error(), "served by uid 65534") {
		t.Errorf("Dial of a stranger's socket: %v", err)
	}
	_, err = NewClient(sock).Begin(context.Background(), BeginRequest{Label: "secret prompt"})
	if err == nil || !strings.Contains(err.Error(), "not a ckptfs daemon of yours") {
		t.Errorf("Begin on a stranger's socket: %v", err)
	}
	time.Sleep(300 * time.Millisecond)
	select {
	case b := <-got:
		t.Errorf("the stranger's socket got %q", b)
	default:
	}
}
