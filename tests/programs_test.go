package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// seedTree is the starting tree of the program tests: a few hundred small
// files in nested directories, plus a tarball of another tree.
func seedTree(t *testing.T, dir string) {
	t.Helper()
	files := map[string]string{}
	for i := 0; i < 120; i++ {
		files[fmt.Sprintf("src/pkg%d/file%d.go", i%7, i)] = fmt.Sprintf("package pkg%d\n\n// file %d\nvar X%d = %d\n", i%7, i, i, i*i)
	}
	files["README.md"] = "# project\nhello world\nfoo bar\n"
	files["docs/a.txt"] = strings.Repeat("line of text\n", 300)
	writeTree(t, dir, files)
	os.Chmod(filepath.Join(dir, "docs/a.txt"), 0o640)
	os.Symlink("README.md", filepath.Join(dir, "readme-link"))
	os.Symlink("does/not/exist", filepath.Join(dir, "dangling"))
}

// programScript drives real programs. $TARBALL is a tar of a small tree
// outside both directories.
const programScript = `
sed -i 's/hello/HELLO/' README.md
sed -i 's/var/const/' src/pkg1/*.go
mv src/pkg2 src/pkg2-moved
mv docs/a.txt docs/b.txt
cp -r src/pkg3 src/pkg3-copy
cp -a docs docs-copy
rm -rf src/pkg4
rm src/pkg5/file5.go
mkdir -p extract && tar -xf "$TARBALL" -C extract
tar -cf bundle.tar src/pkg6 && rm -rf src/pkg6 && tar -xf bundle.tar && rm bundle.tar
ln -s src/pkg0 pkg0-link
ln -sf README.md readme-link
ln src/pkg0/file0.go hardlink.go
echo appended >> hardlink.go
chmod 0755 src/pkg1/file1.go
chmod 0700 src/pkg0
chmod 04755 src/pkg3-copy/file3.go
truncate -s 10 src/pkg0/file7.go
truncate -s 100000 docs-copy/a.txt
echo -n > emptied.txt
printf 'x%.0s' $(seq 1 5000) > big.txt
mkdir -p empty/dir/chain
mkfifo fifo
python3 - <<'PY'
import mmap, os
fd = os.open("mm.bin", os.O_RDWR | os.O_CREAT, 0o644)
os.ftruncate(fd, 16384)
m = mmap.mmap(fd, 16384, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
for i in range(0, 16384, 512):
    m[i:i+5] = b"mmap!"
m.flush()
m.close()
os.close(fd)
fd = os.open("README.md", os.O_RDWR)
m = mmap.mmap(fd, 0, mmap.MAP_SHARED)
m[0:1] = b"@"
m.close()
os.close(fd)
PY
git init -q repo
cd repo
echo one > f.txt
mkdir sub && echo two > sub/g.txt
git add -A && git commit -qm first
git checkout -qb feature
echo three >> f.txt && git rm -q sub/g.txt && echo new > h.txt
git add -A && git commit -qm second
git checkout -q master
git checkout -q feature -- h.txt
git status --porcelain > ../git-status.txt
cd ..
`

// TestProgramsDifferential runs the same programs in a plain directory and
// through a ckptfs mount: the final trees must be identical.
func TestProgramsDifferential(t *testing.T) {
	tarSrc := t.TempDir()
	writeTree(t, tarSrc, map[string]string{"t/1.txt": "one", "t/2/3.txt": "three", "t/4.bin": strings.Repeat("\x00\x01", 5000)})
	tarball := filepath.Join(t.TempDir(), "x.tar")
	runIn(t, tarSrc, "tar -cf "+tarball+" t")
	script := "export TARBALL=" + tarball + "\n" + programScript

	plain := t.TempDir()
	seedTree(t, plain)
	runIn(t, plain, script)

	dir := t.TempDir()
	seedTree(t, dir)
	m := mountProject(t, dir)
	runIn(t, dir, script)
	// Compare through the mount, then the backing tree after unmount.
	skip := []string{".ckptfs"}
	noBytes := []string{"repo/.git/index"}
	diffTrees(t, snapshot(t, plain, skip, noBytes), snapshot(t, dir, skip, noBytes))
	m.Unmount(t)
	diffTrees(t, snapshot(t, plain, skip, noBytes), snapshot(t, dir, skip, noBytes))
}

// After a write through a shared mmap, stat through the mount shows the new
// mtime at once (the daemon drops the cached attributes; doc/FUSE-NOTES.md).
func TestMmapWriteRefreshesMtime(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"m.bin": strings.Repeat("\x00", 8192)})
	mountProject(t, dir)
	out := runIn(t, dir, `python3 - <<'PY'
import mmap, os, time
st0 = os.stat("m.bin").st_mtime_ns
time.sleep(0.05)
fd = os.open("m.bin", os.O_RDWR)
m = mmap.mmap(fd, 8192, mmap.MAP_SHARED)
m[100:104] = b"abcd"
m.flush()
m.close()
os.close(fd)
st1 = os.stat("m.bin").st_mtime_ns
print("advanced" if st1 > st0 else "stale %d %d" % (st0, st1))
PY`)
	if !strings.Contains(out, "advanced") {
		t.Fatalf("mtime after mmap write: %s", out)
	}
}

// A turn names the program that made each change: a process that execs
// another program is named by the program it runs when it makes the
// change, not the one it first made a change as.
func TestProgramsOfAProcessThatExecs(t *testing.T) {
	proj := t.TempDir()
	m := mountProject(t, proj)
	m.turnctl(t, "begin", "--label", "one")
	runIn(t, proj, `bash -c 'echo a > a.txt; sleep 0.05; exec python3 -c "open(\"b.txt\", \"w\").write(\"b\\n\")"'`)
	m.turnctl(t, "end")
	out := m.turnctl(t, "log", "--program", "python3")
	if !strings.Contains(out, "one") {
		t.Errorf("log --program python3 finds no turn one:\n%s\n%s", out, m.turnctl(t, "log"))
	}
	if out := m.turnctl(t, "log", "--program", "bash"); !strings.Contains(out, "one") {
		t.Errorf("log --program bash finds no turn one:\n%s", out)
	}
}
