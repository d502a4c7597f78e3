package versionstore

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"os"
	"slices"
	"sort"
	"sync"

	"github.com/cockroachdb/pebble/v2"
	"golang.org/x/sys/unix"

	"ckptfs/internal/backing"
	"ckptfs/internal/ckpt"
	"ckptfs/internal/crashpoint"
)

// ranges.go: range capture. The first write or truncate of a turn into a
// big regular file keeps the prior bytes of only the ranges it changes,
// so a 4 KiB write into a 1 GiB file costs about what 4 KiB costs.
//
// # Records
//
// A range record (op "w") holds a path's prior state (type, mode, owner
// and its size S0 at the start of the turn, or of the step), its inode,
// and the prior bytes of some spans of [0, S0): Spans lists them (offset,
// length pairs, ascending, aligned to rangeBlock and cut at S0), Content
// holds their bytes one after another, as chunks. The open turn remembers
// which blocks of each path it holds (spanSet): a later write records only
// the spans not held yet (often none), so the spans of one path's records
// in one turn do not overlap, save for two writers racing (see below).
// Every byte of [0, S0) that changes during the turn is in a span first:
// a write's range, a truncate's [new size, S0), a copy_file_range's
// destination, a punched or zeroed hole (the overlay passes each change's
// range: ckpt.Capture.Range). Bytes at S0 and after were not there at the
// turn's start. Every other change (fallocate modes that move bytes, an
// unlink or a rename over the path, whatever can replace the file) asks
// for a whole capture, which a range record does not satisfy (it sets
// touchRange, not touchFull): a full prior record of the path then
// follows in the turn. A first capture of the whole file (O_TRUNC) is a
// whole record, and a writer that comes back to a region has the rest of
// it captured with its next write (denseHeld).
//
// A file is range-captured when it is regular, of rangeMin bytes or
// more, has one name (a write through a hard link records every name of
// the inode, whole), is not offered to the attic by link, and the store
// would not clone it (a clone costs O(1) and lets its writes go through
// passthrough; a file whose btrfs no-copy-on-write flag is not the
// attic's cannot be cloned into it, so it is range-captured there too).
// Once a path has a range record in the open turn, its later captures of
// content stay ranges.
//
// # Resolution
//
// A range record does not tell the path's bytes by itself: they are the
// bytes the same file had later (its base) with the spans put back. The
// forward scan that meets the record goes on, following renames, to the
// next record of the path: a full prior record (later in the turn: the
// file unlinked or renamed over, kept in the attic; or in a later turn)
// is the base; another range record is one more layer; with no further
// record, the live file is the base. The bytes at the first record's
// turn start are the base's, cut or extended to each layer's size and
// with each layer's spans put back, from the newest layer to the oldest:
// where spans overlap, the oldest record's bytes are the file's. Why the
// base is the same file: the path cannot be replaced before a full
// record of it is taken (above), renames move the question with the file,
// and a byte outside every span did not change between the layer's turn
// start and its base. A path whose spans come to cover [0, S0) needs no
// base: the set counts as a whole capture (touchFull) from then on.
//
// Two writers of one file may both find a span missing and both record
// it; the second may read bytes the first one's write already changed.
// Its record comes later in the log, so the first's bytes win.
//
// A rewind's reverse pass undoes a range record in place (undoRange,
// patchTo): the spans are written back into the live file, and the bytes
// this changes are recorded first, as a range record of the rewind's own
// turn, so undoing a small write into a big file costs what the write
// did. The fix-up pass, restores and reverts do the same with every
// layer of a version whose base is the live file at its own path (an
// actPatch action, which carries the layers: the bytes outside them are
// the version's already, and are never written); a version over another
// path's bytes or over stored bytes is stored whole first, as bytes at
// another live path are (planRestore), so every action still carries
// its bytes. Cat, diff, export, revert's merges and views read through
// patchedReader, which flattens its layers into runs once; comparisons
// and log -S read two versions over one live file only where their own
// layers differ (differIn). GC (a journal's layers too), verify and du
// count a range record's chunks like any other record's.

// rangeMin is the smallest file whose content is captured by ranges.
// Below it a whole copy costs at most a few milliseconds (about 1 ms a
// MiB to read, hash and compress here), its chunks are shared with the
// file's other versions, and the rest of the turn's writes to it need no
// capture at all (later opens go through passthrough); a range record
// costs a synced commit per write to a part not held yet, and keeps the
// file's writes on the daemon for the rest of the turn. At 1 MiB the
// whole copy of the first write is still about a range record's cost;
// above, the copy grows with the file (doc/BENCH.md: big-file capture).
const rangeMin = 1 << 20

// rangeBlock is the granule of spans: a write's span is widened to whole
// blocks, so that the writes of a page-sized database or a block device
// image record each block once, however they are cut.
const rangeBlock = 4 << 10

// touchRange: the path has a range record in the open turn (its spans
// are in Store.spans); with touchMeta, its mode and owner are held.
const touchRange = 4

// spanSet is what the open turn holds of one range-captured path: which
// of its blocks (rangeBlock bytes from offset 0; the last one cut at the
// prior size) have their prior bytes recorded, as a sparse bitmap, so
// that looking up and adding a span costs the same with 10 spans as with
// 100,000.
type spanSet struct {
	prior ckpt.State  // the state its first range record holds (size S0)
	inode *ckpt.Inode // the inode that record names
	held  map[int64]*[spanWords]uint64
	n     int64 // blocks held
}

