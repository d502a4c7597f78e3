package fusefs

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"ckptfs/internal/backing"
)

// flush.go owns the turn boundary's flush of the kernel's dirty pages.
//
// Without a writeback cache every write(2) reaches the daemon before it
// returns; only a shared writable mmap leaves dirty pages in the kernel,
// written back later as WRITE requests. Those pages belong to the turn in
// which they were written, so a boundary has them written back first. A
// mapping holds its file open, and the kernel writes its pages back when
// it is unmapped: dirty pages exist only in files with a daemon-served
// read-write handle open (Root.writers: a shared writable mapping needs
// an fd open for reading and writing; a passthrough handle's mapping is
// the backing file's own).
//
// syncfs(2) does not do: on FUSE it starts the writeback without waiting
// for it (Linux 6.18), so the pages arrived after the boundary, in the next
// turn. sync_file_range(2) of each such file, with both waits, writes its
// pages back and waits for them (fsync would also have the daemon sync
// the file to disk, which a boundary does not need). And the daemon
// must never do it itself: a daemon killed while one of its threads waits
// on a request to its own mount never finishes exiting (the kernel waits
// for an answer the dead daemon cannot give, and ends the connection only
// once the daemon's last thread is gone), leaving the mount hung. So
// another process does it (Options.Flush), whose wait ends with the
// connection.

// flushWriters writes back the dirty pages of every file open for
// writing through the daemon, and waits for them: FlushFiles, run by
// Options.Flush. A file whose flush fails is logged; the boundary goes on
// (its pages arrive in the next turn, as they would have unflushed).
func (r *Root) flushWriters() {
	if r.mountDir == "" {
		return
	}
	r.ptMu.Lock()
	nodes := make([]*Node, 0, len(r.writers))
	for n := range r.writers {
		nodes = append(nodes, n)
	}
	r.ptMu.Unlock()
	var paths []string
	for _, n := range nodes {
		if p, ok := n.flushPath(); ok && p != "" {
			paths = append(paths, p)
		}
	}
	if len(paths) == 0 {
		return
	}
	sort.Strings(paths)
	args := append([]string{r.mountDir, strconv.FormatUint(r.rootDev, 10), strconv.FormatUint(r.mountDev.Load(), 10)}, paths...)
	flush := r.opts.Flush
	if flush == nil {
		flush = FlushFiles
	}
	if err := flush(args); err != nil {
		r.logf("ckptfs: turn boundary: flush the pages of files mapped for writing: %v", err)
	}
}

// flushPath is a root-relative path that leads to n's inode: its path in
// go-fuse's tree, else (the name the kernel knew it by was removed while
// it stayed mapped) a remembered name of its hard-linked inode that still
// holds it (Node.paths), whose bytes the map's pages change. false: no
// name holds it, and its pages change nothing in the tree.
func (n *Node) flushPath() (string, bool) {
	if p, ok := n.path(); ok {
		return p, true
	}
	st, err := backing.Fstat(n.fd)
	if err != nil || st.Nlink == 0 {
		return "", false
	}
	if ps := n.paths(&st); len(ps) > 0 {
		return ps[0], true
	}
	return "", false
}

// SetMountDev tells the overlay its mount's device number, once the
// mount is live (the mount table has it): a boundary's flush after the
// mount was detached (umount -l from outside) finds the mapped files by
// it.
func (r *Root) SetMountDev(dev uint64) { r.mountDev.Store(dev) }

