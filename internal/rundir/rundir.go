// Package rundir says where a mount's runtime files live (its control socket
// and an info file naming the daemon) and finds the ckptfs mount that
// contains a directory.
//
// The runtime files cannot live inside the mounted tree: the store directory
// is hidden through the mount, so a socket there could not be reached by its
// path. They live in the runtime directory instead:
//
//	$CKPTFS_RUNTIME_DIR, else $XDG_RUNTIME_DIR/ckptfs, else /run/ckptfs for
//	root, else /tmp/ckptfs-UID
//
// named after a hash of the mounted directory's absolute path:
//
//	<runtime>/<16 hex digits>.sock   the control socket (mode 0600)
//	<runtime>/<16 hex digits>.json   Info, written once the mount is live
//
// The runtime directory is per user and must be that user's alone (Dir
// refuses one that is not: private), and a daemon answers its own user
// only: a mount that belongs to another user (Mount.UID) is reported as
// such (ForeignError) instead of being looked for here.
package rundir

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// FSType is the filesystem type ckptfs mounts show in /proc/mounts.
const FSType = "fuse.ckptfs"

// ViewFSType is the filesystem type of a read-only view of a turn
// (ckptfs mount --at): not a project mount, so FindMount and the rest
// pass it by.
const ViewFSType = "fuse.ckptfs-at"

// Info describes a live mount's daemon.
type Info struct {
	Dir     string    `json:"dir"`   // the mounted directory, absolute
	Store   string    `json:"store"` // the store directory, absolute
	PID     int       `json:"pid"`
	Socket  string    `json:"socket"`
	Started time.Time `json:"started"`
	// Saved: the daemon, stopping, has saved the record of the tree
	// (the manifest the next mount compares the tree with), and ends.
	// A daemon gone with its info file left and Saved false died before
	// it: changes made until the next mount are not told apart.
	Saved bool `json:"saved,omitempty"`
	// Unsaved: the daemon, stopping, could not close its open turn or
	// save the record of the tree, for this reason; it ends all the same,
	// and leaves its info file so marked for 'ckptfs umount' to tell
	// (which removes it).
	Unsaved string `json:"unsaved,omitempty"`
}

// Dir returns the runtime directory, creating it (mode 0700) if needed.
func Dir() (string, error) {
	d := os.Getenv("CKPTFS_RUNTIME_DIR")
	if d == "" {
		if x := os.Getenv("XDG_RUNTIME_DIR"); x != "" {
			d = filepath.Join(x, "ckptfs")
		} else if os.Geteuid() == 0 {
			d = "/run/ckptfs"
		} else {
			d = filepath.Join(os.TempDir(), fmt.Sprintf("ckptfs-%d", os.Geteuid()))
		}
	}
	if err := os.MkdirAll(d, 0o700); err != nil {
		return "", fmt.Errorf("runtime directory: %w", err)
	}
	if err := private(d); err != nil {
		return "", err
	}
	return d, nil
}

// private checks that the runtime directory d is the user's alone: a
// directory (not a symlink to one), owned by the effective user, that no
// one else may write to or search. Under a shared /tmp another user can
// make /tmp/ckptfs-UID first; a socket there could then be replaced by
// theirs, which would read every prompt sent to it.
func private(d string) error {
	var st unix.Stat_t
	if err := unix.Lstat(d, &st); err != nil {
		return fmt.Errorf("runtime directory: %w", err)
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFDIR:
		return fmt.Errorf("runtime directory %s is not a directory (a symlink?); remove it, or set CKPTFS_RUNTIME_DIR", d)
	case int(st.Uid) != os.Geteuid():
		// Another user's XDG_RUNTIME_DIR (su without -, sudo -E), or a
		// directory someone else made first: not to be removed blindly.
		return fmt.Errorf("runtime directory %s belongs to uid %d, not to you (uid %d): set CKPTFS_RUNTIME_DIR to a directory of your own (after su or sudo -E, XDG_RUNTIME_DIR may still be the other user's)", d, st.Uid, os.Geteuid())
	case st.Mode&0o077 != 0:
		return fmt.Errorf("runtime directory %s has mode %04o: others may use it; chmod 700 it, or set CKPTFS_RUNTIME_DIR", d, st.Mode&0o7777)
	}
	return nil
}

