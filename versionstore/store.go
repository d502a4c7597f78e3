package versionstore

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"golang.org/x/sys/unix"

	"ckptfs/internal/bytejson"
	"ckptfs/internal/ckpt"
)

// formatVersion is the on-disk format this code writes. A store with a
// higher version is refused; an older one is marked with this version
// when opened, since this code may write what older code cannot read
// (2: range records, ranges.go; 3: their bytes in span files, spans.go).
const formatVersion = 3

// Options configure Open.
type Options struct {
	// FS is the filesystem Pebble lives on; nil means the real one. Tests
	// pass vfs.NewMem() or vfs.NewCrashableMem(). With a non-nil FS there
	// is no attic (prior bytes are always copied into the store) and no
	// free-space check (space.go).
	FS vfs.FS
	// Fatal is called when Pebble meets an error it cannot continue from
	// (a failed WAL or MANIFEST write: see space.go); it must not return.
	// nil: print the message to stderr and exit with status 1.
	Fatal func(msg string)
	// RangeFrom is the smallest file whose content is range-captured
	// (ranges.go); 0: rangeMin. Tests lower it to put small files
	// through range capture.
	RangeFrom int64
}

// Store is the history of one tree. Its methods are safe for concurrent use.
type Store struct {
	dir    string   // as given to Open, for messages
	dirf   *os.File // the store directory, opened before any mount covers it
	wal    *walFS
	db     *pebble.DB
	rlog   *rangeLog // rangelog.go
	attic  *os.File  // nil without an attic
	lock   *os.File  // flocked while open
	closed bool

	// atticSizes keeps the sizes of the attic's files for StoreBytes
	// (storebytes.go).
	atticSizes atticSizes

	rewindMu sync.Mutex // one rewind at a time; a gc or a forget holds it too
	// rewindWaiting counts rewinds waiting for rewindMu: a gc holding it
	// stops at its next batch (gc.go).
	rewindWaiting atomic.Int32
	// checkReused: a rewind is running (alone), and a capture that finds
	// a chunk stored already checks its bytes, storing them again if
	// they are damaged: a rollback reads what the rewind captured.
	checkReused atomic.Bool
	// merges counts the merges (merge.go) since the store was opened.
	merges atomic.Uint64
	// grown counts the content bytes kept since growth was last
	// signalled (Grown); keptInTurn says the open turn kept some.
	grown      atomic.Int64
	keptInTurn atomic.Bool
	growth     chan struct{}
	// contentMu: a capture that keeps bytes holds it shared from before it
	// looks for its chunks until its event is committed; a gc's deleting
	// batch holds it exclusively (gc.go).
	contentMu sync.RWMutex
	// histMu orders the changes of where history starts and of pins.
	histMu sync.Mutex
	// histGen counts the forgets, merges, pins and unpins (HistoryGen).
	histGen atomic.Uint64
	// undoBase, when set (SetUndoBase), finds the turn an undo undoes,
	// whose undo the policy keeps.
	undoBase atomic.Pointer[func() (uint64, bool)]
	// gcIdle: gcKey when a gc last found nothing to forget (GCDue).
	gcIdle atomic.Value
	// holds: the turns held while something reads them (Hold), by
	// count; guarded by histMu.
	holds  map[uint64]int
	gcMu   sync.Mutex  // one gc at a time; Close waits for it
	gcStop atomic.Bool // Close asks a running gc to stop

	linkMu      sync.Mutex
	linkIdx     *linkIndex                      // the hard links a walk found, during a rewind (links.go)
	unversioned func(p string, isDir bool) bool // paths no capture sees (SetUnversioned)

	// ballastMu orders the changes of the ballast's size (space.go).
	ballastMu sync.Mutex
	// fullNeed is the space the capture refused last needed (space.go).
	fullNeed atomic.Int64

	mu        sync.Mutex
	full      bool      // captures refused for want of space, or the ballast short (space.go)
	spaceAt   time.Time // when the free space was last found sufficient
	spaceLeft int64     // what that look found free, less what was admitted since
	reclaimAt time.Time // when a refused capture last ran a gc (space.go)
	lastErr   error     // the last error of Record, Begin or End
	lastErrAt time.Time
	cur       *ckpt.Turn          // the open turn, nil if none
	latest    uint64              // highest turn number
	nextSeq   uint64              // next event sequence number
	touched   map[string]uint8    // paths captured in the open turn: touchFull|touchMeta|touchRange
	spans     map[string]*spanSet // what the open turn holds of range-captured paths (ranges.go)
	// rangeFrom is the smallest file range-captured (Options.RangeFrom).
	rangeFrom int64
	// atticDev is the attic's device; atticClones: its filesystem is of
	// a kind that may clone (ranges.go: learnAttic); perFileCOW: one
	// whose files have a no-copy-on-write flag (btrfs, bcachefs: chattr
	// +C), which a clone's source and destination must share;
	// atticNoCOW: the attic has it, so its new files do.
	atticDev    uint64
	atticClones bool
	perFileCOW  bool
	atticNoCOW  bool
	programs    map[string]bool // programs of the open turn
	atticSeq    uint64
	// cloneState: whether the attic's filesystem clones (clone.go), and
	// cloneXDev the devices of files it cannot clone (not the store's).
	cloneState int
	cloneXDev  map[uint64]bool
	start      historyInfo // where history starts (history.go)

	ingestDir string        // where tables to ingest are written ("": none)
	ingestSeq atomic.Uint64 // names them

	// spanMu guards spanFile, the span file in use (spans.go), and the
	// reservations in it; spanWriters counts those not yet written.
	spanMu      sync.Mutex
	spanFile    *spanFile
	spanWriters sync.WaitGroup
	spanSyncErr atomic.Pointer[error] // a failed sync before a WAL close
}

