package control

import (
	"runtime"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"ckptfs/internal/units"
	"ckptfs/versionstore"
)

// autogc.go: the daemon's background gc. It looks whether the policy has
// work (the store over its budget, turns older than the windows) every
// interval, whenever the store has kept another growthStep of content
// (versionstore.Store.Grown: a fast writer passes its budget within an
// interval), and at the end of a turn that kept any, and then runs the store's GC on a thread of the lowest CPU
// and I/O priority, sleeping between its batches: captures and turn
// boundaries wait on it only for the few milliseconds a deleting batch
// holds the store's content lock (versionstore/gc.go). When the store is
// past its budget by more than a twentieth, the gc runs without the
// sleeps and at a priority that competes (setPriority), so that a fast
// writer cannot outrun it. An explicit gc
// (Service.GC) runs the same way.

// autoGCPause is the sleep between two batches of a background gc.
const autoGCPause = 20 * time.Millisecond

// lowPriority locks the calling goroutine to its thread and gives the
// thread the lowest CPU and I/O priority. The goroutine must end without
// unlocking: Go then ends the thread, which never serves another one.
func lowPriority() {
	runtime.LockOSThread() // the priorities below are the thread's
	setPriority(false)
}

// setPriority sets the calling (locked) thread's priorities: the lowest
// (nice 19, idle I/O), or, urgent, the lowest that still competes with
// the work on the mount (nice 10, best-effort I/O at its lowest level).
func setPriority(urgent bool) {
	tid := unix.Gettid()
	nice, io := 19, 3<<13 // IOPRIO_CLASS_IDLE
	if urgent {
		nice, io = 10, 2<<13|7 // IOPRIO_CLASS_BE, level 7
	}
	unix.Setpriority(unix.PRIO_PROCESS, tid, nice)
	// ioprio_set(IOPRIO_WHO_PROCESS, tid, io): best effort.
	unix.Syscall(unix.SYS_IOPRIO_SET, 1, uintptr(tid), uintptr(io))
}

// overBudget reports whether the store is past its budget by more than
// a twentieth: a writer outruns a gc that only takes what is left over,
// and the gc must then keep up with it.
func overBudget(st *versionstore.Store) bool {
	pol, err := st.EffectivePolicy()
	return err == nil && st.StoreBytes() > pol.KeepSize+pol.KeepSize/20
}

// AutoGC runs until stop is closed.
func AutoGC(st *versionstore.Store, every time.Duration, stop <-chan struct{}, logf func(string, ...any)) {
	lowPriority()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		case <-st.Grown():
		}
		due, why, err := st.GCDue()
		if err != nil || !due {
			continue
		}
		opts := versionstore.GCOptions{Pause: func() { time.Sleep(autoGCPause) }}
		urgent := overBudget(st)
		if urgent {
			setPriority(true)
			opts.Pause = nil
		}
		rep, err := st.GC(opts)
		if urgent {
			setPriority(false)
		}
		if err != nil {
			logf("background gc (%s): %v", why, err)
			continue
		}
		msg := ""
		if rep.Start != nil {
			msg = ", history starts at turn " + strconv.FormatUint(rep.Start.Turn, 10)
		}
		if rep.Merged > 0 {
			msg += ", " + strconv.Itoa(rep.Merged) + " turns merged into the kept turns after them"
		}
		logf("background gc (%s): freed %s%s; the store holds %s", why, units.Bytes(rep.Freed()), msg, units.Bytes(rep.After))
	}
}