// spanWords is the words of one bitmap page: 64 × 64 blocks (16 MiB).
const spanWords = 64

const spanPageBlocks = spanWords * 64

func (ss *spanSet) has(b int64) bool {
	pg := ss.held[b/spanPageBlocks]
	i := b % spanPageBlocks
	return pg != nil && pg[i/64]&(1<<(i%64)) != 0
}

func (ss *spanSet) set(b int64) {
	if ss.held == nil {
		ss.held = map[int64]*[spanWords]uint64{}
	}
	pg := ss.held[b/spanPageBlocks]
	if pg == nil {
		pg = new([spanWords]uint64)
		ss.held[b/spanPageBlocks] = pg
	}
	i := b % spanPageBlocks
	if pg[i/64]&(1<<(i%64)) == 0 {
		pg[i/64] |= 1 << (i % 64)
		ss.n++
	}
}

// missing returns the parts of [off, end), widened to whole blocks and cut
// at the prior size, that the set does not hold: offset, length pairs.
func (ss *spanSet) missing(off, end int64) []int64 {
	lo, hi, ok := blockRange(off, end, ss.prior.Size)
	if !ok {
		return nil
	}
	var out []int64
	for b := lo / rangeBlock; b*rangeBlock < hi; b++ {
		if ss.has(b) {
			continue
		}
		start := b * rangeBlock
		stop := min(hi, start+rangeBlock)
		if n := len(out); n > 0 && out[n-2]+out[n-1] == start {
			out[n-1] += stop - start
		} else {
			out = append(out, start, stop-start)
		}
	}
	return out
}

// missingOf is missing for several ascending [off, end) pairs, with the
// blocks two of them share listed once.
func (ss *spanSet) missingOf(ranges []int64) []int64 {
	var out []int64
	for i := 0; i+1 < len(ranges); i += 2 {
		m := ss.missing(ranges[i], ranges[i+1])
		for j := 0; j+1 < len(m); j += 2 {
			start, stop := m[j], m[j]+m[j+1]
			n := len(out)
			if n > 0 {
				start = max(start, out[n-2]+out[n-1])
			}
			switch {
			case start >= stop:
			case n > 0 && out[n-2]+out[n-1] == start:
				out[n-1] += stop - start
			default:
				out = append(out, start, stop-start)
			}
		}
	}
	return out
}

// denseHeld is how many of a word's 64 blocks (256 KiB) the turn must hold
// already for a write into the word to capture all of it: a writer that
// comes back to a region (fio, a database's hot pages, an image being
// rewritten) then costs one record per 256 KiB rather than one per block.
// Sparse writers (a database's scattered pages) stay at single blocks.
const denseHeld = 16

// dense widens [off, end) to the 256 KiB words around its ends whose
// blocks the set holds at least denseHeld of.
func (ss *spanSet) dense(off, end int64) (int64, int64) {
	const word = 64 * rangeBlock
	if end > ss.prior.Size {
		end = ss.prior.Size
	}
	if off < 0 || off >= end {
		return off, end
	}
	if w := off &^ (word - 1); ss.count(w/rangeBlock) >= denseHeld {
		off = w
	}
	if w := (end - 1) &^ (word - 1); ss.count(w/rangeBlock) >= denseHeld {
		end = min(w+word, ss.prior.Size)
	}
	return off, end
}

// count is how many of the 64 blocks from b (a multiple of 64) are held.
func (ss *spanSet) count(b int64) int {
	pg := ss.held[b/spanPageBlocks]
	if pg == nil {
		return 0
	}
	return bits.OnesCount64(pg[(b%spanPageBlocks)/64])
}

// holds reports whether the set holds all of [off, end) (widened and cut
// as missing does), without allocating.
func (ss *spanSet) holds(off, end int64) bool {
	lo, hi, ok := blockRange(off, end, ss.prior.Size)
	if !ok {
		return true
	}
	for b := lo / rangeBlock; b*rangeBlock < hi; b++ {
		if !ss.has(b) {
			return false
		}
	}
	return true
}

// blockRange widens [off, end) to whole blocks and cuts it at size; ok is
// false when nothing is left.
func blockRange(off, end, size int64) (lo, hi int64, ok bool) {
	end = min(end, size)
	if off < 0 || off >= end {
		return 0, 0, false
	}
	lo = off &^ (rangeBlock - 1)
	hi = min(size, (end+rangeBlock-1)&^(rangeBlock-1))
	return lo, hi, true
}

// add marks the blocks of offset, length pairs (block-aligned, as
// missing returns them) held.
func (ss *spanSet) add(spans []int64) {
	for i := 0; i+1 < len(spans); i += 2 {
		for b := spans[i] / rangeBlock; b*rangeBlock < spans[i]+spans[i+1]; b++ {
			ss.set(b)
		}
	}
}

// complete reports whether the set holds every byte of [0, S0).
func (ss *spanSet) complete() bool {
	return ss.n*rangeBlock >= ss.prior.Size
}

