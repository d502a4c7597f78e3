package versionstore

import (
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"

	"ckptfs/internal/ckpt"
	"ckptfs/internal/crashpoint"
)

// rewind_steps.go: the idempotent steps of a rewind: undo one event,
// make a path be a state, rename back; each records the prior state first,
// as the overlay would.

// undo reverses one event on the live tree, recording what it changes in
// the open (rewind) turn. since is the journal's Mark: the events from
// there on are this step's own, recorded by an earlier run of it that a
// crash cut short (0: unknown).
func (s *Store) undo(r *record, live ckpt.Tree, who ckpt.Program, since uint64) error {
	switch r.Op {
	case opPrior:
		if kept, err := s.stillAsRecorded(r, live); err != nil || kept {
			return err
		}
		return s.ensure(live, r.Path, r.State, r.Content, "", who)
	case opRange:
		return s.undoRange(r, live, who)
	case opMeta:
		cur, err := live.Lstat(r.Path)
		if err != nil || cur.Type != ckpt.Regular {
			return err
		}
		return s.setFileMeta(live, r.Path, cur, r.State, who)
	case opRename, opExchange:
		// Undo by renaming back. First-touch capture means the tree between
		// two events of one turn is not always exactly reconstructed (a path
		// deleted after being renamed within the turn has no record of its
		// own), so this step is lenient: a side that is missing has an older
		// record that will set it anyway, and the fix-up pass that follows
		// the reverse pass (see runJournal) settles any remaining difference.
		to, err := live.Lstat(r.To)
		if err != nil {
			return err
		}
		from, err := live.Lstat(r.Path)
		if err != nil {
			return err
		}
		// An exchange back, or a rename that stands for one, cannot be
		// told done from the names alone: a redo after a crash looks
		// for the record of its earlier run (which Recover kept only if
		// it was made) and does not make it twice.
		// A directory that holds unversioned paths stays where it is,
		// as they do: moved back, it would take another project's
		// store, an --exclude'd build/, to a name the rewind may then
		// leave, where nothing looks for them (the dry run names the
		// directory as left where it is). The fix-up pass gives both
		// names their target state, path by path.
		if held, err := s.holdsUnversioned(live, r.To, to); err != nil || held {
			return err
		}
		if r.Op == opExchange && to.Exists() && from.Exists() {
			if held, err := s.holdsUnversioned(live, r.Path, from); err != nil || held {
				return err
			}
			if done, err := s.movedSince(since, opExchange, r.To, r.Path); err != nil || done {
				return err
			}
			return s.rename(live, r.To, r.Path, true, who)
		}
		if r.Op == opExchange {
			if done, err := s.movedSince(since, opRename, r.Path, r.To); err != nil || done {
				return err
			}
		}
		if !to.Exists() {
			if r.Op == opExchange && from.Exists() {
				if held, err := s.holdsUnversioned(live, r.Path, from); err != nil || held {
					return err
				}
				if err := s.mkdirParents(live, r.To, who); err != nil {
					return err
				}
				return s.rename(live, r.Path, r.To, false, who)
			}
			return nil // already renamed back (a crash-interrupted run)
		}
		if from.Exists() {
			if left, err := s.replace(live, r.Path, from, who); err != nil || left {
				// Left: a directory that holds unversioned paths
				// now has the name; the fix-up pass settles what it
				// can (the object stays at r.To meanwhile).
				return err
			}
		}
		if err := s.mkdirParents(live, r.Path, who); err != nil {
			return err
		}
		return s.rename(live, r.To, r.Path, false, who)
	}
	return fmt.Errorf("%w: unknown event op %q", ErrCorrupt, r.Op)
}

// stillAsRecorded reports whether the regular file that prior record r
// names is still the one r recorded: the same inode, mode, owner, size
// and bytes. Undoing r then has nothing to do. ensure would otherwise
// write the bytes back all the same (it compares the states of
// everything else, not a file's bytes), which takes a write into the
// file's directory: a record whose change then failed (the capture
// comes first), as the last record of a rewind that failed half-way
// is, would have its rollback write a file the rewind never changed,
// and fail the same way (a directory of root's in a private mount). The
// inode must be r's: only a file written in place since can have its
// bytes back, and only then are they read to compare.
func (s *Store) stillAsRecorded(r *record, live ckpt.Tree) (bool, error) {
	if r.State.Type != ckpt.Regular || r.Inode == nil || r.Content == nil || r.Lost {
		return false, nil
	}
	cur, ino, err := live.LstatInode(r.Path)
	if err != nil || cur.Type != ckpt.Regular || !ino.Same(*r.Inode) || cur.Size != r.State.Size || !sameMeta(cur, r.State) {
		return false, err
	}
	return s.sameBytes(resolved{State: cur, Live: r.Path, Inode: ino},
		resolved{State: r.State, Content: r.Content, FromLog: true, Seq: r.Seq, Inode: *r.Inode}, live)
}

