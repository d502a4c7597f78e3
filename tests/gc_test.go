package tests

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// storeBytes is the disk space the store of a mounted project occupies,
// its ballast aside (the store is hidden by the mount: the daemon's cwd).
func storeBytes(t *testing.T, m *Mount) int64 { return storeSpace(t, m, true) }

// storeSpace is storeBytes, with Pebble's logs (preallocated ahead of
// use) or without them.
func storeSpace(t *testing.T, m *Mount, logs bool) int64 {
	t.Helper()
	root := fmt.Sprintf("/proc/%d/cwd", m.PID(t))
	var total int64
	filepath.Walk(root+"/", func(p string, fi os.FileInfo, err error) error {
		if err != nil || !fi.Mode().IsRegular() || filepath.Base(p) == "ballast" || (!logs && strings.HasSuffix(p, ".log")) {
			return nil
		}
		total += fi.Sys().(*syscall.Stat_t).Blocks * 512
		return nil
	})
	return total
}

func randomBytes(t *testing.T, n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// turnctlOK runs turnctl and fails the test if it fails.
func turnctlOK(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := runTurnctl(t, dir, args...)
	if err != nil {
		t.Fatalf("turnctl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// turnctlFails runs turnctl, wants exit status code and one line on
// stderr containing want.
func turnctlFails(t *testing.T, dir string, code int, want string, args ...string) {
	t.Helper()
	out, err := runTurnctl(t, dir, args...)
	var xe *exec.ExitError
	if !errors.As(err, &xe) || xe.ExitCode() != code {
		t.Fatalf("turnctl %s: want exit status %d, got %v\n%s", strings.Join(args, " "), code, err, out)
	}
	if !strings.Contains(out, want) || strings.Count(strings.TrimSpace(out), "\n") > 0 {
		t.Fatalf("turnctl %s: want one line with %q, got:\n%s", strings.Join(args, " "), want, out)
	}
}

// Forgetting the oldest turns and a gc shrink the store on disk, and every
// kept turn still rewinds exactly (bytes and modes); forgotten and pinned
// turns and the newest one are refused with one clear line, changing
// nothing.
func TestForgetAndGCShrinkTheStore(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"a.txt": "zero\n", "src/main.go": "package main\n"})
	m := mountProject(t, dir)
	skip := []string{".ckptfs"}
	snaps := map[int]map[string]entry{0: snapshot(t, dir, skip, nil)}
	const big = 4 << 20
	for n := 1; n <= 6; n++ {
		turnctlOK(t, dir, "begin", "--label", fmt.Sprintf("turn %d", n))
		if err := os.WriteFile(filepath.Join(dir, "big.bin"), randomBytes(t, big), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte(strings.Repeat(fmt.Sprintf("line %d\n", n), n)), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Join(dir, "src/main.go"), os.FileMode(0o600+n%2*0o044)); err != nil {
			t.Fatal(err)
		}
		turnctlOK(t, dir, "end")
		snaps[n] = snapshot(t, dir, skip, nil)
	}
	turnctlOK(t, dir, "pin", "4", "--note", "keep me")
	before := storeBytes(t, m)

	// Refusals change nothing.
	turnctlFails(t, dir, 1, "newest turn", "forget", "2", "6")
	turnctlFails(t, dir, 1, "pinned", "forget", "--before", "5")
	turnctlFails(t, dir, 2, "--keep-size", "policy", "--keep-size", "10x")
	turnctlFails(t, dir, 2, "--keep-age", "policy", "--keep-age", "soon")
	if out := turnctlOK(t, dir, "log"); strings.Contains(out, "history starts") {
		t.Fatalf("a refused forget moved the start of history:\n%s", out)
	}

	out := turnctlOK(t, dir, "forget", "0", "1", "2", "3")
	if !strings.Contains(out, "history starts at turn 4, as it ended (what it changed is no longer shown)") {
		t.Fatalf("forget: %s", out)
	}
	turnctlFails(t, dir, 1, "pinned", "forget", "4")
	turnctlFails(t, dir, 1, "forgotten by forget", "rewind", "2")
	turnctlFails(t, dir, 1, "forgotten", "show", "3")
	if out := turnctlOK(t, dir, "log"); !strings.Contains(out, "history starts at turn 4 (older turns forgotten by forget") || !regexp.MustCompile(`(?m)^ *4 .*\[history starts here\].*\[pinned`).MatchString(out) || strings.Contains(out, "0 files") {
		t.Fatalf("log does not say where history starts, or the pin, or counts the first kept turn's changes:\n%s", out)
	}
	var lg struct {
		Start *struct{ Turn uint64 }  `json:"start"`
		Pins  []struct{ Turn uint64 } `json:"pins"`
	}
	if err := json.Unmarshal([]byte(turnctlOK(t, dir, "--json", "log")), &lg); err != nil || lg.Start == nil || lg.Start.Turn != 4 || len(lg.Pins) != 1 || lg.Pins[0].Turn != 4 {
		t.Fatalf("log --json: start %+v pins %+v (%v)", lg.Start, lg.Pins, err)
	}

	var du struct {
		StoreBytes int64 `json:"store_bytes"`
		Budget     int64 `json:"budget_bytes"`
		Garbage    int64 `json:"garbage_bytes"`
	}
	if err := json.Unmarshal([]byte(turnctlOK(t, dir, "--json", "du")), &du); err != nil {
		t.Fatal(err)
	}
	if du.Garbage < 3*big || du.Budget <= 0 {
		t.Fatalf("du: %+v, want at least %d bytes of garbage after forgetting 3 big versions", du, 3*big)
	}
	out = turnctlOK(t, dir, "gc")
	if !strings.Contains(out, "freed") {
		t.Fatalf("gc: %s", out)
	}
	after := storeBytes(t, m)
	t.Logf("store %d -> %d bytes on disk; gc said: %s", before, after, strings.TrimSpace(out))
	if after > before-3*big {
		t.Fatalf("the store did not shrink by the %d bytes forgotten: %d -> %d", 3*big, before, after)
	}
	turnctlOK(t, dir, "verify")

	for _, n := range []int{4, 6, 5, 4} {
		turnctlOK(t, dir, "rewind", fmt.Sprint(n))
		diffTrees(t, snaps[n], snapshot(t, dir, skip, nil))
	}
	turnctlOK(t, dir, "verify")

	// Offline, the history start and the pin hold.
	m.Unmount(t)
	if out := turnctlOK(t, dir, "log"); !strings.Contains(out, "history starts at turn 4") {
		t.Fatalf("offline log:\n%s", out)
	}
	turnctlOK(t, dir, "rewind", "5")
	diffTrees(t, snaps[5], snapshot(t, dir, skip, nil))
}

// The policy given at mount is kept in the store, applied by the daemon's
// background gc, and used by a later mount without the flags.
func TestPolicyFromMountFlagsRunsInTheBackground(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"f": "0\n"})
	if out, err := runCkptfs("mount", "--keep-age", "bogus", dir); err == nil || !strings.Contains(out, "--keep-age") {
		t.Fatalf("mount with a bad --keep-age: %v\n%s", err, out)
	} else if xe, ok := err.(*exec.ExitError); !ok || xe.ExitCode() != 2 {
		t.Fatalf("mount with a bad --keep-age: want exit status 2, got %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, ".ckptfs")); err == nil {
		t.Fatal("a refused mount created the store")
	}
	t.Setenv("CKPTFS_GC_EVERY", "100ms")
	if out, err := runCkptfs("mount", "--keep-daily", "forever", dir); err == nil || !strings.Contains(out, "--keep-daily") {
		t.Fatalf("mount with a bad --keep-daily: %v\n%s", err, out)
	}
	m := mountProject(t, dir, "--keep-turns", "2", "--keep-age", "1ms", "--keep-size", "1GiB")
	skip := []string{".ckptfs"}
	snaps := map[int]map[string]entry{}
	for n := 1; n <= 5; n++ {
		turnctlOK(t, dir, "begin")
		if err := os.WriteFile(filepath.Join(dir, "f"), randomBytes(t, 100<<10), 0o640); err != nil {
			t.Fatal(err)
		}
		turnctlOK(t, dir, "end")
		snaps[n] = snapshot(t, dir, skip, nil)
	}
	// The last two turns are kept whole; the older ones all ended this
	// hour: the start of history (0) and the hour's last turn (3) are
	// kept, 1 and 2 are merged into 3.
	deadline := time.Now().Add(60 * time.Second)
	for {
		out := turnctlOK(t, dir, "log")
		if strings.Contains(out, "[with turns 1-2]") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the background gc did not thin history:\n%s", out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	turnctlFails(t, dir, 1, "merged into turn 3", "rewind", "2")
	if out := turnctlOK(t, dir, "show", "3"); !strings.Contains(out, "changes since turn 0") {
		t.Fatalf("show of a turn turns were merged into:\n%s", out)
	}
	// No thinning: history starts at turn 4.
	turnctlOK(t, dir, "policy", "--keep-hourly", "off", "--keep-daily", "off")
	for {
		out := turnctlOK(t, dir, "log")
		if strings.Contains(out, "history starts at turn 4 (older turns forgotten by the retention policy") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the background gc did not apply the policy:\n%s", out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	turnctlOK(t, dir, "rewind", "4")
	diffTrees(t, snaps[4], snapshot(t, dir, skip, nil))
	var st struct {
		Budget int64 `json:"budget_bytes"`
	}
	if out, err := runCkptfs("status", "--json", dir); err != nil || json.Unmarshal([]byte(out), &st) != nil || st.Budget != 1<<30 {
		t.Fatalf("status --json: budget %d (%v)\n%s", st.Budget, err, out)
	}
	m.Unmount(t)
	os.Unsetenv("CKPTFS_GC_EVERY")
	mountProject(t, dir)
	var pol struct {
		Policy struct {
			KeepTurns int     `json:"keep_turns"`
			KeepSize  int64   `json:"keep_size"`
			KeepDaily float64 `json:"keep_daily_seconds"`
		} `json:"policy"`
	}
	if err := json.Unmarshal([]byte(turnctlOK(t, dir, "--json", "policy")), &pol); err != nil || pol.Policy.KeepTurns != 2 || pol.Policy.KeepSize != 1<<30 || pol.Policy.KeepDaily >= 0 {
		t.Fatalf("policy after a remount without flags: %+v (%v)", pol, err)
	}
	turnctlOK(t, dir, "policy", "--keep-turns", "0")
	pol.Policy.KeepTurns, pol.Policy.KeepSize = -1, 0 // the reply's 0 is the default
	if err := json.Unmarshal([]byte(turnctlOK(t, dir, "--json", "policy")), &pol); err != nil || pol.Policy.KeepTurns != 0 || pol.Policy.KeepSize != 1<<30 {
		t.Fatalf("policy --keep-turns 0 did not go back to the default: %+v (%v)", pol, err)
	}
}

// Forgetting turns in the middle of history merges them into the kept
// turn after them: that turn shows the changes since the turn before
// them, the turns before and after rewind exactly (bytes and modes),
// the forgotten ones are refused naming where they went, and a gc frees
// the versions only they held.
func TestForgetInTheMiddleThroughTheMount(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"a.txt": "zero\n", "keep.txt": "same\n"})
	m := mountProject(t, dir)
	skip := []string{".ckptfs"}
	snaps := map[int]map[string]entry{0: snapshot(t, dir, skip, nil)}
	const big = 4 << 20
	for n := 1; n <= 5; n++ {
		turnctlOK(t, dir, "begin", "--label", fmt.Sprintf("turn %d", n), "--ref", fmt.Sprintf("r%d", n))
		if err := os.WriteFile(filepath.Join(dir, "big.bin"), randomBytes(t, big), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte(fmt.Sprintf("line %d\n", n)), os.FileMode(0o600+n%2*0o044)); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Join(dir, "a.txt"), os.FileMode(0o600+n%2*0o044)); err != nil {
			t.Fatal(err)
		}
		if n == 2 {
			if err := os.Rename(filepath.Join(dir, "keep.txt"), filepath.Join(dir, "moved.txt")); err != nil {
				t.Fatal(err)
			}
		}
		turnctlOK(t, dir, "end")
		snaps[n] = snapshot(t, dir, skip, nil)
	}
	before := storeBytes(t, m)
	out := turnctlOK(t, dir, "forget", "2", "3")
	if !strings.Contains(out, "forgot turns 2-3") || !strings.Contains(out, "merged turns 2-3 into turn 4") {
		t.Fatalf("forget: %s", out)
	}
	turnctlFails(t, dir, 1, "merged into turn 4", "rewind", "3")
	turnctlFails(t, dir, 2, "no turn has ref", "show", "ref:r2")
	out = turnctlOK(t, dir, "show", "4")
	for _, want := range []string{"with turns 2-3", "changes since turn 1", "moved.txt", "a.txt", "big.bin"} {
		if !strings.Contains(out, want) {
			t.Fatalf("show 4 after the merge lacks %q:\n%s", want, out)
		}
	}
	var lg struct {
		Turns []struct {
			Num        uint64  `json:"num"`
			Parent     *uint64 `json:"parent"`
			MergedFrom *uint64 `json:"merged_from"`
		} `json:"turns"`
	}
	if err := json.Unmarshal([]byte(turnctlOK(t, dir, "--json", "log")), &lg); err != nil {
		t.Fatal(err)
	}
	var nums []uint64
	for _, tn := range lg.Turns {
		nums = append(nums, tn.Num)
		if tn.Num == 4 && (tn.MergedFrom == nil || *tn.MergedFrom != 2 || tn.Parent == nil || *tn.Parent != 1) {
			t.Fatalf("log --json: turn 4 merged_from %v parent %v, want 2 and 1", tn.MergedFrom, tn.Parent)
		}
	}
	if fmt.Sprint(nums) != "[5 4 1 0]" {
		t.Fatalf("log --json lists turns %v, want [5 4 1 0]", nums)
	}
	turnctlOK(t, dir, "gc")
	after := storeBytes(t, m)
	t.Logf("store %d -> %d bytes on disk", before, after)
	if after > before-2*big {
		t.Fatalf("the store did not shrink by the 2 big versions only turns 2-3 held: %d -> %d", before, after)
	}
	turnctlOK(t, dir, "verify")
	for _, n := range []int{1, 4, 0, 5, 1} {
		turnctlOK(t, dir, "rewind", fmt.Sprint(n))
		diffTrees(t, snaps[n], snapshot(t, dir, skip, nil))
	}
	// Offline too.
	m.Unmount(t)
	turnctlOK(t, dir, "rewind", "4")
	diffTrees(t, snaps[4], snapshot(t, dir, skip, nil))
}
