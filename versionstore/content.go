package versionstore

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/cockroachdb/pebble/v2"
	"github.com/klauspost/compress/zstd"
	"golang.org/x/sys/unix"

	"ckptfs/internal/backing"
)

// Content chunking: content-defined (a gear rolling hash, as in FastCDC with
// normalised chunking), so an appended-to or slightly edited large file
// shares most chunks with its earlier version. Chunk sizes: at least
// minChunk, normally about avgChunk, at most maxChunk. A file smaller than
// minChunk is one chunk.
const (
	minChunk = 32 << 10
	avgChunk = 128 << 10
	maxChunk = 512 << 10
	maskS    = (1 << 19) - 1 // harder to cut before avgChunk
	maskL    = (1 << 15) - 1 // easier to cut after it

	codecRaw  = 0
	codecZstd = 1

	// batchBytes bounds how much chunk data one unsynced batch carries.
	batchBytes = 8 << 20
)

var gear = func() (g [256]uint64) {
	x := uint64(0x9E3779B97F4A7C15) // splitmix64, fixed seed: the table is part of the format
	for i := range g {
		x += 0x9E3779B97F4A7C15
		z := x
		z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
		z = (z ^ (z >> 27)) * 0x94D049BB133111EB
		g[i] = z ^ (z >> 31)
	}
	return
}()

// cut returns the length of the first chunk of b: the first cut point
// past minChunk, or min(len(b), maxChunk).
func cut(b []byte) int {
	n := len(b)
	if n <= minChunk {
		return n
	}
	if n > maxChunk {
		n = maxChunk
	}
	var h uint64
	i := minChunk
	for ; i < n && i < avgChunk; i++ {
		h = (h << 1) + gear[b[i]]
		if h&maskS == 0 {
			return i + 1
		}
	}
	for ; i < n; i++ {
		h = (h << 1) + gear[b[i]]
		if h&maskL == 0 {
			return i + 1
		}
	}
	return n
}

var (
	encoder, _ = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1))
	decoder, _ = zstd.NewReader(nil, zstd.WithDecoderConcurrency(0))
	bufPool    = sync.Pool{New: func() any { b := make([]byte, 2*maxChunk); return &b }}
)

// contentRef says where the bytes of one stored file version are: a list
// of chunks, or a file in the attic (kept by hard link, not copied), or
// (Part) a part of a span file in the attic (spans.go).
type contentRef struct {
	Size   int64  `json:"n"`
	Chunks []byte `json:"h,omitempty"` // concatenated SHA-256 sums
	Attic  string `json:"a,omitempty"` // name in the attic directory
	// An attic file's inode number and mtime (ns) when it was linked: a
	// write to it or a replacement changes them. Attic bytes are not
	// checksummed (that would mean reading the file at the moment it is
	// deleted, which the attic exists to avoid). Zero: not recorded.
	Ino   uint64 `json:"i,omitempty"`
	MTime int64  `json:"t,omitempty"`
	// Part: the bytes are Size bytes at Off in the span file Attic,
	// whose CRC-32C is Sum (only a range record's bytes are kept so).
	Part bool   `json:"p,omitempty"`
	Off  int64  `json:"o,omitempty"`
	Sum  uint32 `json:"c,omitempty"`
}

