package versionstore

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"ckptfs/internal/bytejson"
	"ckptfs/internal/ckpt"
)

// offline.go: changes made to the tree while no daemon watched it.
//
// At a clean unmount the daemon saves a manifest of the tree (SaveManifest):
// every path's State and Stamp, and how many events history held then. At
// the next mount, before the tree is served, RecordOffline walks the tree
// again and compares: every path that differs gets a record of its state
// in the manifest, all in one turn of kind offline ("changed while
// unmounted"), committed in one batch with the manifest's deletion (so a
// crash either records the turn and drops the manifest, or does neither).
// The comparison is at the level of stat: a regular file changed when its
// inode, size, mtime or ctime did (written: a write whose mtime was put
// back shows by its ctime, which no one can set; a ctime that a chmod, a
// chown or a link explains does not count), its mode or owner when those
// did. Its prior
// bytes were never seen, so its record is Lost: every command that would
// need them (cat, a diff's patch, a rewind across the turn) names the path
// instead of showing today's bytes as old ones. Everything else (added
// paths, directories, symlinks, nodes, modes) is recorded exactly. An
// object found under a new name only (the same inode, born at the same
// time, and, for a file, the same size and mtime: findRenames) is recorded
// as a rename, so that a rewind moves it back with its bytes; a new file
// given a deleted one's inode number is not.
//
// Events recorded after the manifest was saved (a change that reached the
// daemon after the unmount's walk, a rewind made with no daemon, a rewind
// finished by Recover) captured their paths' prior states themselves: the
// manifest's entries for the paths they name are taken from the tree
// before the comparison, so that they are not recorded twice, the second
// time wrongly. The commands run with no daemon (turnctl's offline
// commands) call RecordOffline too, keeping a manifest of the tree as
// they found it (keep).
//
// The manifest exists only between an unmount and the next mount: a daemon
// that was killed leaves none, and changes made before the next mount
// cannot be told (RecordOffline reports that).

// manifestInfo is the value under keyManifest.
type manifestInfo struct {
	Saved    time.Time `json:"saved"`
	Patterns []string  `json:"patterns,omitempty"` // the exclude patterns of the walk
	Events   uint64    `json:"events"`             // Store.Events() when it was saved
}

// manifestEntry is one path of the manifest.
type manifestEntry struct {
	State  ckpt.State `json:"s"`
	Stamp  ckpt.Stamp `json:"p"`
	Target []byte     `json:"t,omitempty"` // a symlink's target, as bytes
	// Nlink: the inode's link count then (0: not known), which tells a
	// ctime a link made or removed changed (written).
	Nlink uint32 `json:"n,omitempty"`
}

func walkKey(p string) []byte { return append([]byte{prefixWalk}, p...) }

func encodeEntry(st ckpt.State, sp ckpt.Stamp) []byte {
	e := manifestEntry{State: st, Stamp: sp, Nlink: sp.Nlink}
	if st.Target != "" {
		e.Target, e.State.Target = []byte(st.Target), ""
	}
	b, err := bytejson.Marshal(e)
	if err != nil {
		panic("versionstore: BUG: " + err.Error())
	}
	return b
}

func decodeEntry(v []byte) (manifestEntry, error) {
	var e manifestEntry
	if err := bytejson.Unmarshal(v, &e); err != nil {
		return e, fmt.Errorf("%w: manifest entry: %v", ErrCorrupt, err)
	}
	e.State.Target = string(e.Target)
	return e, nil
}

