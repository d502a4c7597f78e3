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
	"time"

	"ckptfs/internal/rundir"
)

// BackupDir is where Install and Uninstall keep a copy of a settings file
// from before their edit: the user's state directory, not beside the file,
// where git would pick the copy up (a project's .claude/settings.json is
// often committed, and FILE.bak is in no .gitignore).
func BackupDir() (string, error) {
	d, err := rundir.StateDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(d, "backups"), nil
}

// backup keeps data, the settings file at path before an edit, in
// BackupDir under a name that says which file and when
// (home%me%proj%.claude%settings.json.20261126-110642.123456789.bak),
// and returns its path.
func backup(path string, data []byte) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	dir, err := BackupDir()
	if err != nil {
		return "", fmt.Errorf("no place for the backup of %s: %w", path, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	name := strings.ReplaceAll(strings.TrimPrefix(abs, "/"), "/", "%") + "." + time.Now().Format("20060102-150405.000000000") + ".bak"
	b := filepath.Join(dir, name)
	return b, writeFile(b, data, path)
}

// hookGroup and hookCmd are the entries turnctl adds, one group per event:
//
//	{"hooks": [{"type": "command", "command": "turnctl hook-event AGENT"}]}
type hookGroup struct {
	Hooks []hookCmd `json:"hooks"`
}

type hookCmd struct {
	Name    string `json:"name,omitempty"`
	Type    string `json:"type"`
	Command string `json:"command"`
}

// HookCommand is the command line the hooks run, given how to call turnctl.
func (a *Agent) HookCommand(turnctl string) string {
	return turnctl + " hook-event " + a.Name
}

// isOurs says whether a hook command is one turnctl installed for a.
func (a *Agent) isOurs(cmd string) bool {
	return strings.Contains(cmd, "turnctl") && strings.HasSuffix(strings.TrimSpace(cmd), " hook-event "+a.Name)
}

func (a *Agent) group(turnctl string) hookGroup {
	return hookGroup{Hooks: []hookCmd{{Name: a.hookName, Type: "command", Command: a.HookCommand(turnctl)}}}
}

// Result says what Install or Uninstall did.
type Result struct {
	Path    string
	Changed bool   // the file was written (or removed)
	Created bool   // Install: the file did not exist
	Removed bool   // Uninstall: nothing but {} was left, so the file went
	Backup  string // the copy of the file from before the edit, if any
}

// Snippet is the configuration Install would write into an empty file.
func (a *Agent) Snippet(turnctl string) (string, error) {
	if !a.HasHooks() {
		return "", fmt.Errorf("%s has no hook configuration", a.Title)
	}
	doc, _, err := a.add([]byte("{}\n"), turnctl)
	return string(doc), err
}

// Install merges the hooks that run `turnctl hook-event` into the settings
// file at path, creating it if needed. Everything else in the file keeps
// its bytes; hooks already there are left alone. A file that already has
// them is not touched.
func (a *Agent) Install(path, turnctl string) (Result, error) {
	res := Result{Path: path}
	if !a.HasHooks() {
		return res, fmt.Errorf("%s has no hook configuration to install into", a.Title)
	}
	orig, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		res.Created = true
		orig = nil
	} else if err != nil {
		return res, err
	}
	doc := orig
	if res.Created {
		doc = []byte("{}\n")
	}
	doc, changed, err := a.add(doc, turnctl)
	if err != nil {
		return res, fmt.Errorf("%s: %v", path, err)
	}
	if !changed {
		return res, nil
	}
	if !res.Created {
		if res.Backup, err = backup(path, orig); err != nil {
			return res, err
		}
	} else if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return res, err
	}
	if err := writeFile(path, doc, path); err != nil {
		return res, err
	}
	res.Changed = true
	return res, nil
}

