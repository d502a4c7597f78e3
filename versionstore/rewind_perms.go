package versionstore

import (
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"

	"ckptfs/internal/ckpt"
)

// rewind_perms.go: what a rewind, restore or revert may change with the
// permissions it runs with, checked from its plan before it changes
// anything.
//
// Root changes anything. A daemon running as an ordinary user (a private
// mount, turnctl run without a mount) does not: a directory of root's
// that was made while the project was not mounted (a docker bind mount,
// sudo) is not one whose entries it may change. Found half-way, such a
// change stopped the rewind after it had changed other paths, to be
// undone (rewind_rollback.go), for a cause known before the first step.
// So the plan is checked up front: every directory whose entries it
// changes (the parent of every path it adds, removes, replaces, renames
// or relinks, and a directory it removes with what is in it), every file
// it writes in place, and every path whose mode or owner it sets. The
// cost is a stat of each such directory, not a walk of the tree. The
// reverse pass of a whole-tree rewind may still touch a directory the
// plan does not (a path renamed through it and on, undone step by step):
// that fails half-way, and is undone.

// creds are whose permissions a tree is changed with: a user ID and its
// group IDs.
type creds struct {
	uid  uint32
	gids []uint32
}

// credsOf returns the creds live is changed with: its own (ckpt.Creds),
// else the process's.
func credsOf(live ckpt.Tree) creds {
	if c, ok := live.(ckpt.Creds); ok {
		uid, gids := c.Creds()
		return creds{uid, gids}
	}
	c := creds{uid: uint32(os.Geteuid()), gids: []uint32{uint32(os.Getegid())}}
	if gs, err := os.Getgroups(); err == nil {
		for _, g := range gs {
			c.gids = append(c.gids, uint32(g))
		}
	}
	return c
}

// perm returns the permission bits (rwx: 7) that st's mode grants c, as
// the kernel picks them: the owner's, else the group's, else the others'.
func (c creds) perm(st ckpt.State) uint32 {
	switch {
	case st.UID == c.uid:
		return st.Mode >> 6 & 7
	case slices.Contains(c.gids, st.GID):
		return st.Mode >> 3 & 7
	}
	return st.Mode & 7
}

// owns reports whether c may chmod what is in state st (and, through
// internal/backing's ownDir, change the entries of its own directory
// whatever its mode).
func (c creds) owns(st ckpt.State) bool { return c.uid == 0 || st.UID == c.uid }

// entries reports whether c may add, remove and rename entries of the
// directory in state st: one it may write and search, or its own.
func (c creds) entries(st ckpt.State) bool { return c.owns(st) || c.perm(st)&3 == 3 }

// checkPermitted refuses (ErrDenied), before a rewind, restore or
// revert (op: what it calls itself, "rewind to turn 3") changes
// anything, a plan (changes: Before the tree now, After the target)
// with a change the tree's creds do not permit (see above).
func (s *Store) checkPermitted(op string, changes []Change, live ckpt.Tree) error {
	c := credsOf(live)
	if c.uid == 0 || len(changes) == 0 {
		return nil
	}
	dirs := map[string]ckpt.State{}
	dirState := func(p string) (ckpt.State, error) {
		st, ok := dirs[p]
		if !ok {
			var err error
			if st, err = live.Lstat(p); err != nil {
				return st, err
			}
			dirs[p] = st
		}
		return st, nil
	}
	var denied []string
	seen := map[string]bool{}
	deny := func(format string, args ...any) {
		if why := fmt.Sprintf(format, args...); !seen[why] {
			seen[why] = true
			denied = append(denied, why)
		}
	}
	// entry checks a change of the entry for path in its directory;
	// leaving is what the change takes out of it (Absent: nothing).
	entry := func(path string, leaving ckpt.State) error {
		dir := parentOf(path)
		st, err := dirState(dir)
		if err != nil || st.Type != ckpt.Dir {
			return err // not a directory now: the rewind makes it, its own
		}
		switch {
		case !c.entries(st):
			deny("%s is owned by uid %d and not writable by you (uid %d)", displayName(dir), st.UID, c.uid)
		case leaving.Exists() && st.Mode&0o1000 != 0 && st.UID != c.uid && leaving.UID != c.uid:
			deny("%s is owned by uid %d, not by you (uid %d), in the sticky directory %s", displayName(path), leaving.UID, c.uid, displayName(dir))
		}
		return nil
	}
	meta := func(path string, st ckpt.State) {
		if st.Type != ckpt.Symlink && !c.owns(st) {
			deny("%s is owned by uid %d, not by you (uid %d): its mode cannot be set", displayName(path), st.UID, c.uid)
		}
	}
	// What a directory renamed takes along moves with it: no entry of
	// its own changes.
	moved := map[string]string{}
	for _, ch := range changes {
		if ch.Kind == ckpt.Renamed && ch.Before.Type == ckpt.Dir {
			moved[ch.From] = ch.Path
		}
	}
	for _, ch := range changes {
		var err error
		switch ch.Kind {
		case ckpt.Renamed:
			from, to := parentOf(ch.From), parentOf(ch.Path)
			if !sameMeta(ch.Before, ch.After) {
				meta(ch.From, ch.Before)
			}
			if dest, ok := moved[from]; ok && dest == to {
				continue
			}
			if ch.Before.Type == ckpt.Dir && from != to && c.perm(ch.Before)&2 == 0 {
				// Its ".." changes: that takes write permission on
				// the directory itself, its owner's too.
				deny("%s is owned by uid %d and not writable by you (uid %d)", displayName(ch.From), ch.Before.UID, c.uid)
			}
			if err = entry(ch.From, ch.Before); err == nil {
				err = entry(ch.Path, ckpt.State{})
			}
		case ckpt.ModeOnly:
			meta(ch.Path, ch.Before)
		case ckpt.Modified:
			if _, inPlace := patchedBytes(ch); inPlace {
				if !c.owns(ch.Before) && c.perm(ch.Before)&2 == 0 {
					deny("%s is owned by uid %d and not writable by you (uid %d)", displayName(ch.Path), ch.Before.UID, c.uid)
				}
				break
			}
			err = entry(ch.Path, ch.Before)
		default: // added, deleted, of another type, relinked
			if err = entry(ch.Path, ch.Before); err != nil {
				break
			}
			if ch.Before.Type == ckpt.Dir && ch.After.Type != ckpt.Dir && !c.entries(ch.Before) {
				// Removed with what is in it.
				var names []string
				if names, err = live.ReadDir(ch.Path); err == nil && len(names) > 0 {
					deny("%s is owned by uid %d and not writable by you (uid %d)", displayName(ch.Path), ch.Before.UID, c.uid)
				}
			}
		}
		if err != nil {
			return err
		}
	}
	if len(denied) == 0 {
		return nil
	}
	why, it := denied[0], "it"
	if len(denied) > 1 {
		why, it = fmt.Sprintf("%s (and %d more like it)", why, len(denied)-1), "them"
	}
	noun, _, _ := strings.Cut(op, " ") // rewind, restore, revert, undo
	a := "a"
	if strings.HasPrefix(noun, "u") {
		a = "an"
	}
	return detailf(ErrDenied, "%s refused: %s; %s %s running as you cannot change %s; nothing changed", op, why, a, noun, it).also(fs.ErrPermission)
}

// displayName is how checkPermitted names a path.
func displayName(p string) string {
	if p == "" {
		return "the project's directory"
	}
	return p
}
