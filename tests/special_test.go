package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// node is what a rewind must give back of a path: its type, mode, owner
// and device number.
type node struct {
	Fmt      uint32 // S_IFMT bits
	Mode     uint32 // permission bits
	UID, GID uint32
	Rdev     uint64
}

func (n node) String() string {
	return fmt.Sprintf("fmt %#o mode %#o owner %d:%d rdev %d:%d", n.Fmt, n.Mode, n.UID, n.GID, unix.Major(n.Rdev), unix.Minor(n.Rdev))
}

// nodes lists every FIFO, socket and device node below dir.
func nodes(t *testing.T, dir string) map[string]node {
	t.Helper()
	out := map[string]node{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".ckptfs" {
			return filepath.SkipDir
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFIFO, unix.S_IFSOCK, unix.S_IFCHR, unix.S_IFBLK:
			rel, _ := filepath.Rel(dir, p)
			out[rel] = node{Fmt: st.Mode & unix.S_IFMT, Mode: st.Mode & 0o7777, UID: st.Uid, GID: st.Gid, Rdev: st.Rdev}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameNodes(t *testing.T, what string, want, got map[string]node) {
	t.Helper()
	var w, g []string
	for p, n := range want {
		w = append(w, p+": "+n.String())
	}
	for p, n := range got {
		g = append(g, p+": "+n.String())
	}
	sort.Strings(w)
	sort.Strings(g)
	if strings.Join(w, "\n") != strings.Join(g, "\n") {
		t.Errorf("%s:\n got %s\nwant %s", what, strings.Join(g, "\n     "), strings.Join(w, "\n     "))
	}
}

// FIFOs, sockets and device nodes are versioned like every other path: a
// rewind removes the ones made after its target and brings back the ones
// removed or changed since (type, mode, owner, device number), and undo
// puts back what the rewind removed.
func TestSpecialFilesComeBackExactly(t *testing.T) {
	dir := t.TempDir()
	m := mountProject(t, dir)
	mk := func(p string, fmtBits, mode uint32, dev uint64) {
		t.Helper()
		if err := unix.Mknod(filepath.Join(dir, p), fmtBits|mode, int(dev)); err != nil {
			t.Fatalf("mknod %s: %v", p, err)
		}
		if err := unix.Chmod(filepath.Join(dir, p), mode); err != nil {
			t.Fatal(err)
		}
	}
	m.turnctl(t, "begin", "--label", "make nodes")
	if err := os.Mkdir(filepath.Join(dir, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	mk("fifo", unix.S_IFIFO, 0o640, 0)
	mk("d/sock", unix.S_IFSOCK, 0o600, 0)
	mk("null", unix.S_IFCHR, 0o666, unix.Mkdev(1, 3))
	mk("d/loop", unix.S_IFBLK, 0o660, unix.Mkdev(7, 200))
	if err := os.Lchown(filepath.Join(dir, "fifo"), 1234, 5678); err != nil {
		t.Fatal(err)
	}
	m.turnctl(t, "end")
	turn1 := nodes(t, dir)
	if len(turn1) != 4 {
		t.Fatalf("after turn 1: %v", turn1)
	}

	m.turnctl(t, "begin", "--label", "change nodes")
	os.Remove(filepath.Join(dir, "fifo"))
	os.Remove(filepath.Join(dir, "d/loop"))
	mk("d/loop", unix.S_IFBLK, 0o660, unix.Mkdev(7, 201)) // another device
	if err := unix.Chmod(filepath.Join(dir, "null"), 0o600); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dir, "d/sock"))
	mk("d/sock", unix.S_IFIFO, 0o644, 0) // a FIFO where the socket was
	m.turnctl(t, "end")
	turn2 := nodes(t, dir)

	m.turnctl(t, "rewind", "1")
	sameNodes(t, "after rewind 1", turn1, nodes(t, dir))
	m.turnctl(t, "undo")
	sameNodes(t, "after undo of the rewind to 1", turn2, nodes(t, dir))
	m.turnctl(t, "rewind", "0")
	sameNodes(t, "after rewind 0", map[string]node{}, nodes(t, dir))
	m.turnctl(t, "undo")
	sameNodes(t, "after undo of the rewind to 0", turn2, nodes(t, dir))
	m.turnctl(t, "rewind", "1")
	m.Unmount(t)
	sameNodes(t, "rewound to 1, unmounted", turn1, nodes(t, dir))
}
