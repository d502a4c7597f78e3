package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// Another user works in the mount as in the plain directory: entries get
// that user's ownership, set-ID bits survive the daemon's chown, and
// permissions are enforced (default_permissions + allow_other).
func TestOtherUser(t *testing.T) {
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	os.Mkdir(filepath.Join(dir, "pub"), 0o777)
	os.Chmod(filepath.Join(dir, "pub"), 0o777)
	os.WriteFile(filepath.Join(dir, "secret"), []byte("s"), 0o600)
	mountProject(t, dir)
	asNobody := func(script string) error {
		cmd := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "bash", "-c", script)
		cmd.Dir = dir
		cmd.Env = []string{"PATH=/usr/bin:/bin", "LC_ALL=C"}
		return cmd.Run()
	}
	if err := asNobody("umask 022; echo hi > pub/f && mkdir pub/d && chmod 06755 pub/f && ln -s f pub/l"); err != nil {
		t.Fatalf("nobody in pub: %v", err)
	}
	for _, c := range []struct {
		name string
		mode os.FileMode
	}{{"pub/f", 0o755 | os.ModeSetuid | os.ModeSetgid}, {"pub/d", 0o755 | os.ModeDir}} {
		fi, err := os.Lstat(filepath.Join(dir, c.name))
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if st.Uid != 65534 || st.Gid != 65534 || fi.Mode() != c.mode {
			t.Errorf("%s: uid %d gid %d mode %v, want 65534/65534 %v", c.name, st.Uid, st.Gid, fi.Mode(), c.mode)
		}
	}
	// Created with set-ID bits directly (the daemon chowns after create).
	if err := asNobody("umask 0; python3 -c \"import os; os.close(os.open('pub/g', os.O_CREAT|os.O_WRONLY, 0o6755))\""); err != nil {
		t.Fatalf("create with set-ID bits: %v", err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "pub/g")); err != nil || fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != os.ModeSetuid|os.ModeSetgid {
		t.Errorf("pub/g mode %v %v, want setuid and setgid kept", fi.Mode(), err)
	}
	// A write or truncate by an unprivileged owner clears the set-ID bits,
	// as on the plain filesystem.
	if err := asNobody("cp -p pub/g pub/g2 && echo x >> pub/g && truncate -s 1 pub/g2"); err != nil {
		t.Fatalf("write set-ID file: %v", err)
	}
	for _, n := range []string{"pub/g", "pub/g2"} {
		if fi, err := os.Stat(filepath.Join(dir, n)); err != nil || fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
			t.Errorf("%s after an unprivileged write: mode %v %v, want set-ID bits cleared", n, fi.Mode(), err)
		}
	}
	if err := asNobody("cat secret"); err == nil {
		t.Errorf("nobody read a 0600 root file through the mount")
	}
	if err := asNobody("echo x > newfile"); err == nil {
		t.Errorf("nobody created a file in a 0755 root directory")
	}
}

// An open with O_CREAT of a name the kernel remembers as free, made
// meanwhile behind the mount's back, opens that file as it is: its owner
// stays, as natively, rather than becoming the opener.
func TestCreateOverAFileMadeUnderneathKeepsItsOwner(t *testing.T) {
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	pub := filepath.Join(dir, "pub")
	os.Mkdir(pub, 0o777)
	os.Chmod(pub, 0o777)
	under, err := unix.Open(pub, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(under)
	mountProject(t, dir)
	if _, err := os.Stat(filepath.Join(pub, "f")); !os.IsNotExist(err) {
		t.Fatalf("pub/f before it is made: %v, want it absent", err)
	}
	fd, err := unix.Openat(under, "f", unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY, 0o666)
	if err != nil {
		t.Fatal(err)
	}
	unix.Fchmod(fd, 0o666)
	unix.Write(fd, []byte("root's\n"))
	unix.Close(fd)
	cmd := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "bash", "-c", "echo nobody\\'s >> pub/f")
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/bin:/bin", "LC_ALL=C"}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nobody appends to pub/f: %v: %s", err, out)
	}
	var st unix.Stat_t
	if err := unix.Fstatat(under, "f", &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		t.Fatal(err)
	}
	if st.Uid != 0 || st.Gid != 0 || st.Mode&07777 != 0o666 {
		t.Errorf("pub/f after nobody's O_CREAT append: uid %d gid %d mode %o, want 0 0 666 (made by root underneath)", st.Uid, st.Gid, st.Mode&07777)
	}
	if b, _ := os.ReadFile(filepath.Join(pub, "f")); string(b) != "root's\nnobody's\n" {
		t.Errorf("pub/f holds %q, want root's line then nobody's", b)
	}
}
