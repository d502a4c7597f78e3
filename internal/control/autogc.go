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
// interval, and whenever the store has kept another growthStep of content
// (versionstore.Store.Grown: a fast writer passes its budget within an
// interval), and then runs the store's GC on a thread of the lowest CPU
// and I/O priority, sleeping between its batches: captures and turn
// boundaries wait on it only for the few milliseconds a deleting batch
// holds the store's content lock (versionstore/gc.go). An explicit gc
// (Service.GC) runs at those priorities too, without the sleeps.

// autoGCPause is the sleep between two batches of a background gc.
const autoGCPause = 20 * time.Millisecond

// lowPriority locks the calling goroutine to its thread and gives the
// thread the lowest CPU and I/O priority. The goroutine must end without
// unlocking: Go then ends the thread, which never serves another one.
func lowPriority() {
	runtime.LockOSThread() // the priorities below are the thread's
	tid := unix.Gettid()
	unix.Setpriority(unix.PRIO_PROCESS, tid, 19)
	// ioprio_set(IOPRIO_WHO_PROCESS, tid, IOPRIO_CLASS_IDLE): best effort.
	unix.Syscall(unix.SYS_IOPRIO_SET, 1, uintptr(tid), 3<<13)
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
		rep, err := st.GC(versionstore.GCOptions{Pause: func() { time.Sleep(autoGCPause) }})
		if err != nil {
			logf("background gc (%s): %v", why, err)
			continue
		}
		msg := ""
		if rep.Start != nil {
			msg = ", history starts at turn " + strconv.FormatUint(rep.Start.Turn, 10)
		}
		if rep.Merged > 0 {
			msg += ", " + strconv.Itoa(rep.Merged) + " turns thinned out"
		}
		logf("background gc (%s): freed %s%s; the store holds %s", why, units.Bytes(rep.Freed()), msg, units.Bytes(rep.After))
	}
}
