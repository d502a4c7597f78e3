package tests

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLayers keeps the dependency direction one way, as the README's
// Layout draws it: cmd → (fusefs | internal/control) → versionstore, with
// the protocol (turnctl) and the vocabulary (internal/ckpt) at the bottom.
// Each rule names a package (with its subpackages, unless listed apart)
// and what it must never link, directly or not.
func TestLayers(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Deps " "}}`, "ckptfs/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		deps[f[0]] = f[1:]
	}
	const (
		store   = "ckptfs/versionstore"
		overlay = "ckptfs/fusefs"
		control = "ckptfs/internal/control"
		proto   = "ckptfs/turnctl"
		pebble  = "github.com/cockroachdb/pebble"
		fuse    = "github.com/hanwen/go-fuse"
	)
	rules := []struct {
		pkg    string
		except []string // subpackages the rule leaves out
		never  []string
	}{
		{"ckptfs/internal/ckpt", nil, []string{"ckptfs/", pebble, fuse}},
		{proto, nil, []string{store, overlay, control, "ckptfs/internal/turnctlcli", pebble, fuse}},
		{"ckptfs/internal/turnctlcli", nil, []string{store, overlay, control, pebble, fuse, "net/http"}},
		// The page talks to the daemon through the protocol only.
		{"ckptfs/internal/ui", nil, []string{store, overlay, control, "ckptfs/internal/turnctlcli", pebble, fuse}},
		// fusefstest stands in for the overlay in the tests of the
		// layers above it, recording into a real store.
		{overlay, []string{"ckptfs/fusefs/fusefstest"}, []string{store, control, proto, pebble}},
		{store, nil, []string{overlay, control, proto, "ckptfs/internal/turnctlcli", fuse}},
		{control, nil, []string{overlay, fuse}},
		{"ckptfs/internal/backing", nil, []string{store, overlay, control, proto, pebble, fuse}},
	}
	for pkg, ds := range deps {
		if strings.HasPrefix(pkg, "ckptfs/tests") {
			continue
		}
		for _, d := range ds {
			if strings.HasPrefix(d, "ckptfs/cmd/") {
				t.Errorf("%s links %s: nothing links a command", pkg, d)
			}
		}
		for _, r := range rules {
			if pkg != r.pkg && !strings.HasPrefix(pkg, r.pkg+"/") {
				continue
			}
			skip := false
			for _, e := range r.except {
				skip = skip || pkg == e || strings.HasPrefix(pkg, e+"/")
			}
			if skip {
				continue
			}
			for _, d := range ds {
				for _, n := range r.never {
					if d == n || strings.HasPrefix(d, n+"/") || strings.HasSuffix(n, "/") && strings.HasPrefix(d, n) {
						t.Errorf("%s links %s: it must never (README: Layout)", pkg, d)
					}
				}
			}
		}
	}
}
