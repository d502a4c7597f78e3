package tests

import (
	"context"
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
