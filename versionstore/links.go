package versionstore

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"ckptfs/internal/ckpt"
)

// links.go: which paths share an inode (hard links). The reasoning is in
// doc.go ("Hard links"); in short, a record of the prior state of anything
// but a directory carries the identity of its inode then (Inode) and its
// other names then (Links), the paths of one moment that resolve to the
// same identity shared an inode then, and a rewind ends with a link pass
// that gives the paths it restored that partition.

// inoKey is an inode's identity without its link count.
type inoKey struct{ dev, ino uint64 }

func keyOf(i ckpt.Inode) inoKey { return inoKey{i.Dev, i.Ino} }

// linkTag is the identity of the inode a resolution found, when it can be
// hard-linked (ckpt.Type.Linkable) and its inode is known: also for a
// regular file whose bytes then were never captured (Lost), whose record
// still tells which names shared its inode.
func linkTag(r resolved) (inoKey, bool) {
	if !r.State.Type.Linkable() || !r.Inode.Known() {
		return inoKey{}, false
	}
	return keyOf(r.Inode), true
}

// SetUnversioned tells the store which paths of the tree no capture sees
// (the store's own directory, --exclude patterns, the stores of projects
// inside this one): a walk looking for the names of a hard-linked file
// leaves them out, and a rewind that removes a directory leaves them as
// they are, with the directories above them, unrecorded (clear).
func (s *Store) SetUnversioned(fn func(path string, isDir bool) bool) {
	s.linkMu.Lock()
	defer s.linkMu.Unlock()
	s.unversioned = fn
}

// linkIndex holds the names of the files (all but directories) with more
// than one link, by inode number, from one walk of the tree during one
// rewind.
type linkIndex struct {
	names map[uint64][]string
	stale bool // the rewind renamed something since the walk
}

// dropLinkIndex forgets the walk: at the start and end of every rewind.
func (s *Store) dropLinkIndex() {
	s.linkMu.Lock()
	s.linkIdx = nil
	s.linkMu.Unlock()
}

// namesMoved notes that the rewind renamed something: the walk may hold
// names that moved.
func (s *Store) namesMoved() {
	s.linkMu.Lock()
	if s.linkIdx != nil {
		s.linkIdx.stale = true
	}
	s.linkMu.Unlock()
}

// nameAdded notes a name the rewind linked to inode ino.
func (s *Store) nameAdded(ino uint64, p string) {
	s.linkMu.Lock()
	if s.linkIdx != nil && !slices.Contains(s.linkIdx.names[ino], p) {
		s.linkIdx.names[ino] = append(s.linkIdx.names[ino], p)
	}
	s.linkMu.Unlock()
}

