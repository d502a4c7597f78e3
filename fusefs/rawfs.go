package fusefs

import "github.com/hanwen/go-fuse/v2/fuse"

// rawfs.go owns rawFS, the wrapper of go-fuse's raw request handler: the
// requests the overlay must see in their raw form (flags that go-fuse's
// node API drops) go through it. Passthrough replies are in passthrough.go,
// the lookup/forget ordering in forget.go.

// rawFS sees the raw WRITE request, which says whether the data comes from
// the page cache (writeback of a shared mmap, FUSE_WRITE_CACHE) rather than
// from write(2). The kernel does not refresh mtime/ctime for mmap writes,
// so the cached attributes are dropped after such a write
// (doc/FUSE-NOTES.md).
type rawFS struct {
	fuse.RawFileSystem
	srv *fuse.Server
	r   *Root
}

// OpenDir lets the kernel keep directory listings across opens
// (FOPEN_CACHE_DIR|FOPEN_KEEP_CACHE): a second find or git status reads
// no directory through the daemon (find measured 0.55 → 0.18 s on a
// loopback mount). The kernel drops a listing when it sees the directory
// change through the mount; Invalidate drops it when a rewind changes the
// directory underneath. It checks a listing only when a reader starts
// from the beginning: a reader that began while another's listing was
// being filled, before a create, may go on from that listing, short of the
// new file, for the rest of its pass (README, "Performance").
//
// A kernel that offers NO_OPENDIR_SUPPORT is answered ENOSYS instead: it
// then opens every directory without asking, with exactly these flags
// (its default for a filesystem without OPENDIR), sends no RELEASEDIR, and
// reads with no handle (readDir). An open directory the listing of which
// is cached cost two round trips that did nothing (OPENDIR, RELEASEDIR:
// 4.1k of the agent session's 38.5k requests).
func (f *rawFS) OpenDir(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	if f.srv != nil && f.srv.KernelSettings().Flags64()&fuse.CAP_NO_OPENDIR_SUPPORT != 0 {
		return fuse.ENOSYS
	}
	st := f.RawFileSystem.OpenDir(cancel, in, out)
	if st == fuse.OK {
		out.OpenFlags |= fuse.FOPEN_CACHE_DIR | fuse.FOPEN_KEEP_CACHE
	}
	return st
}

func (f *rawFS) ReadDir(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	return f.readDir(cancel, in, out, f.RawFileSystem.ReadDir)
}

// readDir serves a READDIR or READDIRPLUS. One without a handle (Fh 0: the
// kernel opened the directory without OPENDIR) is served by a handle of
// its own, opened and released around it: it lists the directory from
// the request's offset (a d_off of the backing directory, which the
// listing seeks to), so nothing is kept between requests.
func (f *rawFS) readDir(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList, read func(<-chan struct{}, *fuse.ReadIn, *fuse.DirEntryList) fuse.Status) fuse.Status {
	if in.Fh != 0 {
		return read(cancel, in, out)
	}
	var oo fuse.OpenOut
	if st := f.RawFileSystem.OpenDir(cancel, &fuse.OpenIn{InHeader: in.InHeader}, &oo); st != fuse.OK {
		return st
	}
	own := *in
	own.Fh = oo.Fh
	st := read(cancel, &own, out)
	f.RawFileSystem.ReleaseDir(&fuse.ReleaseIn{InHeader: in.InHeader, Fh: oo.Fh})
	return st
}

// Flush answers ENOSYS where closing the backing file does nothing
// (Root.noFlush, closeIsNoop): the kernel then sends no FLUSH again, one
// round trip less at every close (9.2k of the agent session's 38.5k
// requests). Unlike FOPEN_NOFLUSH, this keeps what the kernel does at a
// close before it would send the FLUSH: it still writes the file's dirty
// pages back (a shared mmap written before the close) and reports their
// errors, so those writes still reach the daemon, and are captured, before
// close returns.
func (f *rawFS) Flush(cancel <-chan struct{}, in *fuse.FlushIn) fuse.Status {
	if f.r.noFlush {
		return fuse.ENOSYS
	}
	return f.RawFileSystem.Flush(cancel, in)
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
