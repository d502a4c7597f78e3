// Package storeref remembers where a project's history store is when it is
// not the default DIR/.ckptfs (`ckptfs mount --store PATH DIR`), so that a
// remount of DIR and turnctl's offline commands find the same history
// without --store.
//
// The location cannot live in the store (it is what is looked for), nor in
// the project (the mount would version a pointer file there, and a rewind
// could take it away). It lives in the user's state directory:
//
//	$XDG_STATE_HOME/ckptfs/stores/DEV-INO.json   (default ~/.local/state)
//
// named after the project directory's device and inode number (as seen
// while it is not mounted), so that it follows the directory through a
// rename on its filesystem. The file holds the directory's path, its
// birth time and the store's path. A record whose birth time is not the
// directory's is a stale one of a directory since deleted, whose inode
// number was reused, and is ignored: its store is another project's
// history. Where the filesystem tells no birth time or changes it (as
// overlayfs does at a copy-up), and for records saved before they held
// one, a record whose directory path no longer matches is trusted only
// while its store still exists (the project was moved).
package storeref

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"ckptfs/internal/rundir"
)

// Ref is one remembered store.
type Ref struct {
	Dir string `json:"dir"` // the project directory when it was saved
	// Born is the project directory's birth time (ns since the epoch; 0:
	// not known), which an inode number reused by a new directory does
	// not share.
	Born  int64     `json:"born,omitempty"`
	Store string    `json:"store"` // the store directory, absolute
	Saved time.Time `json:"saved"`
}

// Default is the store of dir when none is remembered.
func Default(dir string) string { return filepath.Join(dir, ".ckptfs") }

// StateDir is the directory the records are kept in.
func StateDir() (string, error) {
	d, err := rundir.StateDir()
	if err != nil {
		return "", fmt.Errorf("cannot tell where to remember the store: %w", err)
	}
	return filepath.Join(d, "stores"), nil
}

// Key is where dir's record is kept, and what ties the record to dir. It
// is found while dir is not mounted: a mount's root shows neither the
// backing directory's inode nor its birth time.
type Key struct {
	Path string // the record file
	Born int64  // dir's birth time (ns since the epoch; 0: not known)
}

// KeyOf returns dir's Key (dir not mounted). On overlayfs a directory's
// birth time changes when it is copied up (at the first change below it,
// its inode staying), so none is kept there.
func KeyOf(dir string) (Key, error) {
	var x unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, dir, 0, unix.STATX_INO|unix.STATX_BTIME, &x); err != nil {
		return Key{}, err
	}
	sd, err := StateDir()
	if err != nil {
		return Key{}, err
	}
	k := Key{Path: filepath.Join(sd, fmt.Sprintf("%x-%x.json", unix.Mkdev(x.Dev_major, x.Dev_minor), x.Ino))}
	var fs unix.Statfs_t
	if x.Mask&unix.STATX_BTIME != 0 && unix.Statfs(dir, &fs) == nil && fs.Type != unix.OVERLAYFS_SUPER_MAGIC {
		k.Born = x.Btime.Sec*1e9 + int64(x.Btime.Nsec)
	}
	return k, nil
}

// Remember records store as dir's store (both absolute); the default
// store removes the record instead. dir must not be mounted (KeyOf).
func Remember(dir, store string) error {
	k, err := KeyOf(dir)
	if err != nil {
		return err
	}
	return RememberAt(k, dir, store)
}

// RememberAt is Remember with dir's Key found before (KeyOf, while dir was
// not mounted yet).
func RememberAt(k Key, dir, store string) error {
	p := k.Path
	if filepath.Clean(store) == Default(dir) {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil
	}
	data, err := json.MarshalIndent(Ref{Dir: dir, Born: k.Born, Store: store, Saved: time.Now().UTC()}, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, p)
}

// Lookup returns the record of dir (not mounted), if there is one that
// is trusted (see the package doc).
func Lookup(dir string) (Ref, bool) {
	k, err := KeyOf(dir)
	if err != nil {
		return Ref{}, false
	}
	data, err := os.ReadFile(k.Path)
	if err != nil {
		return Ref{}, false
	}
	var r Ref
	if json.Unmarshal(data, &r) != nil || !filepath.IsAbs(r.Store) {
		return Ref{}, false
	}
	if r.Born != 0 && k.Born != 0 && r.Born != k.Born {
		return Ref{}, false // another directory's, with the inode reused
	}
	if r.Dir != dir && !exists(r.Store) {
		return Ref{}, false
	}
	return r, true
}

// MissingError is a remembered store that is not there any more.
type MissingError struct {
	Dir string
	Ref Ref
}

func (e *MissingError) Error() string {
	return fmt.Sprintf("the history store of %s, %s (given with --store on %s), is missing: give --store PATH where it is now, or --store %s to start a new history",
		e.Dir, e.Ref.Store, e.Ref.Saved.Local().Format("2006-01-02"), Default(e.Dir))
}

// Resolve returns dir's store: the remembered one, else the default. A
// remembered store that is missing is a *MissingError.
func Resolve(dir string) (string, error) {
	r, ok := Lookup(dir)
	if !ok {
		return Default(dir), nil
	}
	if !exists(r.Store) {
		return "", &MissingError{Dir: dir, Ref: r}
	}
	return r.Store, nil
}

func exists(dir string) bool {
	fi, err := os.Stat(dir)
	return err == nil && fi.IsDir()
}
