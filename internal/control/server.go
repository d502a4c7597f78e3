package control

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"time"

	"ckptfs/internal/bytejson"
	"ckptfs/turnctl"
)

const (
	// readHeaderTimeout: a client that connects and sends nothing (or
	// dribbles its headers) is dropped after this; it never holds up
	// others, who are served on their own connections meanwhile.
	readHeaderTimeout = 10 * time.Second
	// bodyTimeout bounds reading a request body. (Not http.Server's
	// ReadTimeout: its deadline would stay armed while a long rewind runs,
	// and expire into a cancelled request context.)
	bodyTimeout = 30 * time.Second
	// idleTimeout closes kept-alive connections nobody uses.
	idleTimeout = 60 * time.Second
)

// Listen creates the control socket at path with mode 0600. A stale socket
// left by a dead daemon is replaced; a live daemon answering there is an
// error. The socket is bound in a private temporary directory beside path
// and renamed into place, so it is never reachable with looser permissions.
func Listen(path string) (net.Listener, error) {
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != os.ModeSocket {
			return nil, fmt.Errorf("turnctl: %s exists and is not a socket", path)
		}
		c, err := net.DialTimeout("unix", path, time.Second)
		if err == nil {
			c.Close()
			return nil, fmt.Errorf("turnctl: a daemon is already listening on %s", path)
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("turnctl: remove stale socket: %w", err)
		}
	}
	tmpDir, err := os.MkdirTemp(filepath.Dir(path), ".sock-")
	if err != nil {
		return nil, fmt.Errorf("turnctl: %w", err)
	}
	defer os.RemoveAll(tmpDir)
	tmp := filepath.Join(tmpDir, "s")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: tmp, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("turnctl: %w", err)
	}
	// The bound name is about to change: the daemon removes the real path.
	ln.SetUnlinkOnClose(false)
	if err := os.Chmod(tmp, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("turnctl: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		ln.Close()
		return nil, fmt.Errorf("turnctl: %w", err)
	}
	return ln, nil
}

type ctxKey int

const peerKey ctxKey = 0

// peer is what the kernel says about the process at the other end.
type peer struct {
	uid uint32
	pid int32
	err error
}

// peerOf reads SO_PEERCRED of a unix connection.
func peerOf(c net.Conn) peer {
	cred, err := turnctl.PeerCred(c)
	if err != nil {
		return peer{err: err}
	}
	return peer{uid: cred.Uid, pid: cred.Pid}
}

// checkPeer admits only the daemon's own user.
func checkPeer(p peer, self int) *turnctl.Error {
	if p.err != nil {
		return errorf(turnctl.CodeForbidden, "cannot tell who is calling: %v", p.err)
	}
	if int64(p.uid) != int64(self) {
		return errorf(turnctl.CodeForbidden, "uid %d may not control this mount (it belongs to uid %d)", p.uid, self)
	}
	return nil
}

// Serve answers control requests on ln until ln is closed; then it returns
// nil. Each connection is served on its own goroutine.
func Serve(ln net.Listener, h turnctl.Handler) error {
	srv := &http.Server{
		Handler:           NewHTTPHandler(h, os.Getuid()),
		ReadHeaderTimeout: readHeaderTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          log.New(io.Discard, "", 0),
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, peerKey, peerOf(c))
		},
	}
	err := srv.Serve(ln)
	if errors.Is(err, net.ErrClosed) || errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// NewHTTPHandler returns the protocol's http.Handler: it checks the peer's