// SaveManifest records the tree as it is now, every path but those skip
// leaves out (patterns names them, for the next mount to know), replacing
// any earlier manifest, and seals the range-kept files (seal.go). Its cost
// grows with the size of the tree and of those files: the daemon calls it
// once, at unmount.
func (s *Store) SaveManifest(live ckpt.Tree, skip func(string, bool) bool, patterns []string) error {
	set, end, err := s.ranged()
	if err != nil {
		return err
	}
	// What the seals name must not go to a gc before they are committed.
	s.contentMu.RLock()
	defer s.contentMu.RUnlock()
	b := s.db.NewBatch()
	defer b.Close()
	if err := b.DeleteRange([]byte{prefixWalk}, upper(prefixWalk), nil); err != nil {
		return err
	}
	toSeal := map[string]treeEntry{}
	err = walkWithRoot(live, skip, func(p string, st ckpt.State, sp ckpt.Stamp) error {
		if set[p] {
			toSeal[p] = treeEntry{st, sp}
		}
		return b.Set(walkKey(p), encodeEntry(st, sp), nil)
	})
	if err != nil {
		return fmt.Errorf("versionstore: manifest: %w", err)
	}
	if err := s.saveSeals(b, live, set, end, toSeal); err != nil {
		return err
	}
	putJSON(b, keyManifest, manifestInfo{Saved: time.Now().UTC(), Patterns: patterns, Events: s.Events()})
	b.Delete(keyUnsaved, nil)
	if err := s.commit(b, pebble.Sync); err != nil {
		return err
	}
	return s.syncWAL()
}

// NoteUnsaved keeps why (one line) as the reason the daemon, ending
// cleanly, could not save the manifest (or close its open turn before
// it): the next mount, finding no manifest, can then tell the user what
// happened, rather than take it for a daemon killed or crashed
// (TakeUnsaved). A manifest saved since drops it.
func (s *Store) NoteUnsaved(why string) error {
	b := s.db.NewBatch()
	defer b.Close()
	b.Set(keyUnsaved, []byte(why), nil)
	if err := s.commit(b, pebble.Sync); err != nil {
		return err
	}
	return s.syncWAL()
}

// TakeUnsaved returns the reason NoteUnsaved kept ("" for none) and drops
// it, so that it is told once, and a later crash is not taken for it.
func (s *Store) TakeUnsaved() (string, error) {
	v, closer, err := s.db.Get(keyUnsaved)
	if err == pebble.ErrNotFound {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("versionstore: %w", err)
	}
	why := string(v)
	closer.Close()
	b := s.db.NewBatch()
	defer b.Close()
	b.Delete(keyUnsaved, nil)
	return why, s.commit(b, pebble.Sync)
}

// ManifestPatterns reports whether a manifest is saved, and the exclude
// patterns it was walked with.
func (s *Store) ManifestPatterns() ([]string, bool, error) {
	v, closer, err := s.db.Get(keyManifest)
	if err == pebble.ErrNotFound {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("versionstore: %w", err)
	}
	defer closer.Close()
	var info manifestInfo
	if err := bytejson.Unmarshal(v, &info); err != nil {
		return nil, false, fmt.Errorf("%w: manifest: %v", ErrCorrupt, err)
	}
	return info.Patterns, true, nil
}

// OfflineResult says what RecordOffline found.
type OfflineResult struct {
	Checked  bool      // a manifest was there to compare with
	Turn     ckpt.Turn // the offline turn (zero when nothing changed)
	Paths    int       // paths recorded
	Lost     int       // of them, regular files whose prior bytes are unknown
	Examined int       // paths of the tree walked
	Saved    string    // when the manifest was saved (RFC 3339), if Checked
}