// StateDir is where ckptfs keeps the user's files that outlive a mount
// but belong in neither the project nor its store (the stores given with
// --store, the backups of agents' settings files, the records of what
// turnctl hooks install created in them): $XDG_STATE_HOME/ckptfs,
// else ~/.local/state/ckptfs. It is not created.
func StateDir() (string, error) {
	d := os.Getenv("XDG_STATE_HOME")
	if d == "" || !filepath.IsAbs(d) {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("no state directory: %w", err)
		}
		d = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(d, "ckptfs"), nil
}

func base(mountDir string) (string, error) {
	abs, err := filepath.Abs(mountDir)
	if err != nil {
		return "", err
	}
	d, err := Dir()
	if err != nil {
		return "", err
	}
	return filepath.Join(d, name(abs)), nil
}

// name is the runtime files' name (without suffix) of the mount on the
// absolute path abs.
func name(abs string) string {
	sum := sha256.Sum256([]byte(filepath.Clean(abs)))
	return hex.EncodeToString(sum[:8])
}

// SocketIn returns the control socket path of the mount on the absolute
// path mountDir as the daemon of a process whose runtime directory is
// runtime makes it (another user's, for a tool acting as that user).
func SocketIn(runtime, mountDir string) string {
	return filepath.Join(runtime, name(mountDir)+".sock")
}

// Socket returns the control socket path for a mounted directory.
func Socket(mountDir string) (string, error) {
	b, err := base(mountDir)
	return b + ".sock", err
}

// InfoPath returns the info file path for a mounted directory.
func InfoPath(mountDir string) (string, error) {
	b, err := base(mountDir)
	return b + ".json", err
}

// WriteInfo writes the info file atomically.
func WriteInfo(info Info) error {
	p, err := InfoPath(info.Dir)
	if err != nil {
		return err
	}
	data, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return err
	}
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, p)
}

// ReadInfo reads the info file of a mounted directory.
func ReadInfo(mountDir string) (Info, error) {
	p, err := InfoPath(mountDir)
	if err != nil {
		return Info{}, err
	}
	return readInfo(p)
}

// ReadInfoIn reads the info file of the mount on the absolute path
// mountDir in the runtime directory runtime (another user's, for a tool
// acting as that user: see SocketIn).
func ReadInfoIn(runtime, mountDir string) (Info, error) {
	return readInfo(filepath.Join(runtime, name(mountDir)+".json"))
}

func readInfo(p string) (Info, error) {
	var info Info
	data, err := os.ReadFile(p)
	if err != nil {
		return info, err
	}
	err = json.Unmarshal(data, &info)
	return info, err
}

// Remove deletes the runtime files of a mounted directory.
func Remove(mountDir string) {
	if p, err := InfoPath(mountDir); err == nil {
		os.Remove(p)
	}
	RemoveSocket(mountDir)
}

// RemoveSocket deletes the control socket of a mounted directory, and
// keeps its info file.
func RemoveSocket(mountDir string) {
	if p, err := Socket(mountDir); err == nil {
		os.Remove(p)
	}
}

// ErrNotMounted says no ckptfs mount contains the directory.
var ErrNotMounted = errors.New("not inside a ckptfs mount")

// Mount is one live ckptfs mount in the mount table.
type Mount struct {
	Dir    string // its mount point
	Source string // its source (the project, for a view: PROJECT@TURN)
	Dev    uint64 // its device number (st_dev of its files)
	// UID is the user the mount belongs to: the user_id the kernel
	// shows, whose daemon serves it (-1: not shown).
	UID int
	// AllowOther: other users may enter it (allow_other); else it is
	// private to UID, and the kernel refuses everyone else, root too.
	AllowOther bool
}

// ForeignError says a ckptfs mount belongs to another user: its daemon
// answers its owner only (the socket checks the peer's uid), its runtime
// files are in its owner's runtime directory, and a private mount cannot
// even be entered by anyone else, root included.
type ForeignError struct {
	Dir string
	UID int
}

func (e *ForeignError) Error() string {
	who := fmt.Sprintf("uid %d", e.UID)
	if u, err := user.LookupId(fmt.Sprint(e.UID)); err == nil {
		who += " (" + u.Username + ")"
	}
	return fmt.Sprintf("%s is mounted by %s; ask its owner", e.Dir, who)
}

