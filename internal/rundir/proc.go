package rundir

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// procStat returns the fields of /proc/PID/stat after the command name
// (state, ppid, ...), nil when there is no such process. The name may
// hold spaces and parentheses: the fields follow the last ')'.
func procStat(pid int) []string {
	if pid <= 0 {
		return nil
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(string(b[i+1:]))
}

// procState returns the state letter /proc/PID/stat gives a process ('R',
// 'S', 'D', 'T', ...), or 0 when there is no such process or it is a
// zombie (it ended, its parent has not reaped it).
func procState(pid int) byte {
	state, _ := running(pid)
	return state
}

// running is procState and StartTime from one read of /proc/PID/stat.
func running(pid int) (state byte, start uint64) {
	if pid <= 0 || syscall.Kill(pid, 0) != nil {
		return 0, 0
	}
	f := procStat(pid)
	if len(f) == 0 || f[0] == "Z" || f[0] == "X" {
		return 0, 0
	}
	if len(f) >= 20 {
		start, _ = strconv.ParseUint(f[19], 10, 64)
	}
	return f[0][0], start
}

// Running reports whether process pid is running (not gone, not a
// zombie), and when it started (as StartTime; 0 if unknown).
func Running(pid int) (start uint64, ok bool) {
	state, start := running(pid)
	return start, state != 0
}

// Parent returns the parent of process pid, 0 when it cannot be read.
func Parent(pid int) int {
	f := procStat(pid)
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

// StartTime returns when process pid started, in clock ticks after boot
// (/proc/PID/stat's starttime), 0 when it cannot be read. A pid and its
// start time name a process: a pid alone may be reused by another.
func StartTime(pid int) uint64 {
	f := procStat(pid)
	if len(f) < 20 {
		return 0
	}
	t, _ := strconv.ParseUint(f[19], 10, 64)
	return t
}

// Alive reports whether the process pid is running (a zombie is not).
func Alive(pid int) bool { return procState(pid) != 0 }

// Stopped reports whether the process pid is stopped, by a SIGSTOP (or
// SIGTSTP, SIGTTIN, SIGTTOU) or a debugger: a stopped daemon answers
// nothing, neither its socket nor the kernel's FUSE requests, until it
// gets SIGCONT.
func Stopped(pid int) bool {
	s := procState(pid)
	return s == 'T' || s == 't'
}

// StoppedError is the one line that tells a user the daemon of dir is
// stopped and what to do.
func StoppedError(dir string, pid int) error {
	return fmt.Errorf("the ckptfs daemon of %s (pid %d) is stopped (SIGSTOP, or a debugger holds it) and answers nothing, nor does the mount, until it is continued: kill -CONT %d", dir, pid, pid)
}

// StoppedAround returns StoppedError for the ckptfs mount that holds dir,
// found by dir's path alone (nothing is entered: a stat through a stopped
// daemon's mount would wait for as long as it stays stopped), when its
// daemon is stopped; else nil.
func StoppedAround(dir string) error {
	m, err := Lookup(dir)
	if err != nil {
		return nil
	}
	info, err := ReadInfo(m.Dir)
	if err != nil || !Stopped(info.PID) {
		return nil
	}
	return StoppedError(m.Dir, info.PID)
}
