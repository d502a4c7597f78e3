package agenthooks

import (
	"bytes"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
)

// Aider reads .aider.conf.yml (YAML). turnctl does not edit YAML: it
// appends a block between two marker comments and removes exactly that
// block again.
const (
	aiderBegin = "# >>> turnctl hooks (ckptfs): each aider answer ends a turn >>>\n"
	aiderEnd   = "# <<< turnctl hooks (ckptfs) <<<\n"
)

// AiderBlock is the block InstallAider appends.
func AiderBlock(turnctl string) string {
	return aiderBegin +
		"notifications: true\n" +
		"notifications-command: " + yamlQuote(AiderCommand(turnctl)) + "\n" +
		aiderEnd
}

// AiderCommand is the command line aider runs (with a shell) when it has
// answered, given the path of turnctl.
func AiderCommand(turnctl string) string {
	return ShellQuote(turnctl) + " hook-event aider"
}

func yamlQuote(s string) string {
	return "'" + string(bytes.ReplaceAll([]byte(s), []byte("'"), []byte("''"))) + "'"
}

// aiderKeys are settings the block sets; a file that sets them already is
// left alone (YAML does not allow a key twice).
var aiderKeys = regexp.MustCompile(`(?m)^notifications(-command|_command)?\s*:`)

// InstallAider appends the block to the aider configuration at path
// (where its symbolic links lead), its lines ending as the file's do. A
// file that has it already is left alone, unless update and its command
// is another: then the block is replaced. What it creates (the file, its
// directories, a final newline) is recorded for UninstallAider.
func InstallAider(path, turnctl string, update bool) (Result, error) {
	res := Result{Path: path}
	f, err := readSettings(path)
	if err != nil {
		return res, err
	}
	res.Created = !f.exists
	orig := f.data
	eol := eolOf(orig)
	block := withEOL(AiderBlock(turnctl), eol)
	var doc []byte
	rec := &record{File: !f.exists}
	if i, j, err := aiderBlockAt(path, orig); err != nil {
		return res, err
	} else if i >= 0 {
		if !update || string(orig[i:j]) == block {
			return res, nil
		}
		doc = splice(orig, i, j, block)
		res.Updated = true
	} else {
		if aiderKeys.Match(orig) {
			return res, fmt.Errorf("%s already sets notifications or notifications-command; add `%s` to it by hand", path, AiderCommand(turnctl))
		}
		doc = append([]byte{}, orig...)
		if len(doc) > 0 && doc[len(doc)-1] != '\n' {
			// The file gets a final newline, which uninstall takes away
			// again.
			doc = append(doc, eol...)
			rec.EOL = true
		}
		doc = append(doc, block...)
		res.Added = true
		if !f.exists {
			if rec.Dirs, err = mkdirs(filepath.Dir(f.target)); err != nil {
				return res, err
			}
		}
		if err := saveRecord(f.target, "aider", rec); err != nil {
			return res, err
		}
	}
	if f.exists {
		if res.Backup, err = backup(path, orig); err != nil {
			return res, err
		}
	}
	if err := writeFile(f.target, doc, f.target); err != nil {
		return res, err
	}
	res.Changed = true
	return res, nil
}

// UninstallAider removes the block, and what InstallAider's record says it
// created: the newline it added before the block, the file if nothing
// else is left in it (and the directories made for it, if empty).
// Without a record it removes only the block.
func UninstallAider(path string) (Result, error) {
	res := Result{Path: path}
	f, err := readSettings(path)
	if err != nil || !f.exists {
		return res, err
	}
	rec := loadRecord(f.target, "aider")
	orig := f.data
	i, j, err := aiderBlockAt(path, orig)
	if err != nil || i < 0 {
		if err == nil && rec != nil {
			dropRecord(f.target, "aider")
		}
		return res, err
	}
	if rec == nil {
		rec = &record{}
	}
	if rec.EOL && j == len(orig) {
		// Install ended the file's last line before its block.
		switch {
		case bytes.HasSuffix(orig[:i], []byte("\r\n")):
			i -= 2
		case bytes.HasSuffix(orig[:i], []byte("\n")):
			i--
		}
	}
	doc := splice(orig, i, j, "")
	res.Changed = true
	if res.Backup, err = backup(path, orig); err != nil {
		return res, err
	}
	if len(doc) == 0 && rec.File {
		res.Removed = true
		if err := removeCreated(f.target, rec); err != nil {
			return res, err
		}
	} else if err := writeFile(f.target, doc, f.target); err != nil {
		return res, err
	}
	dropRecord(f.target, "aider")
	return res, nil
}

// aiderBlockAt finds turnctl's block in doc, the file at path: doc[i:j],
// or i < 0 if there is none. Its lines may end in "\n" or "\r\n".
func aiderBlockAt(path string, doc []byte) (i, j int, err error) {
	begin, end := strings.TrimSuffix(aiderBegin, "\n"), strings.TrimSuffix(aiderEnd, "\n")
	i = bytes.Index(doc, []byte(begin))
	if i < 0 {
		return -1, -1, nil
	}
	j = bytes.Index(doc[i:], []byte(end))
	if j < 0 {
		return -1, -1, fmt.Errorf("%s: the turnctl block has no end marker; remove it by hand", path)
	}
	j += i + len(end)
	switch {
	case bytes.HasPrefix(doc[j:], []byte("\r\n")):
		j += 2
	case bytes.HasPrefix(doc[j:], []byte("\n")):
		j++
	}
	return i, j, nil
}