const (
	touchFull = 1
	touchMeta = 2
)

// Open opens (creating if needed) the store in dir, takes its lock, checks
// its format version, and loads the open turn.
//
// The directory is opened once and reached afterwards through
// /proc/self/fd, so the store keeps working when a ckptfs mount later covers
// the directory that contains it.
func Open(dir string, opts Options) (*Store, error) {
	s := &Store{dir: dir, growth: make(chan struct{}, 1), rangeFrom: rangeMin}
	// HistoryGen starts where no earlier opening's ended (a client keeps
	// it across a remount, and an offline forget may come between), and
	// well below 2^53 (the page compares it as a JavaScript number).
	s.histGen.Store(uint64(time.Now().UnixMicro()))
	if opts.RangeFrom > 0 {
		s.rangeFrom = opts.RangeFrom
	}
	fs := opts.FS
	root := dir
	if fs == nil {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("versionstore: %w", err)
		}
		f, err := os.OpenFile(dir, os.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			return nil, fmt.Errorf("versionstore: %w", err)
		}
		s.dirf = f
		root = fmt.Sprintf("/proc/self/fd/%d", f.Fd())
		// One process at a time: flock (per open file, unlike Pebble's own
		// fcntl lock, so it also holds within one process).
		lock, err := os.OpenFile(root+"/lock", os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("versionstore: %w", err)
		}
		if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			lock.Close()
			f.Close()
			return nil, fmt.Errorf("%w (%s)", ErrLocked, dir)
		}
		s.lock = lock
		fs = privateFS{vfs.Default}
		if err := privateDB(root + "/db"); err != nil {
			f.Close()
			return nil, fmt.Errorf("versionstore: %w", err)
		}
		if err := os.MkdirAll(root+"/attic", 0o700); err != nil {
			f.Close()
			return nil, fmt.Errorf("versionstore: %w", err)
		}
		if s.attic, err = os.OpenFile(root+"/attic", os.O_RDONLY|unix.O_DIRECTORY, 0); err != nil {
			f.Close()
			return nil, fmt.Errorf("versionstore: %w", err)
		}
		s.learnAttic()
	}
	if s.dirf != nil {
		// Best effort (space.go); a ballast the disk has no room to make
		// whole leaves the store full until space is back.
		if _, total, err := s.statfs(); err == nil && isENOSPC(s.makeBallast(ballastSize(total))) {
			s.full = true
		}
	}
	// Before Pebble replays (and flushes) the log a killed daemon left:
	// the parts its events name must be durable first (spans.go).
	if err := s.syncLeftSpans(); err != nil {
		s.closeFiles()
		return nil, err
	}
	s.wal = newWalFS(vfs.OnDiskFull(fs, s.onDiskFull))
	// A memtable is flushed only after its WAL was rotated, so this hook
	// also runs before a flush makes the memtable's events durable.
	s.wal.beforeClose = s.syncBeforeWALClose
	popts := &pebble.Options{
		FS:                 s.wal,
		FormatMajorVersion: pebble.FormatNewest,
		Logger:             quietLogger{fatal: opts.Fatal},
		// Pebble's default for a failed block checksum is fatal; we want
		// the read to fail with ErrCorrupt (pebbleErr) and the rest of
		// history to stay readable, so that verify can report it.
		EventListener: &pebble.EventListener{DataCorruption: func(info pebble.DataCorruptionInfo) {
			quietLogger{}.Errorf("corruption: %s", info.Path)
			s.noteErr(fmt.Errorf("%w: %s: %v", ErrCorrupt, info.Path, info.Details))
		}},
		MemTableSize: 32 << 20,
	}
	db, err := pebble.Open(filepath.Join(root, "db"), popts)
	if err != nil {
		s.closeFiles()
		return nil, fmt.Errorf("versionstore: open %s: %w", dir, err)
	}
	s.db = db
	// Replayed by load, once the format is known (rangelog.go).
	var entries []rangeEntry
	s.rlog, entries = openRangeLog(fs, root)
	// Tables of large content are written here, then ingested (ingest.go);
	// a crash leaves at most some to remove. Made after Pebble made (and
	// synced) the store directory.
	if d := fs.PathJoin(root, "ingest"); fs.RemoveAll(d) == nil && fs.MkdirAll(d, 0o700) == nil {
		s.ingestDir = d
	}
	if err := s.load(entries); err != nil {
		db.Close()
		s.closeFiles()
		return nil, err
	}
	return s, nil
}

