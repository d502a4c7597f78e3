package versionstore

import (
	"fmt"
	"sort"

	"github.com/cockroachdb/pebble/v2"
	"golang.org/x/sys/unix"

	"ckptfs/internal/bytejson"
	"ckptfs/internal/ckpt"
)

// seal.go: the bytes of range-kept files, kept at an unmount.
//
// A file kept by range records (ranges.go) keeps its earlier versions as
// those ranges over its bytes now: the live file is every such version's
// base. A change made to it while unmounted, which no capture sees, would
// take that base away, and every earlier version with it. So at a clean
// unmount SaveManifest seals each file that range records were ever made
// of (at its name now): it keeps the file's bytes as they are (a clone
// where the attic clones, else chunks) under the seal key of its path,
// with the stamp of what it kept. The next mount's RecordOffline gives a
// file changed since the record it makes of its state at the unmount those
// bytes, where it would otherwise be Lost (never captured): its versions
// then rest on them. A seal follows its file through the renames
// RecordOffline finds (findRenames: a directory's carries the files below
// it). The seals go with the manifest (a mount drops both; an offline
// command, which keeps the manifest, keeps the seals of the files it finds
// unchanged, under their names now). Between an unmount and the next
// mount they are the only reference to their content: the gc's mark
// counts them, and the budget does not (usage.go: budgeted).
//
// Which paths: the ranged set, every path a range record was made of,
// followed through later renames to its name now (a path deleted since
// stays in it: sealing a new file there costs time, never history). It is
// kept under keyRanged with the seq up to which it has read the log, so
// that each unmount reads only the events since the last.

// sealEntry is the value under a seal key.
type sealEntry struct {
	Ref   *contentRef `json:"c"`
	Size  int64       `json:"n"`
	Stamp ckpt.Stamp  `json:"p"`
}

// rangedInfo is the value under keyRanged.
type rangedInfo struct {
	Seq   uint64   `json:"seq"` // the events below it are read
	Paths []string `json:"paths,omitempty"`
}

func sealKey(p string) []byte { return append([]byte{prefixSeal}, p...) }

// ranged returns the ranged set as of the log's end now, and that end.
func (s *Store) ranged() (map[string]bool, uint64, error) {
	var info rangedInfo
	v, closer, err := s.db.Get(keyRanged)
	switch {
	case err == nil:
		err = bytejson.Unmarshal(v, &info)
		closer.Close()
		if err != nil {
			return nil, 0, fmt.Errorf("%w: ranged paths: %v", ErrCorrupt, err)
		}
	case err != pebble.ErrNotFound:
		return nil, 0, pebbleErr(err)
	}
	set := make(map[string]bool, len(info.Paths))
	for _, p := range info.Paths {
		set[p] = true
	}
	s.mu.Lock()
	end := s.nextSeq
	s.mu.Unlock()
	err = s.scanNames(info.Seq, end, func(r *record) (bool, error) {
		switch r.Op {
		case opRange:
			set[r.Path] = true
		case opRename:
			moveRanged(set, r.Path, r.To)
		case opExchange:
			a, b := takeRanged(set, r.Path), takeRanged(set, r.To)
			putRanged(set, r.To, a)
			putRanged(set, r.Path, b)
		}
		return true, nil
	})
	return set, end, err
}

// moveRanged moves the members of set at or below from to the same place
// under to.
func moveRanged(set map[string]bool, from, to string) {
	putRanged(set, to, takeRanged(set, from))
}

// takeRanged removes and returns the members at or below p, relative to
// it ("" for p itself).
func takeRanged(set map[string]bool, p string) []string {
	var out []string
	for q := range set {
		if rest, ok := ckpt.Under(q, p); ok {
			out = append(out, rest)
			delete(set, q)
		}
	}
	return out
}

func putRanged(set map[string]bool, p string, rel []string) {
	for _, r := range rel {
		set[join(p, r)] = true
	}
}

