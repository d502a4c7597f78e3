package turnctlcli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"ckptfs/fusefs/fusefstest"
	"ckptfs/internal/ckpt"
	"ckptfs/internal/control"
	"ckptfs/internal/storeref"
	"ckptfs/versionstore"
)

// testProject makes a project directory with a store in DIR/.ckptfs holding:
//
//	turn 1 (agent "first"): a.txt "one\ntwo\n", sub/, sub/b.txt
//	turn 2 (agent "second", ref:m2): a.txt "one\n2\nthree\n", sub/b.txt -> sub/c.txt
//	turn 3 (agent "third"): a.txt deleted
//
// The store is closed again, so turnctl opens it offline.
func testProject(t *testing.T) string {
	t.Helper()
	return historyOf(t, func(turn func(label, ref string, fn func()), ov *fusefstest.Overlay) {
		turn("first", "", func() {
			ov.Write("a.txt", "one\ntwo\n")
			ov.Mkdir("sub")
			ov.Write("sub/b.txt", "bee\n")
		})
		turn("second", "m2", func() {
			ov.Write("a.txt", "one\n2\nthree\n")
			ov.Rename("sub/b.txt", "sub/c.txt")
		})
		turn("third", "", func() { ov.Remove("a.txt") })
	})
}

// tc runs turnctl in-process and returns stdout, stderr and the
// exit status.
func tc(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := runWith(context.Background(), control.OpenOffline, args, strings.NewReader(""), &out, &errb)
	return out.String(), errb.String(), code
}

