package agenthooks

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"ckptfs/internal/rundir"
)

// settingsFile is a settings file as Install and Uninstall read it.
type settingsFile struct {
	path   string // as the user named it
	target string // the file itself: where path's symbolic links lead
	exists bool
	data   []byte // its contents
	bom    []byte // a UTF-8 byte order mark data starts with, kept
	body   []byte // data after bom
}

// readSettings reads the file at path, following symbolic links: an edit
// goes to the file a link leads to (a settings file kept with one's
// dotfiles), and the link stays.
func readSettings(path string) (*settingsFile, error) {
	target, err := resolve(path)
	if err != nil {
		return nil, err
	}
	f := &settingsFile{path: path, target: target}
	f.data, err = os.ReadFile(target)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		f.data = nil
	case err != nil:
		return nil, err
	default:
		f.exists = true
	}
	f.body = f.data
	if bytes.HasPrefix(f.data, utf8BOM) {
		f.bom, f.body = utf8BOM, f.data[len(utf8BOM):]
	}
	return f, nil
}

var utf8BOM = []byte("\uFEFF")

// blank says whether the file holds nothing but white space (or is not
// there): an empty object, to Install.
func (f *settingsFile) blank() bool { return len(bytes.TrimSpace(f.body)) == 0 }

// write replaces the file with bom and body, keeping its mode.
func (f *settingsFile) write(body []byte) error {
	return writeFile(f.target, append(append([]byte{}, f.bom...), body...), f.target)
}

// resolve follows the symbolic links path names, one by one (as the
// kernel does, relative to the directory that holds the link), to the
// file they lead to, which need not exist; it returns that file's
// absolute path, its existing directories with their links resolved.
func resolve(path string) (string, error) {
	p, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	for range 40 {
		p = filepath.Join(realDir(filepath.Dir(p)), filepath.Base(p))
		fi, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) || err == nil && fi.Mode()&fs.ModeSymlink == 0 {
			return p, nil
		} else if err != nil {
			return "", err
		}
		l, err := os.Readlink(p)
		if err != nil {
			return "", err
		}
		if !filepath.IsAbs(l) {
			l = filepath.Join(filepath.Dir(p), l)
		}
		p = l
	}
	return "", fmt.Errorf("%s: too many levels of symbolic links", path)
}

// realDir is the absolute directory dir with the symbolic links of the
// part of it that exists resolved.
func realDir(dir string) string {
	rest := ""
	for d := dir; ; d = filepath.Dir(d) {
		if r, err := filepath.EvalSymlinks(d); err == nil {
			return filepath.Join(r, rest)
		}
		if filepath.Dir(d) == d {
			return dir
		}
		rest = filepath.Join(filepath.Base(d), rest)
	}
}

// mkdirs creates dir and the directories above it that are missing, and
// returns those it created, the deepest first. Run as root, it gives them
// the owner of the directory they are made in (ownerFor).
func mkdirs(dir string) ([]string, error) {
	var made []string
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); err == nil {
			break
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		made = append(made, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return made, err
	}
	for i := len(made) - 1; i >= 0; i-- {
		if uid, gid, ok := ownerFor(filepath.Dir(made[i])); ok {
			if err := os.Chown(made[i], uid, gid); err != nil {
				return made, err
			}
		}
	}
	return made, nil
}

// eolOf is the line ending doc uses: "\r\n" if its first line ends so,
// else "\n".
func eolOf(doc []byte) string {
	if i := bytes.IndexByte(doc, '\n'); i > 0 && doc[i-1] == '\r' {
		return "\r\n"
	}
	return "\n"
}

// withEOL writes the line breaks of s, which are "\n", as eol.
func withEOL(s, eol string) string {
	if eol == "\n" {
		return s
	}
	return strings.ReplaceAll(s, "\n", eol)
}

// record is what Install created in a settings file, so that Uninstall
// removes that and no more: an empty "hooks": {} or event list the user
// had stays, one Install added goes, and so do a file and directories
// Install created. The file itself cannot say (both look alike, and the
// agents' JSON has no room for a marker), so the record is kept in
// BackupDir's sibling, the state directory's hooks/, named after the file
// (where its links lead) and the agent.
type record struct {
	File   bool     `json:"file,omitempty"`   // the file was not there
	Dirs   []string `json:"dirs,omitempty"`   // nor these directories, deepest first
	Blank  *string  `json:"blank,omitempty"`  // the file held only this white space
	EOL    bool     `json:"eol,omitempty"`    // Aider: the newline added at the file's end
	Hooks  bool     `json:"hooks,omitempty"`  // the "hooks" object
	Events []string `json:"events,omitempty"` // event lists under "hooks"
}

func recordPath(target, agent string) (string, error) {
	d, err := rundir.StateDir()
	if err != nil {
		return "", fmt.Errorf("no place for the record of what install adds to %s: %w", target, err)
	}
	name := strings.ReplaceAll(strings.TrimPrefix(target, "/"), "/", "%") + "." + agent + ".json"
	return filepath.Join(d, "hooks", name), nil
}

// loadRecord returns the record of Install's edit of target for agent,
// or nil if there is none (turnctl before records, a state directory
// cleared, a settings file from elsewhere).
func loadRecord(target, agent string) *record {
	p, err := recordPath(target, agent)
	if err != nil {
		return nil
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return nil
	}
	var r record
	if json.Unmarshal(data, &r) != nil {
		return nil
	}
	return &r
}

func saveRecord(target, agent string, r *record) error {
	p, err := recordPath(target, agent)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return writeFile(p, append(data, '\n'), p)
}

func dropRecord(target, agent string) {
	if p, err := recordPath(target, agent); err == nil {
		os.Remove(p)
	}
}

// removeCreated removes the file at target, which Install created, and
// the directories it created for it if nothing else is in them now.
func removeCreated(target string, r *record) error {
	if err := os.Remove(target); err != nil {
		return err
	}
	for _, d := range r.Dirs {
		if os.Remove(d) != nil {
			break // not empty: the user's now
		}
	}
	return nil
}
