package versionstore

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"log"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"ckptfs/internal/ckpt"
)

// spans.go owns span files: the attic files that hold the bytes of range
// records of a few blocks (ranges.go), one record's after another.
//
// Why: a write into a big file makes a range record of one to 64 blocks,
// and a turn of random writes makes thousands. Kept as chunks, each
// record's bytes are hashed, compressed, written to Pebble's log, then to
// a table and again by compactions; in a span file they are written once,
// by one pwrite.
//
// A span file is in use from its first record until the next Begin or
// End (rotateSpans), so that the files of a forgotten turn mostly go
// with it (a turn opened by a capture or by the offline check shares the
// file of the turn before). Concurrent captures reserve their places in
// it, and write there without a lock of the file.
//
// Durability: a span file's bytes are written before the event that names
// them is committed, so both survive a kill -9 once Record returns.
// Whatever makes events durable against a power loss fsyncs the span
// file in use first (its name was made durable when it was made): every
// sync point (syncWAL), a rotation before it lets go of the file, the
// close of a WAL file and a memtable flush (hooks set in Open), and the
// reopen after a kill -9 (syncLeftSpans, before Pebble replays the log).
// Only the kernel's own writeback of the log can make an event of the
// open turn durable before its part; after a power loss that part fails
// its check (size or sum), never reads back wrong, and a rewind over it
// refuses before it changes anything (checkKept, rewind.go).
//
// A gc cannot remove a span file between a part's write and its event's
// commit (the capture holds contentMu shared throughout), and leaves the
// span file in use, whose parts no committed event may name yet (a commit
// failed).
//
// Integrity: each record's bytes carry a CRC-32C (contentRef.Sum),
// checked at every read and by verify; the file itself grows while in use,
// so only its inode is recorded, not its size or mtime.

// spanFile is the span file in use.
type spanFile struct {
	name string
	f    *os.File
	ino  uint64
	end  int64 // the next free offset
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// putSpans writes b (a range record's span bytes, one after another) into
// the span file in use, starting one if none is, and returns its ref.
func (s *Store) putSpans(b []byte) (*contentRef, error) {
	sf, off, err := s.reserveSpans(int64(len(b)))
	if err != nil {
		return nil, err
	}
	defer s.spanWriters.Done()
	if _, err := sf.f.WriteAt(b, off); err != nil {
		if isENOSPC(err) {
			return nil, fmt.Errorf("%w: %v", ckpt.ErrStoreFull, err)
		}
		return nil, fmt.Errorf("versionstore: span file %s: %w", sf.name, err)
	}
	return &contentRef{Size: int64(len(b)), Attic: sf.name, Ino: sf.ino, Part: true, Off: off, Sum: crc32.Checksum(b, castagnoli)}, nil
}

// reserveSpans reserves n bytes in the span file in use, counting the
// caller among its writers (spanWriters.Done when written): a rotation
// waits for them before it syncs and closes the file.
func (s *Store) reserveSpans(n int64) (*spanFile, int64, error) {
	s.spanMu.Lock()
	if s.spanFile == nil {
		s.spanMu.Unlock()
		if testHookNewSpanFile != nil {
			testHookNewSpanFile()
		}
		nf, err := s.newSpanFile() // takes s.mu: not under spanMu
		if err != nil {
			return nil, 0, err
		}
		s.spanMu.Lock()
		if s.spanFile != nil { // a racing capture started one
			nf.f.Close()
			unix.Unlinkat(int(s.attic.Fd()), nf.name, 0)
		} else if err := s.noteSpanFile(nf.name); err != nil {
			s.spanMu.Unlock()
			nf.f.Close() // its name goes with the next gc
			return nil, 0, err
		} else {
			s.spanFile = nf
		}
	}
	sf := s.spanFile
	off := sf.end
	sf.end += n
	s.spanWriters.Add(1)
	s.spanMu.Unlock()
	return sf, off, nil
}

// testHookNewSpanFile, in tests, runs before a capture makes a span file.
var testHookNewSpanFile func()

// newSpanFile creates a span file, its name durable (the attic directory
// fsynced) before any event can name it.
func (s *Store) newSpanFile() (*spanFile, error) {
	name := s.atticName()
	fd, err := unix.Openat(int(s.attic.Fd()), name, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		if err == unix.ENOSPC {
			return nil, fmt.Errorf("%w: %v", ckpt.ErrStoreFull, err)
		}
		return nil, fmt.Errorf("versionstore: attic: make span file: %w", err)
	}
	f := os.NewFile(uintptr(fd), name)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		f.Close()
		return nil, fmt.Errorf("versionstore: attic: span file: %w", err)
	}
	if err := s.attic.Sync(); err != nil {
		f.Close()
		return nil, fmt.Errorf("versionstore: attic: span file: %w", err)
	}
	return &spanFile{name: name, f: f, ino: st.Ino}, nil
}

// syncWAL makes every event committed so far survive a power loss: the
// span file in use first (its bytes written so far), then Pebble's log.
// It fails if a sync of the span file before a WAL file's close did.
func (s *Store) syncWAL() error {
	if err := s.syncSpanInUse(); err != nil {
		return err
	}
	if p := s.spanSyncErr.Swap(nil); p != nil {
		return *p
	}
	if err := s.flushRangeLog(); err != nil {
		return err
	}
	return s.wal.SyncWAL()
}

