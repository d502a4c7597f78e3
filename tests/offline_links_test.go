package tests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// What a turn changed is still listed whole after a later edit made while
// unmounted: both names of a pair each given an inode of their own keep
// their entries, the edited one with its bytes then never captured.
func TestShowKeepsLinksAfterEditWhileUnmounted(t *testing.T) {
	dir := t.TempDir()
	m := mountProject(t, dir)
	m.turnctl(t, "begin")
	runIn(t, dir, `printf 'a\n' > f; ln f g`)
	m.turnctl(t, "end")
	m.turnctl(t, "begin")
	runIn(t, dir, `cp f f.tmp && mv f.tmp f; cp g g.tmp && mv g.tmp g`)
	m.turnctl(t, "end")
	if got := firstFields(m.turnctl(t, "show", "2")); !strings.Contains(got, "link link") {
		t.Fatalf("turnctl show 2 before: %q", got)
	}
	m.Unmount(t)
	f, err := os.OpenFile(filepath.Join(dir, "f"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("off\n")
	f.Close()
	m = mountProject(t, dir)
	show := m.turnctl(t, "show", "2")
	var g, fl bool
	for _, l := range strings.Split(show, "\n") {
		fs := strings.Fields(l)
		g = g || len(fs) >= 2 && fs[0] == "link" && fs[1] == "g"
		fl = fl || len(fs) >= 2 && fs[1] == "f"
	}
	if !g || !fl {
		t.Fatalf("turnctl show 2 after the offline edit of f:\n%s\nwant g relinked and f listed", show)
	}
}
