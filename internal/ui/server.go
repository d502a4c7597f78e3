package ui

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"ckptfs/turnctl"
)

//go:embed static
var staticFS embed.FS

// DefaultAddr is where the server listens unless told otherwise: a free
// port on the IPv4 loopback.
const DefaultAddr = "127.0.0.1:0"

// CSRFHeader carries the page's CSRF token on every POST.
const CSRFHeader = "X-Ckptfs-Csrf"

// Options configure a Server.
type Options struct {
	// Addr is the address to listen on (DefaultAddr if ""): a loopback
	// IP or "localhost", and a port (0: any free one).
	Addr string
	// Root is the project directory, shown on the page.
	Root string
	// Poll is how often the event stream asks the daemon for its latest
	// turn (500 ms if 0).
	Poll time.Duration
}

// Server serves the page and its API for one project.
type Server struct {
	h     turnctl.Handler
	opts  Options
	ln    net.Listener
	addr  string // the address bound, "127.0.0.1:PORT": the only Host accepted
	token string // the URL's token, then the cookie's value
	csrf  string // the page's token for POSTs
	mux   *http.ServeMux
	index *template.Template

	mu    sync.Mutex
	cache timelineCache
	turns turnCache
}

// Listen checks that opts.Addr is a loopback address, binds it, and
// returns a Server ready to Serve.
func Listen(h turnctl.Handler, opts Options) (*Server, error) {
	if opts.Addr == "" {
		opts.Addr = DefaultAddr
	}
	if opts.Poll == 0 {
		opts.Poll = 500 * time.Millisecond
	}
	addr, err := loopbackAddr(opts.Addr)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("ui: %w", err)
	}
	s, err := newServer(h, opts, ln)
	if err != nil {
		ln.Close()
		return nil, err
	}
	return s, nil
}

func newServer(h turnctl.Handler, opts Options, ln net.Listener) (*Server, error) {
	index, err := template.ParseFS(staticFS, "static/index.html")
	if err != nil {
		return nil, fmt.Errorf("ui: %w", err)
	}
	s := &Server{h: h, opts: opts, ln: ln, addr: ln.Addr().String(), token: randomHex(), csrf: randomHex(), index: index}
	s.routes()
	return s, nil
}

// loopbackAddr checks that addr names a loopback address and returns it
// with "localhost" made 127.0.0.1 (the Host a browser then sends is the
// address bound, nothing a resolver decides).
func loopbackAddr(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", addrError(fmt.Sprintf("--addr %q is not HOST:PORT: %v", addr, err))
	}
	if host == "localhost" {
		host = "127.0.0.1"
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return "", addrError(fmt.Sprintf("--addr %s is not a loopback address: the page can rewind the project, so it listens on 127.0.0.1 or ::1 only", addr))
	}
	return net.JoinHostPort(ip.String(), port), nil
}

// addrError is a --addr the page does not listen on: a wrong invocation
// (BadUsage: turnctl exits 2).
type addrError string

func (e addrError) Error() string { return string(e) }
func (addrError) BadUsage()       {}

func randomHex() string {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		panic("ui: no randomness: " + err.Error())
	}
	return hex.EncodeToString(b)
}

// Addr is the address the server listens on.
func (s *Server) Addr() string { return s.addr }

// URL is the page's address with its token: whoever has it can use the
// page, so it is printed for the user alone.
func (s *Server) URL() string { return "http://" + s.addr + "/?token=" + s.token }

// cookieName names the cookie after the port: browsers share cookies
// between the ports of a host.
func (s *Server) cookieName() string {
	_, port, _ := net.SplitHostPort(s.addr)
	return "ckptfs_ui_" + port
}

// Serve serves until ctx is cancelled, then shuts down.
func (s *Server) Serve(ctx context.Context) error {
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second, BaseContext: func(net.Listener) context.Context { return ctx }}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(s.ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
		return nil
	}
}

