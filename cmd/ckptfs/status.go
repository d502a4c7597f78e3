package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"ckptfs/internal/rundir"
	"ckptfs/turnctl"
	"ckptfs/versionstore"
)

// statusReport is what `ckptfs status` prints.
type statusReport struct {
	Dir        string `json:"dir"`
	Mounted    bool   `json:"mounted"`
	PID        int    `json:"pid,omitempty"`
	Alive      bool   `json:"alive"`
	Store      string `json:"store,omitempty"`
	StoreBytes int64  `json:"store_bytes"`
	Socket     string `json:"socket,omitempty"`
	Started    string `json:"started,omitempty"`
	// From the daemon over the control socket (mounted only).
	Latest   *uint64            `json:"latest_turn,omitempty"`
	OpenTurn *versionstore.Turn `json:"open_turn,omitempty"`
	Error    string             `json:"error,omitempty"` // the daemon did not answer
}

func runStatus(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("status", "status [--json] [DIR]", stdout)
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 1 {
		return usageError{"status: expected at most one DIR (try --help)"}
	}
	var dir string
	if fs.NArg() == 1 {
		d, err := filepath.Abs(fs.Arg(0))
		if err != nil {
			return err
		}
		dir = filepath.Clean(d)
	} else {
		wd, err := os.Getwd()
		if err != nil {
			return err
		}
		if dir, err = rundir.FindMount(wd); err != nil {
			return fmt.Errorf("status: %v (name a DIR)", err)
		}
	}
	rep := statusReport{Dir: dir, Mounted: rundir.IsMounted(dir)}
	if info, err := rundir.ReadInfo(dir); err == nil {
		rep.PID, rep.Store, rep.Socket = info.PID, info.Store, info.Socket
		rep.Started = info.Started.Format("2006-01-02 15:04:05")
		rep.Alive = alive(info.PID)
	}
	if rep.Store == "" {
		rep.Store = filepath.Join(dir, ".ckptfs")
	}
	storePath := rep.Store
	if rep.Mounted && rep.Alive {
		// The store is hidden by the mount; the daemon's cwd is the store.
		storePath = fmt.Sprintf("/proc/%d/cwd", rep.PID)
	}
	rep.StoreBytes = du(storePath + "/")
	if rep.Mounted && rep.Alive && rep.Socket != "" {
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
		}
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	fmt.Fprintf(stdout, "dir:     %s\n", rep.Dir)
	if rep.Mounted {
		fmt.Fprintf(stdout, "mounted: yes\n")
	} else {
		fmt.Fprintf(stdout, "mounted: no\n")
	}
	if rep.PID != 0 {
		state := "running"
		if !rep.Alive {
			state = "dead"
		}
		fmt.Fprintf(stdout, "daemon:  pid %d (%s), since %s\n", rep.PID, state, rep.Started)
	}
	fmt.Fprintf(stdout, "store:   %s (%s on disk)\n", rep.Store, human(rep.StoreBytes))
	if rep.Latest != nil {
		fmt.Fprintf(stdout, "turns:   %d\n", *rep.Latest)
		if t := rep.OpenTurn; t != nil {
			fmt.Fprintf(stdout, "open:    turn %d (%s) since %s\n", t.Num, t.Kind, t.Start.Format("2006-01-02 15:04:05"))
		} else {
			fmt.Fprintf(stdout, "open:    none\n")
		}
	} else if rep.Error != "" {
		fmt.Fprintf(stdout, "turns:   unknown (%s)\n", rep.Error)
	}
	return nil
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

func human(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
