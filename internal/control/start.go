package control

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"ckptfs/internal/backing"
	"ckptfs/internal/ckpt"
	"ckptfs/internal/exclude"
	"ckptfs/versionstore"
)

// StartOptions says who starts using a project's history.
type StartOptions struct {
	// Excludes are the patterns the overlay leaves out (a mount). Nil: an
	// offline command, which leaves out what the last mount did (the
	// manifest's patterns).
	Excludes *exclude.Matcher
	// KeepManifest: the tree as found becomes the manifest the next mount
	// compares with (an offline command; a mount drops it, since while
	// mounted the overlay sees every change).
	KeepManifest bool
	// Links: find the names of hard-linked files (the overlay must know
	// every name of a file written through one of them).
	Links bool
	// Logf receives what start-up did; may be nil.
	Logf func(format string, args ...any)
}

// Link is one name of a file with several links, found by the start-up
// walk of the tree.
type Link struct {
	Ino  uint64
	Path string
}

// StartResult says what Start found.
type StartResult struct {
	Recovered  bool                            // a rewind a crash interrupted was finished
	RolledBack string                          // or rolled back, why (it could not finish)
	Unclean    bool                            // history but no manifest of the last unmount: changes since were lost (a mount)
	Unsaved    string                          // with Unclean: the last daemon ended but could not save the manifest, why ("": it was killed or crashed)
	Offline    versionstore.OfflineResult      // what changed while unmounted
	Links      []Link                          // the names of hard-linked files, with StartOptions.Links
	Hidden     string                          // the store's path in the tree ("": outside it)
	Skip       func(p string, isDir bool) bool // what no capture sees: the store, the excluded, other projects' stores
}

// Start readies a project's history for use, the same way for a mount and
// for an offline command, before anyone reads history or the tree: it
// finishes a rewind a crash left half-done, records what changed while
// the project was unmounted (versionstore.RecordOffline), and tells the
// store which paths no capture sees. root is the project directory and
// storeDir the store's, as given by the user.
func Start(st *versionstore.Store, tree *backing.Tree, root, storeDir string, o StartOptions) (StartResult, error) {
	var res StartResult
	logf := o.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	var err error
	if rel, err := filepath.Rel(root, storeDir); err == nil && rel != "." && !strings.HasPrefix(rel, "..") {
		res.Hidden = filepath.ToSlash(rel)
	}
	if err := checkProject(st, tree, root); err != nil {
		return res, err
	}
	pats, haveManifest, err := st.ManifestPatterns()
	if err != nil {
		return res, err
	}
	// What the manifest's walk left out must be left out of the
	// comparison too: the union of its patterns and today's.
	var old *exclude.Matcher
	if haveManifest {
		if old, err = exclude.New(pats); err != nil {
			return res, err
		}
	}
	current := o.Excludes
	if current == nil {
		current = old
	}
	if current == nil {
		// An offline command with no manifest (the last daemon did not
		// stop cleanly): the patterns the last mount kept in the store,
		// or a rewind here would record and remove what that mount
		// left unversioned.
		kept, ok, err := st.Excludes()
		if err != nil {
			return res, err
		}
		if ok {
			if current, err = exclude.New(kept); err != nil {
				return res, err
			}
		}
	}
	// (A nil Matcher still matches the built-in pattern, another
	// project's store below the root: exclude.Nested.)
	res.Skip = func(p string, isDir bool) bool {
		return p == res.Hidden || current.Match(p, isDir)
	}
	st.SetUnversioned(res.Skip)
	// Only now: the rewind Recover finishes must leave the unversioned
	// paths below a directory it removes as the rewind itself does (see
	// versionstore's clear), not record and remove them.
	var rolled *versionstore.RolledBackError
	if res.Recovered, err = st.Recover(tree); errors.As(err, &rolled) {
		logf("an interrupted rewind could not finish: %v", err)
		res.RolledBack = err.Error()
	} else if err != nil {
		return res, fmt.Errorf("finishing an interrupted rewind: %w", err)
	} else if res.Recovered {
		logf("finished an interrupted rewind")
	}
	skip := res.Skip
	if old != nil && old != current {
		skip = func(p string, isDir bool) bool { return res.Skip(p, isDir) || old.Match(p, isDir) }
	}
	var seen func(string, ckpt.State, ckpt.Stamp)
	if o.Links {
		seen = func(p string, s ckpt.State, sp ckpt.Stamp) {
			if s.Type.Linkable() && sp.Nlink > 1 {
				res.Links = append(res.Links, Link{sp.Ino, p})
			}
		}
	}
	// A mount takes the note of a daemon that ended but could not save
	// the manifest (told once; stale if a manifest was saved since).
	unsaved := ""
	if o.Excludes != nil {
		if unsaved, err = st.TakeUnsaved(); err != nil {
			return res, err
		}
	}
	if !haveManifest {
		if st.Latest() > 0 && o.Excludes != nil {
			res.Unclean, res.Unsaved = true, unsaved
			if unsaved != "" {
				logf("no manifest of the last unmount (the daemon ended but could not save it: %s): changes made since, while unmounted, are not recorded", unsaved)
			} else {
				logf("no manifest of the last unmount (the daemon did not stop cleanly): changes made since, while unmounted, are not recorded")
			}
		}
		if seen == nil {
			return res, nil
		}
		err := tree.Walk("", res.Skip, func(p string, s ckpt.State, sp ckpt.Stamp) error {
			seen(p, s, sp)
			return nil
		})
		return res, err
	}
	start := time.Now()
	if res.Offline, err = st.RecordOffline(tree, skip, seen, o.KeepManifest); err != nil {
		return res, fmt.Errorf("recording changes made while unmounted: %w", err)
	}
	took := time.Since(start).Round(time.Millisecond)
	if res.Offline.Paths == 0 {
		logf("nothing changed while unmounted (%d paths checked in %v)", res.Offline.Examined, took)
	} else {
		logf("changed while unmounted: %d paths (%d whose earlier bytes were never seen), recorded as turn %d (%d paths checked in %v)",
			res.Offline.Paths, res.Offline.Lost, res.Offline.Turn.Num, res.Offline.Examined, took)
	}
	return res, nil
}

// checkProject refuses a store that holds another project's history (a
// --store given to the wrong project), before anything is recorded: the
// store keeps the project it was last used for, and one whose directory
// is still there, with the identity kept, is another project. A store
// with no record (new, or older than the record), or whose project is
// this one (also moved: the identity follows a rename) or is gone, is
// this project's: the record is made or brought up to date.
func checkProject(st *versionstore.Store, tree *backing.Tree, root string) error {
	_, ino, err := tree.LstatInode("")
	if err != nil {
		return err
	}
	here := versionstore.Project{Path: root, Dev: ino.Dev, Ino: ino.Ino}
	was, ok, err := st.Project()
	if err != nil {
		return err
	}
	if ok && (was.Dev != here.Dev || was.Ino != here.Ino) && was.Path != root {
		var x unix.Stat_t
		if unix.Lstat(was.Path, &x) == nil && uint64(x.Dev) == was.Dev && x.Ino == was.Ino {
			return fmt.Errorf("the store %s holds the history of %s, another project: use it with that one, or give this one another --store", st.Dir(), was.Path)
		}
	}
	if ok && was == here {
		return nil
	}
	return st.SetProject(here)
}