// RecordOffline compares the tree with the manifest saved at the last
// clean unmount and records what changed since as one turn of kind
// offline. skip must leave out what the manifest's walk left out too (see
// ManifestPatterns). With keep, the tree as it is now becomes the manifest
// (a command run with no daemon: the next mount compares with that);
// without, the manifest is dropped in the same batch (a mount: while
// mounted, the daemon sees every change). seen, if not nil, is called for
// every path of the tree the walk finds (the daemon learns hard links).
// Without a manifest it reports Checked false and does nothing. Call it
// before the tree is served or read, after Recover.
func (s *Store) RecordOffline(live ckpt.Tree, skip func(string, bool) bool, seen func(string, ckpt.State, ckpt.Stamp), keep bool) (OfflineResult, error) {
	var res OfflineResult
	v, closer, err := s.db.Get(keyManifest)
	if err == pebble.ErrNotFound {
		return res, nil
	}
	if err != nil {
		return res, fmt.Errorf("versionstore: %w", err)
	}
	var info manifestInfo
	err = bytejson.Unmarshal(v, &info)
	closer.Close()
	if err != nil {
		return res, fmt.Errorf("%w: manifest: %v", ErrCorrupt, err)
	}
	res.Checked, res.Saved = true, info.Saved.Format(time.RFC3339)

	old := map[string]manifestEntry{}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixWalk}, UpperBound: upper(prefixWalk)})
	if err != nil {
		return res, fmt.Errorf("versionstore: %w", err)
	}
	for it.First(); it.Valid(); it.Next() {
		p := string(it.Key()[1:])
		e, err := decodeEntry(it.Value())
		if err != nil {
			it.Close()
			return res, err
		}
		old[p] = e
	}
	if err := it.Close(); err != nil {
		return res, fmt.Errorf("versionstore: %w", err)
	}
	cur := map[string]treeEntry{}
	err = walkWithRoot(live, skip, func(p string, st ckpt.State, sp ckpt.Stamp) error {
		cur[p] = treeEntry{st, sp}
		if seen != nil && p != "" {
			seen(p, st, sp)
		}
		return nil
	})
	if err != nil {
		return res, fmt.Errorf("versionstore: offline changes: %w", err)
	}
	res.Examined = len(cur)

	// Paths that events since the manifest name were captured by those
	// events: take them as they are now.
	recorded, err := s.pathsSince(info.Events)
	if err != nil {
		return res, err
	}
	for p := range old {
		if recorded.covers(p) {
			delete(old, p)
		}
	}
	for p, c := range cur {
		if recorded.covers(p) {
			old[p] = manifestEntry{State: c.st, Stamp: c.sp, Nlink: c.sp.Nlink}
		}
	}

	// The bytes of range-kept files the unmount sealed (seal.go).
	seals, err := s.seals()
	if err != nil {
		return res, err
	}
	// The tree's device: the manifest keeps inode numbers alone.
	_, rootIno, err := live.LstatInode("")
	if err != nil {
		return res, fmt.Errorf("versionstore: offline changes: %w", err)
	}
	dev := rootIno.Dev
	// Renames first: the paths whose objects only moved get a rename
	// record, and the comparison below then sees each under its new name.
	renames, old := findRenames(old, cur)
	// A seal goes with its file, as the manifest's entry does.
	seals = moveSeals(seals, renames)
	// The names of each inode at the unmount: the record of a path's
	// state then names its inode and those other names, as a capture
	// does (links.go), so that the turns' hard links are still told
	// where its bytes never were.
	inoNames := map[uint64][]string{}
	for p, e := range old {
		if e.State.Type.Linkable() && e.Stamp.Ino != 0 && !(skip != nil && skip(p, false)) {
			inoNames[e.Stamp.Ino] = append(inoNames[e.Stamp.Ino], p)
		}
	}
	// And now: an inode whose names differ from the manifest's had a link
	// made or removed, which changed its ctime (written).
	curNames := map[uint64][]string{}
	for p, c := range cur {
		if c.st.Type.Linkable() && c.sp.Ino != 0 {
			curNames[c.sp.Ino] = append(curNames[c.sp.Ino], p)
		}
	}
	relinked := func(ino uint64) bool {
		a, b := slices.Clone(inoNames[ino]), slices.Clone(curNames[ino])
		slices.Sort(a)
		slices.Sort(b)
		return !slices.Equal(a, b)
	}
	isWritten := func(c treeEntry, e manifestEntry) bool {
		return written(c, e, func() bool { return relinked(e.Stamp.Ino) }) || c.st.Size != e.State.Size
	}
	// unwritten: a name whose bytes are the manifest's still (not one an
	// event since recorded: its entry is the tree's now).
	unwritten := func(q string, ino uint64) bool {
		eq, ok1 := old[q]
		cq, ok2 := cur[q]
		return ok1 && ok2 && !recorded.covers(q) && eq.Stamp.Ino == ino && cq.st.Type == ckpt.Regular && !isWritten(cq, eq)
	}
	tag := func(r *record, e manifestEntry) *record {
		names := inoNames[e.Stamp.Ino]
		if !e.State.Type.Linkable() || len(names) == 0 {
			return r
		}
		r.Inode = &ckpt.Inode{Dev: dev, Ino: e.Stamp.Ino, Nlink: uint32(len(names))}
		for _, q := range names {
			if q != r.Path {
				r.Links = append(r.Links, q)
			}
		}
		sort.Strings(r.Links)
		return r
	}
	var recs []*record
	for p, e := range old {
		if skip != nil && skip(p, e.State.Type == ckpt.Dir) {
			continue
		}
		c, ok := cur[p]
		switch {
		case !ok, c.st.Type != e.State.Type,
			e.State.Type == ckpt.Regular && isWritten(c, e):
			r := tag(priorRecord(p, e.State), e)
			sealed(r, e.State, e.Stamp, seals)
			if r.Lost {
				if err := s.fromOtherName(r, e, unwritten, live); err != nil {
					return res, err
				}
			}
			recs = append(recs, r)
		case e.State.Type == ckpt.Regular && sameMeta(c.st, e.State):
			// unchanged
		case e.State.Type == ckpt.Regular:
			m := e.State
			m.Size = 0
			recs = append(recs, &record{Op: opMeta, Path: p, State: m})
		case c.st != e.State:
			recs = append(recs, tag(priorRecord(p, e.State), e))
		case e.State.Type != ckpt.Dir && c.sp.Ino != e.Stamp.Ino:
			// Another object in the same state (a link to another
			// symlink or node, say): the record names the inode the
			// path had, so that a rewind's link pass gives it that
			// inode's names again.
			recs = append(recs, tag(priorRecord(p, e.State), e))
		}
	}
	for p := range cur {
		if _, ok := old[p]; !ok {
			recs = append(recs, &record{Op: opPrior, Path: p, State: ckpt.State{}})
		}
	}
	// Parents before children, as a capture would have found them, after
	// the renames, which happened first (the others name the paths as
	// they are after them).
	sort.Slice(recs, func(i, j int) bool { return recs[i].Path < recs[j].Path })
	recs = append(renames, recs...)
	for _, r := range recs {
		if r.Lost {
			res.Lost++
		}
	}
	res.Paths = len(recs)
	if keep && len(recs) == 0 && info.Events == s.Events() {
		// Nothing to record, and the manifest still describes the tree.
		return res, nil
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return res, ErrClosed
	}
	b := s.db.NewBatch()
	defer b.Close()
	if err := b.DeleteRange([]byte{prefixWalk}, upper(prefixWalk), nil); err != nil {
		return res, err
	}
	var t *ckpt.Turn
	if len(recs) > 0 {
		if s.cur != nil {
			c := *s.cur // s.cur changes only once the batch is committed
			s.closeTurn(b, &c)
		}
		t = s.newTurn(b, ckpt.KindOffline, "changed while unmounted")
		for i, r := range recs {
			r.Seq, r.Turn = s.nextSeq+uint64(i), t.Num
			putEvent(b, r)
		}
		t.Open = false
		t.End = time.Now().UTC()
		t.LastSeq = s.nextSeq + uint64(len(recs)) - 1
		putJSON(b, turnKey(t.Num), t)
	}
	if keep {
		for p, c := range cur {
			b.Set(walkKey(p), encodeEntry(c.st, c.sp), nil)
		}
		putJSON(b, keyManifest, manifestInfo{Saved: time.Now().UTC(), Patterns: info.Patterns, Events: s.nextSeq + uint64(len(recs))})
		// A seal stays while the file is what it sealed, under the name
		// it has now.
		if err := b.DeleteRange([]byte{prefixSeal}, upper(prefixSeal), nil); err != nil {
			return res, err
		}
		for p, e := range seals {
			if c, ok := cur[p]; ok && c.st.Type == ckpt.Regular && c.st.Size == e.Size && c.sp.SameBytes(e.Stamp) {
				putJSON(b, sealKey(p), e)
			}
		}
	} else {
		if err := b.Delete(keyManifest, nil); err != nil {
			return res, err
		}
		if err := b.DeleteRange([]byte{prefixSeal}, upper(prefixSeal), nil); err != nil {
			return res, err
		}
	}
	if err := s.commit(b, pebble.Sync); err != nil {
		return res, err
	}
	if t != nil {
		s.nextSeq += uint64(len(recs))
		s.latest = t.Num
		s.cur = nil
		s.resetTouched()
		s.programs = map[string]bool{}
		res.Turn = *t
	}
	return res, s.syncWAL()
}

