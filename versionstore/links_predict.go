package versionstore

import (
	"errors"
	"io"
	"os"
	"slices"

	"ckptfs/internal/ckpt"
)

// links_predict.go: which changes of links alone (Relinked) the link pass
// of a restore makes, told before the restore changes anything.

// linksMade returns a restore's planned changes (below prefixes; changes
// of the tree now to its state right after event stop) without the
// changes of links alone that its link pass will not make: a path whose
// target partition it cannot give back without changing names outside
// the restore (one of them had its mode or owner changed since: it is no
// pin, and linking the path to it would give the path that mode, see
// linkNode), and that it leaves on the inode it has. The restore does not
// touch such a path, so neither does its dry run list it, and a restore
// with nothing else to do changes nothing and records no turn.
//
// It plans the link pass as the restore will, over the tree as the
// restore's other changes will have left it (plannedTree).
func (s *Store) linksMade(stop uint64, prefixes []string, changes []Change, live ckpt.Tree) ([]Change, error) {
	if !slices.ContainsFunc(changes, func(c Change) bool { return c.Kind == ckpt.Relinked }) {
		return changes, nil
	}
	pt, err := newPlannedTree(live, changes)
	if err != nil {
		return nil, err
	}
	// The walk of the links (linkIndex) is the planned tree's: not one
	// to keep.
	s.dropLinkIndex()
	actions, err := s.planLinks(stop, prefixes, pt)
	s.dropLinkIndex()
	if err != nil {
		return nil, err
	}
	touched := map[string]bool{}
	for _, a := range actions {
		touched[a.Path] = true
	}
	kept := changes[:0:0]
	for _, c := range changes {
		if c.Kind != ckpt.Relinked || touched[c.Path] {
			kept = append(kept, c)
		}
	}
	return kept, nil
}

// plannedTree is the live tree as a restore's actions (before its link
// pass) will leave it, for planLinks to read: every path a change other
// than Relinked names has its target state, on an inode of its own (a new
// one, or the one it has if the restore keeps it: a change of its mode or
// owner alone, or bytes patched in place, of a file with one name), and
// the other names of the inode it leaves have one link less. It cannot be
// changed.
type plannedTree struct {
	live   ckpt.Tree
	states map[string]ckpt.State
	inodes map[string]ckpt.Inode
	fewer  map[uint64]uint32 // links an inode loses, by inode number
	added  map[string][]string
}

// plannedDev is the device of the inodes plannedTree makes up: no real
// inode is Same as one of them.
const plannedDev = ^uint64(0)

var errPlanned = errors.New("versionstore: BUG: a change of the planned tree")

func newPlannedTree(live ckpt.Tree, changes []Change) (*plannedTree, error) {
	t := &plannedTree{live: live, states: map[string]ckpt.State{}, inodes: map[string]ckpt.Inode{}, fewer: map[uint64]uint32{}, added: map[string][]string{}}
	var next uint64
	for _, c := range SplitRenames(changes) {
		if c.Kind == ckpt.Relinked {
			continue
		}
		cur, ino, err := live.LstatInode(c.Path)
		if err != nil {
			return nil, err
		}
		st := c.After
		t.states[c.Path] = st
		if !cur.Exists() && st.Exists() {
			d := parentOf(c.Path)
			t.added[d] = append(t.added[d], c.Path[len(d)+min(len(d), 1):])
		}
		if !st.Type.Linkable() {
			if cur.Type.Linkable() && ino.Nlink > 1 {
				t.fewer[ino.Ino]++
			}
			continue
		}
		if ino.Nlink == 1 && keepsInode(c, cur) {
			t.inodes[c.Path] = ino
			continue
		}
		next++
		t.inodes[c.Path] = ckpt.Inode{Dev: plannedDev, Ino: next, Nlink: 1}
		if cur.Type.Linkable() && ino.Nlink > 1 {
			t.fewer[ino.Ino]++
		}
	}
	return t, nil
}

