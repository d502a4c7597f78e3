package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// Requests the kernel sends the daemon for nothing are answered so that
// it sends them no more (fusefs/rawfs.go), and what they used to carry
// still happens.

// daemonLog is the path of a --debug mount's log (every request it got).
func daemonLog(t *testing.T, m *Mount) string {
	return filepath.Join(fmt.Sprintf("/proc/%d/cwd", m.PID(t)), "daemon.log")
}

// countOps counts go-fuse's debug lines of requests by opcode (not the
// one go-fuse makes itself to its node -1 once mounted).
func countOps(log []byte) map[string]int {
	n := map[string]int{}
	for _, m := range regexp.MustCompile(`rx \d+: ([A-Z_]+) n(\d+)`).FindAllSubmatch(log, -1) {
		if string(m[2]) == "18446744073709551615" {
			continue
		}
		n[string(m[1])]++
	}
	return n
}

// sessionOps mounts a small tree with --debug, runs a workload that opens
// directories and files hundreds of times, checks what it read and
// listed, and returns the requests the daemon got, by opcode.
func sessionOps(t *testing.T) map[string]int {
	t.Helper()
	t.Setenv("CKPTFS_WARMUP", "0") // (the daemon inherits it)
	dir := t.TempDir()
	files := map[string]string{}
	for d := 0; d < 10; d++ {
		for f := 0; f < 10; f++ {
			files[fmt.Sprintf("d%d/f%d", d, f)] = fmt.Sprintf("%d/%d\n", d, f)
		}
	}
	writeTree(t, dir, files)
	m := mountProject(t, dir, "--debug")
	out := runIn(t, dir, `for i in 1 2 3; do ls -R . >/dev/null; cat d*/f* | wc -l; done
for i in 1 2 3 4 5; do echo $i > d0/new$i; cat d0/new$i >/dev/null; done
find . -type f -not -path './.ckptfs/*' | sort | head -3; ls d0 | wc -l`)
	want := "100\n100\n100\n./d0/f0\n./d0/f1\n./d0/f2\n15\n"
	if out != want {
		t.Errorf("through the mount:\n%s\nwant\n%s", out, want)
	}
	log, err := os.ReadFile(daemonLog(t, m))
	if err != nil {
		t.Fatal(err)
	}
	ops := countOps(log)
	t.Logf("requests: %v", ops)
	if ops["OPEN"] < 300 {
		t.Fatalf("%d OPEN: the workload did not run through the daemon", ops["OPEN"])
	}
	return ops
}

// Directories are opened without OPENDIR or RELEASEDIR: the first OPENDIR
// is answered ENOSYS, and the kernel then opens them itself.
func TestDirectoriesOpenWithoutOpendir(t *testing.T) {
	ops := sessionOps(t)
	if ops["OPENDIR"] > 1 || ops["RELEASEDIR"] > 0 {
		t.Errorf("%d OPENDIR and %d RELEASEDIR, want at most 1 (answered ENOSYS) and none", ops["OPENDIR"], ops["RELEASEDIR"])
	}
}

// On a local filesystem files are closed without FLUSH: the first is
// answered ENOSYS, and the kernel sends no more.
func TestClosesWithoutFlush(t *testing.T) {
	var st unix.Statfs_t
	if err := unix.Statfs(os.TempDir(), &st); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains([]int64{unix.EXT4_SUPER_MAGIC, unix.XFS_SUPER_MAGIC, unix.BTRFS_SUPER_MAGIC, unix.TMPFS_MAGIC}, st.Type) {
		t.Skipf("%s: not a filesystem whose close the daemon leaves to the kernel", os.TempDir())
	}
	if ops := sessionOps(t); ops["FLUSH"] > 1 {
		t.Errorf("%d FLUSH, want at most 1 (answered ENOSYS)", ops["FLUSH"])
	}
}

// Pages written through a shared mmap are written back when the file is
// closed, though the kernel sends no FLUSH (FOPEN_NOFLUSH would skip this):
// the WRITE reaches the daemon, and its capture lands in the turn, before
// close returns, while the mapping lives on.
func TestMmapPagesWrittenBackAtClose(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"m.bin": strings.Repeat("\x00", 8192)})
	m := mountProject(t, dir, "--debug")
	out := runIn(t, dir, `LOG=`+daemonLog(t, m)+` python3 - <<'PY'
import mmap, os, re
log = os.environ["LOG"]
fd = os.open("m.bin", os.O_RDWR)
m = mmap.mmap(fd, 8192, mmap.MAP_SHARED)
m[100:104] = b"abcd"
before = os.path.getsize(log)
os.close(fd)
with open(log, "rb") as f:
    f.seek(before)
    after = f.read()
print("written back at close" if re.search(rb"rx \d+: WRITE ", after) else "not written back")
m.close()
PY
od -An -c -j100 -N4 m.bin`)
	if !strings.Contains(out, "written back at close") || !strings.Contains(out, "a   b   c   d") {
		t.Fatalf("a shared mmap's pages at close:\n%s", out)
	}
}

// A directory listed without a handle is listed afresh from the offset
// of each request (its d_off, seeked to): large directories, the root
// (whose listing leaves the store out), and a listing read in part, then
// from positions it seeks back to before the kernel holds all of it
// (perl's telldir/seekdir), list every name once, where it should.
func TestLargeDirectoryListings(t *testing.T) {
	t.Setenv("CKPTFS_WARMUP", "0") // "seek" is read first by perl
	dir := t.TempDir()
	files := map[string]string{}
	var names []string
	for i := 0; i < 1500; i++ {
		n := fmt.Sprintf("%04d-%s", i, strings.Repeat("n", 90))
		names = append(names, n)
		files[n] = "x"
		files["sub/"+n] = "y"
		files["seek/"+n] = "z"
	}
	writeTree(t, dir, files)
	mountProject(t, dir)
	rootWant := append(slices.Clone(names), "seek", "sub")
	sort.Strings(rootWant)
	out := runIn(t, dir, `perl -e '
opendir(D, "seek") or die;
my (%seen, @marks);
for my $i (0..599) {
  my $n = readdir D; die "short" unless defined $n;
  $seen{$n}++;
  if (@marks && !defined $marks[-1][1]) { $marks[-1][1] = $n; }
  push @marks, [telldir(D), undef] if $i % 200 == 100;
}
my $bad = 0;
for my $m (@marks) { seekdir(D, $m->[0]); my $n = readdir D; $bad++ unless defined $n && $n eq $m->[1]; }
while (defined(my $n = readdir D)) { $seen{$n}++; }
closedir D;
printf "%d names, %d bad seeks\n", scalar(keys %seen), $bad;'`)
	if want := fmt.Sprintf("%d names, 0 bad seeks\n", len(names)+2); out != want {
		t.Errorf("perl over seek: %q, want %q", out, want)
	}
	for _, c := range []struct {
		dir  string
		want []string
	}{{".", rootWant}, {"sub", names}, {"seek", names}} {
		for i := 0; i < 2; i++ { // the second from the kernel's cache
			ents, err := os.ReadDir(filepath.Join(dir, c.dir))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range ents {
				got = append(got, e.Name())
			}
			if !slices.Equal(got, c.want) {
				t.Fatalf("%s, listing %d: %d names, want %d (first %q)", c.dir, i+1, len(got), len(c.want), got[:min(3, len(got))])
			}
		}
	}
}
