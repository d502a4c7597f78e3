package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"ckptfs/internal/bytejson"
	"ckptfs/internal/ckpt"
	"ckptfs/internal/rundir"
	"ckptfs/internal/storeref"
	"ckptfs/internal/turnctlcli"
	"ckptfs/internal/units"
	"ckptfs/turnctl"
)

// statusReport is what `ckptfs status` prints.
type statusReport struct {
	Dir     string `json:"dir"`
	Mounted bool   `json:"mounted"`
	// OwnerUID is the user the mount belongs to (mounted only; -1:
	// unknown). Only that user's daemon answers it; for anyone else
	// Error says so.
	OwnerUID   int    `json:"owner_uid"`
	Private    bool   `json:"private"` // no allow_other: only its owner can enter it
	PID        int    `json:"pid,omitempty"`
	Alive      bool   `json:"alive"`
	Store      string `json:"store,omitempty"`
	StoreBytes int64  `json:"store_bytes"`
	// ReserveBytes is the part of StoreBytes that is the store's ballast:
	// room held back so that the store can still write when the disk
	// fills (given up then, made again once space is back).
	ReserveBytes int64 `json:"reserve_bytes"`
	// HistoryBytes is the store's size its budget is compared with (its
	// ballast aside), BudgetBytes the retention policy's budget; both from
	// the daemon (mounted only).
	HistoryBytes int64     `json:"history_bytes,omitempty"`
	BudgetBytes  int64     `json:"budget_bytes,omitempty"`
	AllKept      bool      `json:"all_kept,omitempty"` // ckpt.Health.AllKept
	Socket       string    `json:"socket,omitempty"`
	Started      time.Time `json:"started,omitempty"`
	// From the daemon over the control socket (mounted only).
	Latest   *uint64    `json:"latest_turn,omitempty"`
	OpenTurn *ckpt.Turn `json:"open_turn,omitempty"`
	Error    string     `json:"error,omitempty"` // the daemon did not answer
	// The store's health, from the daemon: full (changes fail with ENOSPC)
	// and its last error. FreeBytes is measured here (-1: unknown).
	StoreFull  bool   `json:"store_full"`
	StoreError string `json:"store_error,omitempty"`
	FreeBytes  int64  `json:"store_free_bytes"`
	// The fatal error a dead daemon logged, if any.
	Fatal string `json:"fatal,omitempty"`
}

