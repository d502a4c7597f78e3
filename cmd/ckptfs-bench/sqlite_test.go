package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestPagesChanged(t *testing.T) {
	dir := t.TempDir()
	const size = 1024
	db := make([]byte, 4*size)
	db[16], db[17] = size>>8, size&0xff // the header's page size, big-endian
	before, after := filepath.Join(dir, "before"), filepath.Join(dir, "after")
	if err := os.WriteFile(before, db, 0o644); err != nil {
		t.Fatal(err)
	}
	changed := append([]byte(nil), db...)
	changed[size+7]++                                // page 2
	changed[3*size-1]++                              // page 3
	changed = append(changed, make([]byte, size)...) // page 5, new
	if err := os.WriteFile(after, changed, 0o644); err != nil {
		t.Fatal(err)
	}
	pages, got, err := pagesChanged(before, after)
	if err != nil || pages != 3 || got != size {
		t.Errorf("pagesChanged = %d pages of %d, %v; want 3 of %d", pages, got, err, size)
	}
	if pages, _, err := pagesChanged(before, before); err != nil || pages != 0 {
		t.Errorf("pagesChanged of a file against itself = %d, %v", pages, err)
	}
}
