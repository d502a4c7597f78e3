package fusefs

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"ckptfs/internal/backing"
	"ckptfs/internal/ckpt"
)

// root.go owns the Root: the overlay's options, the state every node
// shares, its construction, and which paths are hidden or unversioned.

// Recorder is what the overlay needs from the history store;
// *versionstore.Store satisfies it.
type Recorder interface {
	// NeedsCapture is a fast in-memory check: false if path was already
	// captured in the open turn.
	NeedsCapture(path string, metaOnly bool) bool
	// NeedsRange is NeedsCapture for a change of the bytes [off, end)
	// only (end ckpt.ToTheEnd: a truncate to off): false if the turn
	// holds their prior bytes already.
	NeedsRange(path string, off, end int64) bool
	// Record records the prior state of c.Path; only when it returns nil
	// may the caller change the path.
	Record(c ckpt.Capture, who ckpt.Program) error
	// RecordRename records a rename before it happens; commit reports
	// whether the syscall succeeded.
	RecordRename(from, to string, exchange bool, who ckpt.Program) (commit func(ok bool), err error)
	// RecordExchange records a RENAME_EXCHANGE before it happens, with
	// the inode numbers of a and b just before: what tells, after a
	// kill in between, whether it happened.
	RecordExchange(a, b string, ia, ib uint64, who ckpt.Program) (commit func(ok bool), err error)
	// Credit adds who to the open turn's programs: it opened for writing,
	// through passthrough, a file whose prior state the turn holds.
	Credit(who ckpt.Program) error
	// CapturesByClone reports whether the capture of the regular file
	// open at fd, of size bytes on device dev, would now be a clone (O(1),
	// no space until the file diverges): a writable open then captures it
	// up front and writes through passthrough.
	CapturesByClone(fd int, dev uint64, size int64) bool
	// UnshareAttic gives each record of the open turn that keeps its
	// bytes by a hard link of an inode the tree still names a copy of
	// its own: after an unlink or a rename over a file that failed once
	// its capture had linked the inode into the attic.
	UnshareAttic() error
}

// Options configure the overlay.
type Options struct {
	Recorder Recorder
	// Hidden are root-relative slash paths invisible through the mount
	// (the store directory, e.g. ".ckptfs").
	Hidden []string
	// Exclude reports unversioned paths (--exclude, and the stores of
	// projects inside this one: exclude.Nested); may be nil.
	Exclude func(path string, isDir bool) bool
	// Logger receives the overlay's diagnostics (a capture that failed,
	// an owner that could not be set, the open-file limit near); may be
	// nil.
	Logger Logger
	// WritePassthrough lets writable opens of a file whose prior state the
	// turn already holds use FUSE passthrough (writes at native speed);
	// Exclusive captures such files again at every boundary. A write in
	// flight through one while the boundary copies the file may be caught
	// half done (the daemon-served path blocks it instead). The daemon
	// turns it on unless CKPTFS_WRITE_PASSTHROUGH=0.
	WritePassthrough bool
	// ReadPassthrough lets read-only opens use FUSE passthrough (reads at
	// native speed) while the file has no daemon-served opens. The daemon
	// turns it on unless CKPTFS_PASSTHROUGH=0.
	//
	// Passthrough needs CAP_SYS_ADMIN to register backing files: a daemon
	// that is not root leaves both off (its opens would all fall back to
	// the daemon-served path after a refused registration each).
	ReadPassthrough bool
	// Private mounts for the daemon's user alone: without allow_other the
	// kernel refuses every other user (root included). Otherwise the
	// mount is shared: allow_other. Both have default_permissions, the
	// kernel checking its caller as the backing filesystem would.
	Private bool
	// KeepCache lets the kernel keep a file's cached pages across opens
	// of it (FOPEN_KEEP_CACHE on daemon-served handles): a second read of
	// a file costs no round trips. It is safe because every change of a
	// file's bytes goes through the kernel's page cache (daemon-served
	// writes), through a direct handle while no shared mapping of the
	// file can write pages back, its pages dropped once it is closed
	// (file.direct), or comes from the daemon, which invalidates the
	// pages (Invalidate); it is ignored with WritePassthrough, whose
	// writes bypass the page cache. The kernel then leaves cached pages
	// alone when it sees a file's mtime change (explicit data cache
	// control).
	KeepCache bool
	// Flush runs FlushFiles(args) in another process and waits for it:
	// the turn boundary's flush of the kernel's dirty pages (flush.go).
	// The daemon must never wait on a request to its own mount itself.
	// nil: FlushFiles runs in this process (tests that never kill it).
	Flush func(args []string) error
}

