package main

// The hidden "fuse-rtt-serve" subcommand: the server side of fuse-rtt
// (fusertt.go), in a process of its own as a daemon would be.
//
//	ckptfs-bench fuse-rtt-serve --transport dev|uring|go-fuse [--pin=false] MNT
//
// It mounts a root directory holding one empty file "f" on MNT, prints
// "ready" on stdout once requests reach it by the chosen transport, serves
// until SIGTERM, unmounts (lazily if busy), prints the request counts
// ("dev=N ring=N getattr=N") and exits.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/spf13/pflag"

	"ckptfs/internal/rawfuse"
)

func runFuseRTTServe(args []string, stdout, stderr io.Writer) int {
	fl := pflag.NewFlagSet("fuse-rtt-serve", pflag.ContinueOnError)
	fl.SetOutput(stderr)
	transport := fl.String("transport", "dev", "dev (read/write on /dev/fuse), uring (FUSE over io_uring) or go-fuse")
	threads := fl.Int("threads", 2, "dev: goroutines reading /dev/fuse")
	depth := fl.Int("depth", 4, "uring: ring entries per queue")
	pin := fl.Bool("pin", true, "uring: pin each queue's thread to its CPU")
	if err := fl.Parse(args); err != nil || fl.NArg() != 1 {
		fmt.Fprintln(stderr, "usage: ckptfs-bench fuse-rtt-serve --transport dev|uring|go-fuse MNT")
		return exitUsage
	}
	mnt := fl.Arg(0)
	signal.Ignore(os.Interrupt) // the parent decides when we stop
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)

	var (
		counts func() string
		wait   func() error
		err    error
	)
	switch *transport {
	case "dev", "uring":
		counts, wait, err = serveRaw(mnt, *transport == "uring", *threads, *depth, *pin)
	case "go-fuse":
		counts, wait, err = serveGoFuse(mnt)
	default:
		err = fmt.Errorf("unknown transport %q", *transport)
	}
	if err != nil {
		rawfuse.Unmount(mnt)
		fmt.Fprintf(stderr, "fuse-rtt-serve: %v\n", err)
		return exitFail
	}
	fmt.Fprintln(stdout, "ready")
	<-term
	if err := rawfuse.Unmount(mnt); err != nil {
		fmt.Fprintf(stderr, "fuse-rtt-serve: unmount %s: %v\n", mnt, err)
	}
	done := make(chan error, 1)
	go func() { done <- wait() }()
	select {
	case err = <-done:
	case <-time.After(5 * time.Second):
		err = errors.New("the server did not stop 5 s after the unmount")
	}
	fmt.Fprintln(stdout, counts())
	if err != nil {
		fmt.Fprintf(stderr, "fuse-rtt-serve: %v\n", err)
		return exitFail
	}
	return exitOK
}

// serveRaw mounts rawfuse's tree with zero attribute timeouts and serves it
// over /dev/fuse (threads readers) or, with uring, over io_uring (and one
// /dev/fuse reader for INIT and what the ring does not carry). It returns
// once the transport is live.
func serveRaw(mnt string, uring bool, threads, depth int, pin bool) (counts func() string, wait func() error, err error) {
	t := rawfuse.NewTree(uring)
	t.EntryValidNs = uint64(time.Hour)
	fd, err := rawfuse.Mount(mnt)
	if err != nil {
		return nil, nil, err
	}
	counts = func() string {
		return fmt.Sprintf("dev=%d ring=%d getattr=%d", t.DevRequests.Load(), t.RingRequests.Load(), t.Getattrs.Load())
	}
	if uring {
		threads = 1
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for range threads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := rawfuse.ServeDev(fd, t); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	var u *rawfuse.Uring
	wait = func() error {
		wg.Wait()
		if u != nil {
			if err := u.Wait(); err != nil {
				errs = append(errs, err)
			}
		}
		syscall.Close(fd)
		return errors.Join(errs...)
	}
	// INIT comes with the mount; nothing else can be asked before its
	// answer, and the rings cannot register before it either.
	select {
	case <-t.InitDone():
	case <-time.After(10 * time.Second):
		return nil, nil, errors.New("no INIT 10 s after the mount")
	}
	if uring {
		if u, err = rawfuse.StartUring(fd, t, depth, pin); err != nil {
			return nil, nil, err
		}
	}
	return counts, wait, nil
}

// serveGoFuse mounts the same tree with go-fuse's fs package and default
// server options (but for a zero attribute timeout and, as root, mount(2)
// directly).
func serveGoFuse(mnt string) (counts func() string, wait func() error, err error) {
	zero, hour := time.Duration(0), time.Hour
	opts := &fs.Options{AttrTimeout: &zero, EntryTimeout: &hour}
	opts.DirectMountStrict = true
	opts.FsName = "ckptfs-rtt"
	opts.Name = "rtt"
	root := &rttDir{}
	server, err := fs.Mount(mnt, root, opts)
	if err != nil {
		return nil, nil, err
	}
	counts = func() string { return fmt.Sprintf("dev=- ring=- getattr=%d", root.getattrs.Load()) }
	wait = func() error { server.Wait(); return nil }
	return counts, wait, nil
}

// rttDir is go-fuse's root: one file "f", whose Getattr answers from memory.
type rttDir struct {
	fs.Inode
	getattrs atomic.Int64
}

var _ = (fs.NodeOnAdder)((*rttDir)(nil))

func (d *rttDir) OnAdd(ctx context.Context) {
	f := d.NewPersistentInode(ctx, &rttFile{getattrs: &d.getattrs}, fs.StableAttr{Mode: syscall.S_IFREG, Ino: 2})
	d.AddChild("f", f, false)
}

type rttFile struct {
	fs.Inode
	getattrs *atomic.Int64
}

var (
	_ = (fs.NodeGetattrer)((*rttFile)(nil))
	_ = (fs.NodeOpener)((*rttFile)(nil))
)

func (f *rttFile) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	f.getattrs.Add(1)
	out.Mode = syscall.S_IFREG | 0o644
	out.Nlink = 1
	out.Ino = 2
	return 0
}

func (f *rttFile) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	return nil, 0, 0
}