// holdsUnversioned reports whether path, in state st, is a directory
// with unversioned paths below it (SetUnversioned). It stops at the first
// one found.
func (s *Store) holdsUnversioned(live ckpt.Tree, path string, st ckpt.State) (bool, error) {
	unv := s.unversionedFunc()
	if unv == nil || st.Type != ckpt.Dir {
		return false, nil
	}
	found := false
	err := walkLive(live, path, nil, func(rel string) {
		if !found {
			p := join(path, rel)
			pst, err := live.Lstat(p)
			found = err == nil && unv(p, pst.Type == ckpt.Dir)
		}
	})
	return found, err
}

// mkdirParents creates the missing parents of path (mode 0755; an older
// record sets their real state).
func (s *Store) mkdirParents(live ckpt.Tree, path string, who ckpt.Program) error {
	els := strings.Split(path, "/")
	for i := 1; i < len(els); i++ {
		p := strings.Join(els[:i], "/")
		st, err := live.Lstat(p)
		if err != nil {
			return err
		}
		if st.Type == ckpt.Dir {
			continue
		}
		if _, err := s.replace(live, p, st, who); err != nil { // not a directory: never left
			return err
		}
		if err := live.Mkdir(p, 0o755); err != nil {
			return err
		}
	}
	return nil
}

// movedSince reports whether an event op(from, to) was recorded at seq
// since or later (since 0: unknown, false).
func (s *Store) movedSince(since uint64, op, from, to string) (bool, error) {
	if since == 0 {
		return false, nil
	}
	s.mu.Lock()
	end := s.nextSeq
	s.mu.Unlock()
	found := false
	err := s.scanEvents(since, end, func(r *record) (bool, error) {
		found = r.Op == op && r.Path == from && r.To == to
		return !found, nil
	})
	return found, err
}

func (s *Store) rename(live ckpt.Tree, from, to string, exchange bool, who ckpt.Program) error {
	if exchange {
		ia, err := live.Ident(from)
		if err != nil {
			return err
		}
		ib, err := live.Ident(to)
		if err != nil {
			return err
		}
		commit, err := s.RecordExchange(from, to, ia, ib, who)
		if err != nil {
			return err
		}
		s.namesMoved()
		// A redo tells an exchange done by its record (movedSince): the
		// record must not be lost to a power loss that keeps the
		// exchange.
		if err := s.syncWAL(); err != nil {
			commit(false)
			return fmt.Errorf("versionstore: %w", err)
		}
		crashpoint.Hit("rewind.exchange.recorded")
		err = live.Exchange(from, to)
		crashpoint.Hit("rewind.exchange.done")
		commit(err == nil)
		return err
	}
	commit, err := s.RecordRename(from, to, false, who)
	if err != nil {
		return err
	}
	s.namesMoved()
	if err := s.syncWAL(); err != nil { // as for an exchange, above
		commit(false)
		return fmt.Errorf("versionstore: %w", err)
	}
	crashpoint.Hit("rewind.rename.recorded")
	err = live.Rename(from, to)
	crashpoint.Hit("rewind.rename.done")
	commit(err == nil)
	return err
}