// NeedsRange reports whether a change of the bytes [off, end) of path
// (end ckpt.ToTheEnd: a truncate to off) still needs a capture in the
// open turn. It is an in-memory check.
func (s *Store) NeedsRange(path string, off, end int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == nil {
		return true
	}
	if s.touched[path]&touchFull != 0 {
		return false
	}
	ss := s.spans[path]
	return ss == nil || !ss.holds(off, end)
}

// rangePlan is how a capture is kept as a range record: with the state
// and inode of the path's first range record in the open turn, the spans
// to record, and whether it is that first record (made even with no
// spans: it holds the size the turn started with).
type rangePlan struct {
	prior ckpt.State
	inode *ckpt.Inode
	spans []int64
	first bool
}

// planRange decides whether capture c of path p, before a change of the
// bytes ranges (ascending [off, end) pairs), is kept as a range record
// (ok), and how. For a path with range records in the open turn it always
// is.
func (s *Store) planRange(p string, c ckpt.Capture, ranges []int64) (plan rangePlan, ok bool) {
	if len(ranges) == 0 || c.MetaOnly || c.Prior.Type != ckpt.Regular {
		return plan, false
	}
	s.mu.Lock()
	if s.cur != nil {
		if ss := s.spans[p]; ss != nil && s.touched[p]&touchFull == 0 {
			if len(ranges) == 2 {
				lo, hi := ss.dense(ranges[0], ranges[1])
				ranges = []int64{lo, hi}
			}
			plan = rangePlan{prior: ss.prior, inode: ss.inode, spans: ss.missingOf(ranges)}
			s.mu.Unlock()
			return plan, true
		}
	}
	mayClone := s.mayClone(c.Inode.Dev)
	s.mu.Unlock()
	if c.Prior.Size < s.rangeFrom || c.Link != nil || len(c.Links) > 0 || c.Inode.Nlink > 1 {
		return plan, false
	}
	if mayClone && !s.refusesClones(c) {
		return plan, false
	}
	plan = rangePlan{prior: c.Prior, first: true}
	plan.spans = (&spanSet{prior: c.Prior}).missingOf(ranges)
	if len(plan.spans) == 2 && plan.spans[0] == 0 && plan.spans[1] == c.Prior.Size {
		return plan, false // all of it (O_TRUNC): a whole capture
	}
	if c.Inode.Known() {
		i := c.Inode
		plan.inode = &i
	}
	return plan, true
}

// refusesClones reports whether c's file cannot be cloned into the
// attic: its no-copy-on-write flag is not the attic's (btrfs refuses a
// clone between a file with it and one without). Its whole capture would
// be a copy, so it is range-captured even where the store clones.
func (s *Store) refusesClones(c ckpt.Capture) bool {
	if !s.perFileCOW || c.Open == nil {
		return false
	}
	f, err := c.Open()
	if err != nil {
		return false
	}
	defer f.Close()
	return s.refusesClonesFd(int(f.Fd()))
}

// refusesClonesFd is refusesClones for the file open at fd.
func (s *Store) refusesClonesFd(fd int) bool {
	return s.perFileCOW && backing.NoCopyOnWrite(fd) != s.atticNoCOW
}

// rangesOf is the byte range capture c is taken before the change of, as
// planRange takes it (nil: c is whole).
func rangesOf(c ckpt.Capture) []int64 {
	if c.Range == nil {
		return nil
	}
	return []int64{c.Range.Off, c.Range.End}
}

// mayClone reports whether the whole capture of a big file on device dev
// may be a clone (s.mu held): the attic is on that device, its filesystem
// is one that shares extents, and no clone has said otherwise.
func (s *Store) mayClone(dev uint64) bool {
	return s.attic != nil && s.atticClones && dev == s.atticDev && s.cloneState != cloneNo && !s.cloneXDev[dev]
}

// Filesystems that may share extents between files (FICLONE), by statfs
// magic: XFS, btrfs, bcachefs.
var cloningFS = map[int64]bool{xfsMagic: true, 0x9123683e: true, 0xca451a4e: true}

// learnAttic notes the attic's device, and whether its filesystem is of
// a kind that may clone: elsewhere big files are range-captured from the
// first capture on, without a clone attempt and its fall back to a copy.
func (s *Store) learnAttic() {
	if s.attic == nil {
		return
	}
	var st unix.Stat_t
	var fs unix.Statfs_t
	if unix.Fstat(int(s.attic.Fd()), &st) != nil || unix.Fstatfs(int(s.attic.Fd()), &fs) != nil {
		return
	}
	s.atticDev, s.atticClones = st.Dev, cloningFS[int64(fs.Type)]
	s.perFileCOW = s.atticClones && int64(fs.Type) != xfsMagic
	s.atticNoCOW = s.perFileCOW && backing.NoCopyOnWrite(int(s.attic.Fd()))
	if int64(fs.Type) == xfsMagic {
		s.probeClone()
	}
}

// xfsMagic is XFS's statfs magic. On XFS made with reflink=1 any regular
// file clones; btrfs and bcachefs have per-file no-copy-on-write flags,
// so that a probe between two new attic files says nothing of the tree's.
const xfsMagic = 0x58465342

// errRangeShort: the file ended before a span the range capture was to
// read; the capture is taken whole instead.
var errRangeShort = errors.New("versionstore: the file ended before a span")

