package tests

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"ckptfs/internal/bytejson"
	"ckptfs/internal/rundir"
)

// Hostile input end to end, beyond TestBadInput and TestStoreInvisible:
// the control socket, the command line, and the store's name through the
// mount.

// TestHostileSocket: a huge body, a slow client, a vanishing client, and a
// client of another uid each get an error (or are dropped) while the daemon
// keeps serving everyone else.
func TestHostileSocket(t *testing.T) {
	needTurnctl(t)
	proj := t.TempDir()
	m := mountProject(t, proj)
	sock, err := rundir.Socket(m.Dir)
	if err != nil {
		t.Fatal(err)
	}
	dial := func() net.Conn {
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	alive := func(when string) {
		t.Helper()
		done := make(chan error, 1)
		go func() { _, err := m.turnctlCmd("status").CombinedOutput(); done <- err }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("turnctl status %s: %v", when, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("turnctl status %s: no answer in 5 s", when)
		}
	}
	// Huge body: 413 without reading it all.
	c := dial()
	go func() {
		fmt.Fprintf(c, "POST /v1/begin HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n{\"label\":\"", 64<<20)
		chunk := bytes.Repeat([]byte("x"), 1<<16)
		for i := 0; i < 1024; i++ {
			if _, err := c.Write(chunk); err != nil {
				return
			}
		}
	}()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	reply, _ := io.ReadAll(io.LimitReader(c, 4096))
	c.Close()
	if !bytes.Contains(reply, []byte("413")) || !bytes.Contains(reply, []byte("too_large")) {
		t.Errorf("64 MiB body: %q, want 413 too_large", reply)
	}
	alive("after a huge body")
	// Slow client: headers dribbled, never finished; and one that sends a
	// body shorter than it announced.
	slow := dial()
	defer slow.Close()
	slow.Write([]byte("POST /v1/begin HTTP/1.1\r\nHo"))
	short := dial()
	defer short.Close()
	fmt.Fprintf(short, "POST /v1/begin HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"la")
	alive("while two clients hang")
	// Vanishing clients: mid-headers, mid-body, and right after a request
	// that changes state (begin), before reading the reply.
	for _, s := range []string{"POST /v1/beg", "POST /v1/begin HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n{",
		"POST /v1/begin HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"} {
		v := dial()
		v.Write([]byte(s))
		v.Close()
	}
	alive("after vanishing clients")
	m.turnctl(t, "begin")
	m.turnctl(t, "end")

	// Another uid: the socket and its directory are opened up so that the
	// connection itself succeeds; the peer check must still refuse it.
	fi, err := os.Stat(m.Runtime)
	if err != nil {
		t.Fatal(err)
	}
	parent, _ := os.Stat(filepath.Dir(m.Runtime))
	os.Chmod(filepath.Dir(m.Runtime), 0o755)
	os.Chmod(m.Runtime, 0o755)
	os.Chmod(sock, 0o666)
	defer os.Chmod(filepath.Dir(m.Runtime), parent.Mode().Perm())
	defer os.Chmod(m.Runtime, fi.Mode().Perm())
	defer os.Chmod(sock, 0o600)
	cmd := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
		"curl", "-sS", "--max-time", "5", "--unix-socket", sock, "-d", "{}", "http://ckptfs/v1/rewind")
	out, _ := cmd.CombinedOutput()
	if !strings.Contains(string(out), "forbidden") || !strings.Contains(string(out), "65534") {
		t.Errorf("uid 65534 on the socket: %q, want a forbidden error naming the uid", out)
	}
	// Private again: turnctl refuses a runtime directory others may use.
	os.Chmod(m.Runtime, fi.Mode().Perm())
	alive("after another uid")
}

// TestHostileNames: names with a newline and with invalid UTF-8 are legal;
// they are versioned, shown escaped on one line, and restorable. Paths
// outside the project are one-line errors.
func TestHostileNames(t *testing.T) {
	needTurnctl(t)
	proj := t.TempDir()
	m := mountProject(t, proj)
	names := []string{"new\nline", "bad\xff\xfename", "tab\tand\x1bescape"}
	m.turnctl(t, "begin")
	for i, n := range names {
		if err := os.WriteFile(filepath.Join(proj, n), []byte(fmt.Sprint("content ", i)), 0o644); err != nil {
			t.Fatalf("create %q: %v", n, err)
		}
	}
	m.turnctl(t, "end") // turn 1
	out := m.turnctl(t, "show", "1")
	for _, n := range names {
		if strings.Contains(out, n) {
			t.Errorf("show prints %q raw:\n%s", n, out)
		}
	}
	if strings.Contains(out, "\xff") || strings.Contains(out, "\x1b") || strings.Contains(out, "new\nline") {
		t.Errorf("show prints control bytes or invalid UTF-8:\n%q", out)
	}
	if lines := strings.Count(strings.TrimSpace(out), "\n") + 1; lines < len(names) || strings.Count(out, "line") != 1 {
		t.Errorf("show output (one line per path expected):\n%q", out)
	}
	m.turnctl(t, "begin")
	for _, n := range names {
		os.Remove(filepath.Join(proj, n))
	}
	m.turnctl(t, "end") // turn 2
	// A rewind brings every name back byte for byte.
	m.turnctl(t, "rewind", "1")
	for i, n := range names {
		if b, err := os.ReadFile(filepath.Join(proj, n)); err != nil || string(b) != fmt.Sprint("content ", i) {
			t.Errorf("rewind 1: %q: %q %v", n, b, err)
		}
	}
	m.turnctl(t, "rewind", "2")
	// restore, cat and show name paths on the wire (JSON strings): each
	// name reaches the daemon byte for byte, and comes back so in --json.
	for i, n := range names {
		m.turnctl(t, "restore", "1", "--", n)
		if b, err := os.ReadFile(filepath.Join(proj, n)); err != nil || string(b) != fmt.Sprint("content ", i) {
			t.Errorf("restore %q: %q %v", n, b, err)
		}
		if got, err := m.turnctlCmd("cat", "1", n).Output(); err != nil || string(got) != fmt.Sprint("content ", i) {
			t.Errorf("cat 1 %q: %q %v", n, got, err)
		}
		var shown struct {
			Changes []struct{ Path, Kind string }
		}
		if err := bytejson.Unmarshal([]byte(m.turnctl(t, "show", "--json", "2", "--", n)), &shown); err != nil {
			t.Fatalf("show --json 2 -- %q: %v", n, err)
		}
		if len(shown.Changes) != 1 || shown.Changes[0].Path != n || shown.Changes[0].Kind != "deleted" {
			t.Errorf("show --json 2 -- %q: %+v", n, shown.Changes)
		}
	}
	outside := filepath.Dir(proj)
	for _, args := range [][]string{
		{"restore", "1", "--", "/etc"}, {"restore", "1", "--", outside}, {"restore", "1", "--", "../.."},
		{"cat", "1", "/etc/passwd"}, {"cat", "1", "a/../../x"}, {"diff", "0", "1", "--", "/etc"},
		{"cat", "999999", "x"}, {"show", "-5"}, {"rewind", "18446744073709551616"}, {"show", "ref:"},
		{"restore", "1", "--", "no\nsuch"}, {"cat", "1", "no\xff\x1bsuch"}, {"restore", "1", "--", "no\xe9\x1b[2Jsuch"},
	} {
		out, code := m.turnctlFail(t, args...)
		if (code != 1 && code != 2) || strings.Count(strings.TrimSpace(out), "\n") != 0 || !strings.HasPrefix(out, "turnctl") {
			t.Errorf("turnctl %q: exit %d, stderr %q; want exit 1 or 2 and one line", args, code, out)
		}
		if !utf8.ValidString(out) || strings.Contains(out, "\x1b") {
			t.Errorf("turnctl %q: stderr %q prints a byte that is not UTF-8 or an escape sequence", args, out)
		}
	}
	if _, err := os.Stat("/etc/passwd"); err != nil {
		t.Fatalf("/etc/passwd: %v", err)
	}
	m.turnctl(t, "status")
}

// TestStoreNameThroughMount: the store's name cannot be made, replaced,
// exchanged, linked to, or reached through a symlink.
func TestStoreNameThroughMount(t *testing.T) {
	proj := t.TempDir()
	writeTree(t, proj, map[string]string{"a": "1", "d/x": "2"})
	m := mountProject(t, proj)
	store := filepath.Join(proj, ".ckptfs")
	// A symlink naming the store is an ordinary symlink; through it the
	// store is as absent as by its name.
	if err := os.Symlink(".ckptfs", filepath.Join(proj, "lnk")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.ReadDir(filepath.Join(proj, "lnk")); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("readdir through a symlink to the store: %v", err)
	}
	if err := os.WriteFile(filepath.Join(proj, "lnk", "lock"), nil, 0o644); err == nil {
		t.Errorf("wrote into the store through a symlink")
	}
	if err := os.WriteFile(filepath.Join(proj, "lnk"), []byte("x"), 0o644); err == nil {
		t.Errorf("created the store's name by writing through a dangling symlink")
	}
	if err := os.Symlink("../.ckptfs/db", filepath.Join(proj, "d", "up")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.ReadDir(filepath.Join(proj, "d", "up")); err == nil {
		t.Errorf("read the store's db through a symlink")
	}
	// Exchange with the store's name, mknod on it.
	err := unix.Renameat2(unix.AT_FDCWD, filepath.Join(proj, "a"), unix.AT_FDCWD, store, unix.RENAME_EXCHANGE)
	if !errors.Is(err, syscall.EPERM) && !errors.Is(err, syscall.ENOENT) {
		t.Errorf("exchange with the store: %v", err)
	}
	if err := unix.Mkfifo(store, 0o644); !errors.Is(err, syscall.EPERM) {
		t.Errorf("mkfifo on the store's name: %v", err)
	}
	if err := unix.Renameat2(unix.AT_FDCWD, filepath.Join(proj, "a"), unix.AT_FDCWD, store, unix.RENAME_NOREPLACE); !errors.Is(err, syscall.EPERM) {
		t.Errorf("rename NOREPLACE onto the store's name: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(proj, "a")); err != nil || string(b) != "1" {
		t.Errorf("a after the attempts: %q %v", b, err)
	}
	m.Unmount(t)
	if _, err := os.Stat(filepath.Join(store, "db")); err != nil {
		t.Fatalf("store damaged: %v", err)
	}
	if fi, err := os.Lstat(store); err != nil || !fi.IsDir() {
		t.Fatalf("store replaced: %v %v", fi, err)
	}
}
