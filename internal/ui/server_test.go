package ui

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"ckptfs/fusefs/fusefstest"
	"ckptfs/internal/ckpt"
	"ckptfs/internal/control"
	"ckptfs/turnctl"
	"ckptfs/versionstore"
)

// testHistory makes a project with a store holding
//
//	turn 1 "first":  a.txt "one\ntwo\n"
//	turn 2 "second": a.txt "one\n2\nthree\n", b.txt "bee\n", pic.png
//	turn 3 rewind to 1 (b.txt gone, a.txt back)
//	turn 4 "fourth": no change
//
// and returns the directory and a Handler on it (the control Service,
// offline).
func testHistory(t *testing.T) (string, turnctl.Handler) {
	t.Helper()
	dir := t.TempDir()
	store, err := versionstore.Open(filepath.Join(dir, ".ckptfs"), versionstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ov := fusefstest.New(t, dir, store)
	turn := func(label string, fn func()) {
		if _, err := store.Begin(ckpt.KindAgent, label, ""); err != nil {
			t.Fatal(err)
		}
		fn()
		if _, err := store.End(""); err != nil {
			t.Fatal(err)
		}
	}
	turn("first", func() { ov.Write("a.txt", "one\ntwo\n") })
	turn("second\nthe whole prompt of the second turn", func() {
		ov.Write("a.txt", "one\n2\nthree\n")
		if _, _, err := store.Step("Edit", "a.txt"); err != nil { // one tool call's changes
			t.Fatal(err)
		}
		ov.Write("b.txt", "bee\n")
		ov.Write("pic.png", pngBytes)
	})
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	h, closer, err := control.OpenOffline(dir, filepath.Join(dir, ".ckptfs"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closer)
	ctx := context.Background()
	if _, err := h.Rewind(ctx, turnctl.RewindRequest{Turn: "1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Begin(ctx, turnctl.BeginRequest{Label: "fourth"}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.End(ctx, turnctl.EndRequest{}); err != nil {
		t.Fatal(err)
	}
	return dir, h
}

// pngBytes is the start of a PNG file: binary, served as an image.
const pngBytes = "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"

// client is a browser stand-in: it sends requests with the right Host
// and, once logged in, the cookie.
type client struct {
	t      *testing.T
	s      *Server
	cookie *http.Cookie
}

func newTestServer(t *testing.T, h turnctl.Handler) *Server {
	t.Helper()
	s, err := Listen(h, Options{Root: "/proj", Poll: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.ln.Close() })
	return s
}

// do sends a request through the server's ServeHTTP (httptest).
func (c *client) do(method, target, body string, hdr map[string]string) *httptest.ResponseRecorder {
	c.t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, target, r)
	req.Host = c.s.Addr()
	if c.cookie != nil {
		req.AddCookie(c.cookie)
	}
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	c.s.ServeHTTP(w, req)
	return w
}

// login trades the URL's token for the cookie, as the first load does.
func login(t *testing.T, s *Server) *client {
	t.Helper()
	c := &client{t: t, s: s}
	w := c.do("GET", "/?token="+s.token, "", nil)
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/" {
		t.Fatalf("login: %d %s", w.Code, w.Body)
	}
	cookies := w.Result().Cookies()
	if len(cookies) != 1 {
		t.Fatalf("login set %d cookies", len(cookies))
	}
	ck := cookies[0]
	if !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Value != s.token {
		t.Errorf("cookie %+v: want HttpOnly, SameSite=Strict, the token", ck)
	}
	c.cookie = ck
	return c
}

func (c *client) json(target string, v any) {
	c.t.Helper()
	w := c.do("GET", target, "", nil)
	if w.Code != 200 {
		c.t.Fatalf("GET %s: %d %s", target, w.Code, w.Body)
	}
	if err := json.Unmarshal(w.Body.Bytes(), v); err != nil {
		c.t.Fatalf("GET %s: %v\n%s", target, err, w.Body)
	}
}

func (c *client) post(target, body string) *httptest.ResponseRecorder {
	c.t.Helper()
	return c.do("POST", target, body, map[string]string{"Content-Type": "application/json", CSRFHeader: c.s.csrf, "Origin": "http://" + c.s.Addr()})
}

// TestUIRefusesNonLoopback: --addr must be a loopback address.
func TestUIRefusesNonLoopback(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0", "192.0.2.1:0", "example.com:0", "127.0.0.1"} {
		if s, err := Listen(nil, Options{Addr: addr}); err == nil {
			s.ln.Close()
			t.Errorf("Listen(%q) accepted a non-loopback address", addr)
		}
	}
	for _, addr := range []string{"127.0.0.1:0", "localhost:0", "127.0.0.2:0"} {
		s, err := Listen(nil, Options{Addr: addr})
		if err != nil {
			t.Errorf("Listen(%q): %v", addr, err)
			continue
		}
		if !strings.HasPrefix(s.Addr(), "127.") || !strings.HasPrefix(s.URL(), "http://127.") {
			t.Errorf("Listen(%q) bound %s, URL %s", addr, s.Addr(), s.URL())
		}
		s.ln.Close()
	}
}