// recordRange records the prior bytes of plan's spans of c's file as a
// range record of p. A later record with no spans to record (a racing
// writer took them) is not made.
func (s *Store) recordRange(p string, c ckpt.Capture, plan rangePlan, who ckpt.Program) error {
	spans := plan.spans
	if len(spans) == 0 && !plan.first {
		return nil
	}
	var total int64
	for i := 1; i < len(spans); i += 2 {
		total += spans[i]
	}
	if err := s.checkSpace(total); err != nil {
		return err
	}
	r := &record{Op: opRange, Path: p, State: plan.prior, Inode: plan.inode, Spans: spans}
	s.contentMu.RLock()
	defer s.contentMu.RUnlock()
	if total == 0 {
		return s.append(r, who, true)
	}
	var from io.ReaderAt
	switch {
	case c.ReadAt != nil:
		from = readerAtFunc(c.ReadAt)
	case c.Open != nil:
		f, err := c.Open()
		if err != nil {
			return fmt.Errorf("versionstore: read prior bytes of %q: %w", c.Path, err)
		}
		defer f.Close()
		from = f
	default:
		return fmt.Errorf("versionstore: capture of %q has no way to read its bytes", c.Path)
	}
	src := &spanReader{f: from, spans: spans}
	if total > rangeBatchMax {
		ref, err := s.putContent(src, total)
		if err != nil {
			return err
		}
		if ref.Size != total {
			return errRangeShort
		}
		r.Content = ref
		s.noteGrowth(ref.Size)
		return s.append(r, who, true)
	}
	// A few blocks (a write into a database is one of these): into the
	// span file in use where there is an attic, else their chunks into
	// the event's own batch, one synced commit for both.
	bp := bufPool.Get().(*[]byte) // rangeBatchMax <= its size
	defer bufPool.Put(bp)
	buf := (*bp)[:total]
	if _, err := io.ReadFull(src, buf); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			err = errRangeShort
		}
		return err
	}
	if s.attic != nil {
		ref, err := s.putSpans(buf)
		if err != nil {
			return err
		}
		crashpoint.Hit("record.spans")
		r.Content = ref
		s.noteGrowth(total)
		return s.append(r, who, true)
	}
	ref := &contentRef{Size: total}
	var puts [][2][]byte
	for rest := buf; len(rest) > 0; {
		l := cut(rest)
		sum := sha256.Sum256(rest[:l])
		ref.Chunks = append(ref.Chunks, sum[:]...)
		puts = append(puts, [2][]byte{chunkKey(sum), encodeChunk(rest[:l])})
		rest = rest[l:]
	}
	r.Content = ref
	s.noteGrowth(total)
	return s.appendWith(r, who, true, func(b *pebble.Batch, _ uint64) {
		for _, kv := range puts {
			b.Set(kv[0], kv[1], nil)
		}
	})
}

// rangeBatchMax is the most span bytes a range record commits in its
// event's batch; more go through putContent's own batches first.
const rangeBatchMax = 256 << 10

// readerAtFunc is a ReadAt function as an io.ReaderAt.
type readerAtFunc func(p []byte, off int64) (int, error)

func (f readerAtFunc) ReadAt(p []byte, off int64) (int, error) { return f(p, off) }

// spanReader reads the bytes of spans (offset, length pairs) of f one
// after another; a span f does not hold to its end is errRangeShort.
type spanReader struct {
	f     io.ReaderAt
	spans []int64
	done  int64 // of spans[0:2]
}

func (r *spanReader) Read(p []byte) (int, error) {
	for len(r.spans) > 0 && r.done == r.spans[1] {
		r.spans, r.done = r.spans[2:], 0
	}
	if len(r.spans) == 0 {
		return 0, io.EOF
	}
	n := int(min(int64(len(p)), r.spans[1]-r.done))
	m, err := r.f.ReadAt(p[:n], r.spans[0]+r.done)
	r.done += int64(m)
	if err == io.EOF {
		if m == n {
			return m, nil
		}
		return m, errRangeShort
	}
	return m, err
}

// touchSpans updates the open turn's span sets for event r (s.mu held),
// after touchSet marked it.
func (s *Store) touchSpans(r *record) {
	switch r.Op {
	case opRange:
		if s.touched[r.Path]&touchFull != 0 {
			return
		}
		ss := s.spans[r.Path]
		if ss == nil {
			ss = &spanSet{prior: r.State, inode: r.Inode}
			s.spans[r.Path] = ss
		}
		ss.add(r.Spans)
		if ss.complete() {
			s.touched[r.Path] |= touchFull
			delete(s.spans, r.Path)
		}
	case opPrior:
		delete(s.spans, r.Path)
	case opRename, opExchange:
		moveUnder(s.spans, r, nil)
	}
}

// resetTouched empties the open turn's touched set and span sets (s.mu
// held): a turn or step boundary.
func (s *Store) resetTouched() {
	s.touched = map[string]uint8{}
	s.spans = map[string]*spanSet{}
}

// layer is one range record in a resolution: the file's size before the
// record's turn (or step), and the spans it put back.
type layer struct {
	Size  int64
	Spans []int64     // offset, length pairs, ascending
	Bytes *contentRef // their bytes, one after another (nil: no spans)
}

