package versionstore

import (
	"sort"

	"ckptfs/internal/ckpt"
)

// pairs.go: lists of changes path by path. Changes shows a path that
// disappeared while the path it was moved to appeared as one rename; these
// split such renames into their halves and join them again, so that two
// lists of the same per-path changes (a rewind's dry run and the rewind,
// a restore of some paths, a diff of some paths) read alike.

// SplitRenames returns cs with every rename as its two halves: a deletion
// of the path it left and an addition of the path it came to.
func SplitRenames(cs []Change) []Change {
	out := make([]Change, 0, len(cs))
	for _, c := range cs {
		if c.Kind != ckpt.Renamed {
			out = append(out, c)
			continue
		}
		out = append(out,
			Change{Path: c.From, Kind: ckpt.Deleted, Before: c.Before, before: c.before},
			Change{Path: c.Path, Kind: ckpt.Added, After: c.After, after: c.after})
	}
	sortChanges(out)
	return out
}

// PairLike returns cs (SplitRenames first) with the deletion and the
// addition joined into one rename wherever like holds that rename: two
// lists of the same per-path changes then read the same, whichever events
// made them (a rewind's plan, made from the history's renames, and what
// the rewind did, which may have copied instead).
func PairLike(cs, like []Change) []Change {
	cs = SplitRenames(cs)
	idx := map[string]int{}
	for i, c := range cs {
		idx[c.Path] = i
	}
	drop := map[int]bool{}
	for _, l := range like {
		if l.Kind != ckpt.Renamed {
			continue
		}
		i, oki := idx[l.From]
		j, okj := idx[l.Path]
		if !oki || !okj || drop[i] || drop[j] {
			continue
		}
		gone, came := cs[i], cs[j]
		if gone.Kind != ckpt.Deleted || came.Kind != ckpt.Added || gone.Before.Type != came.After.Type {
			continue
		}
		cs[j] = Change{Path: came.Path, From: gone.Path, Kind: ckpt.Renamed, Before: gone.Before, After: came.After, before: gone.before, after: came.after}
		drop[i] = true
	}
	out := cs[:0:0]
	for i, c := range cs {
		if !drop[i] {
			out = append(out, c)
		}
	}
	return out
}

// RestrictChanges keeps the changes of the paths at or below one of
// prefixes, path by path: a rename with one end outside them is the half
// inside (an addition or a deletion), as what a restore of those paths
// does and as a path-limited diff shows it.
func RestrictChanges(cs []Change, prefixes []string) []Change {
	var kept []Change
	for _, c := range SplitRenames(cs) {
		for _, p := range prefixes {
			if _, ok := ckpt.Under(c.Path, p); ok {
				kept = append(kept, c)
				break
			}
		}
	}
	return PairLike(kept, cs)
}

func sortChanges(cs []Change) {
	sort.Slice(cs, func(i, j int) bool { return cs[i].Path < cs[j].Path })
}
