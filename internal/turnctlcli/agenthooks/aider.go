package agenthooks

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"
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

// InstallAider appends the block to the aider configuration at path. A
// file that has it already is left alone, unless update and its command
// is another: then the block is replaced.
func InstallAider(path, turnctl string, update bool) (Result, error) {
	res := Result{Path: path}
	orig, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		res.Created = true
	} else if err != nil {
		return res, err
	}
	var doc []byte
	if i, j, err := aiderBlockAt(path, orig); err != nil {
		return res, err
	} else if i >= 0 {
		if !update || string(orig[i:j]) == AiderBlock(turnctl) {
			return res, nil
		}
		doc = splice(orig, i, j, AiderBlock(turnctl))
		res.Updated = true
	} else {
		if aiderKeys.Match(orig) {
			return res, fmt.Errorf("%s already sets notifications or notifications-command; add `%s` to it by hand", path, AiderCommand(turnctl))
		}
		doc = append([]byte{}, orig...)
		if len(doc) > 0 && doc[len(doc)-1] != '\n' {
			// The file gets a final newline, which uninstall leaves.
			doc = append(doc, '\n')
		}
		doc = append(doc, AiderBlock(turnctl)...)
		res.Added = true
	}
	if !res.Created {
		if res.Backup, err = backup(path, orig); err != nil {
			return res, err
		}
	}
	if err := writeFile(path, doc, path); err != nil {
		return res, err
	}
	res.Changed = true
	return res, nil
}

// UninstallAider removes the block (and the newline install added before
// it); a file left empty is removed.
func UninstallAider(path string) (Result, error) {
	res := Result{Path: path}
	orig, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return res, nil
	} else if err != nil {
		return res, err
	}
	i, j, err := aiderBlockAt(path, orig)
	if err != nil || i < 0 {
		return res, err
	}
	doc := splice(orig, i, j, "")
	res.Changed = true
	if res.Backup, err = backup(path, orig); err != nil {
		return res, err
	}
	if len(doc) == 0 {
		res.Removed = true
		return res, os.Remove(path)
	}
	return res, writeFile(path, doc, path)
}

// aiderBlockAt finds turnctl's block in doc, the file at path: doc[i:j],
// or i < 0 if there is none.
func aiderBlockAt(path string, doc []byte) (i, j int, err error) {
	i = bytes.Index(doc, []byte(aiderBegin))
	if i < 0 {
		return -1, -1, nil
	}
	j = bytes.Index(doc[i:], []byte(aiderEnd))
	if j < 0 {
		return -1, -1, fmt.Errorf("%s: the turnctl block has no end marker; remove it by hand", path)
	}
	return i, i + j + len(aiderEnd), nil
}