func layerOf(r *record) layer {
	return layer{Size: r.State.Size, Spans: r.Spans, Bytes: r.Content}
}

// patched is a regular file's version told by range records: a base (a
// later version of the same file) with layers put back.
type patched struct {
	Layers []layer // oldest first
	// The base: bytes in the store, or the live file at Live, or none
	// (the layers cover every byte); BaseSize bytes (the stored ones, or
	// the live file's when resolved).
	Content  *contentRef
	Live     string
	BaseSize int64
	None     bool
}

// patchedReader reads a patched version at any offset.
type patchedReader struct {
	size     int64
	layers   []layer
	at       []io.ReaderAt // each layer's bytes
	cum      [][]int64     // each layer's spans' offsets in its bytes
	base     io.ReaderAt   // nil: none
	baseSize int64
	once     sync.Once
	runs     []run // where each byte comes from (flatten), made at the first locate
}

// run is a stretch of a patched version whose bytes come from one place,
// up to end (from the previous run's end): a layer's bytes (layer >= 0;
// the run's first byte at off in them), the base at the same offset
// (layerBase), or nowhere (layerNone: the version is corrupt there).
type run struct {
	end   int64
	layer int
	off   int64
}

const (
	layerBase = -1
	layerNone = -2
)

// newPatchedReader reads a version of size bytes: layers (oldest first)
// over base, which holds baseSize bytes.
func (s *Store) newPatchedReader(size int64, layers []layer, base io.ReaderAt, baseSize int64) *patchedReader {
	pr := &patchedReader{size: size, layers: layers, base: base, baseSize: baseSize}
	for _, l := range layers {
		var at io.ReaderAt
		switch {
		case l.Bytes != nil && l.Bytes.Part:
			at = &partAt{s: s, ref: l.Bytes}
		case l.Bytes != nil:
			at = &chunksAt{s: s, sums: l.Bytes.Chunks}
		}
		cum := make([]int64, 0, len(l.Spans)/2)
		var o int64
		for i := 1; i < len(l.Spans); i += 2 {
			cum = append(cum, o)
			o += l.Spans[i]
		}
		pr.at, pr.cum = append(pr.at, at), append(pr.cum, cum)
	}
	return pr
}

// flatten computes runs. A byte at pos is the oldest layer's that holds
// it in a span, if pos is below the size of every layer after the first
// up to that one (a layer's size is the file's at its record: a byte at
// or past it was not there then, so no older layer can take it from a
// newer one); a byte no layer holds is the base's, if pos is below every
// layer's size after the first and the base's (none without a base).
// Anything else is in no record. It costs O(n log n) in the spans of all
// layers, so that a version over 17,000 layers (a turn of random writes
// into one file) reads in time of its bytes, not of bytes times layers.
func (pr *patchedReader) flatten() {
	// lim[i]: the bound of the bytes layer i may give; lim[len] the
	// base's.
	lim := make([]int64, len(pr.layers)+1)
	bound := pr.size
	for i := range pr.layers {
		lim[i] = bound
		next := pr.baseSize
		if i+1 < len(pr.layers) {
			next = pr.layers[i+1].Size
		} else if pr.base == nil {
			next = 0
		}
		bound = min(bound, next)
	}
	lim[len(pr.layers)] = bound
	if pr.base == nil {
		lim[len(pr.layers)] = 0 // with no layers too: no byte is known
	}
	n := 0
	for _, l := range pr.layers {
		n += len(l.Spans) / 2
	}
	pieces := make([]spanPiece, 0, n)
	for i, l := range pr.layers {
		for k := 0; k+1 < len(l.Spans); k += 2 {
			if start, end := l.Spans[k], min(l.Spans[k]+l.Spans[k+1], pr.size); start < end {
				pieces = append(pieces, spanPiece{start, end, i, pr.cum[i][k/2]})
			}
		}
	}
	slices.SortFunc(pieces, func(a, b spanPiece) int { return cmp.Compare(a.start, b.start) })
	// A sweep over the boundaries with the pieces that cover the current
	// position in a heap, oldest layer first.
	var active pieceHeap
	emit := func(from, to int64, layer int, off int64) {
		if from >= to {
			return
		}
		if layer >= 0 && to > lim[layer] || layer == layerBase && to > lim[len(pr.layers)] {
			cut := lim[len(pr.layers)]
			if layer >= 0 {
				cut = lim[layer]
			}
			if from < cut {
				pr.addRun(cut, layer, off)
			}
			pr.addRun(to, layerNone, 0)
			return
		}
		pr.addRun(to, layer, off)
	}
	pos, next := int64(0), 0
	for pos < pr.size {
		for next < len(pieces) && pieces[next].start <= pos {
			active.push(pieces[next])
			next++
		}
		for len(active) > 0 && active[0].end <= pos {
			active.pop()
		}
		to := pr.size
		if next < len(pieces) {
			to = min(to, pieces[next].start)
		}
		if len(active) == 0 {
			emit(pos, to, layerBase, pos)
			pos = to
			continue
		}
		top := active[0]
		to = min(to, top.end)
		emit(pos, to, top.layer, top.off+pos-top.start)
		pos = to
	}
}