// ensure makes path have state st (bytes from content, or from the live
// path src), recording its current state in the open turn first.
func (s *Store) ensure(live ckpt.Tree, path string, st ckpt.State, content *contentRef, src string, who ckpt.Program) error {
	if st.Type != ckpt.Absent && st.Type != ckpt.Special {
		if err := s.mkdirParents(live, path, who); err != nil {
			return err
		}
	}
	cur, ino, err := live.LstatInode(path)
	if err != nil {
		return err
	}
	switch st.Type {
	case ckpt.Absent:
		if !cur.Exists() {
			return nil
		}
		_, err := s.clear(live, path, cur, who)
		return err
	case ckpt.Dir:
		if cur.Type == ckpt.Dir {
			return s.ensureMeta(live, path, cur, st, who)
		}
		if _, err := s.replace(live, path, cur, who); err != nil { // not a directory: never left
			return err
		}
		if err := live.Mkdir(path, st.Mode); err != nil {
			return err
		}
		return setMeta(live, path, ckpt.State{Mode: st.Mode}, st)
	case ckpt.Symlink:
		if cur.Type == ckpt.Symlink && cur.Target == st.Target {
			if cur.UID == st.UID && cur.GID == st.GID {
				return nil
			}
			want := cur
			want.UID, want.GID = st.UID, st.GID
			return s.setFileMeta(live, path, cur, want, who)
		}
		if left, err := s.replace(live, path, cur, who); err != nil || left {
			return err
		}
		if err := live.Symlink(st.Target, path); err != nil {
			return err
		}
		if cur.UID != st.UID || cur.GID != st.GID {
			live.Lchown(path, st.UID, st.GID) // best effort
		}
		return nil
	case ckpt.Regular:
		if src == path && cur.Type == ckpt.Regular {
			// The same file: only its mode or owner differs.
			return s.setFileMeta(live, path, cur, st, who)
		}
		var rc io.ReadCloser
		if content != nil {
			rc, err = s.openContent(content)
		} else if src != "" {
			rc, err = live.Open(src)
		} else {
			err = fmt.Errorf("%w: no bytes for %q", ErrCorrupt, path)
		}
		if err != nil {
			return err
		}
		defer rc.Close()
		if cur.Type == ckpt.Dir {
			if left, err := s.replace(live, path, cur, who); err != nil || left {
				return err
			}
		} else if err := s.captureIno(live, path, cur, ino, who); err != nil {
			return err
		}
		// WriteFile replaces atomically with a new inode: fresh mtime, and
		// processes holding the old file keep the old bytes.
		return live.WriteFile(path, st, rc)
	case ckpt.FIFO, ckpt.Socket, ckpt.CharDevice, ckpt.BlockDevice:
		if cur.Type == st.Type && cur.Rdev == st.Rdev {
			return s.setFileMeta(live, path, cur, st, who)
		}
		if left, err := s.replace(live, path, cur, who); err != nil || left {
			return err
		}
		if err := live.Mknod(path, st); err != nil {
			return err
		}
		return setMeta(live, path, ckpt.State{Mode: st.Mode}, st)
	}
	return nil // Special (recorded by an older ckptfs): its kind is unknown
}

// keepsSharedInode reports whether action a leaves the path, now cur and a
// name of an inode with other names, on that inode: only where ensure
// has nothing to do. ensure replaces a file whose type, bytes, symlink
// target or device number change, and setFileMeta gives one whose mode
// or owner change an inode of its own; so do patchTo and relink (a
// patch, a link to another name). Keep it in step with them.
func keepsSharedInode(a action, cur ckpt.State) bool {
	if a.Op != "" {
		return false
	}
	st := a.State
	switch st.Type {
	case ckpt.Regular:
		return a.Live == a.Path && cur.Type == ckpt.Regular && sameMeta(cur, st)
	case ckpt.Symlink:
		return cur.Type == ckpt.Symlink && cur.Target == st.Target && cur.UID == st.UID && cur.GID == st.GID
	case ckpt.FIFO, ckpt.Socket, ckpt.CharDevice, ckpt.BlockDevice:
		return cur.Type == st.Type && cur.Rdev == st.Rdev && sameMeta(cur, st)
	}
	return false
}

// ensureMeta gives path, a directory already, st's mode and owner,
// recording its current state first.
func (s *Store) ensureMeta(live ckpt.Tree, path string, cur, st ckpt.State, who ckpt.Program) error {
	if sameMeta(cur, st) {
		return nil
	}
	if err := s.capture(live, path, cur, who); err != nil {
		return err
	}
	return setMeta(live, path, cur, st)
}

// replace records and removes whatever is at path (recording it absent
// if nothing is), to make way for something else. It reports whether it
// left path instead (see clear): a directory that holds unversioned
// paths, which the caller must then leave as it is.
func (s *Store) replace(live ckpt.Tree, path string, cur ckpt.State, who ckpt.Program) (left bool, err error) {
	if !cur.Exists() {
		return false, s.capture(live, path, cur, who)
	}
	return s.clear(live, path, cur, who)
}

