package tests

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"ckptfs/internal/rundir"
	"ckptfs/turnctl"
)

// control returns a client on the mount's control socket.
func control(t *testing.T, m *Mount) *turnctl.Client {
	t.Helper()
	sock, err := rundir.Socket(m.Dir)
	if err != nil {
		t.Fatal(err)
	}
	c := turnctl.NewClient(sock)
	t.Cleanup(func() { c.Close() })
	return c
}

// TestLiveRewindIsSeenAtOnce rewinds a mounted project over the control
// socket while the kernel holds long-lived caches of every path (entries,
// attributes, pages, negative entries): what processes see through the mount
// right after the rewind must be the rewound tree (Root.Invalidate).
func TestLiveRewindIsSeenAtOnce(t *testing.T) {
	tarSrc := t.TempDir()
	writeTree(t, tarSrc, map[string]string{"t/1.txt": "one", "t/2/3.txt": "three"})
	tarball := filepath.Join(t.TempDir(), "x.tar")
	runIn(t, tarSrc, "tar -cf "+tarball+" t")
	script := strings.Replace(programScript, "mkfifo fifo\n", "", 1)
	parts := strings.SplitN(script, "git init", 2)
	partA := "export TARBALL=" + tarball + "\n" + parts[0]
	partB := "git init" + parts[1] + `
rm -rf extract src/pkg3-copy
mv docs docs2 && mkdir docs && echo fresh > docs/new.txt
chmod 0600 README.md
echo changed > src/pkg0/file14.go
`
	skip := []string{".ckptfs"}
	dir := t.TempDir()
	seedTree(t, dir)
	m := mountProject(t, dir)
	c := control(t, m)
	ctx := context.Background()
	warm := func() { snapshot(t, dir, skip, nil) } // fill the kernel's caches

	warm()
	s0 := snapshot(t, dir, skip, nil)
	if _, err := c.Begin(ctx, turnctl.BeginRequest{Label: "A"}); err != nil {
		t.Fatalf("begin: %v", err)
	}
	runIn(t, dir, partA)
	end1, err := c.End(ctx, turnctl.EndRequest{})
	if err != nil {
		t.Fatalf("end: %v", err)
	}
	s1 := snapshot(t, dir, skip, nil)
	if _, err := c.Begin(ctx, turnctl.BeginRequest{Label: "B"}); err != nil {
		t.Fatalf("begin: %v", err)
	}
	runIn(t, dir, partB)
	end2, err := c.End(ctx, turnctl.EndRequest{})
	if err != nil {
		t.Fatalf("end: %v", err)
	}
	s2 := snapshot(t, dir, skip, nil)
	t.Logf("turn %d: %s; turn %d: %s", end1.Turn.Num, end1.Summary, end2.Turn.Num, end2.Summary)

	for _, step := range []struct {
		turn string
		want map[string]entry
	}{
		{fmtInt(int(end1.Turn.Num)), s1},
		{"0", s0},
		{fmtInt(int(end2.Turn.Num)), s2},
		{fmtInt(int(end1.Turn.Num)), s1},
	} {
		warm()
		if _, err := c.Rewind(ctx, turnctl.RewindRequest{Turn: step.turn}); err != nil {
			t.Fatalf("rewind %s: %v", step.turn, err)
		}
		diffTrees(t, step.want, snapshot(t, dir, skip, nil))
		if t.Failed() {
			t.Fatalf("after rewind to %s the mount shows stale state", step.turn)
		}
	}
	// Work goes on after a rewind, and is recorded.
	runIn(t, dir, "echo after > README.md && rm -rf src")
	m.Unmount(t)
	store, tree := openStore(t, m)
	latest := store.Latest()
	ch, err := store.Changes(latest-1, latest, tree)
	if err != nil || len(ch) == 0 {
		t.Fatalf("changes after the last rewind: %v %v", ch, err)
	}
}

// TestRewindRefreshesCachedListing: the kernel keeps directory listings
// across opens (FOPEN_CACHE_DIR). A rewind that puts back a name the kernel
// holds no dentry for (its negative dentry was reclaimed) must still drop
// the directory's cached listing, or ls would not show the restored file.
func TestRewindRefreshesCachedListing(t *testing.T) {
	dir := t.TempDir()
	m := mountProject(t, dir)
	c := control(t, m)
	ctx := context.Background()
	d := filepath.Join(dir, "d")
	if _, err := c.Begin(ctx, turnctl.BeginRequest{}); err != nil {
		t.Fatal(err)
	}
	writeTree(t, dir, map[string]string{"d/a": "a", "d/b": "b"})
	end1, err := c.End(ctx, turnctl.EndRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Begin(ctx, turnctl.BeginRequest{}); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(d, "b")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.End(ctx, turnctl.EndRequest{}); err != nil {
		t.Fatal(err)
	}
	// Hold d open, so that its inode and cached listing stay while the
	// kernel reclaims unused dentries (the negative one of d/b).
	hold, err := os.Open(d)
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Close()
	list := func() []string {
		t.Helper()
		ents, err := os.ReadDir(d)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		return names
	}
	if got := strings.Join(list(), ","); got != "a" {
		t.Fatalf("before the rewind, d lists %q, want a", got)
	}
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("2\n"), 0); err != nil {
		t.Fatalf("dropping dentries: %v", err)
	}
	if _, err := c.Rewind(ctx, turnctl.RewindRequest{Turn: fmtInt(int(end1.Turn.Num))}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(list(), ","); got != "a,b" {
		t.Fatalf("after the rewind to turn %d, d lists %q, want a,b", end1.Turn.Num, got)
	}
	if got, err := os.ReadFile(filepath.Join(d, "b")); err != nil || string(got) != "b" {
		t.Fatalf("d/b after the rewind: %q, %v", got, err)
	}
}
