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
		"notifications-command: " + yamlQuote(turnctl+" hook-event aider") + "\n" +
		aiderEnd
}

func yamlQuote(s string) string {
	return "'" + string(bytes.ReplaceAll([]byte(s), []byte("'"), []byte("''"))) + "'"
}

// aiderKeys are settings the block sets; a file that sets them already is
// left alone (YAML does not allow a key twice).
var aiderKeys = regexp.MustCompile(`(?m)^notifications(-command|_command)?\s*:`)

// InstallAider appends the block to the aider configuration at path.
func InstallAider(path, turnctl string) (Result, error) {
	res := Result{Path: path}
	orig, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		res.Created = true
	} else if err != nil {
		return res, err
	}
	if bytes.Contains(orig, []byte(aiderBegin)) {
		return res, nil
	}
	if aiderKeys.Match(orig) {
		return res, fmt.Errorf("%s already sets notifications or notifications-command; add `%s hook-event aider` to it by hand", path, turnctl)
	}
	doc := append([]byte{}, orig...)
	if len(doc) > 0 && doc[len(doc)-1] != '\n' {
		// The file gets a final newline, which uninstall leaves.
		doc = append(doc, '\n')
	}
	doc = append(doc, AiderBlock(turnctl)...)
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
	i := bytes.Index(orig, []byte(aiderBegin))
	if i < 0 {
		return res, nil
	}
	j := bytes.Index(orig[i:], []byte(aiderEnd))
	if j < 0 {
		return res, fmt.Errorf("%s: the turnctl block has no end marker; remove it by hand", path)
	}
	doc := append(append([]byte{}, orig[:i]...), orig[i+j+len(aiderEnd):]...)
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
