package versionstore

import (
	"cmp"
	"os"
	"slices"
	"syscall"

	"ckptfs/internal/backing"
)

// attic_space.go: what the attic takes of the disk where it clones.
//
// A clone shares its blocks with the file it was cloned from, and a later
// clone of the same file with it: counted by its blocks, as a copy, a 5
// GiB image captured in two turns would count 10 GiB against the budget
// while taking next to nothing, and the gc would forget history for it.
// On a filesystem that clones, the attic's regular files are counted by
// their physical extents instead (FIEMAP): an extent no other file shares
// counts, and a shared one counts once if two attic files or more hold it
// (the attic alone may be keeping it), not at all if only one does (the
// other holder is the live file it was cloned from, which keeps it
// anyway). An extent of one attic file shared with the live file and with
// a file outside both is not counted: the only way to miss space the
// store holds, and it takes a clone made outside ckptfs.

// extentOf is a physical extent of a file, and whether FIEMAP says it is
// shared with another file.
type extentOf struct {
	start, end uint64
	shared     bool
}

// atticBytes sums what the attic files at paths (stats their stats)
// take on the disk, as above. Whether an extent is shared changes as the
// live file it was cloned from is written: FIEMAP is asked every time.
func atticBytes(paths []string, stats []*syscall.Stat_t) int64 {
	var shared []extentOf
	var total int64
	for i, p := range paths {
		var own []extentOf
		var other int64
		f, err := os.Open(p)
		if err == nil {
			err = backing.Extents(int(f.Fd()), false, func(e backing.Extent) {
				if e.Flags&(backing.ExtentUnknown|backing.ExtentDelay) != 0 || e.Physical == 0 {
					other += int64(e.Length) // no place yet: its own
				} else {
					own = append(own, extentOf{e.Physical, e.Physical + e.Length, e.Flags&backing.ExtentShared != 0})
				}
			})
			f.Close()
		}
		if err != nil {
			total += stats[i].Blocks * 512 // counted as a copy
			continue
		}
		for _, e := range own {
			if e.shared {
				shared = append(shared, e)
			} else {
				total += int64(e.end - e.start)
			}
		}
		total += other
	}
	return total + coveredTwice(shared)
}

// coveredTwice is the length of what two or more of the extents cover.
func coveredTwice(ext []extentOf) int64 {
	type edge struct {
		at    uint64
		delta int
	}
	edges := make([]edge, 0, 2*len(ext))
	for _, e := range ext {
		edges = append(edges, edge{e.start, 1}, edge{e.end, -1})
	}
	slices.SortFunc(edges, func(a, b edge) int {
		if c := cmp.Compare(a.at, b.at); c != 0 {
			return c
		}
		return cmp.Compare(a.delta, b.delta) // ends before starts at one place
	})
	var total int64
	depth, from := 0, uint64(0)
	for _, e := range edges {
		if depth >= 2 {
			total += int64(e.at - from)
		}
		depth += e.delta
		from = e.at
	}
	return total
}
