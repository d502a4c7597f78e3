package main

// The hidden "loopback" subcommand: serves L or L+ in a child process of the
// bench, so that the process doing file operations never serves its own
// mount (go-fuse deadlocks otherwise).
//
//	ckptfs-bench loopback [--plus [--writeback]] BACKING MNT
//
// It mounts with DirectMountStrict (no fusermount here; we are root), prints
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
	plus := fl.Bool("plus", false, "tuned options (L+)")
	writeback := fl.Bool("writeback", false, "with --plus: writeback cache")
	debug := fl.Bool("debug", false, "log every FUSE request to stderr")
	if err := fl.Parse(args); err != nil || fl.NArg() != 2 {
		fmt.Fprintln(stderr, "usage: ckptfs-bench loopback [--plus [--writeback]] BACKING MNT")
		return exitUsage
	}
	backing, mnt := fl.Arg(0), fl.Arg(1)
	signal.Ignore(os.Interrupt) // the parent decides when we stop
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)

	server, err := mountLoopback(backing, mnt, *plus, *writeback, *debug)
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

// mountLoopback mounts fs.NewLoopbackRoot(backing) on mnt.
//
// L gets exactly what fs.Mount(..., nil) would give (1 s entry and attribute
// timeouts, no negative caching, max_write 128 KiB, max_background 12).
// go-fuse v2.12.1 negotiates FUSE passthrough by default (CAP_PASSTHROUGH is
// in its default capability set and LoopbackFile implements
// FilePassthroughFder), so L already reads and writes through passthrough
// when we are root on a 6.9+ kernel.
//
// L+ adds what the measurements in BENCH.md justify: 1 h entry, attribute
// and negative timeouts (safe: the loopback is the only writer of the
// backing directory), cached directory listings kept across opens,
// max_write 1 MiB, max_background 64, HANDLE_KILLPRIV_V2 (see below). The writeback cache is off unless
// asked for: the kernel does not combine it with passthrough, and
// passthrough is what makes reads native.
func mountLoopback(backing, mnt string, plus, writeback, debug bool) (*fuse.Server, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(backing, &st); err != nil {
		return nil, err
	}
	second := time.Second
	opts := &fs.Options{EntryTimeout: &second, AttrTimeout: &second}
	opts.MaxBackground = 12
	opts.DirectMountStrict = true
	opts.FsName = backing
	opts.Name = "loopback"
	opts.Debug = debug

	var root fs.InodeEmbedder
	if plus {
		hour := time.Hour
		opts.EntryTimeout, opts.AttrTimeout, opts.NegativeTimeout = &hour, &hour, &hour
		opts.MaxWrite = 1 << 20
		opts.MaxBackground = 64
		// Without HANDLE_KILLPRIV_V2 the kernel asks GETXATTR
		// security.capability before every write (file_remove_privs), even
		// through passthrough: 4 KiB writes ran at 81 MB/s and cost the
		// daemon 0.7 CPU-s per 20k writes; with it, 550 MB/s and ~0. The
		// price: the daemon must then clear setuid/setgid bits itself
		// (FUSE_WRITE_KILL_SUIDGID, FATTR_KILL_SUIDGID), which the stock
		// loopback ignores, so a write by a non-root caller keeps them here.
		// A real overlay can honour the flags at no round-trip cost.
		opts.ExtraCapabilities |= fuse.CAP_HANDLE_KILLPRIV_V2
		if writeback {
			opts.ExtraCapabilities |= fuse.CAP_WRITEBACK_CACHE
		}
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
