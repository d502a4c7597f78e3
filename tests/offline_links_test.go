package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// A file that had a second name for a while, then an inode of its own
// again, edited while unmounted: a rewind to a turn before that edit
// never writes bytes that were not the file's then (the earlier rewind's
// copy of the offline bytes among them), leaves its bytes as they are,
// parts it from names that were not its names then, and says exactly
// that, as its dry run does.
func TestRewindLeavesFileEditedWhileUnmountedWithLinks(t *testing.T) {
	dir := t.TempDir()
	p := func(rel string) string { return filepath.Join(dir, rel) }
	m := mountProject(t, dir)
	turn := func(script string) {
		t.Helper()
		m.turnctl(t, "begin")
		runIn(t, dir, script)
		m.turnctl(t, "end")
	}
	turn(`printf 'a\n' > N`)
	turn(`ln N H`)
	turn(`cp N N.tmp && mv N.tmp N`) // N an inode of its own again
	turn(`echo x > other`)
	m.Unmount(t)
	f, err := os.OpenFile(p("N"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("off\n")
	f.Close()
	m = mountProject(t, dir)

	// state describes N and H on disk: bytes, and inodes with their
	// link counts.
	state := func() string {
		t.Helper()
		var out []string
		var sts [2]unix.Stat_t
		for i, n := range []string{"N", "H"} {
			b, err := os.ReadFile(p(n))
			if err != nil {
				t.Fatal(err)
			}
			if err := unix.Lstat(p(n), &sts[i]); err != nil {
				t.Fatal(err)
			}
			out = append(out, fmt.Sprintf("%s=%q nlink %d", n, b, sts[i].Nlink))
		}
		if sts[0].Ino == sts[1].Ino {
			out = append(out, "one inode")
		} else {
			out = append(out, "separate inodes")
		}
		return strings.Join(out, ", ")
	}
	// rewind runs the dry run and the rewind to n, checks that they list
	// the same, and returns that list.
	rewind := func(n string) string {
		t.Helper()
		dry := m.turnctl(t, "rewind", n, "--dry-run")
		real := m.turnctl(t, "rewind", n)
		body := func(out string) string {
			if _, rest, ok := strings.Cut(out, "\n"); ok {
				return rest
			}
			return ""
		}
		if body(dry) != body(real) {
			t.Fatalf("rewind %s: the dry run said\n%s\nthe rewind said\n%s", n, dry, real)
		}
		return body(real)
	}
	// said sums up a rewind's list: "kind path" of each change, then the
	// paths not restored.
	said := func(out string) string {
		var changes, left []string
		inLeft := false
		for _, l := range strings.Split(out, "\n") {
			fs := strings.Fields(l)
			switch {
			case strings.HasPrefix(l, "not restored, left as they are"):
				inLeft = true
			case inLeft && len(fs) == 1:
				left = append(left, fs[0])
			case len(fs) >= 2:
				changes = append(changes, fs[0]+" "+fs[1])
			}
		}
		return strings.Join(changes, ", ") + "; not restored: " + strings.Join(left, " ")
	}

	rewind("2")
	if got, want := state(), `N="a\n" nlink 2, H="a\n" nlink 2, one inode`; got != want {
		t.Fatalf("after rewind 2: %s, want %s", got, want)
	}
	// Turn 4: N's bytes were never captured (the offline edit came
	// after), and N was not H's inode.
	out := rewind("4")
	if got, want := state(), `N="a\n" nlink 1, H="a\n" nlink 1, separate inodes`; got != want {
		t.Fatalf("after rewind 4: %s, want %s\n%s", got, want, out)
	}
	if got, want := said(out), "link N, added other; not restored: N"; got != want {
		t.Fatalf("rewind 4 says %q, want %q:\n%s", got, want, out)
	}

	rewind("2")
	out = rewind("3")
	if got, want := state(), `N="a\n" nlink 1, H="a\n" nlink 1, separate inodes`; got != want {
		t.Fatalf("after rewind 3: %s, want %s\n%s", got, want, out)
	}
	if got, want := said(out), "link N; not restored: N"; got != want {
		t.Fatalf("rewind 3 says %q, want %q:\n%s", got, want, out)
	}
}

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
