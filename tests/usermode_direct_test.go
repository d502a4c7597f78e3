package tests

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// A file created write-only in a mount whose writes go through the
// daemon (an ordinary user's) gets a direct handle (fusefs: directWrites):
// its writes bypass the kernel's page cache, so the kernel asks no
// GETXATTR security.capability before the first one, and what readers of
// the file see stays right.

// TestUserMountNewFilesWriteDirect counts, in a --debug log, the
// capability checks of the files real tools create write-only (none
// before a write(2)), and checks their bytes, what a reader of a file
// being appended to reads, a shared mapping of one, and the rewind of
// the turn.
func TestUserMountNewFilesWriteDirect(t *testing.T) {
	needTurnctl(t)
	p := newUserProject(t)
	p.sh(t, `echo before > old`)
	p.run(t, p.Dir, ckptfsBin, "mount", "--debug", p.Dir)
	p.cleanupMount(t)
	before := p.listing(t)
	p.run(t, p.Dir, turnctlBin, "begin", "--label", "new files")
	p.sh(t, `for i in $(seq 20); do echo "line $i" > new$i; done
		cp new1 copy1
		exec 3<>rw; echo read-write >&3; exec 3>&-`)
	// A reader opens the file between two writes of the writer and reads
	// it whole after each: it must never keep bytes the writer replaced.
	out := p.run(t, p.Dir, "bash", "-c", `exec python3 -c "$0"`, `
import os
w = os.open('log', os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
os.write(w, b'a' * 100)
r = os.open('log', os.O_RDONLY)
seen = [os.pread(r, 4096, 0)]
for i in range(50):
    os.write(w, b'%03d;' % i)
    seen.append(os.pread(r, 4096, 0))
os.close(w)
want = b'a' * 100 + b''.join(b'%03d;' % i for i in range(50))
print('ok' if seen[-1] == want and seen[0] == b'a' * 100 and all(s == want[:len(s)] and len(s) == 100 + 4 * i for i, s in enumerate(seen)) else 'reader saw %r' % seen[-1])`)
	if out != "ok\n" {
		t.Errorf("a reader of a file written through a direct handle: %s", out)
	}
	// While a file created write-only is open, no read-write open of it
	// maps it shared (a page faulted in before a direct write lands,
	// dirtied and written back, would undo the write): the kernel refuses
	// it. A read-only shared mapping works, and sees the writes. Once the
	// daemon has the writer's RELEASE (the kernel sends it after close
	// returns), read-write mappings work again.
	out = p.run(t, p.Dir, "bash", "-c", `exec python3 -c "$0"`, `
import errno, mmap, os, time
w = os.open('mapped', os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
os.write(w, b'0' * 8192)
r = os.open('mapped', os.O_RDWR)
try:
    mmap.mmap(r, 8192, mmap.MAP_SHARED)
    print('mapped read-write while written')
except OSError as e:
    print('refused' if e.errno == errno.ENODEV else e)
os.close(r)
ro = os.open('mapped', os.O_RDONLY)
m = mmap.mmap(ro, 8192, mmap.MAP_SHARED, mmap.PROT_READ)
os.pwrite(w, b'w' * 100, 100)
print(m[90:110] == b'0' * 10 + b'w' * 10)
os.close(w)
deadline = time.time() + 10
while True:
    r = os.open('mapped', os.O_RDWR)
    try:
        m = mmap.mmap(r, 8192, mmap.MAP_SHARED)
        break
    except OSError as e:
        os.close(r)
        if e.errno != errno.ENODEV or time.time() > deadline:
            raise
        time.sleep(0.01)
m[0:1] = b'm'
m.flush()
print(os.pread(r, 200, 0) == b'm' + b'0' * 99 + b'w' * 100)`)
	if out != "refused\nTrue\nTrue\n" {
		t.Errorf("shared mappings of a file created write-only, while and after it is written: %q, want refused read-write, a read-only one seeing the write, then the mapped and written bytes", out)
	}
	p.run(t, p.Dir, turnctlBin, "end")
	got := p.sh(t, `cat new1 new20 copy1 rw; wc -c < log`)
	if want := "line 1\nline 20\nline 1\nread-write\n300\n"; got != want {
		t.Errorf("the new files read %q, want %q", got, want)
	}
	p.run(t, p.Dir, turnctlBin, "rewind", "0")
	if got := p.listing(t); got != before {
		t.Errorf("after the rewind:\n%s\nwant\n%s", got, before)
	}
	p.run(t, "/", ckptfsBin, "umount", p.Dir)

	log, err := os.ReadFile(filepath.Join(p.Dir, ".ckptfs", "daemon.log"))
	if err != nil {
		t.Fatal(err)
	}
	// The node of each file a write-only CREATE made, from the request
	// and its reply (same unique id), and the nodes checked.
	names := map[string]string{} // request id -> name
	for _, m := range regexp.MustCompile(`rx (\d+): CREATE n\d+ \{\S+ \[[A-Z_,]*WRONLY[A-Z_,]*\][^"]*"([^"]+)"`).FindAllSubmatch(log, -1) {
		names[string(m[1])] = string(m[2])
	}
	created := map[string]string{} // node -> name
	for _, m := range regexp.MustCompile(`tx (\d+): +OK, \{n(\d+) `).FindAllSubmatch(log, -1) {
		if name, ok := names[string(m[1])]; ok {
			created[string(m[2])] = name
		}
	}
	var checked []string
	for _, m := range regexp.MustCompile(`GETXATTR n(\d+) \{sz \d+\} "security.capability"`).FindAllSubmatch(log, -1) {
		if name, ok := created[string(m[1])]; ok {
			checked = append(checked, name)
		}
	}
	t.Logf("%d files created write-only; capability checks of them: %v", len(created), checked)
	if len(created) != 23 {
		t.Fatalf("%d write-only CREATE in the daemon's log, want 23 (new1..new20, copy1, log, mapped): %s", len(created), firstLines(log, 5))
	}
	// cp's copy_file_range checks its target itself (the kernel's
	// file_modified): only write(2) goes without.
	if len(checked) > 1 || len(checked) == 1 && checked[0] != "copy1" {
		t.Errorf("files created write-only were checked for security.capability at their first write: %v", checked)
	}
}

// firstLines is the first n lines of b, for an error message.
func firstLines(b []byte, n int) string {
	lines := strings.SplitN(string(b), "\n", n+1)
	return strings.Join(lines[:min(n, len(lines))], "\n")
}