// clear records and removes whatever is at path and below it, but for the
// unversioned paths below it (SetUnversioned: --exclude, the store of a
// project inside this one), which no capture sees and a rewind leaves as
// they are: they stay, unrecorded, with the directories above them. It
// reports whether path is left (a directory holding such paths).
//
// Recording them would put them in this history (another project's whole
// store), and a later rewind across this one would write those stale
// bytes back over whatever they have become.
func (s *Store) clear(live ckpt.Tree, path string, cur ckpt.State, who ckpt.Program) (left bool, err error) {
	unv := s.unversionedFunc()
	passed, err := s.captureTree(live, path, cur, who, unv)
	if err != nil {
		return false, err
	}
	if !passed {
		return false, live.RemoveAll(path)
	}
	_, err = removeVersioned(live, path, unv)
	return true, err
}

// removeVersioned removes what lies below the directory dir but the
// unversioned paths (unv) and the directories above them, and reports
// whether it left anything.
func removeVersioned(live ckpt.Tree, dir string, unv func(string, bool) bool) (left bool, err error) {
	names, err := live.ReadDir(dir)
	if err != nil {
		return false, err
	}
	for _, n := range names {
		p := ckpt.Join(dir, n)
		st, err := live.Lstat(p)
		if err != nil {
			return false, err
		}
		if unv(p, st.Type == ckpt.Dir) {
			left = true
			continue
		}
		if st.Type == ckpt.Dir {
			l, err := removeVersioned(live, p, unv)
			if err != nil {
				return false, err
			}
			if l {
				left = true
				continue
			}
		}
		if err := live.RemoveAll(p); err != nil {
			return false, err
		}
	}
	return left, nil
}

// unversionedFunc returns what SetUnversioned set (nil: nothing).
func (s *Store) unversionedFunc() func(string, bool) bool {
	s.linkMu.Lock()
	defer s.linkMu.Unlock()
	return s.unversioned
}

// setFileMeta gives the regular file, symlink or node at path st's mode
// and owner, recording its current state first. One with other names gets
// an inode of its own instead: a chmod or chown would change the other
// names too. (The link pass then joins it again to the names it had at
// the target.)
func (s *Store) setFileMeta(live ckpt.Tree, path string, cur, st ckpt.State, who ckpt.Program) error {
	if sameMeta(cur, st) {
		return nil
	}
	_, ino, err := live.LstatInode(path)
	if err != nil {
		return err
	}
	if ino.Nlink > 1 {
		want := cur
		want.Mode, want.UID, want.GID = st.Mode, st.UID, st.GID
		return s.split(live, path, want, &ino, who)
	}
	if cur.Type == ckpt.Regular {
		err = s.Record(ckpt.Capture{Path: path, Prior: cur, MetaOnly: true}, who)
	} else {
		err = s.captureIno(live, path, cur, ino, who)
	}
	if err != nil {
		return err
	}
	return setMeta(live, path, cur, st)
}

func setMeta(live ckpt.Tree, path string, cur, st ckpt.State) error {
	if cur.UID != st.UID || cur.GID != st.GID {
		if err := live.Lchown(path, st.UID, st.GID); err != nil && os.Geteuid() == 0 {
			return err
		}
	}
	return live.Chmod(path, st.Mode) // after chown, which clears setuid bits
}

// capture records path's current state in the open turn. Bytes are
// copied, not linked: a process may still hold the file open for writing.
// The record of anything but a directory names its inode and that inode's
// other names.
func (s *Store) capture(live ckpt.Tree, path string, cur ckpt.State, who ckpt.Program) error {
	return s.captureIno(live, path, cur, ckpt.Inode{}, who)
}

// captureIno is capture, with the inode at path if the caller has it.
func (s *Store) captureIno(live ckpt.Tree, path string, cur ckpt.State, ino ckpt.Inode, who ckpt.Program) error {
	c := ckpt.Capture{Path: path, Prior: cur}
	if cur.Type == ckpt.Regular {
		c.Open = func() (*os.File, error) { return live.Open(path) }
	}
	if cur.Type.Linkable() && s.NeedsCapture(path, false) {
		if !ino.Known() {
			var err error
			if _, ino, err = live.LstatInode(path); err != nil {
				return err
			}
		}
		c.Inode = ino
		var err error
		if c.Links, err = s.otherNames(live, path, ino); err != nil {
			return err
		}
	}
	return s.Record(c, who)
}