// walkLinks returns the walk, walking the tree if there is none yet (or,
// with again, if the one there is stale).
func (s *Store) walkLinks(live ckpt.Tree, again bool) (*linkIndex, error) {
	s.linkMu.Lock()
	idx, unversioned := s.linkIdx, s.unversioned
	s.linkMu.Unlock()
	if idx != nil && !(again && idx.stale) {
		return idx, nil
	}
	// The store's own directory, if it lies in the tree, is left out by
	// its identity: its attic holds links of files once in the tree.
	var storeIno unix.Stat_t
	haveStore := s.dirf != nil && unix.Fstat(int(s.dirf.Fd()), &storeIno) == nil
	storeDirs := map[string]bool{}
	skip := func(p string, isDir bool) bool {
		dir := ""
		if i := strings.LastIndexByte(p, '/'); i >= 0 {
			dir = p[:i]
		}
		if storeDirs[dir] && dir != "" {
			return true
		}
		return unversioned != nil && unversioned(p, isDir)
	}
	idx = &linkIndex{names: map[uint64][]string{}}
	err := live.Walk("", skip, func(p string, st ckpt.State, sp ckpt.Stamp) error {
		switch {
		case st.Type == ckpt.Dir && haveStore && sp.Ino == storeIno.Ino:
			if _, ino, err := live.LstatInode(p); err == nil && ino.Dev == storeIno.Dev {
				storeDirs[p] = true
			}
		case st.Type.Linkable() && sp.Nlink > 1 && !storeDirs[p]:
			idx.names[sp.Ino] = append(idx.names[sp.Ino], p)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("versionstore: looking for hard links: %w", err)
	}
	s.linkMu.Lock()
	s.linkIdx = idx
	s.linkMu.Unlock()
	return idx, nil
}

// otherNames returns the names other than p of the file at p,
// whose inode is ino, each checked against the tree.
func (s *Store) otherNames(live ckpt.Tree, p string, ino ckpt.Inode) ([]string, error) {
	if ino.Nlink < 2 {
		return nil, nil
	}
	return s.namesOf(live, ino, p, int(ino.Nlink)-1)
}

// namesOf returns the names of the file whose inode is ino, but
// except, each checked against the tree. It asks the tree first, if it
// knows (LinkNamer), and walks the tree when that yields fewer than want
// names (want <= 0: always).
func (s *Store) namesOf(live ckpt.Tree, ino ckpt.Inode, except string, want int) ([]string, error) {
	seen := map[string]bool{except: true}
	var out []string
	check := func(cands []string) error {
		for _, q := range cands {
			if seen[q] {
				continue
			}
			seen[q] = true
			st, qi, err := live.LstatInode(q)
			if err != nil {
				return err
			}
			if st.Type.Linkable() && qi.Same(ino) {
				out = append(out, q)
			}
		}
		return nil
	}
	if ln, ok := live.(ckpt.LinkNamer); ok {
		if err := check(ln.LinkNames(ino.Ino)); err != nil {
			return nil, err
		}
	}
	for again := false; want <= 0 || len(out) < want; again = true {
		idx, err := s.walkLinks(live, again)
		if err != nil {
			return nil, err
		}
		s.linkMu.Lock()
		names := slices.Clone(idx.names[ino.Ino])
		stale := idx.stale
		s.linkMu.Unlock()
		if err := check(names); err != nil {
			return nil, err
		}
		if again || !stale {
			break
		}
	}
	sort.Strings(out)
	return out, nil
}

// linkChanges sets Relinked for every candidate whose type, bytes, mode
// and owner are the same at both ends (kinds[i] is "") but which shares
// its inode with other paths than before. It compares, at each end, the
// partition of the candidates and of the names their records list into
// inodes; an end that is the live tree (no event after it) also counts
// the names it does not know by the link count. Between two ends in the
// past, a path that shared the inode at one end but was unlinked before
// any record named it is not seen.
//
// It sets parted[i] for a candidate whose bytes at b were never captured
// (its kind is then Modified) if a name that shares its inode at a is not
// a name of its inode at b: a rewind from a to b leaves the path's bytes
// but parts it from that name (planLinks), which the dry run must tell.
func (s *Store) linkChanges(a, b uint64, cands []string, before, after []resolved, kinds []ckpt.ChangeKind, parted []bool, live ckpt.Tree, last uint64) error {
	relevant, same := false, false
	for i := range cands {
		same = same || kinds[i] == "" || after[i].Lost
		for _, r := range []resolved{before[i], after[i]} {
			if r.State.Type.Linkable() && (r.Inode.Nlink > 1 || len(r.Links) > 0) {
				relevant = true
			}
		}
	}
	if !relevant || !same {
		return nil
	}
	paths := slices.Clone(cands)
	bef, aft := slices.Clone(before), slices.Clone(after)
	known := map[string]bool{}
	for _, p := range paths {
		known[p] = true
	}
	// The names the records list, and theirs in turn.
	for from := 0; from < len(paths); {
		var extra []string
		for i := from; i < len(paths); i++ {
			for _, r := range []resolved{bef[i], aft[i]} {
				for _, q := range r.Links {
					if !known[q] {
						known[q] = true
						extra = append(extra, q)
					}
				}
			}
		}
		from = len(paths)
		if len(extra) == 0 {
			break
		}
		rb, err := s.resolveMany(a, extra, live)
		if err != nil {
			return err
		}
		ra, err := s.resolveMany(b, extra, live)
		if err != nil {
			return err
		}
		paths = append(paths, extra...)
		bef, aft = append(bef, rb...), append(aft, ra...)
	}
	// The partition at each end of the paths that can be hard-linked and
	// have a known inode at both (ga, gb), how many paths have each
	// inode at each end (na, nb), and which (onA, by index).
	ga, gb := map[inoKey][]string{}, map[inoKey][]string{}
	na, nb := map[inoKey]int{}, map[inoKey]int{}
	onA := map[inoKey][]int{}
	for i, p := range paths {
		ka, oka := linkTag(bef[i])
		kb, okb := linkTag(aft[i])
		if oka {
			na[ka]++
			onA[ka] = append(onA[ka], i)
		}
		if okb {
			nb[kb]++
		}
		if oka && okb {
			ga[ka] = append(ga[ka], p)
			gb[kb] = append(gb[kb], p)
		}
	}
	for _, g := range []map[inoKey][]string{ga, gb} {
		for _, l := range g {
			sort.Strings(l)
		}
	}
	for i := range cands {
		ka, oka := linkTag(bef[i])
		kb, okb := linkTag(aft[i])
		if !oka || !okb {
			continue
		}
		if kinds[i] != "" {
			if aft[i].Lost {
				parted[i] = a == last && int(bef[i].Inode.Nlink) > na[ka] && ka != kb
				for _, j := range onA[ka] {
					kj, ok := linkTag(aft[j])
					parted[i] = parted[i] || j != i && (!ok || kj != kb)
				}
			}
			continue
		}
		switch {
		case !slices.Equal(ga[ka], gb[kb]):
			kinds[i] = ckpt.Relinked
		case a == last && int(bef[i].Inode.Nlink) > na[ka] && ka != kb,
			b == last && int(aft[i].Inode.Nlink) > nb[kb] && ka != kb:
			// The live inode has names no event since the other end
			// touched, which share it at both ends: it shares them at
			// the other end only if it is the same inode.
			kinds[i] = ckpt.Relinked
		}
	}
	return nil
}

// linkNode is one path the link pass of a rewind looks at.
type linkNode struct {
	path   string
	tgt    resolved   // its state at the target
	cur    ckpt.State // its state now
	curIno ckpt.Inode // its inode now
	// member: its target can be hard-linked and its inode is known.
	// act: a member the pass may change (under the prefixes, of its
	// target's type now). pin: a member whose inode now is its inode at
	// the target (untouched since), with its mode and owner then: the
	// pass keeps it on that inode. One whose mode or owner changed since
	// (a chmod records the path, but keeps its inode, so it still
	// resolves to it) is no pin: outside a restore it keeps them, and
	// linking the restored paths to it would give them its mode now.
	member, act, pin bool
	// lost: not a member, but a regular file whose bytes at the target
	// were never captured, with a known inode then, under the prefixes
	// and a regular file now: the pass never links it (that would give
	// it bytes it may never have had), but parts it, with the bytes it
	// has, from names that were not names of its inode then.
	lost bool
}

// Actions other than "make Path have State" (action.Op).
const (
	actSplit = "split" // give Path an inode of its own, with its bytes and State's mode and owner
	actLink  = "link"  // make Path a name of the inode at From
	actPatch = "patch" // make the file at Path the version Layers tell over its bytes (patchTo)
	actMove  = "move"  // rename the object at From, if it is still inode Expect, to Path (moveBack)
)

// planLinks computes the link pass of a rewind to right after event stop
// (restricted to prefixes; nil: the whole tree), run once the paths have
// their target bytes and modes: the actions that give the files under
// prefixes (all but directories) their target partition into inodes. See
// doc.go.
func (s *Store) planLinks(stop uint64, prefixes []string, live ckpt.Tree) ([]action, error) {
	whole := prefixes == nil
	if whole {
		prefixes = []string{""}
	}
	under := func(p string) bool {
		for _, pre := range prefixes {
			if _, ok := ckpt.Under(p, pre); ok {
				return true
			}
		}
		return false
	}
	cands, err := s.candidates(stop, prefixes, live)
	if err != nil {
		return nil, err
	}
	var nodes []*linkNode
	known := map[string]bool{}
	add := func(paths []string) error {
		var fresh []string
		for _, p := range paths {
			if !known[p] {
				known[p] = true
				fresh = append(fresh, p)
			}
		}
		for len(fresh) > 0 {
			rs, err := s.resolveMany(stop, fresh, live)
			if err != nil {
				return err
			}
			var more []string
			for i, p := range fresh {
				n := &linkNode{path: p, tgt: rs[i]}
				if n.cur, n.curIno, err = live.LstatInode(p); err != nil {
					return err
				}
				_, tagged := linkTag(n.tgt)
				n.member = tagged && !n.tgt.Lost
				asTarget := n.cur.Type == n.tgt.State.Type
				n.pin = n.member && asTarget && !n.tgt.FromLog && n.tgt.Live == p && n.curIno.Same(n.tgt.Inode) && sameMeta(n.cur, n.tgt.State)
				n.act = n.member && asTarget && under(p)
				n.lost = tagged && n.tgt.Lost && asTarget && under(p) && n.curIno.Known()
				nodes = append(nodes, n)
				for _, q := range n.tgt.Links {
					if !known[q] {
						known[q] = true
						more = append(more, q)
					}
				}
			}
			fresh = more
		}
		return nil
	}
	if err := add(cands); err != nil {
		return nil, err
	}
	shared := false
	for _, n := range nodes {
		if n.tgt.Inode.Nlink > 1 || len(n.tgt.Links) > 0 || (n.cur.Type.Linkable() && n.curIno.Nlink > 1) {
			shared = true
			break
		}
	}
	if !shared {
		return nil, nil // nothing shares an inode, then or now
	}
	looked := map[inoKey]bool{}
	for {
		actions, need := linkPlan(nodes, whole, looked)
		if len(need) == 0 {
			return actions, nil
		}
		for _, ino := range need {
			looked[keyOf(ino)] = true
			names, err := s.namesOf(live, ino, "", 0)
			if err != nil {
				return nil, err
			}
			if err := add(names); err != nil {
				return nil, err
			}
		}
	}
}

// linkPlan is the planning of planLinks on the paths found so far. It
// returns the inodes whose names it needs to know first (never one in
// looked), or the actions.
func linkPlan(nodes []*linkNode, whole bool, looked map[inoKey]bool) ([]action, []ckpt.Inode) {
	usable := func(n *linkNode) bool { return n.act || n.pin }
	groups := map[inoKey][]*linkNode{}  // by target inode
	holders := map[inoKey][]*linkNode{} // by inode now
	nlink := map[inoKey]uint32{}
	for _, n := range nodes {
		if usable(n) {
			k := keyOf(n.tgt.Inode)
			groups[k] = append(groups[k], n)
		}
		if n.cur.Type.Linkable() && n.curIno.Known() {
			k := keyOf(n.curIno)
			holders[k] = append(holders[k], n)
			nlink[k] = n.curIno.Nlink
		}
	}
	var need []ckpt.Inode
	wanted := func(ino ckpt.Inode) {
		if k := keyOf(ino); !looked[k] {
			looked[k] = true
			need = append(need, ino)
		}
	}
	// owner: which group may keep each inode now. Names the pass does not
	// know, on a whole-tree rewind, were untouched since the target (every
	// path an event since names is a candidate): they are names of that
	// inode then, so it stays with the group whose target it is. A path
	// that must stay where it is (pin) holds it for its group too; one the
	// pass cannot place (bytes never captured, no known inode, outside a
	// restore) keeps it from everyone else. Otherwise the group with the
	// most names on it keeps it.
	//
	// A path whose bytes then were never captured (lost), still on the
	// inode it had then, keeps it for the names of that inode then: the
	// others leave it. One on another inode leaves it itself (a split,
	// with its bytes now) if a name there was not a name of its inode
	// then.
	owner := map[inoKey]inoKey{}
	var splits, links []action
	for k, hs := range holders {
		unknown := int(nlink[k]) - len(hs)
		kept := false
		for _, h := range hs {
			if !h.lost {
				continue
			}
			g := keyOf(h.tgt.Inode)
			if g == k {
				kept = true
				continue
			}
			part := whole && unknown > 0 // untouched since: names of k then
			for _, o := range hs {
				if og, ok := linkTag(o.tgt); o != h && (!ok || og != g) {
					part = true
				}
			}
			if part || !whole && unknown > 0 {
				ino := h.curIno
				splits = append(splits, action{Op: actSplit, Path: h.path, State: h.cur, Expect: &ino})
			}
		}
		if kept {
			owner[k] = k
			continue
		}
		if _, ok := groups[k]; ok && !whole && unknown > 0 && !looked[k] {
			// A restore: a name it does not know may pin the inode
			// for the group whose target it is (a path untouched
			// since, which no record lists when the group's paths
			// resolve to live files at other names): the pass looks
			// them up first.
			wanted(hs[0].curIno)
			continue
		}
		pinned, strangers := whole && unknown > 0, !whole && unknown > 0
		for _, h := range hs {
			pinned = pinned || h.pin
			strangers = strangers || !usable(h)
		}
		if pinned {
			if _, ok := groups[k]; ok {
				owner[k] = k
			}
			continue
		}
		if strangers {
			continue
		}
		count := map[inoKey]int{}
		first := map[inoKey]string{}
		for _, h := range hs {
			g := keyOf(h.tgt.Inode)
			count[g]++
			if f, ok := first[g]; !ok || h.path < f {
				first[g] = h.path
			}
		}
		var best inoKey
		found := false
		for g, c := range count {
			if !found || c > count[best] || c == count[best] && (g == k && best != k || (g == k) == (best == k) && first[g] < first[best]) {
				best, found = g, true
			}
		}
		owner[k] = best
	}
	keys := make([]inoKey, 0, len(groups))
	for k, ms := range groups {
		sort.Slice(ms, func(i, j int) bool { return ms[i].path < ms[j].path })
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return groups[keys[i]][0].path < groups[keys[j]][0].path })
	sort.Slice(splits, func(i, j int) bool { return splits[i].Path < splits[j].Path })
	for _, k := range keys {
		ms := groups[k]
		// The group's home: an inode it owns, the one it must keep if
		// any, else the one with the most of its names.
		count := map[inoKey]int{}
		for _, m := range ms {
			c := keyOf(m.curIno)
			if o, ok := owner[c]; ok && o == k && m.cur.Type == m.tgt.State.Type {
				count[c]++
			}
		}
		if o, ok := owner[k]; ok && o == k && count[k] == 0 {
			// Kept for the group by names the pass does not know: it
			// needs one of them to link the others to.
			if !looked[k] {
				wanted(ms[0].tgt.Inode)
				continue
			}
		}
		for _, m := range ms {
			if m.tgt.FromLog && int(m.tgt.Inode.Nlink)-1 > len(m.tgt.Links) {
				// Its record did not list every name it had: the walk
				// finds those that still have that inode.
				wanted(m.tgt.Inode)
			}
		}
		// The home inode: the group's own inode if it still has it (it
		// must, when names the pass does not know keep it), else the
		// one with the most of its names; and a member on it, one that
		// must stay there if any.
		var hk inoKey
		if count[k] > 0 {
			hk = k
		} else {
			for _, m := range ms { // the first of the largest: ms is sorted
				if c := keyOf(m.curIno); count[c] > count[hk] {
					hk = c
				}
			}
		}
		var home *linkNode
		for _, m := range ms {
			if count[hk] > 0 && keyOf(m.curIno) == hk && m.cur.Type == m.tgt.State.Type && (home == nil || m.pin && !home.pin) {
				home = m
			}
		}
		var rest []*linkNode
		if home == nil {
			for _, m := range ms {
				if m.act {
					home = m
					ino := m.curIno
					splits = append(splits, action{Op: actSplit, Path: m.path, State: m.tgt.State, Expect: &ino})
					break
				}
			}
			if home == nil {
				continue
			}
			for _, m := range ms {
				if m != home {
					rest = append(rest, m)
				}
			}
		} else {
			for _, m := range ms {
				if keyOf(m.curIno) != hk || m.cur.Type != m.tgt.State.Type {
					rest = append(rest, m)
				}
			}
		}
		for _, m := range rest {
			if m.act {
				links = append(links, action{Op: actLink, Path: m.path, From: home.path})
			}
		}
	}
	if len(need) > 0 {
		return nil, need
	}
	return append(splits, links...), nil
}

// linkedPath is a path a restore gives a state that can be hard-linked,
// which shares its inode now: its other names, and those of them outside
// the restore.
type linkedPath struct{ names, outside []string }

// linkedOutside returns the paths a restore of prefixes gives a state that
// can be hard-linked (changes: its planned changes) that share their
// inode now with names outside prefixes. Only those names can lose the
// link: the restore leaves them as they are, names inside it get the
// target partition among themselves (planLinks).
func (s *Store) linkedOutside(changes []Change, prefixes []string, live ckpt.Tree) (map[string]linkedPath, error) {
	out := map[string]linkedPath{}
	for _, c := range SplitRenames(changes) {
		if !c.After.Type.Linkable() || !underAny(c.Path, prefixes) {
			continue
		}
		cur, ino, err := live.LstatInode(c.Path)
		if err != nil {
			return nil, err
		}
		if !cur.Type.Linkable() || ino.Nlink < 2 {
			continue
		}
		names, err := s.otherNames(live, c.Path, ino)
		if err != nil {
			return nil, err
		}
		l := linkedPath{names: names}
		for _, q := range names {
			if !underAny(q, prefixes) {
				l.outside = append(l.outside, q)
			}
		}
		if len(l.outside) > 0 {
			out[c.Path] = l
		}
	}
	return out, nil
}

// predictSplits says which links of linked (linkedOutside's answer) a
// restore to right after event stop will split, as its link pass
// decides: a path keeps its inode X only if X was its inode then too and
// some name of X is a pin (untouched since, with its mode and owner then:
// planLinks), which keeps X for the path's group; the names outside are
// otherwise strangers to the pass, and the path leaves X for an inode of
// its own or of the names restored with it.
func (s *Store) predictSplits(stop uint64, linked map[string]linkedPath, live ckpt.Tree) ([]LinkSplit, error) {
	var out []LinkSplit
	for _, p := range slices.Sorted(maps.Keys(linked)) {
		l := linked[p]
		all := append([]string{p}, l.names...)
		rs, err := s.resolveMany(stop, all, live)
		if err != nil {
			return nil, err
		}
		_, pino, err := live.LstatInode(p)
		if err != nil {
			return nil, err
		}
		tp, ok := linkTag(rs[0])
		stays := false
		for i, q := range all {
			cur, ino, err := live.LstatInode(q)
			if err != nil {
				return nil, err
			}
			r := rs[i]
			_, member := linkTag(r)
			if member && !r.FromLog && r.Live == q && cur.Type == r.State.Type && ino.Same(r.Inode) && sameMeta(cur, r.State) {
				stays = ok && tp == keyOf(pino)
				break
			}
		}
		if !stays {
			out = append(out, LinkSplit{Path: p, Names: l.outside})
		}
	}
	return out, nil
}

// foundSplits says which of linked (linkedOutside's answer before the
// restore) no longer share an inode with their path, now that it ran.
func foundSplits(linked map[string]linkedPath, live ckpt.Tree) ([]LinkSplit, error) {
	var out []LinkSplit
	for _, p := range slices.Sorted(maps.Keys(linked)) {
		pst, pino, err := live.LstatInode(p)
		if err != nil {
			return nil, err
		}
		var split []string
		for _, q := range linked[p].outside {
			qst, qino, err := live.LstatInode(q)
			if err != nil {
				return nil, err
			}
			if !pst.Type.Linkable() || !qst.Type.Linkable() || !pino.Same(qino) {
				split = append(split, q)
			}
		}
		if len(split) > 0 {
			out = append(out, LinkSplit{Path: p, Names: split})
		}
	}
	return out, nil
}

// underAny reports whether p is one of prefixes or lies below one.
func underAny(p string, prefixes []string) bool {
	for _, pre := range prefixes {
		if _, ok := ckpt.Under(p, pre); ok {
			return true
		}
	}
	return false
}
