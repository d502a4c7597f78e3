package agenthooks

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
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

// isOurs says whether a hook command is one turnctl installed for a:
// "TURNCTL hook-event AGENT", where TURNCTL is one shell word (HookCommand
// writes it so) or names turnctl (an older install wrote a path with a
// space as it is). A turnctl under another name (--turnctl /opt/bin/tc)
// is still recognised, so that uninstall removes its hooks and install
// does not add them twice.
func (a *Agent) isOurs(cmd string) bool {
	prog, ok := strings.CutSuffix(strings.TrimSpace(cmd), " hook-event "+a.Name)
	prog = strings.TrimSpace(prog)
	return ok && prog != "" && (strings.Contains(prog, "turnctl") || oneShellWord(prog))
}

// oneShellWord says whether s is one word to a POSIX shell as ShellQuote
// writes words: without white space, or all in single quotes.
func oneShellWord(s string) bool {
	if !strings.ContainsAny(s, " \t\n") {
		return true
	}
	inner, ok := strings.CutPrefix(s, "'")
	if inner, ok = strings.CutSuffix(inner, "'"); !ok {
		return false
	}
	return ShellQuote(strings.ReplaceAll(inner, `'\''`, "'")) == s
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
	Removed bool   // Uninstall: install created the file, and it held nothing else, so it went
	Backup  string // the copy of the file from before the edit, if any
}

// Snippet is the configuration Install would write into an empty file.
func (a *Agent) Snippet(turnctl string) (string, error) {
	if !a.HasHooks() {
		return "", fmt.Errorf("%s has no hook configuration", a.Title)
	}
	doc, _, err := a.add([]byte("{}\n"), turnctl, false)
	return string(doc), err
}

// Install merges the hooks that run `turnctl hook-event` into the settings
// file at path (where its symbolic links lead), creating it if needed; a
// file that holds only white space is an empty object. Everything else in
// the file keeps its bytes, and lines it adds end as the file's do; hooks
// already there are left alone, except that with update those of
// turnctl's that run another command are changed to run turnctl's. A file
// that already has them is not touched. What it creates (the "hooks"
// object, an event's list, the file, its directories) is recorded for
// Uninstall.
func (a *Agent) Install(path, turnctl string, update bool) (Result, error) {
	res := Result{Path: path}
	if !a.HasHooks() {
		return res, fmt.Errorf("%s has no hook configuration to install into", a.Title)
	}
	f, err := readSettings(path)
	if err != nil {
		return res, err
	}
	res.Created = !f.exists
	doc := f.body
	if f.blank() {
		doc = []byte("{}" + eolOf(f.body))
	}
	_, had, _ := a.remove(doc, nil)
	doc, e, err := a.add(doc, turnctl, update)
	if err != nil {
		return res, fmt.Errorf("%s: %v", path, err)
	}
	if !e.added && !e.updated {
		return res, nil
	}
	res.Added, res.Updated = e.added, e.updated
	if e.added {
		// A record from an earlier install counts only while its hooks
		// are still there.
		rec := loadRecord(f.target, a.Name)
		if rec == nil || !had {
			rec = &record{File: !f.exists}
			if f.exists && f.blank() {
				b := string(f.body)
				rec.Blank = &b
			}
		}
		rec.Hooks = rec.Hooks || e.hooks
		rec.Events = append(rec.Events, e.events...)
		if !f.exists {
			if rec.Dirs, err = mkdirs(filepath.Dir(f.target)); err != nil {
				return res, err
			}
		}
		if err := saveRecord(f.target, a.Name, rec); err != nil {
			return res, err
		}
	}
	if f.exists {
		if res.Backup, err = backup(path, f.data); err != nil {
			return res, err
		}
	}
	if err := f.write(doc); err != nil {
		return res, err
	}
	res.Changed = true
	return res, nil
}

// edit is what add did.
type edit struct {
	added, updated bool
	hooks          bool     // it added the "hooks" object
	events         []string // and these event lists
}