// putContent reads r to the end and stores it as chunks, committing chunk
// batches without sync (the caller's event commit, synced, comes after them
// in the same WAL and so makes them durable too), or, for content of about
// ingestMin bytes and more (sizeHint, or what it turns out to be), as
// ingested tables (ingest.go).
func (s *Store) putContent(r io.Reader, sizeHint int64) (*contentRef, error) {
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	buf := *bp
	ref := &contentRef{}
	sink := s.newChunkSink(sizeHint)
	defer sink.close()
	n := 0 // bytes in buf
	eof := false
	for {
		for !eof && n < len(buf) {
			m, err := r.Read(buf[n:])
			n += m
			if err == io.EOF {
				eof = true
			} else if err != nil {
				return nil, err
			}
		}
		if n == 0 {
			break
		}
		// Not at EOF, buf is full (2*maxChunk) and cut stops at maxChunk.
		l := cut(buf[:n])
		chunk := buf[:l]
		sum := sha256.Sum256(chunk)
		ref.Chunks = append(ref.Chunks, sum[:]...)
		ref.Size += int64(l)
		key := chunkKey(sum)
		stored := false
		if s.checkReused.Load() {
			stored = s.soundChunk(sum[:]) // a damaged one is stored again
		} else {
			stored = s.hasChunk(key)
		}
		if !stored {
			if err := sink.add(key, encodeChunk(chunk)); err != nil {
				return nil, err
			}
		} else if testHookChunkFound != nil {
			testHookChunkFound(s)
		}
		copy(buf, buf[l:n])
		n -= l
	}
	if err := sink.finish(); err != nil {
		return nil, err
	}
	return ref, nil
}

// testHookChunkFound runs when putContent finds a chunk stored already
// (tests: the chunk must stay until the event naming it is committed).
var testHookChunkFound func(*Store)

func encodeChunk(chunk []byte) []byte {
	out := make([]byte, 1, len(chunk)/2+16)
	out[0] = codecZstd
	out = encoder.EncodeAll(chunk, out)
	if len(out) >= len(chunk)+1 {
		out = append(out[:0], codecRaw)
		out = append(out, chunk...)
	}
	return out
}

func (s *Store) hasChunk(key []byte) bool {
	_, closer, err := s.db.Get(key)
	if err != nil {
		return false
	}
	closer.Close()
	return true
}

// soundChunk reports whether the chunk of sum is stored and holds its
// bytes.
func (s *Store) soundChunk(sum []byte) bool {
	_, err := s.getChunk(sum)
	return err == nil
}

// getChunk returns the plain bytes of a chunk, checking its sum.
func (s *Store) getChunk(sum []byte) ([]byte, error) {
	var k [32]byte
	copy(k[:], sum)
	val, closer, err := s.db.Get(chunkKey(k))
	if err == pebble.ErrNotFound {
		return nil, fmt.Errorf("%w: chunk %x missing", ErrCorrupt, sum[:8])
	}
	if err != nil {
		return nil, pebbleErr(err)
	}
	defer closer.Close()
	plain, err := decodeChunk(val)
	if err != nil {
		return nil, fmt.Errorf("%w: chunk %x: %v", ErrCorrupt, sum[:8], err)
	}
	if got := sha256.Sum256(plain); !bytes.Equal(got[:], sum) {
		return nil, fmt.Errorf("%w: chunk %x: checksum mismatch", ErrCorrupt, sum[:8])
	}
	return plain, nil
}

func decodeChunk(val []byte) ([]byte, error) {
	if len(val) == 0 {
		return nil, fmt.Errorf("empty chunk")
	}
	switch val[0] {
	case codecRaw:
		return append([]byte(nil), val[1:]...), nil
	case codecZstd:
		return decoder.DecodeAll(val[1:], nil)
	}
	return nil, fmt.Errorf("unknown codec %d", val[0])
}

// openContent streams a stored version.
func (s *Store) openContent(ref *contentRef) (io.ReadCloser, error) {
	if ref.Part {
		b, err := s.readPart(ref)
		if err != nil {
			return nil, err
		}
		return io.NopCloser(bytes.NewReader(b)), nil
	}
	if ref.Attic != "" {
		f, err := s.openAttic(ref)
		if err != nil {
			return nil, err
		}
		return &sizedReader{f: f, left: ref.Size, name: ref.Attic}, nil
	}
	return &chunkReader{s: s, chunks: ref.Chunks}, nil
}