// uid against uid (when the connection carries credentials, as Serve's
// do), decodes the request, calls h and encodes the reply.
func NewHTTPHandler(h turnctl.Handler, uid int) http.Handler {
	mux := http.NewServeMux()
	route(mux, "begin", false, h.Begin)
	route(mux, "end", false, h.End)
	route(mux, "status", true, h.Status)
	route(mux, "log", true, h.Log)
	route(mux, "show", false, h.Show)
	route(mux, "diff", false, h.Diff)
	route(mux, "rewind", false, h.Rewind)
	route(mux, "undo", false, h.Undo)
	route(mux, "restore", false, h.Restore)
	route(mux, "revert", false, h.Revert)
	route(mux, "verify", true, h.Verify)
	route(mux, "forget", false, h.Forget)
	route(mux, "step", false, h.Step)
	route(mux, "pin", false, h.Pin)
	route(mux, "unpin", false, h.Unpin)
	route(mux, "gc", false, h.GC)
	route(mux, "policy", true, h.Policy)
	route(mux, "du", true, h.Du)
	route(mux, "progress", false, h.Progress)
	route(mux, "mount-at", false, h.MountAt)
	mux.HandleFunc("/v1/cat", func(w http.ResponseWriter, r *http.Request) {
		var req turnctl.CatRequest
		if !decode(w, r, false, &req) {
			return
		}
		rep, err := h.Cat(r.Context(), req)
		if err != nil {
			writeError(w, err)
			return
		}
		defer rep.Body.Close()
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Ckptfs-Turn", strconv.FormatUint(rep.Turn, 10))
		w.Header().Set("Ckptfs-Mode", rep.State.Mode)
		w.Header().Set("Ckptfs-Size", strconv.FormatInt(rep.State.Size, 10))
		io.Copy(w, rep.Body) // an error here can only cut the reply short
	})
	mux.HandleFunc("/v1/tree", func(w http.ResponseWriter, r *http.Request) {
		var req turnctl.TreeRequest
		if !decode(w, r, false, &req) {
			return
		}
		rep, err := h.Tree(r.Context(), req)
		if err != nil {
			writeError(w, err)
			return
		}
		defer rep.Body.Close()
		w.Header().Set("Content-Type", "application/x-tar")
		w.Header().Set("Ckptfs-Turn", strconv.FormatUint(rep.Turn, 10))
		if rep.Step > 0 {
			w.Header().Set("Ckptfs-Step", strconv.Itoa(rep.Step))
		}
		io.Copy(w, rep.Body) // an error here cuts the stream short: ReadTree says so
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, errorf(turnctl.CodeNotFound, "unknown endpoint %s %s", r.Method, r.URL.Path))
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				log.Printf("turnctl: BUG: panic serving %s: %v\n%s", r.URL.Path, v, debug.Stack())
				writeError(w, errorf(turnctl.CodeInternal, "internal error: %v", v))
			}
		}()
		if p, ok := r.Context().Value(peerKey).(peer); ok {
			if err := checkPeer(p, uid); err != nil {
				writeError(w, err)
				return
			}
		}
		if id := r.Header.Get(turnctl.OpHeader); id != "" {
			r = r.WithContext(turnctl.WithOp(r.Context(), id))
		}
		mux.ServeHTTP(w, r)
	})
}

// route registers POST /v1/NAME (and GET when get) for one Handler method.
func route[Req, Rep any](mux *http.ServeMux, name string, get bool, fn func(context.Context, Req) (*Rep, error)) {
	mux.HandleFunc("/v1/"+name, func(w http.ResponseWriter, r *http.Request) {
		var req Req
		if !decode(w, r, get, &req) {
			return
		}
		rep, err := fn(r.Context(), req)
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, rep)
	})
}

// decode reads the JSON request body into v. An empty body is an empty
// request ({}); a GET (where allowed) has no body.
func decode(w http.ResponseWriter, r *http.Request, get bool, v any) bool {
	switch {
	case r.Method == http.MethodPost:
	case r.Method == http.MethodGet && get:
		return true
	default:
		w.Header().Set("Allow", "POST")
		writeError(w, errorf(turnctl.CodeMethod, "%s %s: use POST", r.Method, r.URL.Path))
		return false
	}
	rc := http.NewResponseController(w)
	rc.SetReadDeadline(time.Now().Add(bodyTimeout))
	body := http.MaxBytesReader(w, r.Body, turnctl.MaxRequestBytes)
	data, err := io.ReadAll(body)
	rc.SetReadDeadline(time.Time{})
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, errorf(turnctl.CodeTooLarge, "request body is larger than %d bytes", turnctl.MaxRequestBytes))
		} else {
			writeError(w, errorf(turnctl.CodeBadRequest, "reading request: %v", err))
		}
		return false
	}
	if len(data) == 0 {
		return true
	}
	if err := bytejson.UnmarshalStrict(data, v); err != nil {
		writeError(w, errorf(turnctl.CodeBadRequest, "malformed request: %v", err))
		return false
	}
	return true
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	data, err := bytejson.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		data, _ = bytejson.Marshal(errorf(turnctl.CodeInternal, "encoding reply: %v", err))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(data, '\n'))
}

func writeError(w http.ResponseWriter, err error) {
	var e *turnctl.Error
	if !errors.As(err, &e) {
		e = errorf(turnctl.CodeInternal, "%v", err)
	}
	writeJSON(w, httpStatus(e), e)
}

// httpStatus is the HTTP status of an error reply.
func httpStatus(e *turnctl.Error) int {
	switch e.Code {
	case turnctl.CodeBadRequest:
		return http.StatusBadRequest
	case turnctl.CodeForbidden:
		return http.StatusForbidden
	case turnctl.CodeNotFound:
		return http.StatusNotFound
	case turnctl.CodeMethod:
		return http.StatusMethodNotAllowed
	case turnctl.CodeConflict:
		return http.StatusConflict
	case turnctl.CodeTooLarge:
		return http.StatusRequestEntityTooLarge
	}
	return http.StatusInternalServerError
}

func errorf(code, format string, args ...any) *turnctl.Error {
	return &turnctl.Error{Code: code, Message: fmt.Sprintf(format, args...)}
}
