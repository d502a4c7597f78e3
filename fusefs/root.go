package fusefs

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"ckptfs/internal/ckpt"
)

// Recorder is what the overlay needs from the history store;
// *versionstore.Store satisfies it.
type Recorder interface {
	// NeedsCapture is a fast in-memory check: false if path was already
	// captured in the open turn.
	NeedsCapture(path string, metaOnly bool) bool
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
}

// Options configure the overlay.
type Options struct {
	Recorder Recorder
	// Hidden are root-relative slash paths invisible through the mount
	// (the store directory, e.g. ".ckptfs").
	Hidden []string
	// Exclude reports unversioned paths (--exclude); may be nil.
	Exclude func(path string, isDir bool) bool
	// Logger receives BUG: lines and go-fuse diagnostics; may be nil.
	Logger Logger
	// WritePassthrough lets writable opens of a file whose prior state the
	// turn already holds use FUSE passthrough (writes at native speed);
	// Exclusive captures such files again at every boundary. A write in
	// flight through one while the boundary copies the file may be caught
	// half done (the daemon-served path blocks it instead). The daemon
	// turns it on unless CKPTFS_WRITE_PASSTHROUGH=0. (The rare EIO on open
	// was go-fuse's backing-ID bug, see rawFS.Open; the copy_file_range
	// that "returned 0" was a test reusing its offsets.)
	WritePassthrough bool
	// ReadPassthrough lets read-only opens use FUSE passthrough (reads at
	// native speed) while the file has no daemon-served opens. The daemon
	// turns it on unless CKPTFS_PASSTHROUGH=0. (The rare EIO on open it
	// once met was go-fuse closing a backing ID under a live handle; the
	// daemon registers backing files itself since: rawFS.Open.)
	ReadPassthrough bool
}

// Logger is the minimal logging sink the overlay uses.
type Logger interface {
	Printf(format string, args ...any)
}

// Cache timeouts. Long timeouts are what make a FUSE overlay cheap (BENCH.md:
// extract 6.3× → 2.7×, git status 15× → 2.8× against native). They are safe
// only because nothing but this daemon changes the backing tree while it is
// mounted: the mount covers the directory, and the history store's rewinds
// run inside Root.Exclusive and call Root.Invalidate for every path they
// change.
const (
	entryTimeout    = time.Hour
	attrTimeout     = time.Hour
	negativeTimeout = time.Hour
)

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

	mountDir string
	mntMu    sync.Mutex
	mnt      *os.File // an fd of the mount itself, for syncfs

	relief  *fdRelief // drops the kernel's caches near the fd limit
	nodesMu sync.Mutex
	nodes   map[fs.StableAttr]*Node // live nodes by identity: lookups reuse them
	attic   map[fs.StableAttr]int   // inodes claimed by the store's attic (attic.go)
	links   linkNames               // the names of hard-linked files (links.go)
	order   forgetOrder             // node reuse against forgetting (forget.go)

	commMu sync.Mutex
	comms  map[uint32]string

	// backing registers passthrough backing files (the *fuse.Server,
	// once mounted); see Node.newHandle.
	backing atomic.Pointer[fuse.Server]

	ptMu      sync.Mutex
	ptWriters map[*Node]int // nodes open for writing through passthrough
}

