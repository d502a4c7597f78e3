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
		defer unix.Close(pfd)
		x, err := Lstatat(pfd, name)
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
		return ownSearch(pfd, name, &x, func() error { return t.walkFrom(dir, skip, fn) })
	}
	return t.walkFrom(dir, skip, fn)
}

// walkFrom walks what is below dir, which it opens.
func (t *Tree) walkFrom(dir string, skip func(p string, isDir bool) bool, fn func(p string, st ckpt.State, sp ckpt.Stamp) error) error {
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
		if err := ownSearch(fd, name, &x, func() error {
			cfd, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				if absent(err) {
					return nil
				}
				return pathErr("open", p, err)
			}
			return walkDir(cfd, p, skip, fn)
		}); err != nil {
			return err
		}
	}
	return nil
}

// ownSearch runs walk, the walk of directory name in dirfd (x its stat),
// with read and search permission for its owner: a user's daemon cannot
// list a directory of its own made 0600 or 0300, nor stat what is in it,
// though the user may chmod it. Where the directory is the caller's own
// and lacks them, they are given for the walk and the mode put back
// after, as ownDir does for a change; not where that chmod would clear
// its set-group-ID bit (chmodKeeps), nor as root, who needs none.
func ownSearch(dirfd int, name string, x *Stat, walk func() error) error {
	if euid := unix.Geteuid(); euid == 0 || x.Uid != uint32(euid) || x.Mode&0o500 == 0o500 {
		return walk()
	}
	release, err := grantOwn(dirfd, name, 0o500)
	if err != nil {
		return walk() // and its refusal stands
	}
	defer release(true)
	return walk()
}