// dropChunks lets go of the bytes each layer's reader holds: a reader
// kept between reads (a view's) keeps only its runs.
func (pr *patchedReader) dropChunks() {
	for _, at := range pr.at {
		switch c := at.(type) {
		case *chunksAt:
			c.buf = nil
		case *partAt:
			c.buf = nil
		}
	}
}

// addRun appends a run, merging it into the last when it continues it.
func (pr *patchedReader) addRun(end int64, layer int, off int64) {
	if n := len(pr.runs); n > 0 {
		last := &pr.runs[n-1]
		start := int64(0)
		if n > 1 {
			start = pr.runs[n-2].end
		}
		if last.layer == layer && (layer == layerNone || last.off+last.end-start == off) {
			last.end = end
			return
		}
	}
	pr.runs = append(pr.runs, run{end, layer, off})
}

// spanPiece is one span of a layer: [start, end) of the version, whose
// first byte is at off in the layer's bytes.
type spanPiece struct {
	start, end int64
	layer      int
	off        int64
}

// pieceHeap orders the pieces covering a position by layer, then by end
// (a binary heap, typed: no allocation per piece).
type pieceHeap []spanPiece

func (h pieceHeap) less(a, b int) bool {
	return h[a].layer < h[b].layer || h[a].layer == h[b].layer && h[a].end < h[b].end
}

func (h *pieceHeap) push(x spanPiece) {
	*h = append(*h, x)
	for i := len(*h) - 1; i > 0; {
		p := (i - 1) / 2
		if !h.less(i, p) {
			break
		}
		(*h)[i], (*h)[p] = (*h)[p], (*h)[i]
		i = p
	}
}

func (h *pieceHeap) pop() {
	n := len(*h) - 1
	(*h)[0] = (*h)[n]
	*h = (*h)[:n]
	for i := 0; ; {
		c := 2*i + 1
		if c >= n {
			break
		}
		if c+1 < n && h.less(c+1, c) {
			c++
		}
		if !h.less(c, i) {
			break
		}
		(*h)[i], (*h)[c] = (*h)[c], (*h)[i]
		i = c
	}
}

// locate finds where the byte at pos (< size) comes from: a layer's
// bytes at off (layer >= 0) or the base at pos (layer -1), and for how
// many bytes from there on that stays so.
func (pr *patchedReader) locate(pos int64) (layer int, off, n int64, err error) {
	pr.once.Do(pr.flatten)
	k := sort.Search(len(pr.runs), func(k int) bool { return pr.runs[k].end > pos })
	if k == len(pr.runs) {
		return 0, 0, 0, fmt.Errorf("%w: byte %d of a range-captured version is past its end", ErrCorrupt, pos)
	}
	r := pr.runs[k]
	start := int64(0)
	if k > 0 {
		start = pr.runs[k-1].end
	}
	switch r.layer {
	case layerNone:
		return 0, 0, 0, fmt.Errorf("%w: byte %d of a range-captured version is in no record", ErrCorrupt, pos)
	case layerBase:
		return layerBase, pos, r.end - pos, nil
	}
	return r.layer, r.off + pos - start, r.end - pos, nil
}

func (pr *patchedReader) ReadAt(p []byte, off int64) (int, error) {
	if off >= pr.size {
		return 0, io.EOF
	}
	var eof error
	if rest := pr.size - off; int64(len(p)) > rest {
		p, eof = p[:rest], io.EOF
	}
	done := 0
	for done < len(p) {
		i, at, n, err := pr.locate(off + int64(done))
		if err != nil {
			return done, err
		}
		q := p[done : done+int(min(n, int64(len(p)-done)))]
		src := pr.base
		if i >= 0 {
			src = pr.at[i]
		}
		m, err := src.ReadAt(q, at)
		done += m
		if m < len(q) {
			if err == nil || err == io.EOF {
				err = fmt.Errorf("%w: a range-captured version's bytes end early", ErrCorrupt)
			}
			return done, err
		}
	}
	return done, eof
}

// openPatched opens the version r resolved to (r.Patch set) for reads in
// order or at any offset.
func (s *Store) openPatched(r resolved, live ckpt.Tree) (*patchedFile, error) {
	pt := r.Patch
	var base io.ReaderAt
	var closer io.Closer
	switch {
	case pt.None:
	case pt.Content != nil && pt.Content.Part:
		base = &partAt{s: s, ref: pt.Content}
	case pt.Content != nil && pt.Content.Attic != "":
		f, err := s.openAttic(pt.Content)
		if err != nil {
			return nil, err
		}
		base, closer = f, f
	case pt.Content != nil:
		base = &chunksAt{s: s, sums: pt.Content.Chunks}
	case pt.Live != "":
		if live == nil {
			return nil, fmt.Errorf("versionstore: the live tree is needed to read %q", pt.Live)
		}
		f, err := live.Open(pt.Live)
		if err != nil {
			return nil, err
		}
		base, closer = f, f
	default:
		return nil, fmt.Errorf("%w: no base for a range-captured version", ErrCorrupt)
	}
	pr := s.newPatchedReader(r.State.Size, pt.Layers, base, pt.BaseSize)
	return &patchedFile{SectionReader: io.NewSectionReader(pr, 0, r.State.Size), c: closer}, nil
}