// NewRoot builds the overlay on backing, a directory fd opened before the
// mount covers it. The Root does not take ownership of backing's *os.File
// but keeps using its fd: keep it open while mounted.
func NewRoot(backing *os.File, opts Options) (*Root, error) {
	if opts.Recorder == nil {
		return nil, fmt.Errorf("fusefs: no Recorder")
	}
	fd, err := unix.Dup(int(backing.Fd()))
	if err != nil {
		return nil, fmt.Errorf("fusefs: %w", err)
	}
	unix.CloseOnExec(fd)
	st, err := fstatFd(fd)
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
		comms:     map[uint32]string{},
		ptWriters: map[*Node]int{},
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

// Mount mounts the overlay on dir (normally the backing directory itself)
// and returns once the mount is live.
func (r *Root) Mount(dir string, debug bool) (*fuse.Server, error) {
	r.mountDir = dir
	et, at, nt := entryTimeout, attrTimeout, negativeTimeout
	var bst unix.Statfs_t
	flags := uintptr(0)
	if err := unix.Fstatfs(r.root.fd, &bst); err == nil {
		// Mirror the backing mount's nosuid/nodev/noexec: the directory
		// must behave as it did before it was covered.
		if bst.Flags&unix.ST_NOSUID != 0 {
			flags |= syscall.MS_NOSUID
		}
		if bst.Flags&unix.ST_NODEV != 0 {
			flags |= syscall.MS_NODEV
		}
		if bst.Flags&unix.ST_NOEXEC != 0 {
			flags |= syscall.MS_NOEXEC
		}
	}
	if flags == 0 {
		flags = syscall.MS_MGC_VAL // zero flags, not go-fuse's nosuid,nodev default
	}
	opts := &fs.Options{
		MountOptions: fuse.MountOptions{
			// allow_other + default_permissions: every user who could use
			// the directory before can use it now, checked by the kernel
			// exactly as the backing filesystem would.
			AllowOther:        true,
			Options:           []string{"default_permissions"},
			Name:              "ckptfs",
			FsName:            dir,
			DirectMountStrict: true,
			DirectMountFlags:  flags,
			Debug:             debug,
			MaxWrite:          1 << 20,
			MaxBackground:     64,
			EnableLocks:       true,
			// HANDLE_KILLPRIV_V2: the kernel no longer asks GETXATTR
			// security.capability before every write (one round trip per
			// write; BENCH: 4 KiB writes 81 → 550 MB/s); in exchange the
			// daemon clears set-ID bits itself when a write or truncate
			// says so (file.Write, Node.Setattr).
			ExtraCapabilities: fuse.CAP_HANDLE_KILLPRIV_V2,
			// No writeback cache: every write reaches us before it returns,
			// so turn boundaries are exact.
		},
		EntryTimeout:    &et,
		AttrTimeout:     &at,
		NegativeTimeout: &nt,
		NullPermissions: true,
		RootStableAttr:  &fs.StableAttr{Ino: 1},
	}
	raw := &rawFS{RawFileSystem: fs.NewNodeFS(r.root, opts), r: r}
	srv, err := fuse.NewServer(raw, dir, &opts.MountOptions)
	if err != nil {
		return nil, fmt.Errorf("fusefs: mount %s: %w", dir, err)
	}
	raw.srv = srv
	r.backing.Store(srv)
	go srv.Serve()
	if err := srv.WaitMount(); err != nil {
		srv.Unmount()
		return nil, fmt.Errorf("fusefs: mount %s: %w", dir, err)
	}
	done := make(chan struct{})
	go func() { srv.Wait(); close(done) }()
	go r.relief.run(done)
	return srv, nil
}

// ptOpens maps an OPEN or CREATE request being served (its cancel
// channel) to the backing ID its handle uses, 0 for none: Node.newHandle
// fills it in, rawFS puts it in the reply.
var ptOpens sync.Map

// notePassthrough tells the request's reply to use backing id.
func notePassthrough(ctx context.Context, id int32) {
	if c, ok := ctx.(*fuse.Context); ok && c.Cancel != nil {
		if v, ok := ptOpens.Load(c.Cancel); ok {
			*v.(*int32) = id
		}
	}
}

// Passthrough backing files are registered by the daemon, not go-fuse: its
// bridge drops a reference of the inode's backing ID at every RELEASE,
// also of a handle that never took one (a daemon-served handle released
// just as the first passthrough open of the inode registered an ID). The
// ID was then closed under a live passthrough handle, the next passthrough
// open registered another, and the kernel, which allows one backing file
// per inode at a time, failed that open with EIO.
func (f *rawFS) Open(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	return withBackingID(cancel, out, func() fuse.Status { return f.RawFileSystem.Open(cancel, in, out) })
}

func (f *rawFS) Create(cancel <-chan struct{}, in *fuse.CreateIn, name string, out *fuse.CreateOut) fuse.Status {
	return withBackingID(cancel, &out.OpenOut, func() fuse.Status { return f.RawFileSystem.Create(cancel, in, name, out) })
}

// withBackingID runs an OPEN or CREATE and puts the backing ID its handle
// chose (notePassthrough) in the reply.
func withBackingID(cancel <-chan struct{}, out *fuse.OpenOut, do func() fuse.Status) fuse.Status {
	var id int32
	ptOpens.Store(cancel, &id)
	st := do()
	ptOpens.Delete(cancel)
	if st == fuse.OK && id != 0 {
		setPassthrough(out, id)
	}
	return st
}

func setPassthrough(out *fuse.OpenOut, id int32) {
	out.BackingID = id
	out.OpenFlags |= fuse.FOPEN_PASSTHROUGH
	out.OpenFlags &^= uint32(fuse.FOPEN_KEEP_CACHE)
}

// rawFS sees the raw WRITE request, which says whether the data comes from
// the page cache (writeback of a shared mmap, FUSE_WRITE_CACHE) rather than
// from write(2). The kernel does not refresh mtime/ctime for mmap writes,
// so the cached attributes are dropped after such a write (FUSE-NOTES).
// killWrites holds the cancel channels of WRITE requests that carry
// FUSE_WRITE_KILL_SUIDGID while they run.
var killWrites sync.Map

// killRequested reports whether the request of ctx asked to clear set-ID
// bits (a write by a caller without CAP_FSETID).
func killRequested(ctx context.Context) bool {
	c, ok := ctx.(*fuse.Context)
	if !ok || c.Cancel == nil {
		return false
	}
	_, ok = killWrites.Load(c.Cancel)
	return ok
}

// killSuidgid clears set-user-ID, and set-group-ID if group-executable, as
// the kernel does when an unprivileged process writes or truncates (the
// daemon runs with CAP_FSETID, so its own write would not clear them).
func killSuidgid(fd int) error {
	st, err := fstatFd(fd)
	if err != nil {
		return err
	}
	mode := st.Mode & 07777
	nm := mode &^ unix.S_ISUID
	if mode&unix.S_IXGRP != 0 {
		nm &^= unix.S_ISGID
	}
	if nm == mode || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil
	}
	return unix.Fchmodat(unix.AT_FDCWD, procPath(fd), nm, 0)
}

