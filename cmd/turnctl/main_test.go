package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"ckptfs/internal/ckpt"
	"ckptfs/versionstore"
)

// TestLinksNoStore keeps the turnctl binary lean: agents' hooks start it at
// every prompt, and the history store (Pebble and its dependency tree) costs
// tens of milliseconds of package initialisation per start. The store is
// reached through `ckptfs turnctl-offline` instead. net/http (and with it
// crypto/tls) costs milliseconds more; turnctl.Client speaks HTTP/1.1 itself.
func TestLinksNoStore(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	banned := []string{
		"ckptfs/versionstore", "ckptfs/fusefs", "ckptfs/internal/control",
		"github.com/cockroachdb/", "github.com/prometheus/", "github.com/getsentry/",
		"google.golang.org/protobuf", "github.com/hanwen/go-fuse",
		"net/http", "crypto/tls",
	}
	for _, pkg := range strings.Fields(string(out)) {
		for _, b := range banned {
			if pkg == b || strings.HasPrefix(pkg, b+"/") || (strings.HasSuffix(b, "/") && strings.HasPrefix(pkg, b)) {
				t.Errorf("cmd/turnctl links %s (via %s): keep the store out of the turnctl binary", b, pkg)
			}
		}
	}
}

// TestOfflineHandOver: for a project that is not mounted, turnctl hands the
// command over to the ckptfs beside it; without one it says so in one line.
func TestOfflineHandOver(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binaries")
	}
	bin := t.TempDir()
	for _, pkg := range []string{"ckptfs/cmd/turnctl", "ckptfs/cmd/ckptfs"} {
		if out, err := exec.Command("go", "build", "-o", bin+"/", pkg).CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, out)
		}
	}
	proj := t.TempDir()
	store, err := versionstore.Open(filepath.Join(proj, ".ckptfs"), versionstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Begin(ckpt.KindAgent, "first", "m1"); err != nil {
		t.Fatal(err)
	}
	if _, err := store.End(""); err != nil {
		t.Fatal(err)
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	turnctl := func(exe string, args ...string) (string, string, int) {
		t.Helper()
		cmd := exec.Command(exe, args...)
		cmd.Dir = proj
		cmd.Env = append(os.Environ(), "NO_COLOR=1", "CKPTFS_DIR=")
		var out, errb strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return out.String(), errb.String(), code
	}

	out, errs, code := turnctl(filepath.Join(bin, "turnctl"), "log")
	if code != 0 || !strings.HasPrefix(out, "1 ") || !strings.Contains(out, "first ref:m1") {
		t.Errorf("log beside ckptfs: %d\n%s%s", code, out, errs)
	}
	out, errs, code = turnctl(filepath.Join(bin, "turnctl"), "show", "7")
	if code != 2 || !strings.HasPrefix(errs, "turnctl: no turn 7") || strings.Count(errs, "\n") != 1 {
		t.Errorf("show 7 beside ckptfs: %d\n%s%s", code, out, errs)
	}

	// Alone, with no ckptfs on $PATH either.
	alone := t.TempDir()
	data, err := os.ReadFile(filepath.Join(bin, "turnctl"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(alone, "turnctl"), data, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", t.TempDir())
	out, errs, code = turnctl(filepath.Join(alone, "turnctl"), "log")
	if code != 1 || !strings.HasPrefix(errs, "turnctl: "+proj+" is not mounted") || !strings.Contains(errs, "needs the ckptfs binary") || strings.Count(errs, "\n") != 1 {
		t.Errorf("log without ckptfs: %d\n%s%s", code, out, errs)
	}
	if _, errs, code = turnctl(filepath.Join(alone, "turnctl"), "--help"); code != 0 {
		t.Errorf("--help without ckptfs: %d %s", code, errs)
	}
}