// syncBeforeWALClose is the WAL's beforeClose hook: Pebble calls it on a
// committing goroutine (which may hold s.mu) and cannot take an error
// there, so a failure is kept for the next syncWAL to return.
func (s *Store) syncBeforeWALClose() {
	if err := s.syncSpanInUse(); err != nil {
		log.Printf("versionstore: %v", err)
		s.spanSyncErr.Store(&err)
	}
}

// syncSpanInUse fsyncs the span file in use, if any. Lock order: s.mu or
// Pebble's own locks (some callers hold them), then spanMu; nothing
// that holds spanMu waits for them.
func (s *Store) syncSpanInUse() error {
	s.spanMu.Lock()
	defer s.spanMu.Unlock()
	if sf := s.spanFile; sf != nil {
		if err := sf.f.Sync(); err != nil {
			return fmt.Errorf("versionstore: span file %s: %w", sf.name, err)
		}
	}
	return nil
}

// spanNote is the file in the store directory that names the span file
// last made. It is not synced: it serves the reopen after a kill -9,
// which keeps the page cache (syncLeftSpans).
const spanNote = "spans"

// syncLeftSpans fsyncs the span file that spanNote names, before Pebble
// opens: a killed daemon left it unsynced, and replaying its log makes
// the events that name it durable.
func (s *Store) syncLeftSpans() error {
	if s.dirf == nil || s.attic == nil {
		return nil
	}
	nf, err := openAt(s.dirf, spanNote)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("versionstore: %s: %w", spanNote, err)
	}
	b, err := io.ReadAll(io.LimitReader(nf, 64))
	nf.Close()
	if err != nil {
		return fmt.Errorf("versionstore: %s: %w", spanNote, err)
	}
	name := strings.TrimSpace(string(b))
	if _, err := strconv.ParseUint(name, 16, 64); err != nil {
		return nil // not a name this code wrote
	}
	fd, err := unix.Openat(int(s.attic.Fd()), name, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err == unix.ENOENT {
		return nil // collected since
	}
	if err != nil {
		return fmt.Errorf("versionstore: span file %s: %w", name, err)
	}
	defer unix.Close(fd)
	if err := unix.Fsync(fd); err != nil {
		return fmt.Errorf("versionstore: span file %s: %w", name, err)
	}
	return nil
}

// noteSpanFile writes name into spanNote (not synced), as the span file
// in use is installed (spanMu held): a racing capture's file, made and
// removed, is never noted.
func (s *Store) noteSpanFile(name string) error {
	if s.dirf == nil {
		return nil
	}
	fd, err := unix.Openat(int(s.dirf.Fd()), spanNote, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0o600)
	if err == nil {
		_, err = unix.Write(fd, []byte(name+"\n"))
		unix.Close(fd)
	}
	if err == unix.ENOSPC {
		return fmt.Errorf("%w: %v", ckpt.ErrStoreFull, err)
	}
	if err != nil {
		return fmt.Errorf("versionstore: %s: %w", spanNote, err)
	}
	return nil
}

// rotateSyncWAL is syncWAL at a turn boundary: the span file in use is
// let go of, so that each turn's records have span files of their own
// (gc frees a forgotten turn's).
func (s *Store) rotateSyncWAL() error {
	if err := s.rotateSpans(); err != nil {
		return err
	}
	if err := s.flushRangeLog(); err != nil {
		return err
	}
	return s.wal.SyncWAL()
}

// rotateSpans lets go of the span file in use, once its writers are done,
// fsyncing it: the next record starts another.
func (s *Store) rotateSpans() error {
	s.spanMu.Lock()
	defer s.spanMu.Unlock()
	sf := s.spanFile
	if sf == nil {
		return nil
	}
	s.spanWriters.Wait()
	s.spanFile = nil
	err := sf.f.Sync()
	if cerr := sf.f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("versionstore: span file %s: %w", sf.name, err)
	}
	return nil
}

// spanInUse reports whether name is the span file in use: a gc leaves it,
// though no committed event may name it yet.
func (s *Store) spanInUse(name string) bool {
	s.spanMu.Lock()
	defer s.spanMu.Unlock()
	return s.spanFile != nil && s.spanFile.name == name
}

// readPart reads the bytes of a ref into a span file, checking them
// against their sum.
func (s *Store) readPart(ref *contentRef) ([]byte, error) {
	f, err := s.openAttic(ref)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, ref.Size)
	if _, err := f.ReadAt(b, ref.Off); err != nil {
		return nil, fmt.Errorf("%w: span file %s at %d: %v", ErrCorrupt, ref.Attic, ref.Off, err)
	}
	if crc32.Checksum(b, castagnoli) != ref.Sum {
		return nil, fmt.Errorf("%w: span file %s at %d: checksum mismatch", ErrCorrupt, ref.Attic, ref.Off)
	}
	return b, nil
}

// partAt reads a ref into a span file at any offset: its bytes are read
// and checked whole at the first read (a range record's are at most
// rangeBatchMax).
type partAt struct {
	s   *Store
	ref *contentRef
	buf []byte
}

func (p *partAt) ReadAt(b []byte, off int64) (int, error) {
	if p.buf == nil {
		buf, err := p.s.readPart(p.ref)
		if err != nil {
			return 0, err
		}
		p.buf = buf
	}
	return bytes.NewReader(p.buf).ReadAt(b, off)
}