// TestUIRefusesWithoutToken: no token, a wrong token, a wrong cookie are
// refused, and so is the token's cookie on another port's name.
func TestUIRefusesWithoutToken(t *testing.T) {
	_, h := testHistory(t)
	s := newTestServer(t, h)
	c := &client{t: t, s: s}
	for _, target := range []string{"/", "/api/timeline", "/static/app.js", "/api/events"} {
		if w := c.do("GET", target, "", nil); w.Code != http.StatusUnauthorized {
			t.Errorf("GET %s without token: %d", target, w.Code)
		}
	}
	wrong := "0" + s.token[1:]
	if wrong == s.token {
		wrong = "1" + s.token[1:]
	}
	if w := c.do("GET", "/?token="+wrong, "", nil); w.Code != http.StatusForbidden || len(w.Result().Cookies()) != 0 {
		t.Errorf("wrong token: %d, cookies %v", w.Code, w.Result().Cookies())
	}
	c.cookie = &http.Cookie{Name: s.cookieName(), Value: "x" + s.token[1:]}
	if w := c.do("GET", "/api/timeline", "", nil); w.Code != http.StatusUnauthorized {
		t.Errorf("wrong cookie: %d", w.Code)
	}
	c.cookie = &http.Cookie{Name: "ckptfs_ui_1", Value: s.token}
	if w := c.do("GET", "/api/timeline", "", nil); w.Code != http.StatusUnauthorized {
		t.Errorf("cookie of another port: %d", w.Code)
	}
	c = login(t, s)
	w := c.do("GET", "/", "", nil)
	if w.Code != 200 || !strings.Contains(w.Body.String(), `<meta name="csrf" content="`+s.csrf+`">`) {
		t.Errorf("page after login: %d\n%s", w.Code, w.Body)
	}
	if csp := w.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
		t.Errorf("no CSP: %q", csp)
	}
}

// TestUIRefusesOtherHost: a Host other than the address bound (DNS
// rebinding: evil.example resolving to 127.0.0.1) is refused, even with
// the token or the cookie.
func TestUIRefusesOtherHost(t *testing.T) {
	_, h := testHistory(t)
	s := newTestServer(t, h)
	c := login(t, s)
	_, port, _ := strings.Cut(s.Addr(), ":")
	for _, host := range []string{"evil.example:" + port, "evil.example", "localhost:" + port, "127.0.0.1:1", ""} {
		if w := c.do("GET", "/api/timeline", "", map[string]string{"Host": host}); w.Code != http.StatusForbidden {
			t.Errorf("Host %q: %d", host, w.Code)
		}
		if w := c.do("GET", "/?token="+s.token, "", map[string]string{"Host": host}); w.Code != http.StatusForbidden || len(w.Result().Cookies()) != 0 {
			t.Errorf("Host %q with the token: %d", host, w.Code)
		}
	}
}

