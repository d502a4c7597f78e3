package crashpoint

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

func TestArmFiresAtTheNthMatchingHit(t *testing.T) {
	var fired []string
	disarm, err := Arm("rewind.step,tree.*@3", func(name string) { fired = append(fired, name) })
	if err != nil {
		t.Fatal(err)
	}
	defer disarm()
	for _, n := range []string{"rewind.step", "record.committed", "tree.write.tmp", "rewind.step.done", "tree.remove.part", "rewind.step"} {
		Hit(n)
	}
	if strings.Join(fired, " ") != "tree.remove.part" {
		t.Errorf("fired at %v, want [tree.remove.part]", fired)
	}
	if !Fired() {
		t.Error("still armed after firing")
	}
}

func TestParse(t *testing.T) {
	for _, bad := range []string{"", "@2", "rewind.step@0", "rewind.step@x", "no.such.point", "rewind.step,nope*"} {
		if _, err := parse(bad); err == nil {
			t.Errorf("parse(%q): no error", bad)
		}
	}
	p, err := parse("*")
	if err != nil || p.n != 1 || len(p.pats) != 1 {
		t.Errorf("parse(*) = %+v, %v", p, err)
	}
}

// TestPointsMatchTheCode: every Hit in the module names a listed point, and
// every listed point is hit somewhere.
func TestPointsMatchTheCode(t *testing.T) {
	root := filepath.Join("..", "..")
	re := regexp.MustCompile(`crashpoint\.(Hit|Fail)\("([^"]+)"\)`)
	used := map[string]bool{}
	failUsed := map[string]bool{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "bin") {
			return filepath.SkipDir
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range re.FindAllStringSubmatch(string(b), -1) {
			if m[1] == "Fail" {
				failUsed[m[2]] = true
			} else {
				used[m[2]] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, n := range Points {
		listed[n] = true
		if !used[n] {
			t.Errorf("point %q is listed but never hit", n)
		}
	}
	var unlisted []string
	for n := range used {
		if !listed[n] {
			unlisted = append(unlisted, n)
		}
	}
	sort.Strings(unlisted)
	if len(unlisted) > 0 {
		t.Errorf("points hit but not listed in Points: %v", unlisted)
	}
	for _, n := range FailPoints {
		if !failUsed[n] {
			t.Errorf("failure point %q is listed but never called", n)
		}
		delete(failUsed, n)
	}
	if len(failUsed) > 0 {
		t.Errorf("failure points called but not listed in FailPoints: %v", failUsed)
	}
}

// TestFailOnlyWhereArmed: Fail returns nil unless FailEnv names the point,
// and then an error matching ErrInjected that names it.
func TestFailOnlyWhereArmed(t *testing.T) {
	defer func(old string) { failAt = old }(failAt)
	failAt = ""
	if err := Fail("daemon.manifest"); err != nil {
		t.Errorf("unarmed: %v", err)
	}
	failAt = "daemon.manifest"
	if err := Fail("other.point"); err != nil {
		t.Errorf("armed elsewhere: %v", err)
	}
	if err := Fail("daemon.manifest"); !errors.Is(err, ErrInjected) || !strings.Contains(err.Error(), "daemon.manifest") {
		t.Errorf("armed: %v", err)
	}
}
