package tests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

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
