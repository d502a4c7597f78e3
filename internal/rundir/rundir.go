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
package rundir

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// FSType is the filesystem type ckptfs mounts show in /proc/mounts.
const FSType = "fuse.ckptfs"

// Info describes a live mount's daemon.
type Info struct {
	Dir     string    `json:"dir"`   // the mounted directory, absolute
	Store   string    `json:"store"` // the store directory, absolute
	PID     int       `json:"pid"`
	Socket  string    `json:"socket"`
	Started time.Time `json:"started"`
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
	return d, nil
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
	sum := sha256.Sum256([]byte(filepath.Clean(abs)))
	return filepath.Join(d, hex.EncodeToString(sum[:8])), nil
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
	var info Info
	p, err := InfoPath(mountDir)
	if err != nil {
		return info, err
	}
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
	if p, err := Socket(mountDir); err == nil {
		os.Remove(p)
	}
}

// ErrNotMounted says no ckptfs mount contains the directory.
var ErrNotMounted = errors.New("not inside a ckptfs mount")

// Mount is one live ckptfs mount in the mount table.
type Mount struct {
	Dir string // its mount point
	Dev uint64 // its device number (st_dev of its files)
}

// MountTable lists the live ckptfs mounts, in the order of
// /proc/self/mountinfo (a mount stacked on another comes after it).
func MountTable() ([]Mount, error) {
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
		if len(post) < 1 || len(pre) < 5 || post[0] != FSType {
			continue
		}
		m := Mount{Dir: unescape(pre[4])}
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
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	abs = filepath.Clean(abs)
	ms, err := Mounts()
	if err != nil {
		return "", err
	}
	best := ""
	for _, m := range ms {
		if (abs == m || strings.HasPrefix(abs, m+"/") || m == "/") && len(m) > len(best) {
			best = m
		}
	}
	if best == "" {
		return "", ErrNotMounted
	}
	return best, nil
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