func runStatus(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("status", "status [--json] [DIR]", stdout)
	asJSON := fs.Bool("json", false, "print JSON (schema: doc/schema/ckptfs-status.json)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 1 {
		return usageError{"status: expected at most one DIR (try --help)"}
	}
	var dir string
	if pwd := os.Getenv("PWD"); fs.NArg() == 0 && filepath.IsAbs(pwd) && rundir.StoppedAround(pwd) != nil {
		dir = filepath.Clean(pwd) // os.Getwd would stat it
	} else if fs.NArg() == 0 {
		wd, err := os.Getwd()
		if err != nil {
			return err
		}
		dir = wd
	} else {
		d, err := filepath.Abs(fs.Arg(0))
		if err != nil {
			return err
		}
		dir = filepath.Clean(d)
		// A DIR that is not there is a typo; one that cannot be entered
		// (another user's private mount, a dead mount) is reported on,
		// and so is one in a stopped daemon's mount, where a stat would
		// wait for as long as it stays stopped.
		if rundir.StoppedAround(dir) == nil {
			if fi, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("status: %v", err)
			} else if err == nil && !fi.IsDir() {
				return fmt.Errorf("status: %s is not a directory", dir)
			}
			// The mount table names a mount by its path with symlinks
			// resolved, as mount and umount take DIR.
			dir = canonical(dir)
		}
	}
	if v, ok := viewAround(dir); ok {
		return viewStatusError(v)
	}
	// The project DIR is in: the mount around it, or DIR itself.
	if m, err := rundir.FindMount(dir); err == nil {
		dir = m
	} else if fs.NArg() == 0 {
		return fmt.Errorf("status: %v (name a DIR)", err)
	}
	rep := statusReport{Dir: dir, OwnerUID: -1}
	var foreign error
	if m, err := rundir.Lookup(dir); err == nil && m.Dir == dir {
		rep.Mounted, rep.OwnerUID, rep.Private = true, m.UID, !m.AllowOther
		foreign = m.Mine()
	}
	if foreign != nil {
		// Its runtime files are its owner's, and its daemon answers
		// nobody else: say whose it is rather than guess.
		rep.Error = foreign.Error()
	} else if info, err := rundir.ReadInfo(dir); err == nil {
		rep.PID, rep.Store, rep.Socket = info.PID, info.Store, info.Socket
		rep.Started = info.Started
		rep.Alive = rundir.Alive(info.PID)
	}
	if rep.Store == "" && foreign == nil {
		rep.Store = storeref.Default(dir)
		if r, ok := storeref.Lookup(dir); ok && !rep.Mounted {
			rep.Store = r.Store // given at an earlier mount
		}
	}
	storePath := rep.Store
	if rep.Mounted && rep.Alive {
		// The store is hidden by the mount; the daemon's cwd is the store.
		storePath = fmt.Sprintf("/proc/%d/cwd", rep.PID)
	}
	rep.FreeBytes = -1
	if foreign == nil {
		rep.StoreBytes = du(storePath + "/")
		if fi, err := os.Lstat(filepath.Join(storePath, "ballast")); err == nil && fi.Mode().IsRegular() {
			rep.ReserveBytes = fi.Size()
		}
		var sfs syscall.Statfs_t
		if syscall.Statfs(storePath+"/", &sfs) == nil {
			rep.FreeBytes = int64(sfs.Bavail) * int64(sfs.Bsize)
		}
	}
	if rep.PID != 0 && !rep.Alive {
		rep.Fatal = lastFatal(filepath.Join(storePath, "daemon.log"))
	}
	stopped := rep.Mounted && rep.Alive && rundir.Stopped(rep.PID)
	if stopped {
		// Its socket would not answer, nor would the mount.
		rep.Error = rundir.StoppedError(rep.Dir, rep.PID).Error()
	} else if rep.Mounted && rep.Alive && rep.Socket != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		st, err := turnctl.NewClient(rep.Socket).Status(ctx, turnctl.StatusRequest{})
		cancel()
		if err != nil {
			rep.Error = err.Error()
		} else {
			rep.Latest = &st.Latest
			if st.Open {
				rep.OpenTurn = st.Turn
			}
			rep.StoreFull, rep.StoreError = st.Store.Full, st.Store.LastError
			rep.HistoryBytes, rep.BudgetBytes = st.Store.StoreBytes, st.Store.Budget
			rep.AllKept = st.Store.AllKept
		}
	}
	if *asJSON {
		data, err := bytejson.MarshalIndent(rep.json(), "", "  ")
		if err != nil {
			return err
		}
		_, err = stdout.Write(append(data, '\n'))
		return err
	}
	fmt.Fprintf(stdout, "dir:     %s\n", rep.Dir)
	if rep.Mounted {
		mode := "shared with other users"
		if rep.Private {
			mode = "private to its owner"
		}
		fmt.Fprintf(stdout, "mounted: yes, by %s, %s\n", uidName(rep.OwnerUID), mode)
	} else {
		fmt.Fprintf(stdout, "mounted: no\n")
	}
	if rep.PID != 0 {
		state := "running"
		if !rep.Alive {
			state = "dead"
		} else if stopped {
			state = "stopped: it answers nothing until kill -CONT " + strconv.Itoa(rep.PID)
		}
		fmt.Fprintf(stdout, "daemon:  pid %d (%s), since %s\n", rep.PID, state, rep.Started.Local().Format("2006-01-02 15:04:05"))
	}
	free := ""
	if rep.FreeBytes >= 0 {
		free = ", " + units.Bytes(rep.FreeBytes) + " free"
	}
	if rep.Store != "" && rep.Mounted && rep.PID != 0 && !rep.Alive {
		fmt.Fprintf(stdout, "store:   %s (not readable under a mount whose daemon is dead: ckptfs umount %s, then mount it again)\n", rep.Store, rep.Dir)
	} else if rep.Store != "" && !rep.Mounted && !exists(rep.Store) {
		fmt.Fprintf(stdout, "store:   none yet (ckptfs mount %s makes it at %s)\n", rep.Dir, rep.Store)
	} else if rep.Store != "" {
		fmt.Fprintf(stdout, "store:   %s (%s on disk%s)\n", rep.Store, units.Bytes(rep.StoreBytes), free)
	}
	if rep.ReserveBytes > 0 {
		fmt.Fprintf(stdout, "reserve: %s of that held back, so that the store can still write when the disk fills\n", units.Bytes(rep.ReserveBytes))
	}
	if rep.BudgetBytes > 0 {
		over := ""
		if rep.AllKept {
			over = "; over budget, but the gc may forget nothing more: what is left is pinned, the newest turn or its undo (turnctl gc --dry-run)"
		} else if rep.HistoryBytes > rep.BudgetBytes {
			over = "; over budget: the daemon's gc trims the oldest turns"
		}
		fmt.Fprintf(stdout, "budget:  %s of %s (%.0f%%, the reserve aside%s)\n", units.Bytes(rep.HistoryBytes), units.Bytes(rep.BudgetBytes),
			100*float64(rep.HistoryBytes)/float64(rep.BudgetBytes), over)
	}
	if rep.StoreFull {
		fmt.Fprintf(stdout, "problem: store full: writes whose earlier bytes must be kept fail with ENOSPC until space is freed under the store (deletes, renames and chmod still work)\n")
	}
	if rep.StoreError != "" {
		fmt.Fprintf(stdout, "error:   %s\n", rep.StoreError)
	}
	if rep.Fatal != "" {
		fmt.Fprintf(stdout, "fatal:   %s\n", rep.Fatal)
	}
	if rep.Latest != nil {
		fmt.Fprintf(stdout, "latest:  turn %d\n", *rep.Latest)
		if t := rep.OpenTurn; t != nil {
			fmt.Fprintf(stdout, "open:    turn %d (%s) since %s\n", t.Num, t.Kind, t.Start.Format("2006-01-02 15:04:05"))
		} else {
			fmt.Fprintf(stdout, "open:    none\n")
		}
	} else if rep.Error != "" {
		fmt.Fprintf(stdout, "latest:  unknown (%s)\n", rep.Error)
	}
	return nil
}

