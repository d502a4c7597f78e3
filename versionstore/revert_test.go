package versionstore

import (
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"ckptfs/internal/backing"
	"ckptfs/internal/ckpt"
	"ckptfs/internal/merge3"
)

// obj is one file of the revert model: its identity survives renames.
type obj struct {
	name string // "" when it does not exist
	data string
	mode uint32
}

// revertModel makes a random history of files (a top directory and d/,
// names never used twice, so that a path is one file's until it is
// renamed) recording into a store, and keeps each turn's end as files by
// identity: the oracle for a revert is a three-way merge per file and
// field, independent of the store's per-path planning.
type revertModel struct {
	m     *sim
	next  int
	objs  map[int]obj
	snaps []map[int]obj
	// renamed and replaced: the objects the open turn renamed, and those
	// it wrote by renaming a new file over them. A turn does one or the
	// other to an object: one that does both lists a deletion and an
	// addition (the object's new name holds a new file), not the
	// object's rename and write that the oracle sees.
	renamed, replaced map[int]bool
}

func (r *revertModel) fresh() string {
	r.next++
	if r.m.rng.Intn(3) == 0 {
		return fmt.Sprintf("d/f%d", r.next)
	}
	return fmt.Sprintf("f%d", r.next)
}

func (r *revertModel) text(old string) string {
	rng := r.m.rng
	if rng.Intn(12) == 0 {
		return "bin\x00ary" + fmt.Sprint(rng.Intn(9))
	}
	ls := strings.SplitAfter(old, "\n")
	if ls[len(ls)-1] == "" {
		ls = ls[:len(ls)-1]
	}
	if len(ls) == 0 || strings.Contains(old, "\x00") || rng.Intn(5) == 0 {
		ls = nil
		for i := 0; i < 3+rng.Intn(8); i++ {
			ls = append(ls, fmt.Sprintf("line %d\n", rng.Intn(100)))
		}
		return strings.Join(ls, "")
	}
	i := rng.Intn(len(ls))
	switch rng.Intn(3) {
	case 0:
		ls[i] = fmt.Sprintf("edited %d\n", rng.Intn(100))
	case 1:
		ls = append(ls[:i], append([]string{fmt.Sprintf("added %d\n", rng.Intn(100))}, ls[i:]...)...)
	default:
		ls = append(ls[:i], ls[i+1:]...)
	}
	return strings.Join(ls, "")
}

func (r *revertModel) live() []int {
	var ids []int
	for id, o := range r.objs {
		if o.name != "" {
			ids = append(ids, id)
		}
	}
	sort.Ints(ids)
	return ids
}

func (r *revertModel) step() {
	m, rng := r.m, r.m.rng
	ids := r.live()
	op := rng.Intn(5)
	if len(ids) == 0 {
		op = 0
	}
	who := ckpt.Program{Comm: "sim"}
	switch op {
	case 0: // create
		p := r.fresh()
		m.capture(p, false)
		o := obj{name: p, data: r.text(""), mode: 0o644}
		if err := os.WriteFile(m.abs(p), []byte(o.data), 0o644); err != nil {
			m.t.Fatal(err)
		}
		r.objs[r.next] = o
	case 1, 2: // write
		id := ids[rng.Intn(len(ids))]
		o := r.objs[id]
		o.data = r.text(o.data)
		if rng.Intn(3) > 0 || r.renamed[id] {
			m.captureAll(o.name, false)
			if err := os.WriteFile(m.abs(o.name), []byte(o.data), 0); err != nil {
				m.t.Fatal(err)
			}
			r.objs[id] = o
			break
		}
		// As sed -i writes: a new file renamed over the old; the same
		// file to the oracle.
		r.replaced[id] = true
		tmp := r.fresh()
		m.capture(tmp, false)
		if err := os.WriteFile(m.abs(tmp), []byte(o.data), 0); err != nil {
			m.t.Fatal(err)
		}
		if err := os.Chmod(m.abs(tmp), os.FileMode(o.mode)); err != nil {
			m.t.Fatal(err)
		}
		m.capture(o.name, false)
		mvRecorded(m, tmp, o.name)
		r.objs[id] = o
	case 3: // chmod, delete or rename
		id := ids[rng.Intn(len(ids))]
		o := r.objs[id]
		switch rng.Intn(3) {
		case 0:
			m.captureAll(o.name, true)
			o.mode = []uint32{0o644, 0o600, 0o755}[rng.Intn(3)]
			if err := os.Chmod(m.abs(o.name), os.FileMode(o.mode)); err != nil {
				m.t.Fatal(err)
			}
		case 1:
			m.capture(o.name, true)
			if err := os.Remove(m.abs(o.name)); err != nil {
				m.t.Fatal(err)
			}
			o.name = ""
		default:
			if r.replaced[id] {
				break
			}
			r.renamed[id] = true
			q := r.fresh()
			commit, err := m.store.RecordRename(o.name, q, false, who)
			if err != nil {
				m.t.Fatal(err)
			}
			err = os.Rename(m.abs(o.name), m.abs(q))
			commit(err == nil)
			if err != nil {
				m.t.Fatal(err)
			}
			o.name = q
		}
		r.objs[id] = o
	case 4: // nothing this step
	}
}

