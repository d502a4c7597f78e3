package versionstore

import (
	"fmt"
	"io"
	"slices"
	"sort"

	"ckptfs/internal/ckpt"
)

// snapshot.go: the whole tree at the end of a turn (checkout), and what
// differs between two turns with the later bytes (export), by the same
// forward resolution a restore plans with: the candidates the events
// since name are resolved through the log, everything else is as the live
// tree holds it now.

// Snapshot lists the entries of a tree at the end of a turn (TreeAt), or
// the paths that differ between two turns (TreeDelta). Entries are sorted
// by path, so parents come before their children.
type Snapshot struct {
	Turn    uint64
	Entries []Entry
	// mark is the newest event when the snapshot was taken: an entry read
	// from the live tree is the turn's only while no event since names it
	// (Check).
	mark uint64
	// watch: the events since mark, for reading a view's files (ViewAt).
	watch *watch
	// unwatched: no daemon records the tree's changes (ViewOptions).
	unwatched bool
}

// Entry is one path of a Snapshot.
type Entry struct {
	Path string // root-relative; "" the root itself (TreeAt)
	// State at the end of the turn; Absent in a delta: the path is gone
	// (with everything below it).
	State ckpt.State
	// Inode identifies, for anything but a directory, the inode the path
	// had then (zero: not known): paths of one Snapshot with the same
	// Inode.Dev and Inode.Ino were hard links of one another (TreeAt).
	Inode ckpt.Inode
	// Lost: a regular file whose bytes then were never captured (changed
	// while the project was not mounted): OpenEntry refuses it.
	Lost bool

	r     resolved
	stamp ckpt.Stamp // a live regular file's, when the snapshot was taken
}

// Linked reports whether e's identity is known, so that it may share an
// inode with other entries.
func (e Entry) Linked() bool {
	return e.State.Type.Linkable() && e.Inode.Ino != 0
}

// TreeAt returns every versioned path as it was at the end of turn n: the
// manifest a rewind to n would leave (the unversioned paths, the store
// and --exclude patterns, aside), the root first. It costs a walk of the
// live tree and a pass over the events since n.
func (s *Store) TreeAt(n uint64, live ckpt.Tree) (*Snapshot, error) {
	mark := s.lastSeq()
	after, err := s.endSeq(n)
	if err != nil {
		return nil, err
	}
	s.linkMu.Lock()
	unversioned := s.unversioned
	s.linkMu.Unlock()
	skip := func(p string, isDir bool) bool { return unversioned != nil && unversioned(p, isDir) }
	cands, err := s.candidates(after, []string{""}, live)
	if err != nil {
		return nil, err
	}
	// A candidate below an unversioned directory (one moved since, say)
	// is left out as the walk leaves it out.
	excluded := func(p string) bool {
		for d := parentOf(p); d != ""; d = parentOf(d) {
			if skip(d, true) {
				return true
			}
		}
		return false
	}
	isCand := map[string]bool{"": true}
	paths := []string{""}
	for _, p := range cands {
		if !isCand[p] && !excluded(p) {
			isCand[p] = true
			paths = append(paths, p)
		}
	}
	sn := &Snapshot{Turn: n, mark: mark}
	// Everything the events since n do not name is as it is now.
	err = live.Walk("", skip, func(p string, st ckpt.State, sp ckpt.Stamp) error {
		if isCand[p] {
			return nil
		}
		e := Entry{Path: p, State: st, r: resolved{State: st, Live: p}, stamp: sp}
		if st.Type.Linkable() && sp.Nlink > 1 {
			st2, ino, err := live.LstatInode(p)
			if err != nil {
				return err
			}
			if st2.Type.Linkable() {
				e.Inode = ino
			}
		}
		e.r.Inode = e.Inode
		sn.Entries = append(sn.Entries, e)
		return nil
	})
	if err != nil {
		return nil, err
	}
	walked := len(sn.Entries)
	rs, err := s.resolveMany(after, paths, live)
	if err != nil {
		return nil, err
	}
	// The names a record says its inode had then: a walked path among
	// them with that inode now is still a name of it, though a later turn
	// took the inode's other names (its link count now 1).
	then := map[uint64][]string{}
	for i, p := range paths {
		r := rs[i]
		if r.State.Type == ckpt.Absent || p != "" && skip(p, r.State.Type == ckpt.Dir) {
			continue
		}
		e := Entry{Path: p, State: r.State, Lost: r.Lost, r: r}
		if r.State.Type.Linkable() {
			e.Inode = r.Inode
			if r.Inode.Known() && len(r.Links) > 0 {
				then[r.Inode.Ino] = append(then[r.Inode.Ino], r.Links...)
			}
		}
		sn.Entries = append(sn.Entries, e)
	}
	for i := range sn.Entries[:walked] {
		e := &sn.Entries[i]
		if !e.State.Type.Linkable() || e.Inode.Known() || !slices.Contains(then[e.stamp.Ino], e.Path) {
			continue
		}
		st, ino, err := live.LstatInode(e.Path)
		if err != nil {
			return nil, err
		}
		if st.Type.Linkable() && ino.Ino == e.stamp.Ino {
			e.Inode, e.r.Inode = ino, ino
		}
	}
	sort.Slice(sn.Entries, func(i, j int) bool { return sn.Entries[i].Path < sn.Entries[j].Path })
	// A path whose parent was not a directory then cannot be: a lenient
	// resolution's leftover, never written.
	dirs := map[string]bool{}
	kept := sn.Entries[:0]
	for _, e := range sn.Entries {
		if e.Path != "" && !dirs[parentOf(e.Path)] {
			continue
		}
		if e.State.Type == ckpt.Dir {
			dirs[e.Path] = true
		}
		kept = append(kept, e)
	}
	sn.Entries = kept
	if len(kept) == 0 || kept[0].Path != "" {
		return nil, fmt.Errorf("versionstore: the root was not a directory at the end of turn %d", n)
	}
	return sn, nil
}

