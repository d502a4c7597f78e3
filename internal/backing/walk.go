package backing

import (
	"os"

	"golang.org/x/sys/unix"

	"ckptfs/internal/ckpt"
)

// Walk calls fn for every path at or below dir ("" for the whole tree; dir
// itself is reported unless it is the root), parents before children,
// without following symlinks: each directory is opened relative to its
// parent's fd, so the walk costs one stat per path and never resolves a
// long path. skip leaves a path out, with everything below it. A path that
// vanishes during the walk is passed over.
func (t *Tree) Walk(dir string, skip func(p string, isDir bool) bool, fn func(p string, st ckpt.State, sp ckpt.Stamp) error) error {
	if dir != "" {
		st, err := t.Lstat(dir)
		if err != nil || !st.Exists() {
			return err
		}
		pfd, name, err := t.parent(dir)
		if err != nil {
			return err
		}
		x, err := Lstatat(pfd, name)
		unix.Close(pfd)
		if err != nil {
			return pathErr("lstat", dir, err)
		}
		if skip != nil && skip(dir, st.Type == ckpt.Dir) {
			return nil
		}
		if err := fn(dir, st, stampOf(&x)); err != nil {
			return err
		}
		if st.Type != ckpt.Dir {
			return nil
		}
	}
	fd, err := t.openat2(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return pathErr("open", dir, err)
	}
	return walkDir(fd, dir, skip, fn)
}

// walkDir walks the directory open as fd (which it closes), named dir.
func walkDir(fd int, dir string, skip func(string, bool) bool, fn func(string, ckpt.State, ckpt.Stamp) error) error {
	f := os.NewFile(uintptr(fd), dir)
	names, err := f.Readdirnames(-1)
	if err != nil {
		f.Close()
		return pathErr("readdir", dir, err)
	}
	defer f.Close()
	for _, name := range names {
		p := name
		if dir != "" {
			p = dir + "/" + name
		}
		x, err := Lstatat(fd, name)
		if err != nil {
			if absent(err) {
				continue
			}
			return pathErr("lstat", p, err)
		}
		st := StateOf(&x)
		isDir := st.Type == ckpt.Dir
		if skip != nil && skip(p, isDir) {
			continue
		}
		if st.Type == ckpt.Symlink {
			if st.Target, err = Readlinkat(fd, name); err != nil {
				if absent(err) {
					continue
				}
				return pathErr("readlink", p, err)
			}
		}
		if err := fn(p, st, stampOf(&x)); err != nil {
			return err
		}
		if !isDir {
			continue
		}
		cfd, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			if absent(err) {
				continue
			}
			return pathErr("open", p, err)
		}
		if err := walkDir(cfd, p, skip, fn); err != nil {
			return err
		}
	}
	return nil
}