func (r *revertModel) snap() map[int]obj {
	c := map[int]obj{}
	for id, o := range r.objs {
		c[id] = o
	}
	return c
}

// expectRevert is the oracle: the tree after a revert of turn n (files by
// path: data and mode), and the paths that conflict (text: only in their
// lines). Per file and field (existence, name, bytes, mode): ours (now) if
// the turn did not change the field, theirs (before the turn) if nothing
// later did, else the same if both are, else: for the name, ours (a later
// rename wins); for the bytes, a line merge; anything else conflicts, and
// so does a file one side removes while the other changed its bytes or
// mode. A conflict is named by the path the file has now, else at the
// end of the turn, else before it; a text conflict by where its markers go.
func (r *revertModel) expectRevert(n int, markers bool) (map[string]obj, map[string]bool) {
	before, end, now := r.snaps[n-1], r.snaps[n], r.objs
	out := map[string]obj{}
	conflicts := map[string]bool{} // path -> text only
	pick := func(b, e, l string) (string, bool) {
		switch {
		case l == e:
			return b, true
		case b == e, l == b:
			return l, true
		}
		return l, false
	}
	for id, l := range now {
		b, e := before[id], end[id]
		if b == e {
			if l.name != "" {
				out[l.name] = l
			}
			continue
		}
		cname := l.name // a conflict's name: now, else at the end of n, else before
		if cname == "" {
			cname = e.name
		}
		if cname == "" {
			cname = b.name
		}
		exists := l.name != ""
		if exists == (e.name != "") {
			exists = b.name != ""
		}
		if !exists {
			// Removed: by the revert (the turn made it) unless changed
			// since, or later (the turn changed it) unless unchanged.
			if b.name == "" && l.name != "" && (l.data != e.data || l.mode != e.mode) {
				conflicts[cname] = false
				out[l.name] = l
			}
			if l.name == "" && b.name != "" && (b.data != e.data || b.mode != e.mode) {
				conflicts[cname] = false
			}
			continue
		}
		name, _ := pick(b.name, e.name, l.name)
		mode, okm := pick(fmt.Sprint(b.mode), fmt.Sprint(e.mode), fmt.Sprint(l.mode))
		data, okd := pick(b.data, e.data, l.data)
		res := obj{name: name, data: data}
		fmt.Sscan(mode, &res.mode)
		if !okm {
			conflicts[cname] = false
			out[l.name] = l
			continue
		}
		if !okd {
			if merge3.Binary([]byte(b.data)) || merge3.Binary([]byte(e.data)) || merge3.Binary([]byte(l.data)) {
				conflicts[cname] = false
				out[l.name] = l
				continue
			}
			mr := merge3.Merge([]byte(e.data), []byte(l.data), []byte(b.data), merge3.Labels{Ours: "now", Theirs: fmt.Sprintf("before turn %d", n)})
			res.data = string(mr.Text)
			if mr.Conflicts > 0 {
				if _, ok := conflicts[name]; !ok {
					conflicts[name] = true
				}
			}
		}
		out[name] = res
	}
	return out, conflicts
}

// filesNow reads the tree's files (d itself aside) as the model keeps them.
func filesNow(t *testing.T, root string) map[string]obj {
	out := map[string]obj{}
	for p, e := range takeSnapshot(t, root) {
		if e.Type == ckpt.Dir {
			continue
		}
		out[p] = obj{name: p, data: e.Data, mode: e.Mode}
	}
	return out
}