// TreeDelta returns what differs between the end of turn base and the end
// of turn n: each path whose state at n is not its state at base, with
// its state at n (Absent: gone; a rename is the old name gone and the new
// one there). It is Changes(base, n) as entries.
func (s *Store) TreeDelta(base, n uint64, live ckpt.Tree) (*Snapshot, error) {
	mark := s.lastSeq()
	cs, err := s.Changes(base, n, live)
	if err != nil {
		return nil, err
	}
	sn := &Snapshot{Turn: n, mark: mark}
	for _, c := range cs {
		if c.From != "" {
			sn.Entries = append(sn.Entries, Entry{Path: c.From, r: resolved{FromLog: true}})
		}
		e := Entry{Path: c.Path, State: c.After, Lost: c.after.Lost, r: c.after}
		if c.After.Type.Linkable() {
			e.Inode = c.after.Inode
		}
		sn.Entries = append(sn.Entries, e)
	}
	sort.SliceStable(sn.Entries, func(i, j int) bool { return sn.Entries[i].Path < sn.Entries[j].Path })
	return sn, nil
}

// OpenEntry streams a regular file entry's bytes (empty for anything
// else); a Lost entry is ErrNotCaptured.
func (s *Store) OpenEntry(e Entry, live ckpt.Tree) (io.ReadCloser, error) {
	rc, err := s.open(e.r, live)
	if err != nil && e.Lost {
		err = fmt.Errorf("%s: %w", e.Path, err)
	}
	return rc, err
}

// Check reports an error if a path of sn read from the live tree may have
// changed since sn was taken (an event since names it, or a directory
// above it): its bytes then may be later ones than the turn's.
func (s *Store) Check(sn *Snapshot) error {
	touched := map[string]bool{}
	s.mu.Lock()
	end := s.nextSeq
	s.mu.Unlock()
	err := s.scanEvents(sn.mark+1, end, func(r *record) (bool, error) {
		touched[r.Path] = true
		if r.To != "" {
			touched[r.To] = true
		}
		return true, nil
	})
	if err != nil || len(touched) == 0 {
		return err
	}
	for _, e := range sn.Entries {
		lp := e.r.livePath()
		if lp == "" {
			continue
		}
		for d := lp; ; d = parentOf(d) {
			if touched[d] {
				return fmt.Errorf("versionstore: %s changed while it was being read (the project is in use): run again", lp)
			}
			if d == "" {
				break
			}
		}
	}
	return nil
}

func (s *Store) lastSeq() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.nextSeq - 1
}
