package tests

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// nodes is the snapshot of every FIFO, socket and device node below dir.
func nodes(t *testing.T, dir string) map[string]entry {
	t.Helper()
	out := map[string]entry{}
	for p, e := range tree(t, dir) {
		switch e.Type {
		case "fifo", "socket", "chardev", "blockdev":
			out[p] = e
		}
	}
	return out
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
	sameTree(t, "after rewind 1", turn1, nodes(t, dir))
	m.turnctl(t, "undo")
	sameTree(t, "after undo of the rewind to 1", turn2, nodes(t, dir))
	m.turnctl(t, "rewind", "0")
	sameTree(t, "after rewind 0", map[string]entry{}, nodes(t, dir))
	m.turnctl(t, "undo")
	sameTree(t, "after undo of the rewind to 0", turn2, nodes(t, dir))
	m.turnctl(t, "rewind", "1")
	m.Unmount(t)
	sameTree(t, "rewound to 1, unmounted", turn1, nodes(t, dir))
}
