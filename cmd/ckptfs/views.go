package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"ckptfs/fusefs/atview"
	"ckptfs/internal/backing"
	"ckptfs/versionstore"
)

// views.go: the read-only views of a turn (ckptfs mount --at) that a
// daemon serves beside its project: their entries and bytes come from its
// store and the live tree (versionstore.ViewAt, OpenView), their FUSE
// servers run in its process, and they go when it does.

// views implements control.Viewer for the daemon.
type views struct {
	store   *versionstore.Store
	tree    *backing.Tree
	project string
	private bool
	debug   bool
	// unwatched: the project is not mounted (a view's own daemon), so
	// nothing records its changes (versionstore.ViewOptions).
	unwatched bool
	logf      func(format string, args ...any)

	mu     sync.Mutex
	live   map[string]*fuse.Server // by mount point; nil while mounting
	closed bool

	// reads holds off closeAll while a view reads the store; once
	// stopped, a view detached in use answers EIO instead of reading a
	// closed store.
	reads   sync.RWMutex
	stopped bool
}

func newViews(store *versionstore.Store, tree *backing.Tree, project string, private, debug bool, logf func(string, ...any)) *views {
	return &views{store: store, tree: tree, project: project, private: private, debug: debug, logf: logf, live: map[string]*fuse.Server{}}
}

// MountView mounts the tree at the end of turn n on dir.
func (v *views) MountView(n uint64, dir string) error {
	_, err := v.add(n, dir)
	return err
}

// add mounts the view of turn n on dir and returns its server.
func (v *views) add(n uint64, dir string) (*fuse.Server, error) {
	if r, err := filepath.Rel(v.project, dir); err != nil || r == "." || !(r == ".." || strings.HasPrefix(r, "../")) {
		return nil, fmt.Errorf("%s is inside the project %s: mount the view outside it", dir, v.project)
	}
	v.mu.Lock()
	if v.closed {
		v.mu.Unlock()
		return nil, errors.New("the daemon is stopping")
	}
	if _, ok := v.live[dir]; ok {
		v.mu.Unlock()
		return nil, fmt.Errorf("%s is a view already; run 'ckptfs umount %s' first", dir, dir)
	}
	v.live[dir] = nil
	v.mu.Unlock()
	// The turn is kept while the view is mounted: the store may have to
	// read its files at any time.
	release, err := v.store.Hold(n)
	if err != nil {
		v.mu.Lock()
		delete(v.live, dir)
		v.mu.Unlock()
		return nil, err
	}
	srv, err := v.mount(n, dir)
	v.mu.Lock()
	defer v.mu.Unlock()
	if err != nil {
		delete(v.live, dir)
		release()
		return nil, err
	}
	if v.closed {
		// closeAll ran while this one was being mounted.
		delete(v.live, dir)
		srv.Unmount()
		release()
		return nil, errors.New("the daemon is stopping")
	}
	v.live[dir] = srv
	go func() {
		srv.Wait()
		release()
		v.mu.Lock()
		if v.live[dir] == srv {
			delete(v.live, dir)
		}
		v.mu.Unlock()
		v.logf("view of turn %d on %s unmounted", n, dir)
	}()
	v.logf("view of turn %d mounted on %s", n, dir)
	return srv, nil
}

func (v *views) mount(n uint64, dir string) (*fuse.Server, error) {
	sn, err := v.store.ViewAt(n, v.tree, versionstore.ViewOptions{Unwatched: v.unwatched})
	if err != nil {
		return nil, err
	}
	t, err := v.store.Turn(n)
	if err != nil {
		return nil, err
	}
	end := t.End
	if end.IsZero() {
		end = time.Unix(0, 0)
	}
	return atview.Mount(dir, viewEntries(sn), &viewSource{v: v, sn: sn}, atview.Options{
		Time:    end,
		Private: v.private,
		Name:    fmt.Sprintf("%s@%d", v.project, n),
		Debug:   v.debug,
		Logf:    v.logf,
	})
}

// viewEntries lists a snapshot's entries for atview, in the same order,
// with their hard-link groups.
func viewEntries(sn *versionstore.Snapshot) []atview.Entry {
	out := make([]atview.Entry, len(sn.Entries))
	first := map[[2]uint64]int{}
	for i, e := range sn.Entries {
		out[i] = atview.Entry{Path: e.Path, State: e.State, Link: i}
		if e.Linked() {
			k := [2]uint64{e.Inode.Dev, e.Inode.Ino}
			if j, ok := first[k]; ok {
				out[i].Link = j
			} else {
				first[k] = i
			}
		}
	}
	return out
}

// viewSource opens a view's files through the store.
type viewSource struct {
	v  *views
	sn *versionstore.Snapshot
}

var errStopped = errors.New("the daemon has stopped")

func (s *viewSource) Open(i int) (atview.File, error) {
	s.v.reads.RLock()
	defer s.v.reads.RUnlock()
	if s.v.stopped {
		return nil, errStopped
	}
	f, err := s.v.store.OpenView(s.sn, s.sn.Entries[i], s.v.tree)
	if err != nil {
		return nil, err
	}
	return &viewFile{f: f, v: s.v}, nil
}

// viewFile reads through the store while the daemon has it open.
type viewFile struct {
	f *versionstore.ViewFile
	v *views
}

func (f *viewFile) ReadAt(p []byte, off int64) (int, error) {
	f.v.reads.RLock()
	defer f.v.reads.RUnlock()
	if f.v.stopped {
		return 0, errStopped
	}
	return f.f.ReadAt(p, off)
}

func (f *viewFile) Close() error { return f.f.Close() }

// closeAll unmounts every view (detaching one in use) and refuses new
// ones: the daemon is stopping, and its store with it.
func (v *views) closeAll() {
	v.mu.Lock()
	v.closed = true
	live := v.live
	v.live = map[string]*fuse.Server{}
	v.mu.Unlock()
	for dir, srv := range live {
		if srv == nil {
			continue
		}
		if err := srv.Unmount(); err != nil {
			// In use: its users see a dead directory from now on.
			v.logf("unmount the view on %s: %v; detaching it", dir, err)
			if err := detach(dir); err != nil {
				v.logf("detach the view on %s: %v", dir, err)
			}
		}
	}
	v.reads.Lock()
	v.stopped = true
	v.reads.Unlock()
}
