package versionstore

import (
	"slices"
	"sort"
	"strings"

	"ckptfs/internal/ckpt"
)

// rewind_restore.go: planning a restore (a rewind of some paths): which
// paths it may touch, and where each one's target bytes are now.

// walkLive calls fn with the relative path of everything below dir but
// the paths skip (if not nil) reports unversioned, and what lies below
// them: no history holds them, so no comparison or plan may name them.
func walkLive(live ckpt.Tree, dir string, skip func(string, bool) bool, fn func(rel string)) error {
	st, err := live.Lstat(dir)
	if err != nil || st.Type != ckpt.Dir {
		return err
	}
	var walk func(rel string) error
	walk = func(rel string) error {
		names, err := live.ReadDir(join(dir, rel))
		if err != nil {
			return err
		}
		for _, n := range names {
			r := join(rel, n)
			st, err := live.Lstat(join(dir, r))
			if err != nil {
				return err
			}
			if skip != nil && skip(join(dir, r), st.Type == ckpt.Dir) {
				continue
			}
			fn(r)
			if st.Type == ckpt.Dir {
				if err := walk(r); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return walk("")
}

// candidates returns every path under prefixes whose state may differ
// from what it was right after event stop: the paths the events since
// name, as they were named then (renames followed back), and what lies
// below a directory moved since, under both its names.
func (s *Store) candidates(stop uint64, prefixes []string, live ckpt.Tree) ([]string, error) {
	seen := map[string]bool{}
	var cands []string
	// Set lookups, not a loop over the prefixes: Changes asks with one
	// prefix per name moved, which may be thousands.
	exact, above := map[string]bool{}, map[string]bool{}
	for _, pre := range prefixes {
		exact[pre] = true
		for d := pre; ; d = parentOf(d) {
			above[d] = true
			if d == "" {
				break
			}
		}
	}
	under := func(p string) bool {
		for d := p; ; d = parentOf(d) {
			if exact[d] {
				return true
			}
			if d == "" {
				return false
			}
		}
	}
	add := func(p string) {
		if under(p) && !seen[p] {
			seen[p] = true
			cands = append(cands, p)
		}
	}
	var ml moveLog
	s.mu.Lock()
	end := s.nextSeq
	s.mu.Unlock()
	err := s.scanEvents(stop+1, end, func(r *record) (bool, error) {
		add(ml.back(r.Path))
		if r.To != "" {
			add(ml.back(r.To))
		}
		ml.note(r)
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	// What lies below a moved directory's live location: under the name it
	// had then (to bring back) and under the name it has now (to remove,
	// if nothing else was there then).
	for _, m := range ml.moves {
		back, now := under(m.orig) || above[m.orig], under(m.cur) || above[m.cur]
		if !back && !now {
			continue
		}
		if err := walkLive(live, m.cur, s.unversionedFunc(), func(p string) {
			add(join(m.orig, p))
			add(join(m.cur, p))
		}); err != nil {
			return nil, err
		}
	}
	return cands, nil
}

// moveLog maps the current name of every subtree renamed since some
// moment back to the name it had then, event by event, so that events
// under the new name (and what still lies there) are found for the old
// one.
type moveLog struct {
	moves []*move
	// born, if not nil, holds the names whose object was made since that
	// moment (a record of its name with nothing there before), with the
	// event from which the name is known to hold it: one of them renamed
	// over a path replaces that path's bytes, and what was at the path
	// keeps its lineage there, as if written in place (the temporary file
	// sed -i or an editor renames into place). A name whose directory, or
	// one above it, was renamed since that event may hold something else
	// now: it counts as born no more (isBorn). Only for a log fed whole
	// records (not scanNames'), which tell what was there.
	born map[string]uint64
	// renames: with born, each rename and exchange noted, in order.
	renames []renameEvent
}

// renameEvent is a rename or exchange a moveLog noted.
type renameEvent struct {
	seq      uint64
	from, to string
}

type move struct{ orig, cur string }

// planRestore computes the actions that give every path under prefixes its
// state right after event stop: existing things first, parents before
// children, then removals, children before parents.
//
// written, if not nil, maps paths to the stored version the caller just
// wrote there: when the target is that same version and type, mode and size
// match, the bytes are not read again to compare.
//
// A path whose target bytes were never captured (Lost) is returned in
// lost, to be named to the user, and left as it was before the rewind:
// with keep 0 (nothing changed yet) it gets no action; else (the fix-up
// pass of a whole-tree rewind, whose reverse pass may have changed it:
// undone the records of an earlier rewind, which hold bytes it had after
// the target) it is made what it was right after event keep, the last
// before the rewind; so are the mode and owner of a directory the
// rewind leaves (leftAsBefore), by actions after the removals. shared reports whether any path looked at shares
// (or shared at the target) its inode with another: only then has the
// link pass anything to do.
func (s *Store) planRestore(stop uint64, prefixes []string, live ckpt.Tree, written map[string]*contentRef, keep uint64) (actions []action, lost []string, shared bool, err error) {
	cands, err := s.candidates(stop, prefixes, live)
	if err != nil {
		return nil, nil, false, err
	}
	rs, err := s.resolveMany(stop, cands, live)
	if err != nil {
		return nil, nil, false, err
	}
	for i, p := range cands {
		if rs[i].Lost {
			lost = append(lost, p)
		}
	}
	var was []resolved // the lost paths right after event keep
	if keep != 0 && len(lost) > 0 {
		if was, err = s.resolveMany(keep, lost, live); err != nil {
			return nil, nil, false, err
		}
	}
	var mk, rm, meta []action
	nlost := 0
	for i, p := range cands {
		r := rs[i]
		cur, ino, err := live.LstatInode(p)
		if err != nil {
			return nil, nil, false, err
		}
		if r.State.Type.Linkable() && (r.Inode.Nlink > 1 || len(r.Links) > 0) || cur.Type.Linkable() && ino.Nlink > 1 {
			shared = true
		}
		if r.Lost {
			if was == nil {
				continue
			}
			r = was[nlost]
			nlost++
		}
		a := action{Path: p, State: r.State, Content: r.Content}
		if !r.FromLog {
			a.Live = r.Live // r.Live == p: the same file, its mode maybe changed
		}
		if w := written[p]; w != nil && r.Content != nil && sameRef(w, r.Content) &&
			cur.Type == r.State.Type && cur.Size == r.State.Size && cur.Mode == r.State.Mode {
			continue // just written from exactly this version
		}
		if k, err := s.compare(resolved{State: cur, Live: p}, r, live); err != nil {
			return nil, nil, false, err
		} else if k == "" {
			continue // already as it was
		}
		if patchesLive(r, p, cur) {
			// Range records over the file at the same path: it is
			// patched in place (its bytes outside the records are the
			// version's already), as the reverse pass does.
			a = action{Op: actPatch, Path: p, State: r.State, Layers: r.Patch.Layers}
		} else if a.State.Type == ckpt.Regular && (a.Live != "" && a.Live != p || r.Patch != nil) {
			// The bytes lie at another live path, which an earlier action
			// may change, or are told by range records over a later
			// version: keep them in the store first, so that every action
			// (and its redo after a crash) stands on its own.
			rc, err := s.open(r, live)
			if err != nil {
				return nil, nil, false, err
			}
			a.Content, err = s.putContent(rc, a.State.Size)
			rc.Close()
			if err != nil {
				return nil, nil, false, err
			}
			a.Live = ""
		}
		if r.State.Type == ckpt.Absent {
			rm = append(rm, a)
		} else {
			mk = append(mk, a)
		}
		if keep != 0 && cur.Type == ckpt.Dir && r.State.Type != ckpt.Dir {
			m, err := s.leftAsBefore(p, cur, keep, live)
			if err != nil {
				return nil, nil, false, err
			}
			if m != nil {
				meta = append(meta, *m)
			}
		}
	}
	// A path to make whose parent, outside the paths restored, is not a
	// directory now: the parent becomes the directory it was then (its
	// mode and owner then), as the dry run lists it (withParents).
	var parents []string
	for _, a := range mk {
		for _, d := range ancestorsOutside(a.Path, prefixes) {
			if st, err := live.Lstat(d); err != nil {
				return nil, nil, false, err
			} else if st.Type != ckpt.Dir && !slices.Contains(parents, d) {
				parents = append(parents, d)
			}
		}
	}
	if len(parents) > 0 {
		prs, err := s.resolveMany(stop, parents, live)
		if err != nil {
			return nil, nil, false, err
		}
		for i, d := range parents {
			if prs[i].State.Type == ckpt.Dir {
				mk = append(mk, action{Path: d, State: prs[i].State})
			}
		}
	}
	sort.Slice(mk, func(i, j int) bool { return mk[i].Path < mk[j].Path })
	sort.Slice(rm, func(i, j int) bool { return rm[i].Path > rm[j].Path })
	return append(append(mk, rm...), meta...), lost, shared, nil
}

// leftAsBefore returns, for the fix-up pass of a whole-tree rewind, the
// action that gives back the mode and owner it had before the rewind
// (right after event keep) to the directory at p (in state cur now),
// which the rewind leaves: it holds unversioned paths, and at the target
// it is not a directory (the action planned for p removes what it can
// below it, clear). The reverse pass may have changed them (undone a
// chmod of it since the target), and a directory the rewind leaves is
// left as it was, as the dry run says: nil when there is nothing to give
// back.
func (s *Store) leftAsBefore(p string, cur ckpt.State, keep uint64, live ckpt.Tree) (*action, error) {
	held, err := s.holdsUnversioned(live, p, cur)
	if err != nil || !held {
		return nil, err
	}
	was, err := s.resolveMany(keep, []string{p}, live)
	if err != nil {
		return nil, err
	}
	if st := was[0].State; st.Type == ckpt.Dir && !sameMeta(cur, st) {
		return &action{Path: p, State: st}, nil
	}
	return nil, nil
}

// ancestorsOutside returns the proper ancestors of p, outermost first, up
// to the first that lies at or below one of prefixes.
func ancestorsOutside(p string, prefixes []string) []string {
	var out []string
	for i := 0; i < len(p); i++ {
		if p[i] != '/' {
			continue
		}
		d := p[:i]
		for _, pre := range prefixes {
			if _, ok := ckpt.Under(d, pre); ok {
				return out
			}
		}
		out = append(out, d)
	}
	return out
}

// withParents adds to a restore's planned changes (below prefixes) those
// of the directories outside the prefixes that it makes to hold them:
// every proper ancestor of a path it makes that is not a directory now
// (it was one then). all is every change of the whole tree.
func withParents(changes, all []Change, prefixes []string) []Change {
	byPath := map[string]Change{}
	for _, c := range SplitRenames(all) {
		byPath[c.Path] = c
	}
	added := map[string]bool{}
	out := slices.Clone(changes)
	for _, c := range changes {
		if !c.After.Exists() {
			continue
		}
		for _, d := range ancestorsOutside(c.Path, prefixes) {
			pc, ok := byPath[d]
			if ok && !added[d] && pc.After.Type == ckpt.Dir && pc.Before.Type != ckpt.Dir {
				added[d] = true
				out = append(out, pc)
			}
		}
	}
	sortChanges(out)
	return out
}

// parentOf returns the directory holding p ("" for a name at the top).
func parentOf(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[:i]
	}
	return ""
}
