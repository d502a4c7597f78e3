package versionstore

import (
	"os"
	"testing"

	"ckptfs/internal/ckpt"
)

// A turn that gave each of two names of one inode an inode of its own
// lists both names' link changes, also after a later edit of one of them
// made while unmounted (whose bytes at the end of the turn were then
// never captured, but whose inode is still known).
func TestTurnChangesOfLinksKeptAfterOfflineEdit(t *testing.T) {
	s, tree, root := offlineFixture(t)
	m := &sim{t: t, store: s, tree: tree, root: root}
	turn := func(fn func()) {
		t.Helper()
		if _, err := s.Begin(ckpt.KindAgent, "", ""); err != nil {
			t.Fatal(err)
		}
		fn()
		if _, err := s.End(""); err != nil {
			t.Fatal(err)
		}
	}
	copyOver := func(p string) { // cp p p.tmp && mv p.tmp p
		m.capture(p+".tmp", false)
		os.WriteFile(m.abs(p+".tmp"), []byte("a\n"), 0o644)
		m.capture(p, true)
		mvRecorded(m, p+".tmp", p)
	}
	turn(func() {
		m.capture("f", false)
		os.WriteFile(m.abs("f"), []byte("a\n"), 0o644)
		m.capture("g", false)
		os.Link(m.abs("f"), m.abs("g"))
	})
	turn(func() { copyOver("f"); copyOver("g") })
	kinds := func() map[string]ckpt.ChangeKind {
		cs, err := s.TurnChanges(2, tree)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]ckpt.ChangeKind{}
		for _, c := range cs {
			out[c.Path] = c.Kind
		}
		return out
	}
	if k := kinds(); k["f"] != ckpt.Relinked || k["g"] != ckpt.Relinked || len(k) != 2 {
		t.Fatalf("turn 2 changed %v, want f and g relinked", k)
	}
	if err := s.SaveManifest(tree, nil, nil); err != nil {
		t.Fatal(err)
	}
	f, _ := os.OpenFile(m.abs("f"), os.O_WRONLY|os.O_APPEND, 0)
	f.WriteString("off\n")
	f.Close()
	if res, err := s.RecordOffline(tree, nil, nil, false); err != nil || res.Lost != 1 {
		t.Fatalf("offline check: %+v, %v; want f lost", res, err)
	}
	if k := kinds(); k["g"] != ckpt.Relinked || k["f"] == "" || len(k) != 2 {
		t.Fatalf("after the offline edit of f, turn 2 changed %v, want f and g (g relinked)", k)
	}
}
