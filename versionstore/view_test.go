package versionstore

import (
	"bytes"
	"errors"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"testing"

	"ckptfs/internal/backing"
	"ckptfs/internal/ckpt"
)

// TestViewFile: a view's file read at random offsets gives the turn's
// bytes from the live file, and still after the live file is changed in
// place (then from the store's chunks) or renamed (from its new name);
// an open turn has no view.
func TestViewFile(t *testing.T) {
	root := t.TempDir()
	s := NewTestStore(t)
	tree, _ := backing.Open(root)
	defer tree.Close()
	m := &sim{t: t, root: root, tree: tree, store: s}
	rng := rand.New(rand.NewSource(1))
	big := make([]byte, 5<<20+123) // several chunks
	rng.Read(big)
	os.WriteFile(filepath.Join(root, "big"), big, 0o644)
	os.WriteFile(filepath.Join(root, "small"), []byte("small bytes"), 0o644)
	os.WriteFile(filepath.Join(root, "other"), nil, 0o644)
	s.Begin(ckpt.KindAgent, "", "")
	m.capture("other", false)
	os.WriteFile(filepath.Join(root, "other"), []byte("x"), 0o644)
	tn, _ := s.End("")

	sn, err := s.ViewAt(tn.Num, tree, ViewOptions{})
	if err != nil {
		t.Fatal(err)
	}
	open := func(p string) *ViewFile {
		for _, e := range sn.Entries {
			if e.Path == p {
				f, err := s.OpenView(sn, e, tree)
				if err != nil {
					t.Fatal(err)
				}
				return f
			}
		}
		t.Fatalf("%s not in the view", p)
		return nil
	}
	check := func(what string, f *ViewFile, want []byte) {
		t.Helper()
		for i := 0; i < 200; i++ {
			off := rng.Int63n(int64(len(want)))
			buf := make([]byte, rng.Intn(300<<10)+1)
			n, err := f.ReadAt(buf, off)
			end := min(off+int64(len(buf)), int64(len(want)))
			if (err != nil && err != io.EOF) || !bytes.Equal(buf[:n], want[off:end]) {
				t.Fatalf("%s: ReadAt(%d bytes at %d): %d bytes, %v, not the turn's", what, len(buf), off, n, err)
			}
		}
		all, err := io.ReadAll(io.NewSectionReader(f, 0, f.Size()))
		if err != nil || !bytes.Equal(all, want) {
			t.Fatalf("%s: the whole file: %d bytes, %v, not the turn's", what, len(all), err)
		}
	}
	fb, fs := open("big"), open("small")
	check("big, live", fb, big)
	check("small, live", fs, []byte("small bytes"))

	// The project changes: big in place (captured first, as the daemon
	// does), small renamed.
	s.Begin(ckpt.KindAgent, "", "")
	m.capture("big", false)
	f, _ := os.OpenFile(filepath.Join(root, "big"), os.O_WRONLY, 0)
	f.WriteAt([]byte("changed"), 1000)
	f.Close()
	commit, _ := s.RecordRename("small", "moved", false, ckpt.Program{})
	commit(os.Rename(filepath.Join(root, "small"), filepath.Join(root, "moved")) == nil)
	s.End("")
	check("big, changed since", fb, big)
	check("small, renamed since", fs, []byte("small bytes"))
	check("big, opened after the change", open("big"), big)
	fb.Close()
	fs.Close()

	s.Begin(ckpt.KindAgent, "", "")
	open2 := s.Latest()
	if _, err := s.ViewAt(open2, tree, ViewOptions{}); !errors.Is(err, ErrOpenTurn) {
		t.Errorf("ViewAt of the open turn: %v, want ErrOpenTurn", err)
	}
}

// TestHold: a held turn is not forgotten, by hand or by the policy's
// plan, until it is released; a forgotten turn cannot be held.
func TestHold(t *testing.T) {
	s := NewTestStore(t)
	for i := 0; i < 3; i++ {
		s.Begin(ckpt.KindAgent, "", "")
		s.End("")
	}
	release, err := s.Hold(1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Forget([]uint64{0, 1}, ckpt.ReasonForget); !errors.Is(err, ErrPinned) {
		t.Fatalf("forget of a held turn: %v, want ErrPinned", err)
	}
	if p, err := s.pinned(); err != nil || !p[1] {
		t.Errorf("pinned() = %v, %v: the held turn is not in it", p, err)
	}
	release()
	release() // twice: once
	if _, err := s.Forget([]uint64{0, 1}, ckpt.ReasonForget); err != nil {
		t.Fatalf("forget after the release: %v", err)
	}
	if _, err := s.Hold(1); !errors.Is(err, ErrForgotten) {
		t.Errorf("hold of a forgotten turn: %v, want ErrForgotten", err)
	}
}

// TestViewFileUnwatched: with nothing recording the tree's changes, a
// live file read after it changed on disk fails with ErrNotCaptured
// rather than give bytes that are not the turn's.
func TestViewFileUnwatched(t *testing.T) {
	root := t.TempDir()
	s := NewTestStore(t)
	tree, _ := backing.Open(root)
	defer tree.Close()
	os.WriteFile(filepath.Join(root, "f"), []byte("the turn's"), 0o644)
	os.WriteFile(filepath.Join(root, "g"), []byte("kept"), 0o644)
	s.Begin(ckpt.KindAgent, "", "")
	tn, _ := s.End("")
	sn, err := s.ViewAt(tn.Num, tree, ViewOptions{Unwatched: true})
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]*ViewFile{}
	for _, e := range sn.Entries {
		if e.State.Type == ckpt.Regular {
			if files[e.Path], err = s.OpenView(sn, e, tree); err != nil {
				t.Fatal(err)
			}
		}
	}
	buf := make([]byte, 64)
	if n, err := files["f"].ReadAt(buf, 0); err != io.EOF || string(buf[:n]) != "the turn's" {
		t.Fatalf("f before the change: %q, %v", buf[:n], err)
	}
	os.WriteFile(filepath.Join(root, "f"), []byte("not theirs"), 0o644) // same size, in place
	if n, err := files["f"].ReadAt(buf, 0); !errors.Is(err, ErrNotCaptured) {
		t.Errorf("f after it changed on disk: %q, %v; want ErrNotCaptured", buf[:n], err)
	}
	if n, err := files["g"].ReadAt(buf, 0); err != io.EOF || string(buf[:n]) != "kept" {
		t.Errorf("g, unchanged: %q, %v", buf[:n], err)
	}
}