// Logger is the minimal logging sink the overlay uses.
type Logger interface {
	Printf(format string, args ...any)
}

// Root is the overlay: the root node plus the state every node shares.
type Root struct {
	root    *Node
	opts    Options
	rec     Recorder
	hidden  map[string]bool // cleaned root-relative paths
	nested  bool            // some hidden path is below the root level
	rootDev uint64

	// gate: every mutation holds the read lock from capture through the
	// syscall; Exclusive holds the write lock.
	gate      sync.RWMutex
	exclusive atomic.Bool
	// ns, moves: captures name paths in step with renames (moves.go).
	ns        sync.RWMutex
	movesMu   sync.Mutex
	moves     []*pendingMove
	nMoves    atomic.Int32
	pendingMu sync.Mutex
	pending   []func() // kernel notifications deferred until Exclusive ends
	// pendingDirs are the directories whose listing a pending
	// notification drops already.
	pendingDirs map[*fs.Inode]bool

	// noFlush: FLUSH is answered ENOSYS (closeIsNoop).
	noFlush bool

	mountDir string // where Mount mounted it (flushWriters)
	// mountDev is the mount's own device number (SetMountDev; 0: not
	// known): a flush after the mount was detached finds its files by it.
	mountDev atomic.Uint64

	relief  *fdRelief     // has the kernel forget inodes near the fd limit
	useSeq  atomic.Uint64 // the last Node.used
	nodesMu sync.Mutex
	nodes   map[fs.StableAttr]*Node // live nodes by identity: lookups reuse them
	attic   map[fs.StableAttr]int   // inodes claimed by the store's attic (attic.go)
	links   linkNames               // the names of hard-linked files (links.go)
	order   forgetOrder             // node reuse against forgetting (forget.go)

	commMu sync.Mutex
	comms  map[uint32]commName // by pid (caller)

	// backing registers passthrough backing files (the *fuse.Server,
	// once mounted); see Node.newHandle.
	backing atomic.Pointer[fuse.Server]

	ptMu      sync.Mutex    // guards ptWriters and writers
	ptWriters map[*Node]int // nodes open for writing through passthrough
	writers   map[*Node]int // nodes open read-write, daemon-served (flush.go)
}

// NewRoot builds the overlay on dir, the backing directory opened before
// the mount covers it. The Root does not take ownership of dir's *os.File
// but keeps using its fd: keep it open while mounted.
func NewRoot(dir *os.File, opts Options) (*Root, error) {
	if opts.Recorder == nil {
		return nil, fmt.Errorf("fusefs: no Recorder")
	}
	fd, err := unix.Dup(int(dir.Fd()))
	if err != nil {
		return nil, fmt.Errorf("fusefs: %w", err)
	}
	unix.CloseOnExec(fd)
	st, err := backing.Fstat(fd)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("fusefs: %w", err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		unix.Close(fd)
		return nil, fmt.Errorf("fusefs: backing is not a directory")
	}
	r := &Root{
		opts:      opts,
		rec:       opts.Recorder,
		hidden:    map[string]bool{},
		rootDev:   st.Dev,
		nodes:     map[fs.StableAttr]*Node{},
		attic:     map[fs.StableAttr]int{},
		comms:     map[uint32]commName{},
		ptWriters: map[*Node]int{},
		writers:   map[*Node]int{},
	}
	r.relief = newFDRelief(r.logf)
	for _, h := range opts.Hidden {
		p, ok := ckpt.Clean(h)
		if !ok || p == "" {
			unix.Close(fd)
			return nil, fmt.Errorf("fusefs: bad hidden path %q", h)
		}
		r.hidden[p] = true
		if strings.Contains(p, "/") {
			r.nested = true
		}
	}
	r.root = &Node{r: r, fd: fd}
	return r, nil
}

// hiddenName reports whether name inside dir n is a hidden path.
func (r *Root) hiddenName(n *Node, name string) bool {
	if len(r.hidden) == 0 {
		return false
	}
	if n.IsRoot() {
		return r.hidden[name]
	}
	if !r.nested {
		return false
	}
	p, ok := n.path()
	return ok && r.hidden[ckpt.Join(p, name)]
}

// excluded reports whether p is unversioned.
func (r *Root) excluded(p string, isDir bool) bool {
	return r.opts.Exclude != nil && r.opts.Exclude(p, isDir)
}

func (r *Root) logf(format string, args ...any) {
	if r.opts.Logger != nil {
		r.opts.Logger.Printf(format, args...)
	}
}