// written reports whether the regular file c, found at the path of the
// manifest's e, may have been written since: another inode or mtime, or
// another ctime that no change of its mode, owner, link count or names
// (relinked: a name of its inode made or removed) explains (a write
// whose mtime was put back). A chmod, a chown, a link made or removed
// change the ctime too: its bytes are then taken as the manifest
// saw them, and an edit whose mtime was put back in a file also so
// changed (or one of whose other names was renamed) goes unseen. So does
// one in a file whose mode denies its owner reading (0000, 0200): reading
// it, as turnctl run as that user does without a mount (show, cat, a
// rewind), gives the owner read permission for a moment
// (backing.ReopenRead), which moves its ctime, and that read is no write.
func written(c treeEntry, e manifestEntry, relinked func() bool) bool {
	if c.sp.Ino != e.Stamp.Ino || c.sp.Mtime != e.Stamp.Mtime {
		return true
	}
	if c.sp.SameBytes(e.Stamp) {
		return false
	}
	return sameMeta(c.st, e.State) && e.Nlink == c.sp.Nlink && e.State.Mode&0o400 != 0 && !relinked()
}

// readErrs reads r, keeping the first error other than io.EOF.
type readErrs struct {
	r   io.Reader
	err error
}

func (x *readErrs) Read(p []byte) (int, error) {
	n, err := x.r.Read(p)
	if err != nil && err != io.EOF && x.err == nil {
		x.err = err
	}
	return n, err
}

