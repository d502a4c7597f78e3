package tests

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"ckptfs/internal/rundir"
)

// TestStoreIsRemembered: the store given at the first mount is found by a
// remount and by turnctl's offline commands without --store; a store
// that moved is one clear line, and nothing is mounted.
func TestStoreIsRemembered(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	proj, store := t.TempDir(), filepath.Join(t.TempDir(), "history")
	m := mountProject(t, proj, "--store", store)
	m.turnctl(t, "begin", "--label", "remember me")
	runIn(t, proj, `echo hi > a.txt`)
	m.turnctl(t, "end")
	m.Unmount(t)

	out, err := runCkptfs("mount", proj)
	if err != nil || !strings.Contains(out, "(history in "+store+")") {
		t.Fatalf("remount without --store: %v\n%s", err, out)
	}
	if out := m.turnctl(t, "log"); !strings.Contains(out, "remember me") {
		t.Errorf("log after a remount without --store:\n%s", out)
	}
	if out, err := runCkptfs("status", proj); err != nil || !strings.Contains(out, store) {
		t.Errorf("status: %v\n%s", err, out)
	}
	m.Unmount(t)
	if _, err := os.Stat(filepath.Join(proj, ".ckptfs")); err == nil {
		t.Error("a remount without --store made a store in DIR/.ckptfs")
	}
	if out := m.turnctl(t, "log"); !strings.Contains(out, "remember me") {
		t.Errorf("offline log without --store:\n%s", out)
	}
	if out, err := runCkptfs("status", proj); err != nil || !strings.Contains(out, store) {
		t.Errorf("status of the unmounted project: %v\n%s", err, out)
	}

	// The store moved: one line that names it and the way out.
	if err := os.Rename(store, store+".moved"); err != nil {
		t.Fatal(err)
	}
	out, err = runCkptfs("mount", proj)
	if err == nil || strings.Count(out, "\n") != 1 || !strings.Contains(out, store+" (given with --store on") || rundir.IsMounted(proj) {
		t.Errorf("mount with the remembered store gone: %v\n%s", err, out)
	}
	if msg, code := m.turnctlFail(t, "log"); code != 1 || strings.Count(msg, "\n") != 1 || !strings.Contains(msg, "is missing") {
		t.Errorf("offline log with the remembered store gone: %d %q", code, msg)
	}
	// Given where it is now, it is remembered there.
	m = mountProject(t, proj, "--store", store+".moved")
	m.Unmount(t)
	if out, err := runCkptfs("mount", proj); err != nil || !strings.Contains(out, store+".moved") {
		t.Errorf("remount after --store of the moved store: %v\n%s", err, out)
	}
	m.Unmount(t)
}

// The record a mount saves ties the store to the project directory's
// birth time, so that a new directory given a deleted project's inode
// number does not mount that project's history: with the record made to
// look like a deleted directory's (another path, another birth time) and
// its store still there, a mount without --store starts DIR/.ckptfs.
func TestStoreOfAReusedInodeIsNotMounted(t *testing.T) {
	state := t.TempDir()
	t.Setenv("XDG_STATE_HOME", state)
	proj, store := t.TempDir(), filepath.Join(t.TempDir(), "history")
	var x unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, proj, 0, unix.STATX_BTIME, &x); err != nil || x.Mask&unix.STATX_BTIME == 0 {
		t.Skip("no birth time here")
	}
	born := x.Btime.Sec*1e9 + int64(x.Btime.Nsec)
	m := mountProject(t, proj, "--store", store)
	m.Unmount(t)
	recs, _ := filepath.Glob(filepath.Join(state, "ckptfs", "stores", "*.json"))
	if len(recs) != 1 {
		t.Fatalf("records: %v", recs)
	}
	data, err := os.ReadFile(recs[0])
	if err != nil {
		t.Fatal(err)
	}
	var r map[string]any
	if err := json.Unmarshal(data, &r); err != nil || r["born"] != float64(born) {
		t.Fatalf("the record holds birth time %v, the directory's is %d:\n%s", r["born"], born, data)
	}
	r["born"], r["dir"] = born-1e9, filepath.Join(filepath.Dir(proj), "deleted")
	data, _ = json.Marshal(r)
	if err := os.WriteFile(recs[0], data, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := runCkptfs("mount", proj)
	if err == nil {
		t.Cleanup(func() { runCkptfs("umount", proj) })
	}
	if err != nil || !strings.Contains(out, "(history in "+filepath.Join(proj, ".ckptfs")+")") {
		t.Errorf("mount of a directory with another's record: %v\n%s", err, out)
	}
}

// A store given to another project (--store of a project still there) is
// refused before anything is recorded: the two histories would alternate
// in one. The same project, moved while unmounted, still mounts it.
func TestStoreOfAnotherProjectIsRefused(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	base := t.TempDir()
	p2, p3, store := filepath.Join(base, "p2"), filepath.Join(base, "p3"), filepath.Join(t.TempDir(), "history")
	for _, d := range []string{p2, p3} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeTree(t, p3, map[string]string{"only-p3.txt": "p3\n"})
	m := mountProject(t, p2, "--store", store)
	m.turnctl(t, "begin", "--label", "p2's turn")
	runIn(t, p2, `echo p2 > a.txt`)
	m.turnctl(t, "end")
	m.Unmount(t)
	before := turnctlOK(t, p2, "log")

	t.Cleanup(func() { // should the refusal fail
		if rundir.IsMounted(p3) {
			runCkptfs("umount", p3)
		}
	})
	out, err := runCkptfs("mount", "--store", store, p3)
	if exitCode(err) != 1 || !strings.Contains(out, "holds the history of "+p2+", another project") || rundir.IsMounted(p3) {
		t.Fatalf("mount of p3 with p2's store: exit %d, mounted %v, %q", exitCode(err), rundir.IsMounted(p3), out)
	}
	if after := turnctlOK(t, p2, "log"); after != before {
		t.Errorf("the refused mount changed p2's history:\n%s\nthen\n%s", before, after)
	}
	// p2, moved while unmounted, is the same project.
	moved := filepath.Join(base, "p2-moved")
	if err := os.Rename(p2, moved); err != nil {
		t.Fatal(err)
	}
	m = mountProject(t, moved, "--store", store)
	if log := m.turnctl(t, "log"); !strings.Contains(log, "p2's turn") {
		t.Errorf("the moved project's log:\n%s", log)
	}
	m.Unmount(t)
}