// openAttic opens a version kept as an attic file, checking that it is
// the file recorded (size, inode, mtime; of a span file, that it holds
// the part). Only readPart reads a part, at its offset.
func (s *Store) openAttic(ref *contentRef) (*os.File, error) {
	if s.attic == nil {
		return nil, fmt.Errorf("%w: attic file %s but no attic", ErrCorrupt, ref.Attic)
	}
	f, err := openAt(s.attic, ref.Attic)
	if err != nil {
		return nil, fmt.Errorf("%w: attic file %s: %v", ErrCorrupt, ref.Attic, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		f.Close()
		return nil, fmt.Errorf("%w: attic file %s: %v", ErrCorrupt, ref.Attic, err)
	}
	switch {
	case ref.Part && st.Size < ref.Off+ref.Size:
		f.Close()
		return nil, fmt.Errorf("%w: span file %s ends at %d, before the bytes recorded at %d", ErrCorrupt, ref.Attic, st.Size, ref.Off+ref.Size)
	case !ref.Part && st.Size != ref.Size:
		f.Close()
		return nil, fmt.Errorf("%w: attic file %s changed size (%d, recorded %d)", ErrCorrupt, ref.Attic, st.Size, ref.Size)
	case ref.Ino != 0 && st.Ino != ref.Ino:
		f.Close()
		return nil, fmt.Errorf("%w: attic file %s was replaced", ErrCorrupt, ref.Attic)
	case ref.MTime != 0 && st.Mtim.Nano() != ref.MTime:
		f.Close()
		return nil, fmt.Errorf("%w: attic file %s was modified", ErrCorrupt, ref.Attic)
	}
	return f, nil
}

type chunkReader struct {
	s      *Store
	chunks []byte
	cur    []byte
}

func (r *chunkReader) Read(p []byte) (int, error) {
	for len(r.cur) == 0 {
		if len(r.chunks) == 0 {
			return 0, io.EOF
		}
		b, err := r.s.getChunk(r.chunks[:32])
		if err != nil {
			return 0, err
		}
		r.cur, r.chunks = b, r.chunks[32:]
	}
	n := copy(p, r.cur)
	r.cur = r.cur[n:]
	return n, nil
}

func (r *chunkReader) Close() error { return nil }

// openAt opens name inside dir by fd: the attic may sit inside the mounted
// tree, where a path would lead into the mount.
func openAt(dir *os.File, name string) (*os.File, error) {
	fd, err := unix.Openat(int(dir.Fd()), name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err == unix.EACCES {
		// An attic file keeps the mode of the file it was (0000, say),
		// which an ordinary user's daemon may not read as root would.
		var pfd int
		if pfd, err = backing.OpenPath(int(dir.Fd()), name); err == nil {
			fd, err = backing.ReopenRead(pfd)
			unix.Close(pfd)
		}
	}
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), name), nil
}

// sizedReader reads an attic file and fails with ErrCorrupt if it does not
// hold exactly the recorded number of bytes (it shrank while being read).
type sizedReader struct {
	f    *os.File
	left int64
	name string
}

func (r *sizedReader) Read(p []byte) (int, error) {
	n, err := r.f.Read(p)
	r.left -= int64(n)
	if r.left < 0 || (err == io.EOF && r.left != 0) {
		return n, fmt.Errorf("%w: attic file %s changed size while read", ErrCorrupt, r.name)
	}
	return n, err
}

func (r *sizedReader) Close() error { return r.f.Close() }

// WriteSparse copies the attic file into dst by its data extents, leaving
// its holes (backing.SparseWriter), and fails with ErrCorrupt if it holds
// fewer bytes than recorded.
func (r *sizedReader) WriteSparse(dst *os.File) error {
	err := backing.CopyExtents(dst, r.f, r.left)
	if errors.Is(err, backing.ErrShortSource) {
		return fmt.Errorf("%w: attic file %s changed size while read", ErrCorrupt, r.name)
	}
	return err
}

// WriteTo lets io.Copy into an *os.File keep its in-kernel copy
// (copy_file_range, through *io.LimitedReader) while checking the size.
func (r *sizedReader) WriteTo(w io.Writer) (int64, error) {
	want := r.left
	n, err := io.Copy(w, &io.LimitedReader{R: r.f, N: want + 1})
	r.left -= n
	if err == nil && r.left != 0 {
		err = fmt.Errorf("%w: attic file %s changed size while read", ErrCorrupt, r.name)
	}
	return n, err
}
