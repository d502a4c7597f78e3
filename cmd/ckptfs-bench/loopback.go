package main

// The hidden "loopback" subcommand: serves L or L+ in a child process of the
// bench, so that the process doing file operations never serves its own
// mount (go-fuse deadlocks otherwise).
//
//	ckptfs-bench loopback [--opts OPT,...] [--debug] BACKING MNT
//
// As root it mounts with DirectMountStrict (no fusermount), as anyone
// else (Lu) through fusermount3, private to that user; it prints
// "ready" on stdout, serves until SIGTERM, then unmounts (lazily if busy).

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/spf13/pflag"
)

func runLoopback(args []string, stdout, stderr io.Writer) int {
	fl := pflag.NewFlagSet("loopback", pflag.ContinueOnError)
	fl.SetOutput(stderr)
	opts := fl.StringSlice("opts", nil, "tuning options (see lplusOptions); none: stock loopback (L)")
	debug := fl.Bool("debug", false, "log every FUSE request to stderr")
	if err := fl.Parse(args); err != nil || fl.NArg() != 2 {
		fmt.Fprintln(stderr, "usage: ckptfs-bench loopback [--opts OPT,...] [--debug] BACKING MNT")
		return exitUsage
	}
	if err := checkLplusOptions(*opts); err != nil {
		fmt.Fprintf(stderr, "loopback: %v\n", err)
		return exitUsage
	}
	backing, mnt := fl.Arg(0), fl.Arg(1)
	signal.Ignore(os.Interrupt) // the parent decides when we stop
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)

	server, err := mountLoopback(backing, mnt, *opts, *debug)
	if err != nil {
		fmt.Fprintf(stderr, "loopback: mount %s: %v\n", mnt, err)
		return exitFail
	}
	fmt.Fprintln(stdout, "ready")
	go func() {
		<-term
		for i := 0; i < 50; i++ {
			if err := server.Unmount(); err == nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		fmt.Fprintf(stderr, "loopback: %s busy; detaching\n", mnt)
		syscall.Unmount(mnt, syscall.MNT_DETACH)
		os.Exit(exitFail)
	}()
	server.Wait()
	return exitOK
}

// lplusOptions are the tuning options L+ may get, in the order documented.
var lplusOptions = []struct{ name, what string }{
	{"timeouts", "1 h entry and attribute timeouts"},
	{"negative", "1 h negative-entry timeout"},
	{"cachedir", "FOPEN_CACHE_DIR|FOPEN_KEEP_CACHE on opendir, KEEP_CACHE on open"},
	{"maxwrite", "max_write 1 MiB"},
	{"background", "max_background 64"},
	{"killpriv2", "HANDLE_KILLPRIV_V2: no GETXATTR security.capability per write"},
	{"writeback", "writeback cache (the kernel then disables passthrough)"},
}

// defaultLplus is L+ unless --lplus says otherwise: everything but the
// writeback cache.
var defaultLplus = []string{"timeouts", "negative", "cachedir", "maxwrite", "background", "killpriv2"}

func checkLplusOptions(opts []string) error {
	for _, o := range opts {
		ok := false
		for _, l := range lplusOptions {
			ok = ok || l.name == o
		}
		if !ok {
			return fmt.Errorf("unknown L+ option %q", o)
		}
	}
	return nil
}

