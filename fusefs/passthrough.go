package fusefs

import (
	"context"
	"sync"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"ckptfs/internal/backing"
	"ckptfs/internal/ckpt"
)

// passthrough.go owns FUSE passthrough outside the handle itself: the
// side channel that puts a handle's backing ID in the OPEN or CREATE reply,
// and the recapture, at every turn boundary, of files open for writing
// through passthrough.

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

// Open and Create put the backing ID of a passthrough handle in the reply.
// The daemon registers backing files itself (Node.newHandle: one ID per
// inode, shared by its passthrough handles, released with the last), not
// through go-fuse's FilePassthroughFder: go-fuse's bridge drops a reference
// of the inode's backing ID at every RELEASE, also of a handle that never
// took one, and would close the ID under a live passthrough handle; the
// kernel allows one backing file per inode at a time and would fail the
// next passthrough open with EIO.
func (f *rawFS) Open(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	return withBackingID(cancel, out, func() fuse.Status { return f.RawFileSystem.Open(cancel, in, out) })
}

func (f *rawFS) Create(cancel <-chan struct{}, in *fuse.CreateIn, name string, out *fuse.CreateOut) fuse.Status {
	f.r.relief.room(cancel)
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

// recapturePassthroughWriters captures, at a turn boundary, the files open
// for writing through FUSE passthrough: their writes bypass the daemon, so
// the new turn must hold their prior state before any such write lands.
// Called with the gate held exclusively.
func (r *Root) recapturePassthroughWriters() {
	for _, n := range r.ptWriterNodes() {
		if eno := n.captureContentLocked(boundaryCtx); eno != 0 {
			p, _ := n.path()
			r.logf("ckptfs: turn boundary: cannot capture %q, open for writing through passthrough: %v (a rewind to before its next writes cannot give its bytes back)", p, eno)
		}
	}
}

// priorRecorded reports whether a write to the file at p needs no capture
// in the current turn: its one path's prior state is recorded already (or
// is excluded from history). The caller holds the gate, so no boundary falls
// between this answer and the handle's registration. Hard-linked files and
// set-ID files (whose bits a passthrough write by the daemon's credentials
// would not clear) stay on the daemon-served path.
func (r *Root) priorRecorded(p string, st *backing.Stat) bool {
	if !r.opts.WritePassthrough {
		return false
	}
	if !writableThroughPassthrough(st) {
		return false
	}
	return r.excluded(p, false) || !r.rec.NeedsCapture(p, false)
}

// clonesUpFront reports whether a writable open of p (a regular file with
// one link, st, open at fd) should capture it now, by a clone, and write
// through passthrough: the store would clone it (a file it cannot clone,
// such as one whose btrfs no-copy-on-write flag is not the store's, would
// be copied whole at the open, where the daemon-served path keeps only the
// ranges its writes overwrite).
func (r *Root) clonesUpFront(p string, fd int, st *backing.Stat) bool {
	return writableThroughPassthrough(st) && r.rec.CapturesByClone(fd, st.Dev, st.Size)
}

// writableThroughPassthrough: only a regular file with one name and no
// set-ID bit may be written past the daemon (a write through one name
// records every name first; a write clears set-ID bits, which the daemon
// does itself: killpriv.go).
func writableThroughPassthrough(st *backing.Stat) bool {
	return st.Mode&unix.S_IFMT == unix.S_IFREG && st.Nlink == 1 && st.Mode&(unix.S_ISUID|unix.S_ISGID) == 0
}

// creditPassthrough credits the caller with the turn's changes when it
// opened a file for writing through passthrough: its writes will not pass
// through the daemon, which would credit them one by one.
func (r *Root) creditPassthrough(ctx context.Context, h fs.FileHandle) {
	if f, ok := h.(*ptFile); ok && f.writable {
		if err := r.rec.Credit(r.caller(ctx)); err != nil {
			r.logf("ckptfs: credit %v: %v", r.caller(ctx), err)
		}
	}
}

// openFlags are the FOPEN flags of an OPEN or CREATE reply for handle h:
// FOPEN_DIRECT_IO for a direct handle (file.direct), FOPEN_KEEP_CACHE
// for any other daemon-served one when Options.KeepCache holds (a
// passthrough handle's reply gets its flags from setPassthrough).
func (r *Root) openFlags(h fs.FileHandle) uint32 {
	if f, ok := h.(*file); ok && f.direct {
		return fuse.FOPEN_DIRECT_IO
	}
	if _, pt := h.(*ptFile); pt || h == nil || !r.keepCache() {
		return 0
	}
	return fuse.FOPEN_KEEP_CACHE
}

// keepCache says whether the kernel keeps file pages (Options.KeepCache):
// only while no write bypasses the page cache.
func (r *Root) keepCache() bool { return r.opts.KeepCache && !r.opts.WritePassthrough }

// directWrites says whether a file this open creates gets a direct handle
// (file.direct): where the kernel keeps pages and writes go through the
// daemon anyway (a mount without write passthrough: an ordinary user's,
// or root's with CKPTFS_WRITE_PASSTHROUGH=0), for a write-only open. The
// kernel then skips, at its first write, the GETXATTR
// security.capability it asks before a write through the page cache (one
// round trip per new file). A new file has no pages cached, and while
// the handle is open every read-write open of the file is direct too
// (newHandle), so that no shared mapping writes pages back over it.
func (r *Root) directWrites(flags int) bool {
	return r.keepCache() && flags&unix.O_ACCMODE == unix.O_WRONLY
}

// WritesPast reports whether the file at the root-relative path is open
// for writing through FUSE passthrough: its writes reach the backing file
// without the daemon, so a rewind replaces such a file rather than change
// it in place (ckpt.Tree.PatchFile).
func (r *Root) WritesPast(path string) bool {
	p, ok := ckpt.Clean(path)
	if !ok {
		return false
	}
	for _, n := range r.ptWriterNodes() {
		if q, ok := n.path(); ok && q == p {
			return true
		}
	}
	return false
}

// ptWriterNodes lists the nodes open for writing through passthrough.
func (r *Root) ptWriterNodes() []*Node {
	r.ptMu.Lock()
	defer r.ptMu.Unlock()
	nodes := make([]*Node, 0, len(r.ptWriters))
	for n := range r.ptWriters {
		nodes = append(nodes, n)
	}
	return nodes
}