func (s *Store) closeFiles() {
	if s.rlog != nil && s.rlog.f != nil {
		s.rlog.f.Close()
	}
	if s.lock != nil {
		s.lock.Close()
	}
	if s.attic != nil {
		s.attic.Close()
	}
	if s.dirf != nil {
		s.dirf.Close()
	}
}

// quietLogger drops Pebble's info lines, prints its errors (at most a few
// a second: Pebble retries a failing flush at once, and the daemon's log
// may sit on the very disk that is failing), and hands a fatal error to
// Options.Fatal.
type quietLogger struct{ fatal func(string) }

var errLimit struct {
	sync.Mutex
	second     int64 // unix second of the current window
	n, dropped int
}

func (quietLogger) Infof(string, ...interface{}) {}

func (quietLogger) Errorf(format string, args ...interface{}) {
	errLimit.Lock()
	defer errLimit.Unlock()
	if now := time.Now().Unix(); now != errLimit.second {
		if errLimit.dropped > 0 {
			fmt.Fprintf(os.Stderr, "pebble: (%d more errors not shown)\n", errLimit.dropped)
		}
		errLimit.second, errLimit.n, errLimit.dropped = now, 0, 0
	}
	if errLimit.n++; errLimit.n > 5 {
		errLimit.dropped++
		return
	}
	fmt.Fprintf(os.Stderr, "pebble: "+format+"\n", args...)
}