// add inserts the hook groups missing from doc.
func (a *Agent) add(doc []byte, turnctl string) ([]byte, bool, error) {
	changed := false
	for _, ev := range a.events() {
		root, err := parseDoc(doc)
		if err != nil {
			return nil, false, err
		}
		g := a.group(turnctl)
		_, hooks := root.member("hooks")
		switch {
		case hooks == nil:
			doc, err = addMember(doc, root, "hooks", map[string][]hookGroup{ev: {g}})
		case hooks.kind != '{':
			return nil, false, fmt.Errorf(`"hooks" is not an object`)
		default:
			_, list := hooks.member(ev)
			switch {
			case list == nil:
				doc, err = addMember(doc, hooks, ev, []hookGroup{g})
			case list.kind != '[':
				return nil, false, fmt.Errorf(`"hooks"."%s" is not an array`, ev)
			case a.findOurs(doc, list) != nil:
				continue
			default:
				doc, err = addElem(doc, list, g)
			}
		}
		if err != nil {
			return nil, false, err
		}
		changed = true
	}
	return doc, changed, nil
}

// events are the hook events Install wires.
func (a *Agent) events() []string {
	if a.StepEvent == "" {
		return []string{a.BeginEvent, a.EndEvent}
	}
	return []string{a.BeginEvent, a.EndEvent, a.StepEvent}
}

// ours is where one of our hooks sits: element hook of the "hooks" array
// of element group of an event's array.
type ours struct {
	group, hook int
	alone       bool // the only hook in its group
}

func (a *Agent) findOurs(doc []byte, list *node) *ours {
	for gi, g := range list.elems {
		if g.kind != '{' {
			continue
		}
		_, hs := g.member("hooks")
		if hs == nil || hs.kind != '[' {
			continue
		}
		for hi, h := range hs.elems {
			if h.kind != '{' {
				continue
			}
			_, c := h.member("command")
			var cmd string
			if c == nil || json.Unmarshal(doc[c.start:c.end], &cmd) != nil || !a.isOurs(cmd) {
				continue
			}
			return &ours{group: gi, hook: hi, alone: len(hs.elems) == 1}
		}
	}
	return nil
}

// Installed says whether the file at path holds any hook turnctl installs
// for a.
func (a *Agent) Installed(path string) (bool, error) {
	doc, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	_, changed, err := a.remove(doc)
	return changed, err
}

// Uninstall removes the hooks Install added, and the "hooks" entries that
// held nothing else; if the file is left holding only {}, it is removed.
// After an Install and no other edit of those entries, the file is what it
// was before, byte for byte — except that an empty "hooks": {} or event
// list the file held before goes too (nothing records that it was there).
func (a *Agent) Uninstall(path string) (Result, error) {
	res := Result{Path: path}
	orig, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return res, nil
	} else if err != nil {
		return res, err
	}
	doc, changed, err := a.remove(orig)
	if err != nil {
		return res, fmt.Errorf("%s: %v", path, err)
	}
	if !changed {
		return res, nil
	}
	res.Changed = true
	if res.Backup, err = backup(path, orig); err != nil {
		return res, err
	}
	if string(bytes.TrimSpace(doc)) == "{}" {
		res.Removed = true
		if err := os.Remove(path); err != nil {
			return res, err
		}
		return res, nil
	}
	return res, writeFile(path, doc, path)
}

// remove deletes our hooks from doc, one at a time.
func (a *Agent) remove(doc []byte) ([]byte, bool, error) {
	changed := false
	for {
		root, err := parseDoc(doc)
		if err != nil {
			return nil, false, err
		}
		_, hooks := root.member("hooks")
		if hooks == nil || hooks.kind != '{' {
			return doc, changed, nil
		}
		found := false
		for ei, ev := range hooks.members {
			list := ev.val
			if list.kind != '[' {
				continue
			}
			o := a.findOurs(doc, list)
			if o == nil {
				continue
			}
			found, changed = true, true
			if !o.alone {
				_, hs := list.elems[o.group].member("hooks")
				doc = removeChild(doc, hs, o.hook)
				break
			}
			// The group held only our hook: remove it, then the event's
			// list and "hooks" if that leaves them empty.
			switch {
			case len(list.elems) > 1:
				doc = removeChild(doc, list, o.group)
			case len(hooks.members) > 1:
				doc = removeChild(doc, hooks, ei)
			default:
				i, _ := root.member("hooks")
				doc = removeChild(doc, root, i)
			}
			break
		}
		if !found {
			return doc, changed, nil
		}
	}
}

// writeFile replaces path atomically with data, with the mode of like (if
// it exists; else 0644).
func writeFile(path string, data []byte, like string) error {
	mode := fs.FileMode(0o644)
	if fi, err := os.Stat(like); err == nil {
		mode = fi.Mode().Perm()
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