// patchedFile reads a range-captured version in order (Read) or at any
// offset (ReadAt), and closes its base.
type patchedFile struct {
	*io.SectionReader
	c io.Closer
}

func (f *patchedFile) Close() error {
	if f.c == nil {
		return nil
	}
	return f.c.Close()
}

// overLive tells a regular file's resolution whose bytes rest on a live
// file: that file's path and size, and the layers put over it (none for
// the live file itself).
func overLive(r resolved) (path string, base int64, layers []layer, ok bool) {
	if r.Data != nil || r.Lost || r.livePath() == "" || r.Patch == nil && (r.FromLog || r.Content != nil) {
		return "", 0, nil, false
	}
	if r.Patch != nil {
		layers = r.Patch.Layers
	}
	return r.livePath(), r.liveSize(), layers, true
}

// patchesLive reports whether r, the version of regular file p, is told by
// range records over the live file at p as it is now (cur): patchTo can
// make it in place.
func patchesLive(r resolved, p string, cur ckpt.State) bool {
	path, base, layers, ok := overLive(r)
	return ok && len(layers) > 0 && path == p && base == cur.Size && r.State.Type == ckpt.Regular && cur.Type == ckpt.Regular
}

// differIn reports whether x and y, regular files, rest on the same
// live file, read at the same size, and if so the only ranges where their
// bytes may differ (ascending offset, length pairs, merged, up to the
// larger size): their own layers' spans, and what lies past the smallest
// size one of them cut the file to. The layers both end with (the records
// of a later turn, when x and y are a turn's two sides) tell one version
// both rest on, and drop out: each differs from it only where its own
// layers may. Everywhere else both have the same bytes.
func differIn(x, y resolved) ([]int64, bool) {
	if x.State.Type != ckpt.Regular || y.State.Type != ckpt.Regular {
		return nil, false
	}
	px, bx, lx, okx := overLive(x)
	py, by, ly, oky := overLive(y)
	if !okx || !oky || px != py || bx != by {
		return nil, false
	}
	for len(lx) > 0 && len(ly) > 0 && sameLayer(lx[len(lx)-1], ly[len(ly)-1]) {
		bx = lx[len(lx)-1].Size
		lx, ly = lx[:len(lx)-1], ly[:len(ly)-1]
	}
	lo, hi := min(x.State.Size, y.State.Size), max(x.State.Size, y.State.Size)
	layers := append(slices.Clone(lx), ly...)
	if lo < hi {
		layers = append(layers, layer{Size: lo}) // a cut: [lo, hi) differs
	}
	return changedBy(bx, hi, layers), true
}

// sameLayer reports whether a and b put back the same bytes.
func sameLayer(a, b layer) bool {
	if a.Size != b.Size || !slices.Equal(a.Spans, b.Spans) || (a.Bytes == nil) != (b.Bytes == nil) {
		return false
	}
	return a.Bytes == nil || sameRef(a.Bytes, b.Bytes)
}

// sameAt compares the bytes of x and y in ranges (offset, length pairs)
// only.
func (s *Store) sameAt(x, y resolved, ranges []int64, live ckpt.Tree) (bool, error) {
	if len(ranges) == 0 {
		return true, nil
	}
	open := func(r resolved) (io.ReaderAt, io.Closer, error) {
		rc, err := s.open(r, live)
		if err != nil {
			return nil, nil, err
		}
		ra, ok := rc.(io.ReaderAt)
		if !ok {
			rc.Close()
			return nil, nil, fmt.Errorf("versionstore: %q cannot be read at an offset", r.Live)
		}
		return ra, rc, nil
	}
	ra, ca, err := open(x)
	if err != nil {
		return false, err
	}
	defer ca.Close()
	rb, cb, err := open(y)
	if err != nil {
		return false, err
	}
	defer cb.Close()
	buf := cmpBufs.Get().(*[]byte)
	defer cmpBufs.Put(buf)
	ba, bb := (*buf)[:cmpBufSize], (*buf)[cmpBufSize:]
	for i := 0; i+1 < len(ranges); i += 2 {
		for off, end := ranges[i], ranges[i]+ranges[i+1]; off < end; {
			n := int(min(int64(cmpBufSize), end-off))
			na, ea := ra.ReadAt(ba[:n], off)
			nb, eb := rb.ReadAt(bb[:n], off)
			if na != nb || !bytes.Equal(ba[:na], bb[:nb]) {
				return false, nil
			}
			if na < n {
				if ea != nil && ea != io.EOF {
					return false, ea
				}
				if eb != nil && eb != io.EOF {
					return false, eb
				}
				return false, nil // shorter than its size says: not known the same
			}
			off += int64(n)
		}
	}
	return true, nil
}

// layersTell reports whether layers (oldest first) tell every byte of a
// version of size bytes by themselves: its base is never read, and may
// be one whose bytes were never seen (Lost).
func (s *Store) layersTell(layers []layer, size int64) bool {
	return s.newPatchedReader(size, layers, nil, 0).complete(false)
}

// complete reports whether every byte of the version is in a layer or,
// with base, in the base's bytes (without reading any).
func (pr *patchedReader) complete(base bool) bool {
	for pos := int64(0); pos < pr.size; {
		l, _, n, err := pr.locate(pos)
		if err != nil || l < 0 && !base || n <= 0 {
			return false
		}
		pos += n
	}
	return true
}

