package backing

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// sparseBlock is the unit copySparse leaves a hole for: a block of it all
// zeros is not written.
const sparseBlock = 4096

var zeroBlock [sparseBlock]byte

// SparseWriter is a reader of a whole file (the store's attic's) that
// writes itself into an empty file with its holes (by CopyExtents):
// WriteFile has it do so.
type SparseWriter interface {
	io.Reader
	WriteSparse(dst *os.File) error
}

// ErrShortSource is CopyExtents' error for a source that ended before the
// size it was given.
var ErrShortSource = errors.New("the file ended before its recorded size")

// copySparse copies r into the empty file f, leaving holes, so that a
// sparse file written back from the store takes the space it took before,
// not its full size: a SparseWriter's own holes; else (but for a reader
// that writes itself out: bytes held in memory) a hole where a whole
// aligned block of sparseBlock bytes is zero. f's size is then what it
// copied. size, the size expected, only sizes the buffer.
func copySparse(f *os.File, r io.Reader, size int64) error {
	if sw, ok := r.(SparseWriter); ok {
		return sw.WriteSparse(f)
	}
	if wt, ok := r.(io.WriterTo); ok {
		_, err := wt.WriteTo(f)
		return err
	}
	buf := make([]byte, min((max(size, 1)+sparseBlock-1)/sparseBlock*sparseBlock, 1<<20))
	var off int64
	for {
		n, err := io.ReadFull(r, buf)
		if werr := writeAtSparse(f, buf[:n], off, 0); werr != nil {
			return werr
		}
		off += int64(n)
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			return err
		}
	}
	return f.Truncate(off) // a hole at the end has no write to reach it
}

// writeAtSparse writes b at off in f, but for the aligned blocks of zeros
// at or past eof (the file's size before; 0 for a new file), which it
// leaves to be holes.
func writeAtSparse(f *os.File, b []byte, off, eof int64) error {
	if off < eof {
		n := int(min(int64(len(b)), eof-off))
		if _, err := f.WriteAt(b[:n], off); err != nil {
			return err
		}
		b, off = b[n:], off+int64(n)
	}
	// Runs of blocks that are not all zeros, each written at once.
	start := 0
	for i := 0; i < len(b); {
		j := min(len(b), i+int(sparseBlock-(off+int64(i))%sparseBlock))
		if j-i == sparseBlock && bytes.Equal(b[i:j], zeroBlock[:]) {
			if start < i {
				if _, err := f.WriteAt(b[start:i], off+int64(start)); err != nil {
					return err
				}
			}
			start = j
		}
		i = j
	}
	if start < len(b) {
		_, err := f.WriteAt(b[start:], off+int64(start))
		return err
	}
	return nil
}

// CopyExtents copies the first size bytes of src into the empty file dst
// by src's data extents (SEEK_DATA, SEEK_HOLE), by copy_file_range (a
// clone where the filesystem can), then sets dst's size: src's holes stay
// holes.
func CopyExtents(dst, src *os.File, size int64) error {
	sfd, dfd := int(src.Fd()), int(dst.Fd())
	for off := int64(0); off < size; {
		data, err := unix.Seek(sfd, off, unix.SEEK_DATA)
		if err == unix.ENXIO || err == nil && data >= size {
			break // a hole to the end
		}
		if err != nil {
			return err
		}
		hole, err := unix.Seek(sfd, data, unix.SEEK_HOLE)
		if err != nil {
			return err
		}
		hole = min(hole, size)
		for p := data; p < hole; {
			in, out := p, p
			n, err := unix.CopyFileRange(sfd, &in, dfd, &out, int(min(hole-p, 1<<30)), 0)
			if err != nil {
				// Not between these files (another filesystem, say):
				// read and write.
				m, cerr := io.Copy(io.NewOffsetWriter(dst, p), io.NewSectionReader(src, p, hole-p))
				if cerr != nil {
					return cerr
				}
				n = int(m)
			}
			if n == 0 {
				return fmt.Errorf("%w (%d of %d bytes)", ErrShortSource, p, size)
			}
			p += int64(n)
		}
		off = hole
	}
	// A source that ended early ends in a "hole" above: the rest would
	// be zeros that were never its bytes.
	if st, err := Fstat(sfd); err != nil {
		return err
	} else if st.Size < size {
		return fmt.Errorf("%w (%d of %d bytes)", ErrShortSource, st.Size, size)
	}
	return dst.Truncate(size)
}