// ServeHTTP checks every request (Host, token or cookie, and for a POST
// its CSRF token and origin) before the routes see it.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hdr := w.Header()
	hdr.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' blob: data:; object-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("Referrer-Policy", "no-referrer")
	hdr.Set("X-Frame-Options", "DENY")
	hdr.Set("Cache-Control", "no-store")
	if r.Host != s.addr {
		// DNS rebinding: a page of another site whose name now resolves
		// to 127.0.0.1 sends its own name as Host.
		httpError(w, http.StatusForbidden, "forbidden: Host must be "+s.addr)
		return
	}
	if r.URL.Path == "/" && r.URL.Query().Has("token") {
		if !equal(r.URL.Query().Get("token"), s.token) {
			httpError(w, http.StatusForbidden, "forbidden: wrong token; open the URL turnctl ui printed")
			return
		}
		http.SetCookie(w, &http.Cookie{Name: s.cookieName(), Value: s.token, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
		// Out of the address bar and history: the cookie holds it now.
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	c, err := r.Cookie(s.cookieName())
	if err != nil || !equal(c.Value, s.token) {
		httpError(w, http.StatusUnauthorized, "unauthorized: open the URL turnctl ui printed (with its token)")
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		if r.Method != http.MethodPost {
			httpError(w, http.StatusMethodNotAllowed, "method not allowed")
			return
		}
		if !equal(r.Header.Get(CSRFHeader), s.csrf) {
			httpError(w, http.StatusForbidden, "forbidden: missing or wrong CSRF token")
			return
		}
		if o := r.Header.Get("Origin"); o != "" && o != "http://"+s.addr {
			httpError(w, http.StatusForbidden, "forbidden: cross-origin request")
			return
		}
	}
	s.mux.ServeHTTP(w, r)
}

func equal(a, b string) bool {
	return len(a) == len(b) && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

func (s *Server) routes() {
	m := http.NewServeMux()
	sub, _ := fs.Sub(staticFS, "static")
	m.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(sub)))
	m.HandleFunc("GET /{$}", s.page)
	m.HandleFunc("GET /api/timeline", s.timeline)
	m.HandleFunc("GET /api/turn", s.turn)
	m.HandleFunc("GET /api/diff", s.diff)
	m.HandleFunc("GET /api/cat", s.cat)
	m.HandleFunc("GET /api/patch", s.patch)
	m.HandleFunc("GET /api/search", s.search)
	m.HandleFunc("GET /api/events", s.events)
	for name, fn := range map[string]http.HandlerFunc{
		"rewind": s.rewind, "restore": s.restore, "revert": s.revert, "undo": s.undo,
		"pin": s.pin, "unpin": s.unpin, "gc": s.gc,
	} {
		// GET of an action is refused (405) by the pattern's method.
		m.HandleFunc("POST /api/"+name, fn)
	}
	s.mux = m
}

// page is index.html with the CSRF token and the project's name.
func (s *Server) page(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	s.index.Execute(w, struct{ CSRF, Root, Name string }{s.csrf, s.opts.Root, filepath.Base(s.opts.Root)})
}

// Run serves the page for the project at root through h until ctx is
// cancelled: it prints the URL on stdout and, with open, opens a browser
// when there is a display.
func Run(ctx context.Context, h turnctl.Handler, root, addr string, open bool, stdout io.Writer) error {
	s, err := Listen(h, Options{Addr: addr, Root: root})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "turnctl ui: the timeline of %s at\n  %s\n(Ctrl-C stops it)\n", root, s.URL())
	if open {
		if cleanup, err := openBrowser(s.URL()); err != nil {
			fmt.Fprintf(stdout, "turnctl ui: not opening a browser: %v\n", err)
		} else {
			defer cleanup()
		}
	}
	return s.Serve(ctx)
}

// openBrowser opens url in the user's browser through a launcher file:
// the URL carries the token, and a command line is readable by every user
// (/proc/PID/cmdline), so the browser is given the path of a file of mode
// 0600 that redirects to it. cleanup removes the file.
func openBrowser(url string) (cleanup func(), err error) {
	if os.Getenv("DISPLAY") == "" && os.Getenv("WAYLAND_DISPLAY") == "" {
		return nil, errors.New("no display ($DISPLAY, $WAYLAND_DISPLAY); open the URL yourself")
	}
	opener := os.Getenv("BROWSER")
	if opener == "" {
		opener = "xdg-open"
	}
	if _, err := exec.LookPath(opener); err != nil {
		return nil, fmt.Errorf("%s not found; open the URL yourself", opener)
	}
	file, cleanup, err := writeLauncher(url)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(opener, "file://"+file)
	if err := cmd.Start(); err != nil {
		cleanup()
		return nil, err
	}
	go cmd.Wait()
	return cleanup, nil
}

// writeLauncher writes a page that redirects to url into a new private
// directory (0700; the file 0600) and returns its path.
func writeLauncher(url string) (string, func(), error) {
	dir, err := os.MkdirTemp("", "ckptfs-ui-")
	if err != nil {
		return "", nil, err
	}
	cleanup := func() { os.RemoveAll(dir) }
	if err := os.Chmod(dir, 0o700); err != nil {
		cleanup()
		return "", nil, err
	}
	file := filepath.Join(dir, "open.html")
	page := fmt.Sprintf("<!doctype html><meta http-equiv=\"refresh\" content=\"0;url=%s\"><a href=\"%s\">open the timeline</a>\n",
		template.HTMLEscapeString(url), template.HTMLEscapeString(url))
	if err := os.WriteFile(file, []byte(page), 0o600); err != nil {
		cleanup()
		return "", nil, err
	}
	return file, cleanup, nil
}