// captureTree records path and, for a directory, everything below it,
// children first, so that undoing the records (newest first) recreates the
// directory before its children. It passes by the paths below path that
// unv (if not nil) reports unversioned, and the directories above them,
// which stay (see clear), and reports whether it did.
func (s *Store) captureTree(live ckpt.Tree, path string, cur ckpt.State, who ckpt.Program, unv func(string, bool) bool) (passed bool, err error) {
	if cur.Type == ckpt.Dir {
		names, err := live.ReadDir(path)
		if err != nil {
			return false, err
		}
		sort.Strings(names)
		for _, n := range names {
			p := ckpt.Join(path, n)
			st, err := live.Lstat(p)
			if err != nil {
				return false, err
			}
			if unv != nil && unv(p, st.Type == ckpt.Dir) {
				passed = true
				continue
			}
			below, err := s.captureTree(live, p, st, who, unv)
			if err != nil {
				return false, err
			}
			passed = passed || below
		}
	}
	if passed {
		return true, nil
	}
	return false, s.capture(live, path, cur, who)
}

// Left is a directory a rewind leaves in place although at its target the
// path was absent or not a directory: it holds unversioned paths, which a
// rewind leaves as they are, and so the directories above them (clear).
type Left struct {
	Path string
	Then ckpt.Type // the path's type at the target (Absent: not there)
	// Unversioned are the first leftNamed unversioned paths below Path
	// (sorted; one found as a directory stands for everything below it),
	// More how many others there are.
	Unversioned []string
	More        int
}

// leftNamed is how many of the unversioned paths below it a Left names.
const leftNamed = 10

// leaveHolders returns the directories among changes (each per its
// Before, the tree now, and After, the target) that a rewind leaves, as
// clear does: the directories that hold unversioned paths below them and
// that the changes remove or replace, and the old names of those renamed
// back (which the reverse pass does not move: see undo, and the fix-up
// pass makes the directory anew at its name then); and the changes
// without theirs, which the rewind does not make, a rename of such a
// directory listed as the addition it becomes. It costs a walk of those
// directories, none without unversioned paths set.
func (s *Store) leaveHolders(changes []Change, live ckpt.Tree) (kept []Change, left []Left, err error) {
	unv := s.unversionedFunc()
	if unv == nil {
		return changes, nil, nil
	}
	then := map[string]ckpt.Type{} // the directories the changes remove or replace
	var dirs []string
	for _, c := range changes {
		name := c.Path
		if c.Kind == ckpt.Renamed {
			// The reverse pass does not move back a directory that
			// holds unversioned paths (see undo): its old name is
			// left, and the directory made anew at Path.
			name = c.From // gone at the target
		}
		if c.Before.Type != ckpt.Dir || c.Kind != ckpt.Renamed && c.After.Type == ckpt.Dir {
			continue
		}
		if _, ok := then[name]; !ok {
			then[name] = c.After.Type
			if c.Kind == ckpt.Renamed {
				then[name] = ckpt.Absent
			}
			dirs = append(dirs, name)
		}
	}
	if len(dirs) == 0 {
		return changes, nil, nil
	}
	// Walk the outermost of them; each unversioned path found counts for
	// every one of them above it.
	sort.Strings(dirs)
	var found []string
	inner := func(d string) bool {
		for a := parentOf(d); a != ""; a = parentOf(a) {
			if _, ok := then[a]; ok {
				return true
			}
		}
		return false
	}
	for _, d := range dirs {
		if inner(d) {
			continue
		}
		err := live.Walk(d, func(p string, isDir bool) bool {
			if p == d || !unv(p, isDir) {
				return false
			}
			found = append(found, p)
			return true
		}, func(string, ckpt.State, ckpt.Stamp) error { return nil })
		if err != nil {
			return nil, nil, err
		}
	}
	if len(found) == 0 {
		return changes, nil, nil
	}
	sort.Strings(found)
	isLeft := map[string]bool{}
	for _, d := range dirs {
		// What lies below d is contiguous in sorted order.
		i, _ := slices.BinarySearch(found, d+"/")
		j, _ := slices.BinarySearch(found, d+"0") // '0' is '/'+1
		if i == j {
			continue
		}
		l := Left{Path: d, Then: then[d], Unversioned: slices.Clone(found[i:min(j, i+leftNamed)])}
		l.More = j - i - len(l.Unversioned)
		left = append(left, l)
		isLeft[d] = true
	}
	kept = changes[:0:0]
	for _, c := range changes {
		if c.Kind == ckpt.Renamed && isLeft[c.From] && c.Before.Type == ckpt.Dir {
			// Made at Path, its old name left.
			c.Kind, c.From, c.Before, c.before = ckpt.Added, "", ckpt.State{}, resolved{}
		} else if c.Kind != ckpt.Renamed && isLeft[c.Path] && c.Before.Type == ckpt.Dir {
			continue
		}
		kept = append(kept, c)
	}
	return kept, left, nil
}
