package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The daemon holds an fd per inode the kernel remembers; past its mark
// (3/4 of the open-file limit, lowered here by CKPTFS_NODE_MARK) it has the
// kernel forget unused inodes, so a tree larger than the limit works.
func TestManyNodesStayUnderTheFDLimit(t *testing.T) {
	t.Setenv("CKPTFS_NODE_MARK", "500")
	dir := t.TempDir()
	m := mountProject(t, dir)
	const n = 3000
	for i := 0; i < n; i++ {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%04d", i)), []byte(fmt.Sprint(i)), 0o644); err != nil {
			t.Fatalf("file %d: %v", i, err)
		}
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", m.PID(t)))
	if err != nil {
		t.Fatal(err)
	}
	if len(fds) > n*2/3 {
		t.Errorf("daemon holds %d fds after %d files: the kernel was not asked to forget", len(fds), n)
	}
	for i := 0; i < n; i += 97 {
		if b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("f%04d", i))); err != nil || string(b) != fmt.Sprint(i) {
			t.Fatalf("f%04d: %q %v", i, b, err)
		}
	}
	m.Unmount(t)
	log, _ := os.ReadFile(filepath.Join(m.Store, "daemon.log"))
	if !strings.Contains(string(log), "asked the kernel to forget unused inodes") {
		t.Errorf("daemon log does not say it relieved the fds:\n%s", log)
	}
}