// fromOtherName gives r, the record of a regular file whose bytes at the
// manifest (e) are otherwise lost, the bytes of another name its inode
// had then and still has, unwritten since (unwritten): a name removed, or replaced
// by a new file (sed -i), while its inode lives on. The bytes are read
// now, from that name; a name that cannot be read leaves r lost.
func (s *Store) fromOtherName(r *record, e manifestEntry, unwritten func(q string, ino uint64) bool, live ckpt.Tree) error {
	if e.State.Type != ckpt.Regular || e.Stamp.Ino == 0 {
		return nil
	}
	for _, q := range r.Links {
		if !unwritten(q, e.Stamp.Ino) {
			continue
		}
		f, err := live.Open(q)
		if err != nil {
			continue // unreadable (another user's 0600 file): try another
		}
		rd := &readErrs{r: f}
		ref, err := s.putContent(rd, e.State.Size)
		f.Close()
		switch {
		case rd.err != nil:
			continue
		case err != nil:
			return err
		case ref.Size != e.State.Size:
			return nil // changed while read: lost after all
		}
		r.Lost, r.Content = false, ref
		return nil
	}
	return nil
}

// treeEntry is one path of the tree as a walk found it.
type treeEntry struct {
	st ckpt.State
	sp ckpt.Stamp
}