func diffFiles(want, got map[string]obj) string {
	var out []string
	for p, w := range want {
		if g, ok := got[p]; !ok {
			out = append(out, fmt.Sprintf("%s: missing, want %q %o", p, w.data, w.mode))
		} else if g.data != w.data || g.mode != w.mode {
			out = append(out, fmt.Sprintf("%s: got %q %o, want %q %o", p, g.data, g.mode, w.data, w.mode))
		}
	}
	for p, g := range got {
		if _, ok := want[p]; !ok {
			out = append(out, fmt.Sprintf("%s: unexpected %q %o", p, g.data, g.mode))
		}
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}

// newRevertCase makes a random history in s over a new tree (turns of
// revertModel steps), and picks a turn to revert, mostly one with later
// turns, and whether to write markers.
func newRevertCase(t *testing.T, seed int64, s *Store) (r *revertModel, tree *backing.Tree, n int, markers bool) {
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	tree, err := backing.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tree.Close() })
	rng := rand.New(rand.NewSource(seed))
	r = &revertModel{m: &sim{t: t, rng: rng, root: root, tree: tree, store: s}, objs: map[int]obj{}}
	r.snaps = append(r.snaps, r.snap())
	nTurns := 3 + rng.Intn(6)
	for i := 1; i <= nTurns; i++ {
		if _, err := s.Begin(ckpt.KindAgent, "", ""); err != nil {
			t.Fatal(err)
		}
		r.renamed, r.replaced = map[int]bool{}, map[int]bool{}
		for k := 1 + rng.Intn(6); k > 0; k-- {
			r.step()
		}
		if _, err := s.End(""); err != nil {
			t.Fatal(err)
		}
		r.snaps = append(r.snaps, r.snap())
	}
	n = 1 + rng.Intn(nTurns)
	if rng.Intn(5) > 0 {
		n = 1 + rng.Intn(nTurns-1) // later turns to keep
	}
	return r, tree, n, rng.Intn(2) == 0
}

// TestRevertRandom: on random histories, a revert of a random turn gives,
// for each file, what the identity oracle expects (expectRevert); it
// refuses, changing nothing, exactly when a path conflicts (text conflicts
// written with markers when asked); its dry run lists what it then does;
// and it is undone by a rewind to the turn before it. Replay one with
// -run 'TestRevertRandom/seed=N'.
func TestRevertRandom(t *testing.T) {
	for seed := int64(1); seed <= 300; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Parallel()
			s := NewTestStore(t)
			r, tree, n, markers := newRevertCase(t, seed, s)
			root := r.m.root
			want, conflicts := r.expectRevert(n, markers)
			hard := false
			for _, text := range conflicts {
				hard = hard || !text || !markers
			}
			before := filesNow(t, root)
			latest := s.Latest()
			dry, derr := s.Revert(uint64(n), tree, RevertOptions{DryRun: true, Markers: markers})
			res, err := s.Revert(uint64(n), tree, RevertOptions{Markers: markers})
			t.Logf("revert of %d of %d: conflicts %v, markers %v", n, len(r.snaps)-1, conflicts, markers)
			if hard {
				if !errors.Is(err, ErrConflict) || !errors.Is(derr, ErrConflict) {
					t.Fatalf("revert of %d: want a conflict of %v, got %v (dry run: %v)", n, conflicts, err, derr)
				}
				var got []string
				for _, c := range res.Conflicts {
					got = append(got, c.Path)
				}
				var exp []string
				for p := range conflicts {
					exp = append(exp, p)
				}
				sort.Strings(exp)
				if strings.Join(got, " ") != strings.Join(exp, " ") {
					t.Errorf("conflicts %v (%+v), want %v", got, res.Conflicts, exp)
					for i, sn := range r.snaps {
						t.Logf("turn %d: %v", i, sn)
					}
				}
				if d := diffFiles(before, filesNow(t, root)); d != "" || s.Latest() != latest {
					t.Fatalf("a refused revert changed the tree:\n%s", d)
				}
				return
			}
			if err != nil || derr != nil {
				t.Fatalf("revert of %d: %v (dry run: %v)", n, err, derr)
			}
			if d := diffFiles(want, filesNow(t, root)); d != "" {
				t.Fatalf("revert of turn %d (markers %v):\n%s", n, markers, d)
			}
			if a, b := fmt.Sprint(perPath(dry.Changes)), fmt.Sprint(perPath(res.Changes)); a != b {
				t.Errorf("dry run listed\n%s\nthe revert did\n%s", a, b)
			}
			t.Logf("changes %d, merged %v, conflicts %v", len(res.Changes), res.Merged, res.Conflicts)
			if res.Turn.Num == 0 {
				return // nothing to change
			}
			if res.Turn.Kind != ckpt.KindRevert || res.Turn.Label != fmt.Sprintf("revert of turn %d", n) {
				t.Errorf("revert turn %+v", res.Turn)
			}
			if _, err := s.Rewind(res.Turn.Num-1, tree, RewindOptions{}); err != nil {
				t.Fatal(err)
			}
			if d := diffFiles(before, filesNow(t, root)); d != "" {
				t.Fatalf("undoing the revert:\n%s", d)
			}
		})
	}
}