// statusJSON is what `ckptfs status --json` prints (doc/schema/ckptfs-status.json),
// by the rules of turnctl's --json: every key always there, null for what
// does not exist or is not known, times RFC 3339 in UTC.
type statusJSON struct {
	Dir            string              `json:"dir"`
	Mounted        bool                `json:"mounted"`
	OwnerUID       *int                `json:"owner_uid"` // null: not mounted, or unknown
	Private        bool                `json:"private"`
	PID            *int                `json:"pid"` // null: no daemon info
	Alive          bool                `json:"alive"`
	Started        turnctlcli.JSONTime `json:"started"`
	Socket         string              `json:"socket"`
	Store          string              `json:"store"`
	StoreBytes     int64               `json:"store_bytes"`
	ReserveBytes   int64               `json:"reserve_bytes"`
	StoreFreeBytes *int64              `json:"store_free_bytes"` // null: unknown
	HistoryBytes   *int64              `json:"history_bytes"`    // null: the daemon did not say
	BudgetBytes    *int64              `json:"budget_bytes"`     // null: the daemon did not say
	AllKept        bool                `json:"all_kept"`
	LatestTurn     *uint64             `json:"latest_turn"` // null: the daemon did not say
	OpenTurn       any                 `json:"open_turn"`   // null: none open, or not known
	StoreFull      bool                `json:"store_full"`
	StoreError     string              `json:"store_error"`
	Error          string              `json:"error"`
	Fatal          string              `json:"fatal"`
}

func (r statusReport) json() statusJSON {
	o := statusJSON{Dir: r.Dir, Mounted: r.Mounted, Private: r.Private, Alive: r.Alive,
		Started: turnctlcli.JSONTime(r.Started), Socket: r.Socket, Store: r.Store,
		StoreBytes: r.StoreBytes, ReserveBytes: r.ReserveBytes, LatestTurn: r.Latest,
		OpenTurn: turnctlcli.JSONTurn(r.OpenTurn), StoreFull: r.StoreFull,
		StoreError: r.StoreError, Error: r.Error, Fatal: r.Fatal, AllKept: r.AllKept}
	if r.OwnerUID >= 0 {
		o.OwnerUID = &r.OwnerUID
	}
	if r.PID != 0 {
		o.PID = &r.PID
	}
	if r.FreeBytes >= 0 {
		o.StoreFreeBytes = &r.FreeBytes
	}
	if r.Latest != nil {
		// The daemon answered: these are its.
		o.HistoryBytes, o.BudgetBytes = &r.HistoryBytes, &r.BudgetBytes
	}
	return o
}

// uidName is "uid N (name)", or "uid N" when N has no name here.
func uidName(uid int) string {
	if uid < 0 {
		return "an unknown user"
	}
	s := fmt.Sprintf("uid %d", uid)
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil {
		s += " (" + u.Username + ")"
	}
	return s
}

// lastFatal returns the last fatal store error in a daemon log, or "".
func lastFatal(log string) string {
	b, err := os.ReadFile(log)
	if err != nil {
		return ""
	}
	last := ""
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, "fatal") {
			last = strings.TrimSpace(line)
		}
	}
	return last
}

// du sums the disk blocks under root.
func du(root string) int64 {
	var total int64
	filepath.WalkDir(root, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if fi, err := d.Info(); err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				total += st.Blocks * 512
			}
		}
		return nil
	})
	return total
}

// viewAround returns the view (ckptfs mount --at) that dir is in, if any.
func viewAround(dir string) (rundir.Mount, bool) {
	ms, _ := rundir.ViewTable()
	for i := len(ms) - 1; i >= 0; i-- {
		if rel, err := filepath.Rel(ms[i].Dir, dir); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
			return ms[i], true
		}
	}
	return rundir.Mount{}, false
}

// viewStatusError says that status was asked of a view, not a project.
func viewStatusError(v rundir.Mount) error {
	i := strings.LastIndexByte(v.Source, '@')
	if i < 0 {
		return fmt.Errorf("status: %s is a read-only view of a turn (ckptfs mount --at), not a project", v.Dir)
	}
	project, turn := v.Source[:i], v.Source[i+1:]
	return fmt.Errorf("status: %s is a read-only view of %s at the end of turn %s (ckptfs mount --at); ckptfs status %s tells of the project", v.Dir, project, turn, project)
}

// exists reports whether p is there; asked only of a store outside a
// mount: through one, a stopped daemon would leave the lstat hanging.
func exists(p string) bool {
	_, err := os.Lstat(p)
	return !errors.Is(err, os.ErrNotExist)
}