// keepsInode reports whether the action a restore plans for change c
// (of a path in state cur now, with one name) keeps the path's inode, as
// ensure and patchTo do: a change of its mode or owner alone, or of
// bytes patched in place.
func keepsInode(c Change, cur ckpt.State) bool {
	a := c.after
	switch st := c.After; {
	case cur.Type != st.Type:
		return false
	case st.Type == ckpt.Regular:
		return !a.FromLog && a.Live == c.Path || patchesLive(a, c.Path, cur)
	case st.Type == ckpt.Symlink:
		return cur.Target == st.Target
	case st.Type.IsNode():
		return cur.Rdev == st.Rdev
	}
	return false
}

func (t *plannedTree) Lstat(p string) (ckpt.State, error) {
	if st, ok := t.states[p]; ok {
		return st, nil
	}
	return t.live.Lstat(p)
}

func (t *plannedTree) Ident(p string) (uint64, error) {
	if _, ok := t.states[p]; ok {
		return t.inodes[p].Ino, nil
	}
	return t.live.Ident(p)
}

func (t *plannedTree) LstatInode(p string) (ckpt.State, ckpt.Inode, error) {
	if st, ok := t.states[p]; ok {
		return st, t.inodes[p], nil
	}
	st, ino, err := t.live.LstatInode(p)
	if err == nil && st.Type.Linkable() {
		ino.Nlink -= min(ino.Nlink, t.fewer[ino.Ino])
	}
	return st, ino, err
}

func (t *plannedTree) ReadDir(p string) ([]string, error) {
	var names []string
	if st, err := t.live.Lstat(p); err != nil {
		return nil, err
	} else if st.Type == ckpt.Dir {
		if names, err = t.live.ReadDir(p); err != nil {
			return nil, err
		}
	}
	names = slices.DeleteFunc(names, func(n string) bool {
		st, ok := t.states[ckpt.Join(p, n)]
		return ok && !st.Exists()
	})
	return append(names, t.added[p]...), nil
}

func (t *plannedTree) Walk(dir string, skip func(string, bool) bool, fn func(string, ckpt.State, ckpt.Stamp) error) error {
	return t.live.Walk(dir, skip, func(p string, st ckpt.State, sp ckpt.Stamp) error {
		if pst, ok := t.states[p]; ok {
			if !pst.Exists() {
				return nil
			}
			ino := t.inodes[p]
			return fn(p, pst, ckpt.Stamp{Ino: ino.Ino, Nlink: ino.Nlink})
		}
		if st.Type.Linkable() {
			sp.Nlink -= min(sp.Nlink, t.fewer[sp.Ino])
		}
		return fn(p, st, sp)
	})
}

// LinkNames asks the live tree, if it knows: planLinks checks every name
// against the planned tree.
func (t *plannedTree) LinkNames(ino uint64) []string {
	if ln, ok := t.live.(ckpt.LinkNamer); ok {
		return ln.LinkNames(ino)
	}
	return nil
}

func (t *plannedTree) Avail() (int64, uint64, error) { return t.live.Avail() }

// Open opens a file the restore does not change (no other is read).
func (t *plannedTree) Open(p string) (*os.File, error) {
	if _, ok := t.states[p]; ok {
		return nil, errPlanned
	}
	return t.live.Open(p)
}

func (t *plannedTree) Link(string, *os.File, string) error                 { return errPlanned }
func (t *plannedTree) Hardlink(string, string) error                       { return errPlanned }
func (t *plannedTree) RemoveAll(string) error                              { return errPlanned }
func (t *plannedTree) Mkdir(string, uint32) error                          { return errPlanned }
func (t *plannedTree) Symlink(string, string) error                        { return errPlanned }
func (t *plannedTree) WriteFile(string, ckpt.State, io.Reader) error       { return errPlanned }
func (t *plannedTree) PatchFile(string, int64, []int64, io.ReaderAt) error { return errPlanned }
func (t *plannedTree) Chmod(string, uint32) error                          { return errPlanned }
func (t *plannedTree) Lchown(string, uint32, uint32) error                 { return errPlanned }
func (t *plannedTree) Rename(string, string) error                         { return errPlanned }
func (t *plannedTree) Exchange(string, string) error                       { return errPlanned }
func (t *plannedTree) Mknod(string, ckpt.State) error                      { return errPlanned }

var _ ckpt.Tree = (*plannedTree)(nil)
