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

// HookCommand is the command line the hooks run, given the path of
// turnctl (or its name on PATH). The agents run it with a shell, so a path
// that holds anything but the usual characters is quoted.
func (a *Agent) HookCommand(turnctl string) string {
	return ShellQuote(turnctl) + " hook-event " + a.Name
}

// ShellQuote quotes s for a POSIX shell as one word: as it is if it holds
// only characters no shell treats specially (so the usual path stays as
// it is), else in single quotes, a ' in s written as '\”.
func ShellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_-./+,:@", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
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
	Added   bool   // Install: hooks were added
	Updated bool   // Install: hooks already there now run another command
	Removed bool   // Uninstall: nothing but {} was left, so the file went
	Backup  string // the copy of the file from before the edit, if any
}

// Snippet is the configuration Install would write into an empty file.
func (a *Agent) Snippet(turnctl string) (string, error) {
	if !a.HasHooks() {
		return "", fmt.Errorf("%s has no hook configuration", a.Title)
	}
	doc, _, _, err := a.add([]byte("{}\n"), turnctl, false)
	return string(doc), err
}

// Install merges the hooks that run `turnctl hook-event` into the settings
// file at path, creating it if needed. Everything else in the file keeps
// its bytes; hooks already there are left alone, except that with update
// those of turnctl's that run another command are changed to run
// turnctl's. A file that already has them is not touched.
func (a *Agent) Install(path, turnctl string, update bool) (Result, error) {
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
	doc, added, updated, err := a.add(doc, turnctl, update)
	if err != nil {
		return res, fmt.Errorf("%s: %v", path, err)
	}
	if !added && !updated {
		return res, nil
	}
	res.Added, res.Updated = added, updated
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

// add inserts the hook groups missing from doc; with update, it also
// makes those of ours that run another command run turnctl's.
func (a *Agent) add(doc []byte, turnctl string, update bool) (_ []byte, added, updated bool, _ error) {
	for _, ev := range a.events() {
		root, err := parseDoc(doc)
		if err != nil {
			return nil, false, false, err
		}
		g := a.group(turnctl)
		_, hooks := root.member("hooks")
		switch {
		case hooks == nil:
			doc, err = addMember(doc, root, "hooks", map[string][]hookGroup{ev: {g}})
		case hooks.kind != '{':
			return nil, false, false, fmt.Errorf(`"hooks" is not an object`)
		default:
			_, list := hooks.member(ev)
			switch {
			case list == nil:
				doc, err = addMember(doc, hooks, ev, []hookGroup{g})
			case list.kind != '[':
				return nil, false, false, fmt.Errorf(`"hooks"."%s" is not an array`, ev)
			default:
				o := a.findOurs(doc, list)
				if o == nil {
					doc, err = addElem(doc, list, g)
					break
				}
				want := a.HookCommand(turnctl)
				if !update || o.command == want {
					continue
				}
				q, _ := json.Marshal(want)
				doc = splice(doc, o.cmd.start, o.cmd.end, jsonUnescape(string(q)))
				updated = true
				continue
			}
		}
		if err != nil {
			return nil, false, false, err
		}
		added = true
	}
	return doc, added, updated, nil
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
	cmd         *node
	command     string // cmd's value
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
			return &ours{group: gi, hook: hi, alone: len(hs.elems) == 1, cmd: c, command: cmd}
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
