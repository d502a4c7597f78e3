package rundir

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSuperUID(t *testing.T) {
	for opts, want := range map[string]int{
		"rw,user_id=0,group_id=0,default_permissions,allow_other,max_read=1048576": 0,
		"rw,user_id=1000,group_id=1000,max_read=1048576":                           1000,
		"rw,relatime": -1,
		"user_id=x":   -1,
	} {
		if got := superUID(opts); got != want {
			t.Errorf("superUID(%q) = %d, want %d", opts, got, want)
		}
	}
}

func TestMine(t *testing.T) {
	me := os.Geteuid()
	if err := (Mount{Dir: "/p", UID: me}).Mine(); err != nil {
		t.Errorf("own mount: %v", err)
	}
	if err := (Mount{Dir: "/p", UID: -1}).Mine(); err != nil {
		t.Errorf("owner not shown: %v", err)
	}
	err := (Mount{Dir: "/p", UID: me + 1}).Mine()
	if _, ok := err.(*ForeignError); !ok || !strings.HasPrefix(err.Error(), "/p is mounted by uid ") || !strings.HasSuffix(err.Error(), "; ask its owner") {
		t.Errorf("another user's mount: %v", err)
	}
}

// TestRuntimeDirMustBePrivate: a runtime directory someone else could
// write to, or that is not a directory of the user's own, is refused.
func TestRuntimeDirMustBePrivate(t *testing.T) {
	base := t.TempDir()
	ok := filepath.Join(base, "ok")
	t.Setenv("CKPTFS_RUNTIME_DIR", ok)
	if d, err := Dir(); err != nil || d != ok {
		t.Fatalf("a new runtime directory: %q %v", d, err)
	}
	if fi, err := os.Stat(ok); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("made %v %v, want mode 0700", fi.Mode(), err)
	}
	open := filepath.Join(base, "open")
	os.Mkdir(open, 0o700)
	os.Chmod(open, 0o777)
	link := filepath.Join(base, "link")
	os.Symlink(ok, link)
	cases := map[string]string{open: "has mode 0777", link: "is not a directory"}
	if os.Geteuid() == 0 {
		theirs := filepath.Join(base, "theirs")
		os.Mkdir(theirs, 0o700)
		if err := os.Chown(theirs, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		cases[theirs] = "belongs to uid 65534, not to you"
	}
	for d, want := range cases {
		t.Setenv("CKPTFS_RUNTIME_DIR", d)
		if _, err := Dir(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("runtime directory %s: %v, want an error saying %q", d, err, want)
		}
	}
}