// TestCrashPointsOfRevert kills a revert at a random hit of its crash
// points (and of the captures it makes), then recovers it on the store as
// the kill left it: the tree must then be what the revert makes (or, when
// the kill came before its journal, as it was, and the revert done again
// gives it). Replay one with -run 'TestCrashPointsOfRevert/seed=N'.
func TestCrashPointsOfRevert(t *testing.T) {
	for seed := int64(1); seed <= 150; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			mem := vfs.NewCrashableMem()
			s := openOn(t, mem)
			r, tree, n, markers := newRevertCase(t, seed, s)
			want, conflicts := r.expectRevert(n, markers)
			for _, text := range conflicts {
				if !text || !markers {
					s.Close()
					return // refused: changes nothing (TestRevertRandom)
				}
			}
			before := filesNow(t, r.m.root)
			hit := 1 + r.m.rng.Intn(8)
			point, err := untilCrash(t, fmt.Sprintf("*@%d", hit), func() error {
				_, err := s.Revert(uint64(n), tree, RevertOptions{Markers: markers})
				return err
			})
			if point == "" {
				s.Close()
				if err != nil {
					t.Fatal(err)
				}
				return // done before the hit
			}
			t.Logf("crashed at %s (hit %d)", point, hit)
			s2, _ := killClone(t, mem)
			s.Close()
			defer s2.Close()
			did, err := s2.Recover(tree)
			if err != nil {
				t.Fatalf("crash at %s: recover: %v", point, err)
			}
			if !did && diffFiles(want, filesNow(t, r.m.root)) != "" {
				if d := diffFiles(before, filesNow(t, r.m.root)); d != "" {
					t.Fatalf("crash at %s: no journal, and the tree changed:\n%s", point, d)
				}
				if _, err := s2.Revert(uint64(n), tree, RevertOptions{Markers: markers}); err != nil {
					t.Fatal(err)
				}
			}
			if d := diffFiles(want, filesNow(t, r.m.root)); d != "" {
				t.Fatalf("crash at %s (hit %d), then recovery:\n%s", point, hit, d)
			}
			rt, err := s2.Turn(s2.Latest())
			if err != nil || rt.Kind != ckpt.KindRevert || rt.Open {
				t.Fatalf("revert turn %+v %v", rt, err)
			}
		})
	}
}

// TestRevertDirectories: a directory the turn made goes with the revert
// unless a later turn put something in it (then it conflicts, nothing
// changed); one it removed comes back with its files and mode.
func TestRevertDirectories(t *testing.T) {
	s := NewTestStore(t)
	root := t.TempDir()
	os.Mkdir(filepath.Join(root, "y"), 0o750)
	os.WriteFile(filepath.Join(root, "y", "f"), []byte("keep\n"), 0o600)
	m, turn := revertSim(t, s, root)
	tree := m.tree
	n := turn(func() {
		m.capture("x", false)
		os.Mkdir(m.abs("x"), 0o755)
		m.capture("x/f", false)
		os.WriteFile(m.abs("x/f"), []byte("new\n"), 0o644)
		m.capture("y/f", true)
		os.Remove(m.abs("y/f"))
		m.capture("y", false)
		os.Remove(m.abs("y"))
	})
	later := turn(func() {
		m.capture("x/g", false)
		os.WriteFile(m.abs("x/g"), []byte("later\n"), 0o644)
	})
	res, err := s.Revert(n, tree, RevertOptions{})
	if !errors.Is(err, ErrConflict) || len(res.Conflicts) != 1 || res.Conflicts[0].Path != "x" {
		t.Fatalf("revert with x/g added later: %v %+v", err, res.Conflicts)
	}
	if _, err := os.Stat(m.abs("x/g")); err != nil || s.Latest() != later {
		t.Fatalf("a refused revert changed something: %v", err)
	}
	turn(func() {
		m.capture("x/g", true)
		os.Remove(m.abs("x/g"))
	})
	if res, err = s.Revert(n, tree, RevertOptions{}); err != nil {
		t.Fatal(err)
	}
	got := takeSnapshot(t, root)
	if _, ok := got["x"]; ok || got["y"].Mode != 0o750 || got["y/f"].Data != "keep\n" || got["y/f"].Mode != 0o600 {
		t.Fatalf("after the revert: %v (changes %v)", got, perPath(res.Changes))
	}
}