// add inserts the hook groups missing from doc; with update, it also
// makes those of ours that run another command run turnctl's.
func (a *Agent) add(doc []byte, turnctl string, update bool) ([]byte, edit, error) {
	var e edit
	for _, ev := range a.events() {
		root, err := parseDoc(doc)
		if err != nil {
			return nil, e, err
		}
		g := a.group(turnctl)
		_, hooks := root.member("hooks")
		switch {
		case hooks == nil:
			doc, err = addMember(doc, root, "hooks", map[string][]hookGroup{ev: {g}})
			e.hooks = true
			e.events = append(e.events, ev)
		case hooks.kind != '{':
			return nil, e, fmt.Errorf(`"hooks" is not an object`)
		default:
			_, list := hooks.member(ev)
			switch {
			case list == nil:
				doc, err = addMember(doc, hooks, ev, []hookGroup{g})
				e.events = append(e.events, ev)
			case list.kind != '[':
				return nil, e, fmt.Errorf(`"hooks"."%s" is not an array`, ev)
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
				e.updated = true
				continue
			}
		}
		if err != nil {
			return nil, e, err
		}
		e.added = true
	}
	return doc, e, nil
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
	f, err := readSettings(path)
	if err != nil || f.blank() {
		return false, err
	}
	_, changed, err := a.remove(f.body, nil)
	return changed, err
}

// Uninstall removes the hooks Install added, and what Install's record
// says it created for them: the event lists and "hooks" object left
// empty, the file if it holds nothing else (and the directories made for
// it, if empty), or the white space it held. After an Install and no
// other edit of those entries, the file is what it was before, byte for
// byte. Without a record (an install by an older turnctl, a cleared state
// directory, a settings file from another machine) it cannot tell what the
// user had: it keeps an empty "hooks" object and the file, and removes the
// event lists that held only turnctl's hooks.
func (a *Agent) Uninstall(path string) (Result, error) {
	res := Result{Path: path}
	f, err := readSettings(path)
	if err != nil || !f.exists {
		return res, err
	}
	rec := loadRecord(f.target, a.Name)
	var doc []byte
	changed := false
	if !f.blank() {
		doc, changed, err = a.remove(f.body, rec)
		if err != nil {
			return res, fmt.Errorf("%s: %v", path, err)
		}
	}
	if !changed {
		if rec != nil {
			dropRecord(f.target, a.Name)
		}
		return res, nil
	}
	res.Changed = true
	if res.Backup, err = backup(path, f.data); err != nil {
		return res, err
	}
	if rec != nil && string(bytes.TrimSpace(doc)) == "{}" {
		switch {
		case rec.File:
			res.Removed = true
			if err := removeCreated(f.target, rec); err != nil {
				return res, err
			}
			dropRecord(f.target, a.Name)
			return res, nil
		case rec.Blank != nil:
			doc = []byte(*rec.Blank)
		}
	}
	if err := f.write(doc); err != nil {
		return res, err
	}
	if rec != nil {
		dropRecord(f.target, a.Name)
	}
	return res, nil
}

// remove deletes our hooks from doc, one at a time, and the containers
// rec says install added for them once they are empty (rec nil: the event
// lists, not "hooks").
func (a *Agent) remove(doc []byte, rec *record) ([]byte, bool, error) {
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
			// list and "hooks" if that leaves them empty and install
			// added them.
			switch {
			case len(list.elems) > 1 || rec != nil && !slices.Contains(rec.Events, ev.key):
				doc = removeChild(doc, list, o.group)
			case len(hooks.members) > 1 || rec == nil || !rec.Hooks:
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
// it exists; else 0644). Run as root, it keeps path's owner (a new file:
// its directory's), as an edit in place would: root editing a user's
// settings file must not leave it root's, unreadable to the user at mode
// 0600.
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
	if uid, gid, ok := ownerFor(path); ok {
		if err := tmp.Chown(uid, gid); err != nil {
			tmp.Close()
			return err
		}
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

// ownerFor says, when turnctl runs as root, whom a file it writes at path
// should belong to: path's owner, or if there is no file there, the
// owner of the directory it goes into. ok is false when not root (a file
// one writes is one's own) or the owner is root anyway.
func ownerFor(path string) (uid, gid int, ok bool) {
	if os.Geteuid() != 0 {
		return 0, 0, false
	}
	fi, err := os.Stat(path)
	if err != nil {
		if fi, err = os.Stat(filepath.Dir(path)); err != nil {
			return 0, 0, false
		}
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || st.Uid == 0 && st.Gid == 0 {
		return 0, 0, false
	}
	return int(st.Uid), int(st.Gid), true
}

// HooksEnabled says whether the settings file at path sets
// "hooksConfig": {"enabled": true}, which Gemini CLI releases where hooks
// are experimental need.
func HooksEnabled(path string) bool {
	f, err := readSettings(path)
	if err != nil || f.blank() {
		return false
	}
	root, err := parseDoc(f.body)
	if err != nil {
		return false
	}
	_, hc := root.member("hooksConfig")
	if hc == nil || hc.kind != '{' {
		return false
	}
	_, en := hc.member("enabled")
	return en != nil && string(f.body[en.start:en.end]) == "true"
}