// FlushFiles is the flush of a turn boundary (flushWriters), in the
// process that runs it: args are the mount's directory, the device
// number of the directory it covers (which the path leads to once the
// mount is detached), the mount's own device number (0: unknown), and
// the root-relative paths of the files to write back. A path that is
// gone or no longer a regular file is skipped. Once the mount is
// detached no path leads to it: the files processes map from it are
// found through /proc instead (writeBackDetached).
func FlushFiles(args []string) error {
	if len(args) < 3 {
		return fmt.Errorf("flush: want DIR DEV MOUNTDEV PATH...")
	}
	dev, err := strconv.ParseUint(args[1], 10, 64)
	if err != nil {
		return fmt.Errorf("flush: device %q: %v", args[1], err)
	}
	mountDev, err := strconv.ParseUint(args[2], 10, 64)
	if err != nil {
		return fmt.Errorf("flush: device %q: %v", args[2], err)
	}
	dir, err := unix.Open(args[0], unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return writeBackDetached(mountDev) // unmounted, or moved
	}
	defer unix.Close(dir)
	var st unix.Stat_t
	if unix.Fstat(dir, &st) != nil || st.Ino != 1 || st.Dev == dev {
		// Not the mount's root: the directory it covered.
		return writeBackDetached(mountDev)
	}
	var first error
	for _, p := range args[3:] {
		fd, err := unix.Openat(dir, p, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if err != nil {
			continue // renamed or removed since: its pages went with it
		}
		if unix.Fstat(fd, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFREG {
			if err := WriteBack(fd); err != nil && first == nil {
				first = fmt.Errorf("flush %s: %v", p, err)
			}
		}
		unix.Close(fd)
	}
	return first
}

// WriteBack writes the kernel's dirty pages of the file open at fd back
// and waits for them, without syncing the file to disk: through a FUSE
// mount, until its daemon has answered their WRITEs. Never call it in the
// daemon of that mount (see above).
func WriteBack(fd int) error {
	const all = unix.SYNC_FILE_RANGE_WAIT_BEFORE | unix.SYNC_FILE_RANGE_WRITE | unix.SYNC_FILE_RANGE_WAIT_AFTER
	return unix.SyncFileRange(fd, 0, 0, all)
}

// writeBackDetached writes back the files of a detached mount (device
// dev; 0: unknown, nothing to do) that processes map shared and
// writable, and waits for them: the only ones that can hold dirty pages,
// which the end of the connection would lose. No path leads to them
// (WriteBackMaps without paths).
func writeBackDetached(dev uint64) error {
	if dev == 0 {
		return nil
	}
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return err
	}
	var pids []int
	for _, e := range procs {
		if pid, err := strconv.Atoi(e.Name()); err == nil && pid != os.Getpid() {
			pids = append(pids, pid)
		}
	}
	if err := WriteBackMaps(dev, pids, false); err != nil {
		return fmt.Errorf("flush of the detached mount: %v", err)
	}
	return nil
}

// WriteBackMaps writes back the files on device dev (a FUSE mount's) that
// the processes pids map shared and writable, and waits for them
// (WriteBack). A file is found by its inode, not by the path maps shows
// (which escapes a newline as \012, and ends in " (deleted)" for a name
// removed, though the inode may keep another): it is opened through
// /proc/PID/map_files (which needs CAP_SYS_ADMIN: root), else through an
// fd the mapping process holds of it (/proc/PID/fd), else, with byPath,
// through the path maps shows, if that leads to the same inode. A file
// reached none of these ways is named in the error. Never call it in the
// daemon of that mount.
func WriteBackMaps(dev uint64, pids []int, byPath bool) error {
	mapsDev := fmt.Sprintf("%02x:%02x", unix.Major(dev), unix.Minor(dev))
	done := map[uint64]bool{}
	var missed []string
	for _, pid := range pids {
		base := "/proc/" + strconv.Itoa(pid)
		data, err := os.ReadFile(base + "/maps")
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			// start-end perms offset dev inode path: the path after
			// padding, and may hold spaces.
			m := strings.SplitN(line, " ", 6)
			if len(m) < 6 || len(m[1]) < 4 || m[1][1] != 'w' || m[1][3] != 's' || m[3] != mapsDev {
				continue
			}
			ino, err := strconv.ParseUint(m[4], 10, 64)
			if err != nil || done[ino] {
				continue
			}
			p := strings.TrimLeft(m[5], " ")
			if writeBackOpened(base+"/map_files/"+m[0], dev, ino) || writeBackHeld(base, dev, ino) ||
				(byPath && writeBackPath(p, dev, ino)) {
				done[ino] = true
			} else {
				missed = append(missed, fmt.Sprintf("%s (inode %d) mapped by pid %d", p, ino, pid))
			}
		}
	}
	if len(missed) > 0 {
		return fmt.Errorf("cannot reach %s: pages written through those maps may be lost", strings.Join(missed, ", "))
	}
	return nil
}

// writeBackPath is writeBackOpened of the file at path p as
// /proc/PID/maps shows it: a newline in it as \012, and " (deleted)"
// after a name that was removed (the inode may still have another).
func writeBackPath(p string, dev, ino uint64) bool {
	p = strings.ReplaceAll(p, `\012`, "\n")
	if writeBackOpened(p, dev, ino) {
		return true
	}
	q, ok := strings.CutSuffix(p, " (deleted)")
	return ok && writeBackOpened(q, dev, ino)
}

// writeBackHeld is writeBackOpened of an fd the process at base (/proc/PID)
// holds of inode ino of device dev.
func writeBackHeld(base string, dev, ino uint64) bool {
	fds, err := os.ReadDir(base + "/fd")
	if err != nil {
		return false
	}
	for _, e := range fds {
		if writeBackOpened(base+"/fd/"+e.Name(), dev, ino) {
			return true
		}
	}
	return false
}

// writeBackOpened opens p (a /proc magic link to a file, or a path) and,
// if it is inode ino of device dev, writes its pages back (WriteBack); it
// reports whether it did. The inode is told from the kernel's cached
// attributes (AT_STATX_DONT_SYNC): an fd of another filesystem, whose
// server may hang, costs no request.
func writeBackOpened(p string, dev, ino uint64) bool {
	var st unix.Statx_t
	if unix.Statx(unix.AT_FDCWD, p, unix.AT_STATX_DONT_SYNC, unix.STATX_TYPE|unix.STATX_INO, &st) != nil ||
		unix.Mkdev(st.Dev_major, st.Dev_minor) != dev || st.Ino != ino || uint32(st.Mode)&unix.S_IFMT != unix.S_IFREG {
		return false
	}
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	var fst unix.Stat_t
	if unix.Fstat(fd, &fst) != nil || fst.Dev != dev || fst.Ino != ino {
		return false // replaced between the two
	}
	return WriteBack(fd) == nil
}