// TestRevertMovesARenamedFileBack: a revert that undoes a rename renames
// the file back (its inode, and so its other names, kept) and records a
// rename, as the plan it reports says.
func TestRevertMovesARenamedFileBack(t *testing.T) {
	s := NewTestStore(t)
	root := t.TempDir()
	os.WriteFile(filepath.Join(root, "notes.txt"), []byte("notes\n"), 0o640)
	os.Mkdir(filepath.Join(root, "keep"), 0o755)
	os.Link(filepath.Join(root, "notes.txt"), filepath.Join(root, "keep", "link"))
	os.WriteFile(filepath.Join(root, "a.txt"), []byte("a\n"), 0o644)
	m, turn := revertSim(t, s, root)
	tree := m.tree
	ino := inodeOf(t, m.abs("notes.txt"))
	n := turn(func() {
		commit, err := s.RecordRename("notes.txt", "NOTES.md", false, ckpt.Program{Comm: "mv"})
		if err != nil {
			t.Fatal(err)
		}
		err = os.Rename(m.abs("notes.txt"), m.abs("NOTES.md"))
		commit(err == nil)
	})
	turn(func() {
		m.captureAll("a.txt", false)
		os.WriteFile(m.abs("a.txt"), []byte("a\nlater\n"), 0)
	})
	res, err := s.Revert(n, tree, RevertOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := takeSnapshot(t, root)
	if _, ok := got["NOTES.md"]; ok || got["notes.txt"].Data != "notes\n" || got["notes.txt"].Mode != 0o640 || got["a.txt"].Data != "a\nlater\n" {
		t.Fatalf("after the revert: %v", got)
	}
	if i := inodeOf(t, m.abs("notes.txt")); i != ino || inodeOf(t, m.abs("keep/link")) != ino {
		t.Fatalf("notes.txt is inode %d, keep/link %d: want both %d", i, inodeOf(t, m.abs("keep/link")), ino)
	}
	kinds := changeKinds
	const want = "renamed notes.txt<-NOTES.md"
	if got := kinds(res.Changes); got != want {
		t.Errorf("the revert reported %s, want %s", got, want)
	}
	done, err := s.TurnChanges(res.Turn.Num, tree)
	if err != nil {
		t.Fatal(err)
	}
	if got := kinds(done); got != want {
		t.Errorf("the revert turn lists %s, want %s", got, want)
	}
}

// TestMoveBackFallsBackToTheBytes: an actMove whose object is no longer at
// From (the tree changed after the plan) makes Path from the stored bytes
// and leaves From alone; one whose rename is done (a redo) sets only the
// mode.
func TestMoveBackFallsBackToTheBytes(t *testing.T) {
	s := NewTestStore(t)
	root := t.TempDir()
	os.WriteFile(filepath.Join(root, "from"), []byte("planned\n"), 0o644)
	tree, err := backing.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	defer tree.Close()
	_, planned, err := tree.LstatInode("from")
	if err != nil {
		t.Fatal(err)
	}
	content, err := s.putContent(strings.NewReader("planned\n"), 8)
	if err != nil {
		t.Fatal(err)
	}
	st := ckpt.State{Type: ckpt.Regular, Mode: 0o600, Size: 8, UID: uint32(os.Getuid()), GID: uint32(os.Getgid())}
	a := action{Op: actMove, Path: "to", From: "from", State: st, Content: content, Expect: &planned}
	// Another file now at From (a new inode: the planned one is kept by a link).
	os.Link(filepath.Join(root, "from"), filepath.Join(root, "held"))
	os.Remove(filepath.Join(root, "from"))
	os.WriteFile(filepath.Join(root, "from"), []byte("another\n"), 0o644)
	s.Begin(ckpt.KindRevert, "", "")
	defer s.End("")
	if err := s.moveBack(tree, a, ckpt.Program{}); err != nil {
		t.Fatal(err)
	}
	got := takeSnapshot(t, root)
	if got["to"].Data != "planned\n" || got["to"].Mode != 0o600 || got["from"].Data != "another\n" {
		t.Fatalf("after a move whose object left: %v", got)
	}
	if inodeOf(t, filepath.Join(root, "to")) == planned.Ino {
		t.Fatal("to is the planned inode: it was not at From")
	}
	// A redo after the rename: Path is the planned inode already.
	os.Remove(filepath.Join(root, "to"))
	os.Rename(filepath.Join(root, "held"), filepath.Join(root, "to"))
	if err := s.moveBack(tree, a, ckpt.Program{}); err != nil {
		t.Fatal(err)
	}
	got = takeSnapshot(t, root)
	if inodeOf(t, filepath.Join(root, "to")) != planned.Ino || got["to"].Mode != 0o600 || got["from"].Data != "another\n" {
		t.Fatalf("after a redo: %v", got)
	}
}

// TestRevertMovesBackOutOfADirectoryItReplaces: the turn replaced the file
// x with a directory and moved z (a name of an inode it shares with k) into
// it. The revert turns x back into a file and renames x/f back to z: the
// rename must run before x's directory goes, or z is made anew from the
// stored bytes (it loses its inode and its link with k), and the revert
// turn lists an add and a delete where the revert reported a rename.
func TestRevertMovesBackOutOfADirectoryItReplaces(t *testing.T) {
	s := NewTestStore(t)
	root := t.TempDir()
	os.WriteFile(filepath.Join(root, "x"), []byte("x\n"), 0o644)
	os.WriteFile(filepath.Join(root, "z"), []byte("z\n"), 0o640)
	os.Link(filepath.Join(root, "z"), filepath.Join(root, "k"))
	tree, err := backing.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	defer tree.Close()
	m := &sim{t: t, rng: rand.New(rand.NewSource(1)), root: root, tree: tree, store: s}
	ino := inodeOf(t, m.abs("z"))
	s.Begin(ckpt.KindAgent, "", "")
	m.capture("x", true)
	os.Remove(m.abs("x"))
	m.capture("x", false)
	os.Mkdir(m.abs("x"), 0o755)
	commit, err := s.RecordRename("z", "x/f", false, ckpt.Program{Comm: "mv"})
	if err != nil {
		t.Fatal(err)
	}
	err = os.Rename(m.abs("z"), m.abs("x/f"))
	commit(err == nil)
	tn, err := s.End("")
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Revert(tn.Num, tree, RevertOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := takeSnapshot(t, root)
	if got["x"].Type != ckpt.Regular || got["x"].Data != "x\n" || got["z"].Data != "z\n" || got["z"].Mode != 0o640 {
		t.Fatalf("after the revert: %v", got)
	}
	if i := inodeOf(t, m.abs("z")); i != ino || inodeOf(t, m.abs("k")) != ino {
		t.Errorf("z is inode %d, k %d: want both %d (z renamed back)", i, inodeOf(t, m.abs("k")), ino)
	}
	done, err := s.TurnChanges(res.Turn.Num, tree)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := changeKinds(res.Changes), changeKinds(done); a != b {
		t.Errorf("the revert reported %s, its turn lists %s", a, b)
	}
}

// changeKinds lists changes as "KIND PATH<-FROM, ...".
func changeKinds(cs []Change) string {
	var out []string
	for _, c := range cs {
		out = append(out, fmt.Sprintf("%s %s<-%s", c.Kind, c.Path, c.From))
	}
	return strings.Join(out, ", ")
}

// revertBoth runs the revert of turn n as a dry run, then for real, and
// returns both results; an error of either fails the test.
func revertBoth(t *testing.T, s *Store, n uint64, tree ckpt.Tree) (dry, res RevertResult) {
	t.Helper()
	dry, err := s.Revert(n, tree, RevertOptions{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if res, err = s.Revert(n, tree, RevertOptions{}); err != nil {
		t.Fatal(err)
	}
	return dry, res
}

// revertSim opens the tree at root for a hand-written history on s: the
// sim that captures into s, and turn, which runs fn as one agent turn and
// returns its number.
func revertSim(t *testing.T, s *Store, root string) (*sim, func(fn func()) uint64) {
	t.Helper()
	tree, err := backing.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tree.Close() })
	m := &sim{t: t, rng: rand.New(rand.NewSource(1)), root: root, tree: tree, store: s}
	return m, func(fn func()) uint64 {
		t.Helper()
		s.Begin(ckpt.KindAgent, "", "")
		fn()
		tn, err := s.End("")
		if err != nil {
			t.Fatal(err)
		}
		return tn.Num
	}
}

// TestRevertOfADirectoryRenameListsWhatItRecords: a revert that undoes
// `mv d e` makes d again and moves each file back (directories are
// planned path by path), and removes e: its dry run and its report list
// what its turn records, as show does, not a rename of the directory
// the revert did not make.
func TestRevertOfADirectoryRenameListsWhatItRecords(t *testing.T) {
	s := NewTestStore(t)
	root := t.TempDir()
	os.Mkdir(filepath.Join(root, "d"), 0o755)
	os.WriteFile(filepath.Join(root, "d", "x"), []byte("x\n"), 0o644)
	m, turn := revertSim(t, s, root)
	tree := m.tree
	n := turn(func() {
		commit, err := s.RecordRename("d", "e", false, ckpt.Program{Comm: "mv"})
		if err != nil {
			t.Fatal(err)
		}
		err = os.Rename(m.abs("d"), m.abs("e"))
		commit(err == nil)
	})
	dry, res := revertBoth(t, s, n, tree)
	got := takeSnapshot(t, root)
	if _, ok := got["e"]; ok || got["d"].Type != ckpt.Dir || got["d/x"].Data != "x\n" {
		t.Fatalf("after the revert: %v", got)
	}
	done, err := s.TurnChanges(res.Turn.Num, tree)
	if err != nil {
		t.Fatal(err)
	}
	recorded := changeKinds(done)
	if got := changeKinds(res.Changes); got != recorded {
		t.Errorf("the revert reported %s, its turn lists %s", got, recorded)
	}
	if got := changeKinds(dry.Changes); got != recorded {
		t.Errorf("the dry run listed %s, the turn lists %s", got, recorded)
	}
}

// A revert that puts a file back into a directory a later turn removed
// makes the directory again, and its dry run lists it, as the revert's
// own turn then records it.
func TestRevertListsTheDirectoryItMakesAgain(t *testing.T) {
	s := NewTestStore(t)
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(root, "d", "f"), []byte("f\n"))
	writeFile(t, filepath.Join(root, "d", "g"), []byte("g\n"))
	m, turn := revertSim(t, s, root)
	n := turn(func() {
		m.capture("d/f", false)
		os.Remove(m.abs("d/f"))
	})
	turn(func() {
		m.capture("d/g", false)
		os.Remove(m.abs("d/g"))
		m.capture("d", false)
		os.Remove(m.abs("d"))
	})
	dry, res := revertBoth(t, s, n, m.tree)
	const want = "added d<-, added d/f<-"
	if d, r := changeKinds(dry.Changes), changeKinds(res.Changes); d != want || r != want {
		t.Errorf("the dry run listed %s, the revert %s; want %s", d, r, want)
	}
	if b, err := os.ReadFile(filepath.Join(root, "d", "f")); err != nil || string(b) != "f\n" {
		t.Errorf("d/f after the revert: %q, %v", b, err)
	}
	if fi, err := os.Stat(filepath.Join(root, "d")); err != nil || fi.Mode() != os.ModeDir|0o755 {
		t.Errorf("d after the revert: %v, %v; want a directory 0755", fi, err)
	}
}

// revertRename records and makes a rename from -> to, as the overlay does
// (to's state captured first).
func revertRename(t *testing.T, m *sim, from, to string) {
	t.Helper()
	m.capture(to, false)
	mvRecorded(m, from, to)
}

// A name made after the turn, then removed with its directory, whose
// place an old directory then took: the name holds an old file, which a
// rename then moves, and the revert follows it there (it is no temporary
// file renamed into place).
func TestRevertFollowsAFileIntoANameMadeBefore(t *testing.T) {
	s := NewTestStore(t)
	root := t.TempDir()
	os.Mkdir(filepath.Join(root, "d"), 0o755)
	writeFile(t, filepath.Join(root, "d", "f"), []byte("1\n2\n3\n4\n5\n6\n7\n8\n9\n"))
	m, turn := revertSim(t, s, root)
	n := turn(func() {
		m.captureAll("d/f", false)
		os.WriteFile(m.abs("d/f"), []byte("1\ntwo\n3\n4\n5\n6\n7\n8\n9\n"), 0)
	})
	turn(func() {
		m.capture("t", false)
		os.Mkdir(m.abs("t"), 0o755)
		m.capture("t/f", false)
		os.WriteFile(m.abs("t/f"), []byte("tmp\n"), 0o644)
		os.Remove(m.abs("t/f"))
		os.Remove(m.abs("t"))
		revertRename(t, m, "d", "t")
		revertRename(t, m, "t/f", "x")
		m.captureAll("x", false)
		os.WriteFile(m.abs("x"), []byte("1\ntwo\n3\n4\n5\n6\n7\neight\n9\n"), 0)
	})
	if res, err := s.Revert(n, m.tree, RevertOptions{}); err != nil {
		t.Fatalf("revert: %v %+v", err, res.Conflicts)
	}
	if b, _ := os.ReadFile(m.abs("x")); string(b) != "1\n2\n3\n4\n5\n6\n7\neight\n9\n" {
		t.Errorf("x after the revert: %q", b)
	}
}

// A file renamed and deleted after the turn, and later a new file renamed
// to the freed name: the new file is not the turn's file, and the revert
// refuses (the file was deleted by a later turn), changing nothing.
func TestRevertTakesNoNewFileForADeletedOne(t *testing.T) {
	s := NewTestStore(t)
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "a"), []byte("1\n2\n3\n4\n5\n6\n7\n8\n9\n"))
	m, turn := revertSim(t, s, root)
	n := turn(func() {
		m.captureAll("a", false)
		os.WriteFile(m.abs("a"), []byte("1\ntwo\n3\n4\n5\n6\n7\n8\n9\n"), 0)
	})
	turn(func() {
		revertRename(t, m, "a", "b")
		m.captureAll("b", false)
		os.Remove(m.abs("b"))
	})
	const nb = "1\ntwo\n3\n4\n5\n6\n7\n8\n9\nunrelated new b\n"
	turn(func() {
		m.capture("tmp", false)
		os.WriteFile(m.abs("tmp"), []byte(nb), 0o644)
		revertRename(t, m, "tmp", "b")
	})
	for _, dry := range []bool{true, false} {
		res, err := s.Revert(n, m.tree, RevertOptions{DryRun: dry})
		if !errors.Is(err, ErrConflict) || len(res.Conflicts) != 1 || res.Conflicts[0].Path != "a" {
			t.Errorf("revert (dry run %v): %v, conflicts %+v; want a's: deleted by a later turn", dry, err, res.Conflicts)
		}
	}
	if b, _ := os.ReadFile(m.abs("b")); string(b) != nb {
		t.Errorf("b after the refused revert: %q", b)
	}
}

// A directory a revert makes again in a set-group-ID directory takes that
// directory's group, and its dry run says so.
func TestRevertListsTheGroupOfADirectoryItMakes(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give the project another group")
	}
	s := NewTestStore(t)
	root := t.TempDir()
	if err := os.Chown(root, 0, 4321); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(root, os.ModeSetgid|0o755); err != nil {
		t.Fatal(err)
	}
	os.Mkdir(filepath.Join(root, "d"), 0o755)
	writeFile(t, filepath.Join(root, "d", "f"), []byte("f\n"))
	m, turn := revertSim(t, s, root)
	n := turn(func() {
		m.capture("d/f", false)
		os.Remove(m.abs("d/f"))
	})
	turn(func() {
		m.capture("d", false)
		os.Remove(m.abs("d"))
	})
	dry, _ := revertBoth(t, s, n, m.tree)
	live := m.lstat("d")
	for _, c := range dry.Changes {
		if c.Path == "d" && (c.After.GID != live.GID || c.After.Mode != live.Mode || live.GID != 4321) {
			t.Errorf("the dry run makes d gid %d mode %o; the revert made it gid %d mode %o (want gid 4321)", c.After.GID, c.After.Mode, live.GID, live.Mode)
		}
	}
}