// undoRange undoes range record r on the live tree: the file at its path
// gets r's size, r's spans and r's mode and owner back (patchTo). A path
// that is no regular file now, or one too short to hold the bytes outside
// r's spans, is left to an older record or the fix-up pass (as undo is
// lenient). Done twice, it leaves the same bytes.
func (s *Store) undoRange(r *record, live ckpt.Tree, who ckpt.Program) error {
	_, err := s.patchTo(live, r.Path, r.State, []layer{layerOf(r)}, who)
	return err
}

// patchTo makes the regular file at path the version that layers (oldest
// first) tell over its current bytes, of st's size, mode and owner; done
// is false, and nothing changed, when the file cannot be that base (no
// regular file, or too short to hold the bytes outside the layers). A
// file with one name, that the daemon may write and that no process
// writes past it (FUSE passthrough: Tree.PatchFile refuses), is changed
// in place, its inode kept: only the bytes that change are recorded
// first, as a range record of the open turn when the file is big, so
// undoing a 4 KiB write into a 1 GiB file costs about 4 KiB. Any other
// file is replaced by a new inode, its current state recorded whole
// first. It writes only bytes the layers hold, so done twice (a redo
// after a crash part-way) it leaves the same bytes.
func (s *Store) patchTo(live ckpt.Tree, path string, st ckpt.State, layers []layer, who ckpt.Program) (done bool, err error) {
	cur, ino, err := live.LstatInode(path)
	if err != nil || cur.Type != ckpt.Regular {
		return false, err
	}
	f, err := live.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	pr := s.newPatchedReader(st.Size, layers, f, cur.Size)
	if !pr.complete(true) {
		// The file is too short to be the base (it changed while
		// unmounted, or an undo before was lenient).
		return false, nil
	}
	// replace writes a new inode instead: for a file with several names,
	// one the daemon may not write, or one a process writes past the
	// daemon (into the inode, whatever the rewind does).
	replace := func() (bool, error) {
		if err := s.captureIno(live, path, cur, ino, who); err != nil {
			return false, err
		}
		return true, live.WriteFile(path, st, io.NewSectionReader(pr, 0, st.Size))
	}
	if ino.Nlink > 1 || !writableBy(cur, os.Geteuid()) {
		return replace()
	}
	writes := changedBy(cur.Size, st.Size, layers)
	// The bytes that change: those writes that the file holds now, and
	// the bytes past the new size. A file that grows keeps no bytes past
	// its end, but the open turn must still hold the size it had (the
	// first range record does), even when no write starts before that
	// end (a cut at a block boundary undone).
	var ranges []int64
	for i := 0; i+1 < len(writes) && writes[i] < cur.Size; i += 2 {
		ranges = append(ranges, writes[i], min(writes[i]+writes[i+1], cur.Size))
	}
	if cur.Size != st.Size {
		ranges = append(ranges, min(cur.Size, st.Size), ckpt.ToTheEnd)
	}
	if len(ranges) > 0 {
		c := ckpt.Capture{Path: path, Prior: cur, Inode: ino, Open: func() (*os.File, error) { return live.Open(path) }}
		if err := s.recordRanges(c, ranges, who); err != nil {
			return false, err
		}
	}
	if len(writes) > 0 || cur.Size != st.Size {
		err := live.PatchFile(path, st.Size, writes, pr)
		if errors.Is(err, ckpt.ErrWrittenPast) {
			return replace() // after the range record: a whole one follows
		}
		if err != nil {
			return false, err
		}
		// A write by a daemon without CAP_FSETID clears a set-user-ID
		// or set-group-ID bit: the mode is read again.
		if now, err := live.Lstat(path); err == nil && now.Type == ckpt.Regular {
			cur.Mode = now.Mode
		}
	}
	return true, s.setFileMeta(live, path, cur, st, who)
}

// changedBy is where a version of size bytes that layers tell over a
// base of base bytes may differ from the base: the layers' spans, and
// what lies past the smallest size the base or a layer cut the file to
// (ascending offset, length pairs, merged, cut at size). Everywhere else
// the version has the base's bytes.
func changedBy(base, size int64, layers []layer) []int64 {
	cut := min(base, size)
	var spans [][2]int64
	for _, l := range layers {
		cut = min(cut, l.Size)
		for i := 0; i+1 < len(l.Spans); i += 2 {
			spans = append(spans, [2]int64{l.Spans[i], l.Spans[i] + l.Spans[i+1]})
		}
	}
	if cut < size {
		spans = append(spans, [2]int64{cut, size})
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i][0] < spans[j][0] })
	var out []int64
	for _, sp := range spans {
		lo, hi := sp[0], min(sp[1], size)
		if lo >= hi {
			continue
		}
		if n := len(out); n > 0 && lo <= out[n-2]+out[n-1] {
			out[n-1] = max(out[n-1], hi-out[n-2])
			continue
		}
		out = append(out, lo, hi-lo)
	}
	return out
}

// writableBy reports whether a process of effective user euid may open a
// file of state st for writing without changing its mode.
func writableBy(st ckpt.State, euid int) bool {
	return euid == 0 || int(st.UID) == euid && st.Mode&0o200 != 0
}