func TestLogOffline(t *testing.T) {
	dir := testProject(t)
	out, errs, code := tc(t, "-C", dir, "log")
	if code != 0 {
		t.Fatalf("log: %d %s", code, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 {
		t.Fatalf("log printed %d lines:\n%s", len(lines), out)
	}
	for i, want := range []string{"3 ", "2 ", "1 ", "0 "} {
		if !strings.HasPrefix(lines[i], want) {
			t.Errorf("line %d = %q, want it to start with %q", i, lines[i], want)
		}
	}
	if !strings.Contains(lines[1], "second ref:m2") || !strings.Contains(lines[1], "2 files") || !strings.Contains(lines[1], "+2 -1") {
		t.Errorf("turn 2 line: %q", lines[1])
	}
	out, _, code = tc(t, "-C", dir, "--json", "log", "-n", "2")
	var rep struct{ Turns []ckpt.Turn }
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || len(rep.Turns) != 2 || rep.Turns[0].Stats == nil {
		t.Fatalf("log --json -n 2: %d %s", code, out)
	}
}

func TestShowDiffCatOffline(t *testing.T) {
	dir := testProject(t)
	out, errs, code := tc(t, "-C", dir, "show", "ref:m2", "--patch")
	if code != 0 {
		t.Fatalf("show: %d %s", code, errs)
	}
	for _, want := range []string{"turn 2", "modified  a.txt", "renamed   sub/b.txt -> sub/c.txt", "+2 -1", "@@ -1,2 +1,3 @@"} {
		if !strings.Contains(out, want) {
			t.Errorf("show lacks %q:\n%s", want, out)
		}
	}
	out, _, code = tc(t, "-C", filepath.Join(dir, "sub"), "diff", "1", "2", "../a.txt")
	if code != 0 || !strings.Contains(out, "-two\n+2\n+three\n") || strings.Contains(out, "sub/") {
		t.Errorf("diff 1 2 -- ../a.txt: %d\n%s", code, out)
	}
	out, _, code = tc(t, "-C", filepath.Join(dir, "sub"), "diff", "1", "--", "../a.txt")
	if code != 0 || !strings.Contains(out, "+++ /dev/null") || strings.Contains(out, "sub/") {
		t.Errorf("diff 1 -- ../a.txt: %d\n%s", code, out)
	}
	out, _, code = tc(t, "-C", dir, "cat", "1", "a.txt")
	if code != 0 || out != "one\ntwo\n" {
		t.Errorf("cat 1 a.txt: %d %q", code, out)
	}
	_, errs, code = tc(t, "-C", dir, "cat", "3", "a.txt")
	if code != 1 || errs != "turnctl: a.txt did not exist at the end of turn 3\n" {
		t.Errorf("cat of an absent file: %d %q", code, errs)
	}
	_, errs, code = tc(t, "-C", dir, "cat", "1", "sub")
	if code != 1 || errs != "turnctl: sub is not a file at the end of turn 1: a directory\n" {
		t.Errorf("cat of a directory: %d %q", code, errs)
	}
	_, errs, code = tc(t, "-C", dir, "show", "9")
	if code != 2 || errs != "turnctl: no turn 9 (turns are 0-3)\n" {
		t.Errorf("show 9: %d %q", code, errs)
	}
}

func TestRewindOffline(t *testing.T) {
	dir := testProject(t)
	out, errs, code := tc(t, "-C", dir, "rewind", "--dry-run", "1")
	if code != 0 || !strings.Contains(out, "would change") {
		t.Fatalf("rewind --dry-run: %d %s %s", code, out, errs)
	}
	if _, err := os.Stat(filepath.Join(dir, "a.txt")); err == nil {
		t.Fatal("dry run changed the tree")
	}
	out, errs, code = tc(t, "-C", dir, "rewind", "1")
	if code != 0 || !strings.Contains(out, "done as turn 4") {
		t.Fatalf("rewind: %d %s %s", code, out, errs)
	}
	if data, _ := os.ReadFile(filepath.Join(dir, "a.txt")); string(data) != "one\ntwo\n" {
		t.Errorf("a.txt after rewind: %q", data)
	}
	out, errs, code = tc(t, "-C", dir, "undo")
	if code != 0 || !strings.Contains(out, "undo of turn 4") {
		t.Fatalf("undo: %d %s %s", code, out, errs)
	}
	if _, err := os.Stat(filepath.Join(dir, "a.txt")); err == nil {
		t.Error("a.txt back after undoing the rewind")
	}
	out, errs, code = tc(t, "-C", filepath.Join(dir, "sub"), "restore", "2", "--", "../a.txt")
	if code != 0 {
		t.Fatalf("restore: %d %s %s", code, out, errs)
	}
	if data, _ := os.ReadFile(filepath.Join(dir, "a.txt")); string(data) != "one\n2\nthree\n" {
		t.Errorf("a.txt after restore: %q", data)
	}
	_, errs, code = tc(t, "-C", dir, "restore", "2", "--", "/etc/passwd")
	if code != 1 || !strings.Contains(errs, "outside the project") {
		t.Errorf("restore outside: %d %q", code, errs)
	}
	_, errs, code = tc(t, "-C", dir, "restore", "2", "--", "nope")
	if code != 1 || !strings.Contains(errs, "nope did not exist") {
		t.Errorf("restore of a path that never existed: %d %q", code, errs)
	}
	out, errs, code = tc(t, "-C", dir, "verify")
	if code != 0 || !strings.Contains(out, "ok") {
		t.Errorf("verify: %d %s %s", code, out, errs)
	}
}

// TestBeginInAProjectNotMounted: begin in a directory of a project that
// has a history but is not mounted names the project and how to mount
// it; outside any project it says how to mount one.
func TestBeginInAProjectNotMounted(t *testing.T) {
	dir := testProject(t)
	t.Chdir(filepath.Join(dir, "sub"))
	want := "turnctl: " + dir + " is not mounted (mount it with: ckptfs mount " + dir + ")\n"
	if _, errs, code := tc(t, "begin"); code != 1 || errs != want {
		t.Errorf("begin in a project not mounted: exit %d, %q; want %q", code, errs, want)
	}
	t.Chdir(t.TempDir())
	want = "turnctl: not inside a ckptfs mount (ckptfs mount DIR mounts a project; -C DIR names a mounted one)\n"
	if _, errs, code := tc(t, "begin"); code != 1 || errs != want {
		t.Errorf("begin outside any project: exit %d, %q; want %q", code, errs, want)
	}
}

func TestUsageAndMountOnly(t *testing.T) {
	dir := testProject(t)
	// A project named with -C that is not mounted: say so, and how to
	// mount it (not "use -C DIR", which was used).
	notMounted := "turnctl: " + dir + " is not mounted (mount it with: ckptfs mount " + dir + ")\n"
	cases := []struct {
		args []string
		code int
		err  string
	}{
		{[]string{"-C", dir, "begin"}, 1, notMounted},
		{[]string{"-C", dir, "status"}, 1, notMounted},
		{[]string{"-C", dir, "step"}, 1, notMounted},
		{[]string{"-C", dir, "run", "--", "true"}, 1, notMounted},
		{[]string{"-C", dir, "bogus"}, 2, "turnctl: unknown command \"bogus\" (see turnctl --help)\n"},
		{[]string{"-C", dir, "redo"}, 2, "turnctl: unknown command \"redo\": an undo of an undo is the redo (turnctl undo)\n"},
		{[]string{"-C", dir, "show"}, 2, ""},
		{[]string{"-C", dir, "show", "1", "2"}, 2, ""},
		{[]string{"-C", dir, "diff", "1", "2", "3"}, 2, "turnctl diff: diff compares two states: \"3\" would be a third (a path of that name goes after --) (see turnctl diff --help)\n"},
		{[]string{"-C", dir, "log", "--nope"}, 2, ""},
		{[]string{"-C", dir, "log", "--follow"}, 2, "turnctl log: --follow takes exactly one PATH (see turnctl log --help)\n"},
		{[]string{"-C", dir, "log", "--follow", "a", "b"}, 2, "turnctl log: --follow takes exactly one PATH (see turnctl log --help)\n"},
		{[]string{}, 2, ""},
		{[]string{"-C", t.TempDir(), "log"}, 1, ""},
	}
	for _, c := range cases {
		_, errs, code := tc(t, c.args...)
		if code != c.code || (c.err != "" && errs != c.err) || strings.Count(errs, "\n") > 1 && code != 2 {
			t.Errorf("%q: exit %d %q; want %d %q", c.args, code, errs, c.code, c.err)
		}
	}
	for _, c := range commands {
		out, _, code := tc(t, c.name, "--help")
		if code != 0 || !strings.Contains(out, "Usage: turnctl") || !strings.Contains(out, "Exit status") {
			t.Errorf("%s --help: %d %s", c.name, code, out)
		}
	}
}

// A TURN argument that is not one, or names no turn there is, is a usage
// error: one line naming what is accepted, exit 2, and nothing changed.
func TestBadTurnArguments(t *testing.T) {
	dir := testProject(t)
	before, _, _ := tc(t, "-C", dir, "log")
	for _, arg := range []string{"-1", " 3", "3x", "+1", "ref:", "ref:nope", "9", ""} {
		for _, cmd := range [][]string{{"rewind", arg}, {"show", arg}, {"restore", arg, "--", "a.txt"}} {
			out, errs, code := tc(t, append([]string{"-C", dir}, cmd...)...)
			if code != 2 || strings.Count(errs, "\n") != 1 || out != "" {
				t.Errorf("turnctl %q: exit %d, stdout %q, stderr %q; want exit 2 and one line", cmd, code, out, errs)
			}
			if want := map[bool]string{true: "is not a turn", false: "turns are 0-3"}[arg == "-1"]; !strings.Contains(errs, want) {
				t.Errorf("turnctl %q: %q does not name the turns there are", cmd, errs)
			}
			if !strings.HasPrefix(errs, "turnctl: ") {
				t.Errorf("turnctl %q: %q; want it worded as every other bad turn", cmd, errs)
			}
		}
	}
	// A range written as in other tools is told the syntax.
	_, errs, code := tc(t, "-C", dir, "export", "git", "3-1", "--git-dir", filepath.Join(t.TempDir(), "g"))
	if code != 2 || !strings.Contains(errs, `"3-1" is not a turn: a range of turns is FIRST..LAST (1..3)`) {
		t.Errorf("export git 3-1: exit %d, %q", code, errs)
	}
	if after, _, _ := tc(t, "-C", dir, "log"); after != before {
		t.Errorf("bad arguments changed the history:\n%s\nthen\n%s", before, after)
	}
}

// A label is text from anyone: what a terminal would act on (an escape
// sequence, a carriage return) is shown escaped, in log and in show.
func TestControlCharactersInLabelsAreEscaped(t *testing.T) {
	dir := historyOf(t, func(turn func(label, ref string, fn func()), ov *fusefstest.Overlay) {
		turn("fix \x1b[2J\x1b[31mred\rover\u0085 bytes \xff", "", func() { ov.Write("a.txt", "a\n") })
	})
	for _, args := range [][]string{{"log"}, {"show", "1"}} {
		out, errs, code := tc(t, append([]string{"-C", dir}, args...)...)
		if code != 0 {
			t.Fatalf("%v: %d %s", args, code, errs)
		}
		if strings.ContainsAny(out, "\x1b\r\u0085") || !utf8.ValidString(out) {
			t.Errorf("%v prints the label raw: %q", args, out)
		}
		// The byte that is not UTF-8 is kept (bytejson) and escaped.
		if !strings.Contains(out, `fix \x1b[2J\x1b[31mred\rover\u0085 bytes \xff`) {
			t.Errorf("%v does not show the label escaped: %q", args, out)
		}
	}
}

// A binary file's change shows its sizes, an owner change the old and the
// new owner.
func TestShowBinarySizesAndOwners(t *testing.T) {
	dir := historyOf(t, func(turn func(label, ref string, fn func()), ov *fusefstest.Overlay) {
		turn("", "", func() {
			ov.Write("blob", "\x00"+strings.Repeat("x", 2047))
			ov.Write("owned", "o\n")
		})
		turn("", "", func() {
			ov.Write("blob", "\x00"+strings.Repeat("y", 4095))
			ov.Chown("owned", 1234, 5678)
		})
	})
	out, errs, code := tc(t, "-C", dir, "show", "2")
	if code != 0 {
		t.Fatalf("show 2: %d %s", code, errs)
	}
	if !strings.Contains(out, "binary, 2.0 KiB -> 4.0 KiB") {
		t.Errorf("show 2 does not give the binary file's sizes:\n%s", out)
	}
	if !strings.Contains(out, "owner 0:0 -> 1234:5678") {
		t.Errorf("show 2 does not give the owner change:\n%s", out)
	}
	if !regexp.MustCompile(`(?m)^ *owner +owned +owner 0:0 -> 1234:5678`).MatchString(out) {
		t.Errorf("show 2 does not call the owner change one:\n%s", out)
	}
}

// historyOf makes a project whose store holds the agent turns build
// makes (each turn runs fn through the overlay stand-in), closes the
// store so that turnctl opens it offline, and returns the project.
func historyOf(t *testing.T, build func(turn func(label, ref string, fn func()), ov *fusefstest.Overlay)) string {
	t.Helper()
	dir, store, ov := offlineProject(t)
	build(func(label, ref string, fn func()) {
		if _, err := store.Begin(ckpt.KindAgent, label, ref); err != nil {
			t.Fatal(err)
		}
		fn()
		if _, err := store.End(""); err != nil {
			t.Fatal(err)
		}
	}, ov)
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// offlineProject makes a project with an open store and the overlay
// stand-in over it, for a test to build a history in; once the test
// closes the store, turnctl opens it offline.
func offlineProject(t *testing.T) (string, *versionstore.Store, *fusefstest.Overlay) {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("CKPTFS_DIR", "")
	t.Setenv("NO_COLOR", "1")
	store, err := versionstore.Open(filepath.Join(dir, ".ckptfs"), versionstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return dir, store, fusefstest.New(t, dir, store)
}

// TestRememberedStore: a store given at mount (ckptfs mount --store) is
// found by the offline commands without --store; a store that moved is
// one clear line.
func TestRememberedStore(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	dir := testProject(t)
	store := filepath.Join(t.TempDir(), "history")
	if err := os.Rename(filepath.Join(dir, ".ckptfs"), store); err != nil {
		t.Fatal(err)
	}
	if _, _, code := tc(t, "-C", dir, "log"); code != 1 {
		t.Fatalf("log with the store elsewhere and nothing remembered: exit %d", code)
	}
	if err := storeref.Remember(dir, store); err != nil {
		t.Fatal(err)
	}
	out, errs, code := tc(t, "-C", filepath.Join(dir, "sub"), "log")
	if code != 0 || !strings.Contains(out, "second ref:m2") {
		t.Errorf("log with a remembered store: %d %q %q", code, out, errs)
	}
	if err := os.Rename(store, store+".moved"); err != nil {
		t.Fatal(err)
	}
	_, errs, code = tc(t, "-C", dir, "log")
	if code != 1 || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, store+" (given with --store on") {
		t.Errorf("log with a remembered store that moved: %d %q", code, errs)
	}
	out, errs, code = tc(t, "-C", dir, "--store", store+".moved", "log")
	if code != 0 || !strings.Contains(out, "second ref:m2") {
		t.Errorf("log --store where it is now: %d %q %q", code, out, errs)
	}
}

// export patch of the first kept turn, whose own changes were forgotten
// with the turns before it, says so in one line (not that the turn
// before it was forgotten).
func TestExportPatchOfTheFirstKeptTurn(t *testing.T) {
	dir, store, ov := offlineProject(t)
	for _, name := range []string{"a.txt", "b.txt"} {
		if _, err := store.Begin(ckpt.KindAgent, name, ""); err != nil {
			t.Fatal(err)
		}
		ov.Write(name, name+"\n")
		if _, err := store.End(""); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := store.Forget([]uint64{0}, ckpt.ReasonForget); err != nil {
		t.Fatal(err)
	}
	store.Close()
	out, errs, code := tc(t, "-C", dir, "export", "patch", "1")
	if code != 1 || errs != "turnctl: turn 1 is where history starts now: its own changes were forgotten with the turns before it, so it has no patch\n" {
		t.Errorf("export patch 1: %d %q", code, errs)
	}
	out, _, code = tc(t, "-C", dir, "show", "1")
	if code != 0 || !strings.Contains(out, "(history starts here: this turn's own changes were forgotten with the turns before it)") {
		t.Errorf("show 1: %d\n%s", code, out)
	}
	out, errs, code = tc(t, "-C", dir, "export", "patch", "2")
	if code != 0 || !strings.Contains(out, "+b.txt") {
		t.Errorf("export patch 2: %d %q\n%s", code, errs, out)
	}
}

// TestGCPastAPinSaysWhatItMerged: with hourly and daily thinning off, the
// old turns after a pin, which the start of history cannot pass, are
// merged into the kept turn after them, and gc says so (not that an hour
// or a day was thinned). Turn 7 is kept (the window), and 6 with it (its
// undo): 4 is merged into 5.
func TestGCPastAPinSaysWhatItMerged(t *testing.T) {
	dir := historyOf(t, func(turn func(label, ref string, fn func()), ov *fusefstest.Overlay) {
		for i := 1; i <= 7; i++ {
			turn(fmt.Sprint("t", i), "", func() { ov.Write("a.txt", fmt.Sprintln(i)) })
		}
	})
	for _, args := range [][]string{{"pin", "3"}, {"policy", "--keep-turns", "1", "--keep-age", "1s", "--keep-hourly", "off", "--keep-daily", "off"}} {
		if _, errs, code := tc(t, append([]string{"-C", dir}, args...)...); code != 0 {
			t.Fatalf("%v: %s", args, errs)
		}
	}
	time.Sleep(1100 * time.Millisecond)
	out, errs, code := tc(t, "-C", dir, "gc")
	want := "forgot turns 0-2, 4 (policy); history starts at turn 3; 1 of them merged into the kept turn after them\n"
	if code != 0 || !strings.HasPrefix(out, want) {
		t.Errorf("gc: exit %d, %s%s; want it to start with %q", code, out, errs, want)
	}
}

// A budget set below what the store holds says what the gc will do.
func TestPolicyUnderTheStoreSaysSo(t *testing.T) {
	dir := testProject(t)
	if _, errs, code := tc(t, "-C", dir, "policy", "--keep-size", "1GiB"); code != 0 || errs != "" {
		t.Errorf("policy within the store's size: exit %d, %q", code, errs)
	}
	out, errs, code := tc(t, "-C", dir, "policy", "--keep-size", "1B")
	if code != 0 || !strings.Contains(out, "keep-size:   1 B") || !strings.Contains(errs, "over the new budget: the gc forgets the oldest turns") {
		t.Errorf("policy below the store's size: exit %d, %q, %q", code, out, errs)
	}
}

// Offline, no daemon runs the gc: the note on a budget below the store's
// size must not promise one within a minute, and says what does run it.
func TestPolicyUnderTheStoreOfflineNamesTheGC(t *testing.T) {
	dir := testProject(t)
	_, errs, code := tc(t, "-C", dir, "policy", "--keep-size", "1B")
	if code != 0 || strings.Contains(errs, "within a minute") || !strings.Contains(errs, "when you run turnctl gc or mount the project") {
		t.Errorf("policy below the store's size, not mounted: exit %d, %q", code, errs)
	}
}

// A budget without a unit, and a --keep-* flag given an empty value
// (which would read as not given), are usage errors that change nothing.
func TestPolicyRefusesABudgetWithoutAUnitOrAnEmptyValue(t *testing.T) {
	dir := testProject(t)
	for _, c := range []struct{ args, errs string }{
		{"--keep-size 100", "turnctl policy: --keep-size: bad size \"100\": give a unit, like 100M or 100G (100B for bytes) (see turnctl policy --help)\n"},
		{"--keep-size=", "turnctl policy: --keep-size: no value given (see turnctl policy --help)\n"},
		{"--keep-age=", "turnctl policy: --keep-age: no value given (see turnctl policy --help)\n"},
	} {
		out, errs, code := tc(t, append([]string{"-C", dir, "policy"}, strings.Fields(c.args)...)...)
		if code != 2 || out != "" || errs != c.errs {
			t.Errorf("policy %s: exit %d, %q, %q; want 2 and %q", c.args, code, out, errs, c.errs)
		}
	}
	if out, _, _ := tc(t, "-C", dir, "policy"); !strings.Contains(out, "keep-size:   ") || !strings.Contains(out, "(default)") {
		t.Errorf("policy after the refusals:\n%s", out)
	}
}

// forget --dry-run says what forget then does, to the turn, and changes
// nothing; a forget it would refuse it refuses alike.
func TestForgetDryRun(t *testing.T) {
	dir := historyOf(t, func(turn func(label, ref string, fn func()), ov *fusefstest.Overlay) {
		for i := 1; i <= 6; i++ {
			turn(fmt.Sprint("t", i), "", func() { ov.Write("a.txt", fmt.Sprintln(i)) })
		}
	})
	before, _, _ := tc(t, "-C", dir, "log")
	dry, errs, code := tc(t, "-C", dir, "forget", "--dry-run", "0", "1", "3", "4")
	want := "would forget turns 0-1, 3-4; history would start at turn 2, as it ended (what it changed is no longer shown); would merge turns 3-4 into turn 5; nothing changed\n"
	if code != 0 || dry != want {
		t.Errorf("forget --dry-run: exit %d, %q%s; want %q", code, dry, errs, want)
	}
	if after, _, _ := tc(t, "-C", dir, "log"); after != before {
		t.Errorf("a dry run changed the history:\n%s\nthen\n%s", before, after)
	}
	_, dryErr, dryCode := tc(t, "-C", dir, "forget", "--dry-run", "6")
	_, realErr, realCode := tc(t, "-C", dir, "forget", "6")
	if dryCode == 0 || dryCode != realCode || dryErr != realErr {
		t.Errorf("forget of the newest turn: dry run exit %d %q, forget exit %d %q", dryCode, dryErr, realCode, realErr)
	}
	out, errs, code := tc(t, "-C", dir, "forget", "0", "1", "3", "4")
	if want := "forgot turns 0-1, 3-4; history starts at turn 2, as it ended (what it changed is no longer shown); merged turns 3-4 into turn 5 (turnctl gc reclaims the space)\n"; code != 0 || out != want {
		t.Errorf("forget: exit %d, %q%s; want %q", code, out, errs, want)
	}
}

// du's first line is the budget line ckptfs status prints: the same
// bytes under the same name (not "store", which status uses for what
// the store takes on disk with its reserve).
func TestDuNamesTheBudgetAsStatusDoes(t *testing.T) {
	dir := testProject(t)
	out, errs, code := tc(t, "-C", dir, "du")
	if first, _, _ := strings.Cut(out, "\n"); code != 0 || !regexp.MustCompile(`^budget:  \S+ \S+ of \S+ \S+ \(\d+%, the reserve aside\); content `).MatchString(first) {
		t.Errorf("du: exit %d, first line %q%s", code, first, errs)
	}
}

// The commands that take whole turns refuse a step by its form, also
// "1.1" of a turn with one step, which names the same state as turn 1.
func TestWholeTurnCommandsRefuseSteps(t *testing.T) {
	dir := historyOf(t, func(turn func(label, ref string, fn func()), ov *fusefstest.Overlay) {
		turn("", "", func() { ov.Write("a", "a\n") })
		turn("", "", func() { ov.Write("b", "b\n") })
	})
	for _, args := range [][]string{{"pin", "1.1"}, {"unpin", "1.1"}, {"forget", "--dry-run", "1.1"}, {"forget", "--before", "2.1"}} {
		_, errs, code := tc(t, append([]string{"-C", dir}, args...)...)
		if code != 2 || !strings.Contains(errs, `"`+args[len(args)-1]+`" is a step: this command takes a whole turn`) {
			t.Errorf("turnctl %s: %d %q", strings.Join(args, " "), code, errs)
		}
	}
	if out, errs, code := tc(t, "-C", dir, "log"); code != 0 || strings.Contains(out, "pinned") || !strings.Contains(out, "\n1 ") {
		t.Errorf("after the refusals, log: %d %s %s", code, errs, out)
	}
	if _, errs, code := tc(t, "-C", dir, "pin", "1"); code != 0 {
		t.Errorf("pin 1: %d %s", code, errs)
	}
}