// saveSeals seals, into b, the regular files among cur (the ranged set's
// paths as the manifest's walk found them), replacing the seals of an
// earlier unmount, and saves set as of end. The caller holds contentMu
// shared until b is committed (a gc must not take what the seals name
// before they are).
func (s *Store) saveSeals(b *pebble.Batch, live ckpt.Tree, set map[string]bool, end uint64, cur map[string]treeEntry) error {
	if err := b.DeleteRange([]byte{prefixSeal}, upper(prefixSeal), nil); err != nil {
		return err
	}
	paths := make([]string, 0, len(set))
	for p := range set {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		e, ok := cur[p]
		if !ok || e.st.Type != ckpt.Regular || e.st.Size == 0 {
			continue
		}
		ref, sp, err := s.sealFile(live, p, e)
		if err != nil || ref == nil {
			// No room, or changed since the walk: the file goes
			// unsealed (a change while unmounted then costs its
			// versions, as before seals), not the manifest.
			continue
		}
		putJSON(b, sealKey(p), sealEntry{Ref: ref, Size: e.st.Size, Stamp: sp})
	}
	putJSON(b, keyRanged, rangedInfo{Seq: end, Paths: paths})
	return nil
}

// sealFile keeps the bytes of the regular file p, which the walk found as
// e: by a clone where the attic clones, else into chunks. It returns nil
// if the file is no longer what the walk found.
func (s *Store) sealFile(live ckpt.Tree, p string, e treeEntry) (*contentRef, ckpt.Stamp, error) {
	f, err := live.Open(p)
	if err != nil {
		return nil, ckpt.Stamp{}, err
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return nil, ckpt.Stamp{}, err
	}
	sp := ckpt.Stamp{Ino: st.Ino, Mtime: st.Mtim.Nano(), Ctime: st.Ctim.Nano()}
	if !sp.SameBytes(e.sp) || st.Size != e.st.Size {
		return nil, sp, nil
	}
	if ref := s.cloneInto(f, e.st.Size); ref != nil {
		return ref, sp, nil
	}
	if err := s.checkSpace(e.st.Size); err != nil {
		return nil, sp, err
	}
	ref, err := s.putContent(f, e.st.Size)
	if err == nil && ref.Size != e.st.Size {
		return nil, sp, nil // it shrank while read
	}
	return ref, sp, err
}

// seals returns the seals saved at the last unmount, by path.
func (s *Store) seals() (map[string]sealEntry, error) {
	out := map[string]sealEntry{}
	err := s.eachSeal(func(p string, e sealEntry) { out[p] = e })
	return out, err
}

// eachSeal calls fn for every seal.
func (s *Store) eachSeal(fn func(p string, e sealEntry)) error {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixSeal}, UpperBound: upper(prefixSeal)})
	if err != nil {
		return pebbleErr(err)
	}
	for it.First(); it.Valid(); it.Next() {
		var e sealEntry
		if err := bytejson.Unmarshal(it.Value(), &e); err != nil || e.Ref == nil {
			it.Close()
			return fmt.Errorf("%w: seal of %q: %v", ErrCorrupt, it.Key()[1:], err)
		}
		fn(string(it.Key()[1:]), e)
	}
	if err := it.Close(); err != nil {
		return pebbleErr(err)
	}
	return nil
}

// sealed gives r, the record of p's state st at the unmount, the bytes
// the unmount sealed of it, if a seal of exactly that state is in seals.
func sealed(r *record, st ckpt.State, sp ckpt.Stamp, seals map[string]sealEntry) {
	e, ok := seals[r.Path]
	if !ok || !r.Lost || st.Type != ckpt.Regular || e.Size != st.Size || !e.Stamp.SameBytes(sp) {
		return
	}
	r.Lost, r.Content = false, e.Ref
}

// moveSeals returns seals with every path under the name the renames
// (findRenames': in order, each naming its paths after those before it)
// gave it.
func moveSeals(seals map[string]sealEntry, renames []*record) map[string]sealEntry {
	if len(renames) == 0 {
		return seals
	}
	out := make(map[string]sealEntry, len(seals))
	for p, e := range seals {
		for _, r := range renames {
			if rest, ok := ckpt.Under(p, r.Path); ok {
				p = join(r.To, rest)
				if rest == "" {
					e.Stamp.Ctime = 0 // the rename changed it (findRenames)
				}
			}
		}
		out[p] = e
	}
	return out
}