type rawFS struct {
	fuse.RawFileSystem
	srv *fuse.Server
	r   *Root
}

// OpenDir lets the kernel keep directory listings across opens
// (FOPEN_CACHE_DIR|FOPEN_KEEP_CACHE): a second find or git status reads
// no directory through the daemon (BENCH: find 0.55 → 0.18 s on the
// tuned loopback). The kernel drops a listing when it sees the directory
// change through the mount; Invalidate drops it when a rewind changes the
// directory underneath.
func (f *rawFS) OpenDir(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	st := f.RawFileSystem.OpenDir(cancel, in, out)
	if st == fuse.OK {
		out.OpenFlags |= fuse.FOPEN_CACHE_DIR | fuse.FOPEN_KEEP_CACHE
	}
	return st
}

func (f *rawFS) Write(cancel <-chan struct{}, in *fuse.WriteIn, data []byte) (uint32, fuse.Status) {
	return f.write(cancel, in, func() (uint32, fuse.Status) { return f.RawFileSystem.Write(cancel, in, data) })
}

// Writev is what the server calls for WRITE (Write only on ENOSYS), so both
// go through write.
func (f *rawFS) Writev(cancel <-chan struct{}, in *fuse.WriteIn, data [][]byte) (uint32, fuse.Status) {
	return f.write(cancel, in, func() (uint32, fuse.Status) { return f.RawFileSystem.Writev(cancel, in, data) })
}

func (f *rawFS) write(cancel <-chan struct{}, in *fuse.WriteIn, do func() (uint32, fuse.Status)) (uint32, fuse.Status) {
	if in.WriteFlags&fuse.WRITE_KILL_SUIDGID != 0 {
		// Tell file.Write, which sees only a context carrying this
		// request's cancel channel.
		killWrites.Store(cancel, true)
		defer killWrites.Delete(cancel)
	}
	n, st := do()
	if st == fuse.OK && in.WriteFlags&fuse.WRITE_CACHE != 0 && f.srv != nil {
		f.srv.InodeNotify(in.NodeId, -1, 0) // attributes only
	}
	return n, st
}

// Exclusive flushes the kernel's dirty pages of the mount (shared mmap
// writes), then blocks every mutating operation, runs fn, and releases.
// Kernel cache invalidations requested by fn (Invalidate) are sent after
// the lock is released and before Exclusive returns: sending them while
// holding the lock could deadlock against a request that holds a kernel
// inode lock and waits for ours.
func (r *Root) Exclusive(fn func() error) error {
	if f := r.mountFile(); f != nil {
		// Not under the lock: flushing sends WRITE requests, which take
		// the read lock.
		unix.Syncfs(int(f.Fd()))
	}
	r.gate.Lock()
	r.exclusive.Store(true)
	err := fn()
	r.recapturePassthroughWriters()
	r.exclusive.Store(false)
	r.gate.Unlock()
	r.pendingMu.Lock()
	pending := r.pending
	r.pending, r.pendingDirs = nil, nil
	r.pendingMu.Unlock()
	for _, p := range pending {
		p()
	}
	return err
}

func (r *Root) mountFile() *os.File {
	r.mntMu.Lock()
	defer r.mntMu.Unlock()
	if r.mnt == nil && r.mountDir != "" {
		f, err := os.OpenFile(r.mountDir, os.O_RDONLY|unix.O_DIRECTORY, 0)
		if err == nil {
			r.mnt = f
		}
	}
	return r.mnt
}

// Close releases the fds the Root holds (after unmounting).
func (r *Root) Close() {
	r.mntMu.Lock()
	if r.mnt != nil {
		r.mnt.Close()
		r.mnt = nil
	}
	r.mntMu.Unlock()
}