// mountLoopback mounts fs.NewLoopbackRoot(backing) on mnt.
//
// With no options (L) it gets exactly what fs.Mount(..., nil) would give:
// 1 s entry and attribute timeouts, no negative caching, max_write 128 KiB,
// max_background 12. go-fuse v2.12.1 negotiates FUSE passthrough by default
// (CAP_PASSTHROUGH is in its default capability set and LoopbackFile
// implements FilePassthroughFder), so even L reads and writes through
// passthrough when we are root on a 6.9+ kernel.
//
// L+ adds what measurements justify (see lplusOptions). Long timeouts are
// safe here: the loopback is the only writer of the backing directory. The
// writeback cache is off by default: the kernel does not combine it with
// passthrough, and passthrough is what makes reads native.
func mountLoopback(backing, mnt string, opt []string, debug bool) (*fuse.Server, error) {
	has := func(name string) bool {
		for _, o := range opt {
			if o == name {
				return true
			}
		}
		return false
	}
	var st syscall.Stat_t
	if err := syscall.Stat(backing, &st); err != nil {
		return nil, err
	}
	second, hour := time.Second, time.Hour
	opts := &fs.Options{EntryTimeout: &second, AttrTimeout: &second}
	opts.MaxBackground = 12
	opts.DirectMountStrict = os.Geteuid() == 0 // else through fusermount3 (Lu)
	opts.FsName = backing
	opts.Name = "loopback"
	opts.Debug = debug
	if has("timeouts") {
		opts.EntryTimeout, opts.AttrTimeout = &hour, &hour
	}
	if has("negative") {
		opts.NegativeTimeout = &hour
	}
	if has("maxwrite") {
		opts.MaxWrite = 1 << 20
	}
	if has("background") {
		opts.MaxBackground = 64
	}
	if has("killpriv2") {
		// Without HANDLE_KILLPRIV_V2 the kernel asks GETXATTR
		// security.capability before every write (file_remove_privs), even
		// through passthrough: 4 KiB writes ran at 81 MB/s and cost the
		// daemon 0.7 CPU-s per 20k writes; with it, 550 MB/s and ~0. The
		// price: the daemon must then clear setuid/setgid bits itself
		// (FUSE_WRITE_KILL_SUIDGID, FATTR_KILL_SUIDGID), which the stock
		// loopback ignores, so a write by a non-root caller keeps them here.
		// A real overlay can honour the flags at no round-trip cost.
		opts.ExtraCapabilities |= fuse.CAP_HANDLE_KILLPRIV_V2
	}
	if has("writeback") {
		opts.ExtraCapabilities |= fuse.CAP_WRITEBACK_CACHE
	}
	var root fs.InodeEmbedder
	if has("cachedir") {
		lr := &fs.LoopbackRoot{Path: backing, Dev: uint64(st.Dev)}
		root = &cachedNode{LoopbackNode: &fs.LoopbackNode{RootData: lr}}
		lr.RootNode = root
	} else {
		var err error
		if root, err = fs.NewLoopbackRoot(backing); err != nil {
			return nil, err
		}
	}
	return fs.Mount(mnt, root, opts)
}

// cachedNode is a LoopbackNode whose directory listings and file pages the
// kernel may keep across opens (FOPEN_CACHE_DIR, FOPEN_KEEP_CACHE).
type cachedNode struct {
	*fs.LoopbackNode
}

var (
	_ = (fs.NodeWrapChilder)((*cachedNode)(nil))
	_ = (fs.NodeOpendirHandler)((*cachedNode)(nil))
	_ = (fs.NodeOpener)((*cachedNode)(nil))
	_ = (fs.NodeCreater)((*cachedNode)(nil))
)

func (n *cachedNode) WrapChild(ctx context.Context, ops fs.InodeEmbedder) fs.InodeEmbedder {
	return &cachedNode{LoopbackNode: ops.(*fs.LoopbackNode)}
}

func (n *cachedNode) OpendirHandle(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	fh, fl, errno := n.LoopbackNode.OpendirHandle(ctx, flags)
	return fh, fl | fuse.FOPEN_CACHE_DIR | fuse.FOPEN_KEEP_CACHE, errno
}

func (n *cachedNode) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	fh, fl, errno := n.LoopbackNode.Open(ctx, flags)
	return fh, fl | fuse.FOPEN_KEEP_CACHE, errno
}

func (n *cachedNode) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	in, fh, fl, errno := n.LoopbackNode.Create(ctx, name, flags, mode, out)
	return in, fh, fl | fuse.FOPEN_KEEP_CACHE, errno
}