func (l quietLogger) Fatalf(format string, args ...interface{}) {
	msg := "pebble: fatal: " + fmt.Sprintf(format, args...)
	if l.fatal != nil {
		l.fatal(msg)
	}
	fmt.Fprintln(os.Stderr, msg)
	os.Exit(1)
}

// load checks the format, creates turn 0 in a new store, sets again the
// range records a kill took out of Pebble's log (entries: the range
// log's), and rebuilds the in-memory state of the open turn.
func (s *Store) load(entries []rangeEntry) error {
	v, closer, err := s.db.Get(keyFormat)
	switch {
	case err == pebble.ErrNotFound:
		b := s.db.NewBatch()
		b.Set(keyFormat, []byte(strconv.Itoa(formatVersion)), nil)
		t0 := ckpt.Turn{Num: 0, Kind: ckpt.KindInitial, Start: time.Now().UTC(), End: time.Now().UTC(), FirstSeq: 1, LastSeq: 0}
		putJSON(b, turnKey(0), t0)
		if err := s.commit(b, pebble.Sync); err != nil {
			return err
		}
		b.Close()
		if err := s.syncWAL(); err != nil {
			return err
		}
	case err != nil:
		return fmt.Errorf("versionstore: %w", err)
	default:
		n, perr := strconv.Atoi(string(v))
		closer.Close()
		if perr != nil {
			return fmt.Errorf("%w: format version %q", ErrCorrupt, v)
		}
		if n > formatVersion {
			return fmt.Errorf("%w (format %d; this ckptfs reads up to %d): upgrade ckptfs", ErrNewerFormat, n, formatVersion)
		}
		if n < formatVersion {
			if err := s.db.Set(keyFormat, []byte(strconv.Itoa(formatVersion)), pebble.Sync); err != nil {
				return pebbleErr(err)
			}
		}
	}
	// Before anything reads events.
	if err := s.replayRangeLog(entries); err != nil {
		return err
	}
	// Latest turn and next sequence number: the last keys of their kinds.
	last, err := s.lastKey(prefixTurn)
	if err != nil {
		return err
	}
	if s.latest, err = decodeU64Key(prefixTurn, last); err != nil {
		return err
	}
	s.nextSeq = 1
	if lastEv, err := s.lastKey(prefixEvent); err != nil {
		return err
	} else if lastEv != nil {
		seq, err := decodeU64Key(prefixEvent, lastEv)
		if err != nil {
			return err
		}
		s.nextSeq = seq + 1
	}
	t, err := s.storedTurn(s.latest)
	if err != nil {
		return err
	}
	// A sequence number is never given twice, even when the newest
	// events were dropped (a rename that never happened: Recover): the
	// latest turn's range may cover numbers no event holds any more, and
	// an event given one of those would count as that turn's.
	floor := t.FirstSeq
	if !t.Open {
		floor = t.LastSeq + 1
	}
	s.nextSeq = max(s.nextSeq, floor)
	s.resetTouched()
	s.programs = map[string]bool{}
	if t.Open {
		s.cur = &t
		for _, p := range t.Programs {
			s.programs[p] = true
		}
		if err := s.rebuildTouched(); err != nil {
			return err
		}
	}
	if err := s.loadHistory(); err != nil {
		return err
	}
	if s.attic != nil {
		names, _ := s.atticNames()
		for _, n := range names {
			if v, err := strconv.ParseUint(n, 16, 64); err == nil && v >= s.atticSeq {
				s.atticSeq = v + 1
			}
		}
	}
	return nil
}

// rebuildTouched rebuilds the open turn's touched set from its events
// since its last step boundary (steps.go).
func (s *Store) rebuildTouched() error {
	s.resetTouched()
	if s.cur == nil {
		return nil
	}
	from := s.cur.FirstSeq
	steps, err := s.stepsOf(s.cur.Num)
	if err != nil {
		return err
	}
	if len(steps) > 0 {
		from = steps[len(steps)-1].LastSeq + 1
	}
	return s.scanEvents(from, s.nextSeq, func(r *record) (bool, error) {
		s.touch(r)
		return true, nil
	})
}