// TestUIRefusesCSRF: an action needs POST, the page's CSRF token, the
// page's own origin and a JSON body; each refused request changes nothing.
func TestUIRefusesCSRF(t *testing.T) {
	dir, h := testHistory(t)
	s := newTestServer(t, h)
	c := login(t, s)
	before, _ := os.ReadFile(filepath.Join(dir, "a.txt"))
	body := `{"turn":"2"}`
	jsonCT := map[string]string{"Content-Type": "application/json"}
	cases := []struct {
		name   string
		method string
		hdr    map[string]string
		want   int
	}{
		{"GET", "GET", nil, http.StatusMethodNotAllowed},
		{"PUT", "PUT", map[string]string{CSRFHeader: s.csrf}, http.StatusMethodNotAllowed},
		{"no CSRF token", "POST", jsonCT, http.StatusForbidden},
		{"wrong CSRF token", "POST", map[string]string{"Content-Type": "application/json", CSRFHeader: s.token}, http.StatusForbidden},
		{"other origin", "POST", map[string]string{"Content-Type": "application/json", CSRFHeader: s.csrf, "Origin": "http://evil.example"}, http.StatusForbidden},
		{"form body", "POST", map[string]string{"Content-Type": "application/x-www-form-urlencoded", CSRFHeader: s.csrf}, http.StatusBadRequest},
	}
	for _, tc := range cases {
		if w := c.do(tc.method, "/api/rewind", body, tc.hdr); w.Code != tc.want {
			t.Errorf("%s: %d, want %d (%s)", tc.name, w.Code, tc.want, w.Body)
		}
	}
	// Without the cookie, the CSRF token alone is not enough.
	anon := &client{t: t, s: s}
	if w := anon.post("/api/rewind", body); w.Code != http.StatusUnauthorized {
		t.Errorf("POST without cookie: %d", w.Code)
	}
	if after, _ := os.ReadFile(filepath.Join(dir, "a.txt")); string(after) != string(before) {
		t.Fatalf("a refused request changed a.txt: %q -> %q", before, after)
	}
	var tl timelineReply
	c.json("/api/timeline", &tl)
	if tl.Latest != 4 {
		t.Errorf("a refused request made a turn: latest %d", tl.Latest)
	}
}

// TestUILauncherPrivate: the file that hands the URL to a browser is
// readable by its owner alone, in a directory only its owner can enter.
func TestUILauncherPrivate(t *testing.T) {
	url := "http://127.0.0.1:1/?token=secret"
	file, cleanup, err := writeLauncher(url)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	di, err := os.Stat(filepath.Dir(file))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 || di.Mode().Perm() != 0o700 {
		t.Errorf("launcher %v in directory %v, want 0600 in 0700", fi.Mode().Perm(), di.Mode().Perm())
	}
	data, _ := os.ReadFile(file)
	if !strings.Contains(string(data), url) {
		t.Errorf("launcher does not lead to the URL:\n%s", data)
	}
	cleanup()
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Errorf("cleanup left %s", file)
	}
}

// TestUITimeline: the timeline lists every turn newest first, the current
// one marked, the rewind forking off turn 1 with turn 2 on a lane of its
// own that joins at 1; paging cuts it.
func TestUITimeline(t *testing.T) {
	_, h := testHistory(t)
	c := login(t, newTestServer(t, h))
	var tl timelineReply
	c.json("/api/timeline", &tl)
	var nums []uint64
	for _, r := range tl.Rows {
		nums = append(nums, r.Num)
	}
	if tl.Total != 5 || tl.Current != 4 || len(nums) != 5 || nums[0] != 4 || nums[4] != 0 {
		t.Fatalf("timeline: total %d current %d rows %v", tl.Total, tl.Current, nums)
	}
	byNum := map[uint64]row{}
	for _, r := range tl.Rows {
		byNum[r.Num] = r
	}
	if r := byNum[3]; r.Kind != ckpt.KindRewind || r.Parent == nil || *r.Parent != 1 {
		t.Errorf("turn 3: %+v", r)
	}
	// 4 and 3 on the main lane down to 1; 2 on a lane of its own that
	// comes down into 1.
	main, side := byNum[4].Lane.Col, byNum[2].Lane.Col
	if byNum[3].Lane.Col != main || byNum[1].Lane.Col != main || side == main || tl.Width != 2 {
		t.Errorf("lanes: 4:%v 3:%v 2:%v 1:%v width %d", byNum[4].Lane, byNum[3].Lane, byNum[2].Lane, byNum[1].Lane, tl.Width)
	}
	if up := byNum[1].Lane.Up; len(up) != 2 {
		t.Errorf("turn 1 should join two lanes: %v", up)
	}
	if l := byNum[2].Lane; len(l.Up) != 0 || !l.Down || len(byNum[3].Lane.Through) != 0 || byNum[0].Lane.Down {
		t.Errorf("turn 2 lane %+v (a branch's newest turn), turn 3 %+v, turn 0 %+v", byNum[2].Lane, byNum[3].Lane, byNum[0].Lane)
	}
	if byNum[2].Stats == nil || byNum[2].Stats.Files != 3 || byNum[2].Label != "second" {
		t.Errorf("turn 2: %+v", byNum[2])
	}
	c.json("/api/timeline?offset=2&limit=2", &tl)
	if len(tl.Rows) != 2 || tl.Rows[0].Num != 2 || tl.Rows[1].Num != 1 || tl.Total != 5 {
		t.Errorf("page 2 of 2: %+v", tl.Rows)
	}
}