// Moved says a rename (or exchange) moved from to to in the backing tree
// underneath us (rewind): the names of hard-linked files remembered below
// them move along. Like Invalidate, it does not take the mutation lock.
func (r *Root) Moved(from, to string, exchange bool) {
	f, ok1 := ckpt.Clean(from)
	t, ok2 := ckpt.Clean(to)
	if ok1 && ok2 {
		r.links.renamed(f, t, exchange)
	}
}

// Invalidate says the backing tree changed at path underneath us (rewind):
// it drops go-fuse's child entry for it and tells the kernel, so processes
// see the new state at once. It does not take the mutation lock (Exclusive's
// fn calls it).
func (r *Root) Invalidate(path string) {
	p, ok := ckpt.Clean(path)
	if !ok {
		return
	}
	if p == "" {
		r.notifyDir(&r.root.Inode)
		return
	}
	dir, name := p, p
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		dir, name = p[:i], p[i+1:]
	} else {
		dir = ""
	}
	parent := &r.root.Inode
	if dir != "" {
		for _, el := range strings.Split(dir, "/") {
			parent = parent.GetChild(el)
			if parent == nil {
				return // the kernel cannot have cached anything below
			}
		}
	}
	child := parent.GetChild(name)
	if child != nil && !r.sameInode(parent, name, child) {
		// The name now holds another inode (or nothing): go-fuse must
		// forget the old one under this name. One that is still there
		// (a chmod) stays, so handles open on it keep a path and their
		// writes keep being captured.
		r.order.mu.Lock()
		parent.RmChild(name)
		r.order.mu.Unlock()
	}
	r.notify(func() {
		parent.NotifyEntry(name)
		if child != nil {
			child.NotifyContent(0, 0)
		}
	})
	// The kernel keeps directory listings (FOPEN_CACHE_DIR, see OpenDir)
	// and drops one only when it sees the directory change; a name it
	// never looked up changes nothing it sees. Once per directory.
	r.notifyDir(parent)
}

// notifyDir drops the kernel's cached listing and attributes of dir: once
// per directory while Exclusive runs, at once otherwise.
func (r *Root) notifyDir(dir *fs.Inode) {
	if r.exclusive.Load() {
		r.pendingMu.Lock()
		defer r.pendingMu.Unlock()
		if r.pendingDirs == nil {
			r.pendingDirs = map[*fs.Inode]bool{}
		}
		if !r.pendingDirs[dir] {
			r.pendingDirs[dir] = true
			r.pending = append(r.pending, func() { dir.NotifyContent(0, 0) })
		}
		return
	}
	dir.NotifyContent(0, 0)
}

// sameInode reports whether name in parent still is child's backing inode.
func (r *Root) sameInode(parent *fs.Inode, name string, child *fs.Inode) bool {
	pn, ok := parent.Operations().(*Node)
	if !ok {
		return false
	}
	st, err := lstatAt(pn.fd, name)
	return err == nil && idOf(&st) == child.StableAttr()
}

func (r *Root) notify(fn func()) {
	if r.exclusive.Load() {
		r.pendingMu.Lock()
		r.pending = append(r.pending, fn)
		r.pendingMu.Unlock()
		return
	}
	fn()
}

// recapturePassthroughWriters captures, at a turn boundary, the files open
// for writing through FUSE passthrough: their writes bypass the daemon, so
// the new turn must hold their prior state before any such write lands.
// Called with the gate held exclusively.
func (r *Root) recapturePassthroughWriters() {
	r.ptMu.Lock()
	nodes := make([]*Node, 0, len(r.ptWriters))
	for n := range r.ptWriters {
		nodes = append(nodes, n)
	}
	r.ptMu.Unlock()
	for _, n := range nodes {
		n.captureContentLocked(boundaryCtx)
	}
}

type boundaryKey struct{}

// boundaryCtx marks the captures a turn boundary makes on its own
// (recapturePassthroughWriters): no program is credited with them.
var boundaryCtx = context.WithValue(context.Background(), boundaryKey{}, true)

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

// lookupNode returns the live node for an identity, or registers n.
func (r *Root) lookupNode(id fs.StableAttr, n *Node) *Node {
	r.nodesMu.Lock()
	defer r.nodesMu.Unlock()
	if old := r.nodes[id]; old != nil && !old.Forgotten() {
		return old
	}
	r.nodes[id] = n
	r.relief.note(len(r.nodes))
	return n
}

func (r *Root) forgetNode(id fs.StableAttr, n *Node) {
	r.nodesMu.Lock()
	if r.nodes[id] == n {
		delete(r.nodes, id)
		delete(r.attic, id)
	}
	r.nodesMu.Unlock()
}

func (r *Root) logf(format string, args ...any) {
	if r.opts.Logger != nil {
		r.opts.Logger.Printf(format, args...)
	}
}