func (s *Store) lastKey(prefix byte) ([]byte, error) {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefix}, UpperBound: upper(prefix)})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	if !it.Last() {
		return nil, it.Error()
	}
	return append([]byte(nil), it.Key()...), nil
}

// commit applies a batch, mapping a full disk to ckpt.ErrStoreFull.
//
// A synced commit also empties the range log (rangelog.go): every entry
// in it is in Pebble's log once the commit returns.
func (s *Store) commit(b *pebble.Batch, o *pebble.WriteOptions) error {
	if l := s.rlog; o == pebble.Sync && l.pending.Load() > 0 {
		l.mu.Lock()
		defer l.mu.Unlock()
		if err := s.apply(b, o); err != nil {
			return err
		}
		l.reset() // a failed one: retried at the next synced commit
		return nil
	}
	return s.apply(b, o)
}

// apply is commit without the range log.
func (s *Store) apply(b *pebble.Batch, o *pebble.WriteOptions) error {
	if err := b.Commit(o); err != nil {
		if isENOSPC(err) {
			return fmt.Errorf("%w: %v", ckpt.ErrStoreFull, err)
		}
		return fmt.Errorf("versionstore: %w", err)
	}
	return nil
}

// pebbleErr wraps an error of Pebble's, marking its corruption errors as
// ErrCorrupt.
func pebbleErr(err error) error {
	if pebble.IsCorruptionError(err) {
		return fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	return fmt.Errorf("versionstore: %w", err)
}

func putJSON(b *pebble.Batch, key []byte, v any) {
	data, err := bytejson.Marshal(v)
	if err != nil {
		panic("versionstore: BUG: " + err.Error())
	}
	b.Set(key, data, nil)
}

// Close closes the store. An open turn stays open (it is closed by the next
// Begin or End, also after reopening).
func (s *Store) Close() error {
	s.gcStop.Store(true)
	s.gcMu.Lock() // a running gc stops at its next batch
	defer s.gcMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	err := s.rotateSpans()
	if ferr := s.db.Flush(); err == nil {
		err = ferr
	}
	if cerr := s.db.Close(); err == nil {
		err = cerr
	}
	// Pebble's log is closed and synced: it holds every entry.
	if err == nil {
		s.rlog.mu.Lock()
		s.rlog.reset()
		s.rlog.mu.Unlock()
	}
	s.closeFiles()
	return err
}

// Dir returns the store directory as given to Open.
func (s *Store) Dir() string { return s.dir }

// DiskUsage returns the bytes the store occupies (Pebble and attic).
func (s *Store) DiskUsage() (int64, error) {
	if s.dirf == nil {
		return int64(s.db.Metrics().DiskSpaceUsage()), nil
	}
	var total int64
	err := filepath.Walk(fmt.Sprintf("/proc/self/fd/%d", s.dirf.Fd()), func(_ string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			total += fi.Size()
		}
		return nil
	})
	return total, err
}

// NewTestStore returns a store on an in-memory filesystem, closed when t
// ends. It has no attic: prior bytes are always copied.
func NewTestStore(t testing.TB) *Store {
	t.Helper()
	s, err := Open("/store", Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// atticNames lists the attic (nil without one). Each call reads it from
// its start through a handle of its own: s.attic, once read to its end,
// would list nothing more, and gc and du may list it at once.
func (s *Store) atticNames() ([]string, error) {
	if s.attic == nil {
		return nil, nil
	}
	fd, err := unix.Openat(int(s.attic.Fd()), ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("versionstore: attic: %w", err)
	}
	d := os.NewFile(uintptr(fd), "attic")
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("versionstore: attic: %w", err)
	}
	return names, nil
}