// TestUITurnAndDiff: a turn's whole prompt and its files, paged; one
// file's diff; a path's history; search.
func TestUITurnAndDiff(t *testing.T) {
	_, h := testHistory(t)
	c := login(t, newTestServer(t, h))
	var tr turnReply
	c.json("/api/turn?n=2", &tr)
	if tr.Turn.Prompt != "second\nthe whole prompt of the second turn" || tr.Total != 3 || len(tr.Changes) != 3 {
		t.Fatalf("turn 2: %+v", tr)
	}
	if len(tr.Steps) != 2 || tr.Steps[0].Tool != "Edit" || tr.Steps[0].Label != "a.txt" || tr.Steps[1].Num != 2 {
		t.Fatalf("turn 2's steps: %+v", tr.Steps)
	}
	var one turnReply
	if c.json("/api/turn?n=1", &one); len(one.Steps) != 0 {
		t.Fatalf("a turn of one step lists steps: %+v", one.Steps)
	}
	c.json("/api/turn?n=2&offset=1&limit=1", &tr)
	if tr.Total != 3 || len(tr.Changes) != 1 || tr.Changes[0].Path != "b.txt" || tr.Changes[0].Patch != "" {
		t.Errorf("turn 2, second page: %+v", tr.Changes)
	}
	var d change
	c.json("/api/diff?n=2&path=a.txt", &d)
	if !strings.Contains(d.Patch, "-two\n+2\n+three\n") || d.LinesAdded != 2 || d.LinesDeleted != 1 {
		t.Errorf("diff of a.txt in turn 2:\n%s", d.Patch)
	}
	if w := (&client{t: t, s: c.s, cookie: c.cookie}).do("GET", "/api/diff?n=2&path=nope", "", nil); w.Code != http.StatusNotFound {
		t.Errorf("diff of a path the turn did not change: %d", w.Code)
	}
	w := c.do("GET", "/api/cat?n=1&path=a.txt", "", nil)
	if w.Code != 200 || w.Body.String() != "one\ntwo\n" || w.Header().Get("Content-Disposition") != "attachment" {
		t.Errorf("cat: %d %q %v", w.Code, w.Body, w.Header())
	}
	w = c.do("GET", "/api/patch?n=2", "", nil)
	if w.Code != 200 || !strings.Contains(w.Body.String(), "diff --git a/a.txt b/a.txt") || !strings.Contains(w.Body.String(), "-two\n+2\n+three\n") ||
		!strings.Contains(w.Body.String(), "+++ b/b.txt") || !strings.Contains(w.Header().Get("Content-Disposition"), "turn-2.patch") {
		t.Errorf("patch of turn 2: %d %v\n%s", w.Code, w.Header(), w.Body)
	}
	// An image is served as one, for the page to show before and after.
	w = c.do("GET", "/api/cat?n=2&path=pic.png", "", nil)
	if w.Code != 200 || w.Body.String() != pngBytes || w.Header().Get("Content-Type") != "image/png" {
		t.Errorf("cat of an image: %d %q %v", w.Code, w.Body, w.Header())
	}
	c.json("/api/diff?n=2&path=pic.png", &d)
	if !d.Binary || d.After == nil || d.After.Size != int64(len(pngBytes)) {
		t.Errorf("diff of an image: %+v", d)
	}
	var sr searchReply
	c.json("/api/search?path=b.txt", &sr)
	if len(sr.Rows) != 2 || sr.Rows[0].Num != 3 || sr.Rows[1].Num != 2 {
		t.Errorf("history of b.txt: %+v", sr.Rows)
	}
	c.json("/api/search?s=three", &sr)
	if len(sr.Rows) != 2 || sr.Rows[0].Num != 3 || sr.Rows[1].Num != 2 {
		t.Errorf("-S three: %+v", sr.Rows)
	}
	c.json("/api/search?grep=whole+prompt", &sr)
	if len(sr.Rows) != 1 || sr.Rows[0].Num != 2 {
		t.Errorf("--grep: %+v", sr.Rows)
	}
}