// Mine returns nil when the mount belongs to the effective user (or its
// owner is not shown), else a *ForeignError.
func (m Mount) Mine() error {
	if m.UID < 0 || m.UID == os.Geteuid() {
		return nil
	}
	return &ForeignError{Dir: m.Dir, UID: m.UID}
}

// MountTable lists the live ckptfs mounts, in the order of
// /proc/self/mountinfo (a mount stacked on another comes after it).
func MountTable() ([]Mount, error) { return mountTable(FSType) }

// ViewTable lists the live views (ViewFSType), as MountTable.
func ViewTable() ([]Mount, error) { return mountTable(ViewFSType) }

// OfflineView returns the mount point of a view of project served by a
// daemon of its own (one with an info file: ckptfs mount --at while the
// project was not mounted), which holds the project's store, if there is
// one.
func OfflineView(project string) (string, bool) {
	ms, _ := ViewTable()
	for _, m := range ms {
		if strings.HasPrefix(m.Source, project+"@") {
			if _, err := ReadInfo(m.Dir); err == nil {
				return m.Dir, true
			}
		}
	}
	return "", false
}

func mountTable(fstype string) ([]Mount, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Mount
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		// id parent maj:min root mountpoint opts [optional...] - fstype source superopts
		line := sc.Text()
		sep := strings.Index(line, " - ")
		if sep < 0 {
			continue
		}
		post := strings.Fields(line[sep+3:])
		pre := strings.Fields(line[:sep])
		if len(post) < 1 || len(pre) < 5 || post[0] != fstype {
			continue
		}
		m := Mount{Dir: unescape(pre[4]), UID: -1}
		if len(post) >= 2 {
			m.Source = unescape(post[1])
		}
		if len(post) >= 3 {
			m.UID = superUID(post[2])
			m.AllowOther = strings.Contains(","+post[2]+",", ",allow_other,")
		}
		if maj, min, ok := strings.Cut(pre[2], ":"); ok {
			a, err1 := strconv.ParseUint(maj, 10, 32)
			b, err2 := strconv.ParseUint(min, 10, 32)
			if err1 == nil && err2 == nil {
				m.Dev = unix.Mkdev(uint32(a), uint32(b))
			}
		}
		out = append(out, m)
	}
	return out, sc.Err()
}

// Mounts lists the mount points of live ckptfs mounts.
func Mounts() ([]string, error) {
	ms, err := MountTable()
	var out []string
	for _, m := range ms {
		out = append(out, m.Dir)
	}
	return out, err
}

// IsMounted reports whether dir itself is a live ckptfs mount point.
func IsMounted(dir string) bool {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return false
	}
	ms, _ := Mounts()
	for _, m := range ms {
		if m == filepath.Clean(abs) {
			return true
		}
	}
	return false
}

// FindMount returns the innermost ckptfs mount point containing dir.
func FindMount(dir string) (string, error) {
	m, err := Lookup(dir)
	return m.Dir, err
}

// Lookup returns the innermost ckptfs mount containing dir, by its path
// alone: nothing is resolved or entered, so it also names a mount that
// cannot be entered (another user's private mount). Callers that can
// resolve symlinks do so first.
func Lookup(dir string) (Mount, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return Mount{}, err
	}
	abs = filepath.Clean(abs)
	ms, err := MountTable()
	if err != nil {
		return Mount{}, err
	}
	best, found := Mount{}, false
	for _, m := range ms {
		// A mount stacked on another comes later and wins a tie.
		if (abs == m.Dir || strings.HasPrefix(abs, m.Dir+"/") || m.Dir == "/") && (!found || len(m.Dir) >= len(best.Dir)) {
			best, found = m, true
		}
	}
	if !found {
		return Mount{}, ErrNotMounted
	}
	return best, nil
}

// superUID returns the user_id of a FUSE mount's super options, or -1.
func superUID(opts string) int {
	for _, o := range strings.Split(opts, ",") {
		if v, ok := strings.CutPrefix(o, "user_id="); ok {
			if n, err := strconv.Atoi(v); err == nil {
				return n
			}
		}
	}
	return -1
}

// unescape undoes the octal escapes (\040 for space, …) of mountinfo fields.
func unescape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && isOct(s[i+1]) && isOct(s[i+2]) && isOct(s[i+3]) {
			b.WriteByte((s[i+1]-'0')*64 + (s[i+2]-'0')*8 + (s[i+3] - '0'))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOct(c byte) bool { return c >= '0' && c <= '7' }
