package versionstore

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// storebytes.go: what StoreBytes counts of the files in the store's
// directory, the attic's without a stat of each file at each call.
//
// The attic holds a file per capture kept whole and a span file per turn
// or so: after a rm -rf of a node_modules, tens of thousands. StoreBytes
// runs at each status, each policy, and each look of the background gc
// (every 32 MiB kept), and stat'ing them all made each 0.4-0.5 s, the
// cost of history rather than of a change. An attic file is written once
// and never changes after (a span file only while it is in use, a copy
// while it is made): its size is kept by name, and a file is stat'ed
// again only while its last change is recent (atticSettle) or while it
// is the span file in use, so the cost of a call is the attic's directory
// listing and the files new since. The span file in use is never taken
// as settled, however old its mtime: a turn that pauses longer than
// atticSettle (an agent thinking) writes into it again, and a size kept
// from the pause would leave all it holds after uncounted until the
// daemon restarts, the policy's budget overrun by as much.

// atticSettle is how long after its last change an attic file's size is
// taken as final.
const atticSettle = 10 * time.Second

// atticSize is the counted size of an attic file, and whether it had
// settled when it was taken.
type atticSize struct {
	bytes   int64
	settled bool
}

// atticSizes holds the sizes of the attic's files between calls.
type atticSizes struct {
	mu    sync.Mutex
	sizes map[string]atticSize
}

// otherBytes is the bytes the files under root (the store's directory,
// with its trailing slash) take on disk, but the attic's (atticSizes), the
// ballast, and Pebble's tables, blob files and logs (counted by the
// caller from Pebble's metrics: the tables' live set, what the live logs
// hold).
func otherBytes(root string) int64 {
	attic := root + "attic"
	var total int64
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if p == attic && d != nil && d.IsDir() {
			return fs.SkipDir // below
		}
		if err != nil || !d.Type().IsRegular() || p == root+"ballast" {
			return nil
		}
		inDB := strings.HasPrefix(p, root+"db/")
		if inDB && (isPebbleData(p) || isWAL(p)) {
			return nil
		}
		if fi, err := d.Info(); err == nil {
			total += blocksOf(fi)
		}
		return nil
	})
	return total
}

// bytes is the bytes the attic's files names (in the directory attic,
// with its trailing slash) take on disk; a file inUse names (one that may
// still grow: the span file in use) is stat'ed at each call.
func (c *atticSizes) bytes(attic string, names []string, inUse func(name string) bool) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	seen := make(map[string]atticSize, len(names))
	now := time.Now()
	var total int64
	for _, name := range names {
		sz, ok := c.sizes[name]
		if !ok || !sz.settled {
			fi, err := os.Lstat(attic + name)
			if err != nil || !fi.Mode().IsRegular() {
				continue // gone meanwhile
			}
			sz = atticSize{bytes: heldBytes(fi), settled: now.Sub(fi.ModTime()) > atticSettle && !inUse(name)}
		}
		seen[name] = sz
		total += sz.bytes
	}
	c.sizes = seen
	return total
}

// heldBytes is the bytes attic file fi takes on disk for what it holds:
// its blocks, but none past its end. Blocks preallocated past the end
// (XFS's speculative preallocation of a file grown by appends, kept after
// its close when it was written by many opens, as a log file a project
// appends to and then deletes, linked into the attic; an fallocate with
// KEEP_SIZE) are given back later (XFS's background trim, within
// minutes) without a change of mtime: a size kept by name with them
// would count space the store no longer takes for as long as the file
// is kept, and the gc would forget history for it.
func heldBytes(fi fs.FileInfo) int64 {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fi.Size()
	}
	return held(st.Blocks, fi.Size(), int64(st.Blksize))
}

// held is heldBytes of a file of size bytes in blocks 512-byte blocks,
// blksize its block size: every count of an attic file's bytes (the
// budget, the gc's scan and sweep) is this one.
func held(blocks, size, blksize int64) int64 {
	bs := max(blksize, 512)
	return min(blocks*512, (size+bs-1)/bs*bs)
}

// blocksOf is the bytes file fi takes on disk.
func blocksOf(fi fs.FileInfo) int64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Blocks * 512
	}
	return fi.Size()
}