// TestUIActions: a dry run changes nothing and lists what would change; a
// real rewind changes the tree; pin and unpin show in the timeline.
func TestUIActions(t *testing.T) {
	dir, h := testHistory(t)
	c := login(t, newTestServer(t, h))
	var tl timelineReply
	c.json("/api/timeline", &tl) // fills the cache an action must drop
	w := c.post("/api/rewind", `{"turn":"2","dry_run":true}`)
	var rep rewindReport
	if w.Code != 200 || json.Unmarshal(w.Body.Bytes(), &rep) != nil || !rep.DryRun || len(rep.Changes) != 3 || rep.Turn != nil {
		t.Fatalf("rewind dry run: %d %s", w.Code, w.Body)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "a.txt")); string(b) != "one\ntwo\n" {
		t.Fatalf("dry run changed a.txt: %q", b)
	}
	w = c.post("/api/rewind", `{"turn":"2"}`)
	if w.Code != 200 {
		t.Fatalf("rewind: %d %s", w.Code, w.Body)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "a.txt")); string(b) != "one\n2\nthree\n" {
		t.Errorf("after rewind to 2, a.txt is %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "b.txt")); string(b) != "bee\n" {
		t.Errorf("after rewind to 2, b.txt is %q", b)
	}
	if w := c.post("/api/pin", `{"turn":"1","note":"keep"}`); w.Code != 200 {
		t.Fatalf("pin: %d %s", w.Code, w.Body)
	}
	c.json("/api/timeline", &tl)
	if tl.Current != 5 || tl.Rows[4].Pin == nil || tl.Rows[4].Pin.Note != "keep" {
		t.Errorf("after rewind and pin: current %d, turn 1 %+v", tl.Current, tl.Rows[4])
	}
	if w := c.post("/api/unpin", `{"turn":"1"}`); w.Code != 200 {
		t.Fatalf("unpin: %d %s", w.Code, w.Body)
	}
	c.json("/api/timeline", &tl)
	if tl.Rows[4].Pin != nil {
		t.Errorf("unpinned turn 1 still pinned")
	}
	if w := c.post("/api/restore", `{"turn":"1","paths":[],"dry_run":true}`); w.Code != http.StatusBadRequest {
		t.Errorf("restore without paths: %d", w.Code)
	}
	if w := c.post("/api/rewind", `{"turn":"9"}`); w.Code != http.StatusBadRequest && w.Code != http.StatusNotFound {
		t.Errorf("rewind to no turn: %d %s", w.Code, w.Body)
	}
	if w := c.post("/api/gc", `{"dry_run":true}`); w.Code != 200 {
		t.Errorf("gc dry run: %d %s", w.Code, w.Body)
	}
}

// TestUIEvents: the event stream says how things are, then again when a
// turn begins.
func TestUIEvents(t *testing.T) {
	_, h := testHistory(t)
	s := newTestServer(t, h)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.Serve(ctx)
	c := login(t, s)
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+s.Addr()+"/api/events", nil)
	req.AddCookie(c.cookie)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("events: %d %v", resp.StatusCode, resp.Header)
	}
	lines := make(chan string, 16)
	go func() {
		buf := make([]byte, 4096)
		var acc string
		for {
			n, err := resp.Body.Read(buf)
			acc += string(buf[:n])
			for {
				i := strings.Index(acc, "\n\n")
				if i < 0 {
					break
				}
				lines <- acc[:i]
				acc = acc[i+2:]
			}
			if err != nil {
				close(lines)
				return
			}
		}
	}()
	next := func() string {
		select {
		case l := <-lines:
			return l
		case <-time.After(5 * time.Second):
			t.Fatal("no event in 5 s")
			return ""
		}
	}
	// History starts where the store's opening put it (the clock):
	// compare with the first event's.
	first := next()
	var h0 uint64
	if _, err := fmt.Sscanf(first, "event: update\ndata: {\"latest\":4,\"open\":false,\"history\":%d}", &h0); err != nil {
		t.Errorf("first event %q", first)
	}
	if _, err := h.Begin(context.Background(), turnctl.BeginRequest{Label: "fifth"}); err != nil {
		t.Fatal(err)
	}
	if e := next(); e != fmt.Sprintf("event: update\ndata: {\"latest\":5,\"open\":true,\"history\":%d}", h0) {
		t.Errorf("event after begin %q", e)
	}
	// A forget changes no turn's number, and is an update too.
	if _, err := h.Forget(context.Background(), turnctl.ForgetRequest{Turns: []string{"2"}}); err != nil {
		t.Fatal(err)
	}
	if e := next(); e != fmt.Sprintf("event: update\ndata: {\"latest\":5,\"open\":true,\"history\":%d}", h0+1) {
		t.Errorf("event after a forget %q", e)
	}
}

// showOnly is a Handler whose Show answers rep, and Log no turn (and
// nothing else).
type showOnly struct {
	turnctl.Handler
	rep *turnctl.ShowReply
}