// findRenames finds the objects of the manifest (old) that are in the tree
// (cur) under another name only: the same inode, of the same type, at a
// path the manifest did not have, and, for a regular file, of the same
// size and mtime (its bytes are the ones the manifest saw, so a rewind
// gets them back exactly by renaming it back). A directory's rename
// carries what is below it. It returns the rename records in the order
// they can have happened (parents first, each naming its paths after the
// renames before it), and old with every path under the name it has
// after them. An inode seen under two names on either side (hard links)
// is not taken for a rename.
func findRenames(old map[string]manifestEntry, cur map[string]treeEntry) ([]*record, map[string]manifestEntry) {
	count := map[uint64]int{}
	for _, e := range old {
		if e.Stamp.Ino != 0 {
			count[e.Stamp.Ino]++
		}
	}
	byIno := map[uint64]string{}
	for q, c := range cur {
		if c.sp.Ino == 0 {
			continue
		}
		if _, dup := byIno[c.sp.Ino]; dup {
			count[c.sp.Ino] = 2
		}
		byIno[c.sp.Ino] = q
	}
	paths := make([]string, 0, len(old))
	for p := range old {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var recs []*record
	type move struct{ from, to string }
	var moves []move // accepted, in order
	now := func(p string) string {
		for _, m := range moves {
			if rest, ok := ckpt.Under(p, m.from); ok {
				p = join(m.to, rest)
			}
		}
		return p
	}
	taken := map[string]bool{}
	for _, p := range paths {
		e := old[p]
		at := now(p)
		if _, ok := cur[at]; ok || p == "" || e.Stamp.Ino == 0 || count[e.Stamp.Ino] != 1 {
			continue
		}
		q, ok := byIno[e.Stamp.Ino]
		if !ok || taken[q] {
			continue
		}
		if _, was := old[q]; was {
			continue
		}
		c := cur[q]
		// The same object (not a new inode given the number), with the
		// same bytes for all stat tells: a rename changes the ctime, so
		// only the mtime is compared, and an edit whose mtime was put
		// back in a file also renamed goes unseen.
		if c.st.Type != e.State.Type || !c.sp.SameObject(e.Stamp) || e.State.Type == ckpt.Regular && (c.st.Size != e.State.Size || c.sp.Mtime != e.Stamp.Mtime) {
			continue
		}
		if _, ok := ckpt.Under(q, at); ok {
			continue // into itself: not a rename
		}
		taken[q] = true
		recs = append(recs, &record{Op: opRename, Path: at, To: q})
		moves = append(moves, move{at, q})
	}
	if len(moves) == 0 {
		return nil, old
	}
	moved := make(map[string]manifestEntry, len(old))
	for p, e := range old {
		moved[now(p)] = e
	}
	// A rename changed the ctime of the object renamed (not of what a
	// directory holds): what its ctime says is lost with it.
	for _, m := range moves {
		e := moved[m.to]
		e.Stamp.Ctime = 0
		moved[m.to] = e
	}
	return recs, moved
}

// walkWithRoot is live.Walk of the whole tree that reports the project
// directory itself first, as "" (its mode and owner are versioned like any
// directory's).
func walkWithRoot(live ckpt.Tree, skip func(string, bool) bool, fn func(string, ckpt.State, ckpt.Stamp) error) error {
	st, err := live.Lstat("")
	if err != nil {
		return err
	}
	if err := fn("", st, ckpt.Stamp{}); err != nil {
		return err
	}
	return live.Walk("", skip, fn)
}

// recordedPaths are the paths events named, each with everything below it.
type recordedPaths map[string]bool

func (r recordedPaths) covers(p string) bool {
	for q := p; ; {
		if r[q] {
			return true
		}
		i := strings.LastIndexByte(q, '/')
		if i < 0 {
			return r[""]
		}
		q = q[:i]
	}
}

// pathsSince returns the paths the events from seq on name (both names of
// a rename).
func (s *Store) pathsSince(seq uint64) (recordedPaths, error) {
	out := recordedPaths{}
	s.mu.Lock()
	end := s.nextSeq
	s.mu.Unlock()
	if seq >= end {
		return out, nil
	}
	err := s.scanEvents(seq, end, func(r *record) (bool, error) {
		out[r.Path] = true
		if r.To != "" {
			out[r.To] = true
		}
		return true, nil
	})
	return out, err
}

// priorRecord is the record of a path's state at the unmount; a regular
// file's bytes are unknown.
func priorRecord(p string, st ckpt.State) *record {
	return &record{Op: opPrior, Path: p, State: st, Lost: st.Type == ckpt.Regular}
}

func sameMeta(a, b ckpt.State) bool { return a.Mode == b.Mode && a.UID == b.UID && a.GID == b.GID }