func (h showOnly) Show(context.Context, turnctl.ShowRequest) (*turnctl.ShowReply, error) {
	return h.rep, nil
}

func (h showOnly) Log(context.Context, turnctl.LogRequest) (*turnctl.LogReply, error) {
	return &turnctl.LogReply{Turns: []ckpt.Turn{}}, nil
}

// TestUITurnGitLast: a turn's changes inside .git come after the
// project's, marked, so that a commit's dozens of objects do not fill the
// first page.
func TestUITurnGitLast(t *testing.T) {
	var changes []turnctl.FileChange
	for _, p := range []string{".git/objects/ab/cd", "a.go", ".git/HEAD", "z.go"} {
		changes = append(changes, turnctl.FileChange{Path: p, Kind: ckpt.Added})
	}
	s := newTestServer(t, showOnly{rep: &turnctl.ShowReply{Turn: ckpt.Turn{Num: 7, Kind: ckpt.KindAgent}, Changes: changes}})
	c := login(t, s)
	var tr turnReply
	c.json("/api/turn?n=7", &tr)
	var got []string
	for _, ch := range tr.Changes {
		got = append(got, fmt.Sprintf("%s:%v", ch.Path, ch.Git))
	}
	if strings.Join(got, " ") != "a.go:false z.go:false .git/objects/ab/cd:true .git/HEAD:true" {
		t.Errorf("turn's changes in the order %v", got)
	}
}

// A turn that forgotten turns were merged into says so in its row, as
// turnctl log's "[with turn N]" does.
func TestUITimelineMarksMergedTurns(t *testing.T) {
	_, h := testHistory(t)
	if _, err := h.Forget(context.Background(), turnctl.ForgetRequest{Turns: []string{"3"}}); err != nil {
		t.Fatal(err)
	}
	c := login(t, newTestServer(t, h))
	var tl timelineReply
	c.json("/api/timeline", &tl)
	for _, r := range tl.Rows {
		if want := map[bool]uint64{true: 3}[r.Num == 4]; r.MergedFrom != want {
			t.Errorf("turn %d: merged from %d, want %d", r.Num, r.MergedFrom, want)
		}
	}
}

// rewindOnly is a Handler whose Rewind answers rep (and nothing else).
type rewindOnly struct {
	turnctl.Handler
	rep *turnctl.RewindReply
}

func (h rewindOnly) Rewind(context.Context, turnctl.RewindRequest) (*turnctl.RewindReply, error) {
	return h.rep, nil
}

// TestUIReportGitApart: an action's preview lists the project's changes
// and counts those inside .git apart, as turnctl's report does: ".git"
// sorts first, and a rewind past a few commits changes hundreds of git's
// files, which filled the cut list and hid the project's files.
func TestUIReportGitApart(t *testing.T) {
	var changes []turnctl.FileChange
	for i := range reportCut + 50 {
		changes = append(changes, turnctl.FileChange{Path: fmt.Sprintf(".git/objects/%02x/%038d", i%256, i), Kind: ckpt.Added})
	}
	changes = append(changes, turnctl.FileChange{Path: "main.go", Kind: ckpt.Modified}, turnctl.FileChange{Path: "util.go", Kind: ckpt.Deleted})
	s := newTestServer(t, rewindOnly{rep: &turnctl.RewindReply{DryRun: true, Changes: changes}})
	c := login(t, s)
	w := c.post("/api/rewind", `{"turn":"1","dry_run":true}`)
	var rep rewindReport
	if w.Code != 200 || json.Unmarshal(w.Body.Bytes(), &rep) != nil {
		t.Fatalf("rewind dry run: %d %s", w.Code, w.Body)
	}
	var got []string
	for _, ch := range rep.Changes {
		got = append(got, ch.Path)
	}
	if strings.Join(got, " ") != "main.go util.go" || rep.More != 0 || rep.Git != reportCut+50 {
		t.Errorf("preview lists %d changes (%.60q...), %d more, %d in .git; want main.go util.go, 0 more, %d in .git", len(got), strings.Join(got, " "), rep.More, rep.Git, reportCut+50)
	}
}

// TestUIPatchUnknownTurn: the patch of a turn that does not exist names
// that turn, not the one before it.
func TestUIPatchUnknownTurn(t *testing.T) {
	_, h := testHistory(t)
	c := login(t, newTestServer(t, h))
	w := c.do("GET", "/api/patch?n=999", "", nil)
	if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "no turn 999 ") {
		t.Errorf("patch of turn 999: %d %s", w.Code, w.Body)
	}
}
