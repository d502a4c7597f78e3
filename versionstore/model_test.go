package versionstore

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"ckptfs/internal/backing"
	"ckptfs/internal/ckpt"
)

// snapEntry is one path of a tree snapshot.
type snapEntry struct {
	Type   ckpt.Type
	Mode   uint32
	Target string
	Data   string
	Rdev   uint64
	// Link: for anything but a directory that shares its inode with
	// other paths of the snapshot, the first of them all (itself maybe):
	// which paths share an inode, without the inode numbers.
	Link string
}

type snapshot map[string]snapEntry

func (e snapEntry) String() string {
	d := e.Data
	if len(d) > 20 {
		d = d[:20] + "…"
	}
	return fmt.Sprintf("%v %o %q %q %d link %q", e.Type, e.Mode, e.Target, d, e.Rdev, e.Link)
}

// takeSnapshot walks a real directory (skipping names starting with
// ".store").
func takeSnapshot(t testing.TB, root string) snapshot {
	t.Helper()
	snap := snapshot{}
	inodes := map[[2]uint64][]string{}
	err := filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == "." {
			return nil
		}
		if strings.HasPrefix(rel, ".store") {
			return filepath.SkipDir
		}
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err != nil {
			return err
		}
		e := snapEntry{Mode: st.Mode & 0o7777}
		switch fi.Mode().Type() {
		case 0:
			e.Type = ckpt.Regular
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			e.Data = string(b)
		case os.ModeDir:
			e.Type = ckpt.Dir
		case os.ModeSymlink:
			e.Type, e.Mode = ckpt.Symlink, 0o777
			e.Target, _ = os.Readlink(p)
		default:
			e.Type, e.Rdev = ckpt.NodeState(st.Mode, st.Rdev)
		}
		if e.Type != ckpt.Dir {
			k := [2]uint64{st.Dev, st.Ino}
			inodes[k] = append(inodes[k], rel)
		}
		snap[rel] = e
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, names := range inodes {
		if len(names) > 1 {
			sort.Strings(names)
			for _, n := range names {
				e := snap[n]
				e.Link = names[0]
				snap[n] = e
			}
		}
	}
	return snap
}

// inodeNames returns the names of the inode at p in the tree at root
// (skipping names starting with ".store"): what the overlay knows.
func inodeNames(t testing.TB, root, p string) []string {
	var want syscall.Stat_t
	if err := syscall.Lstat(filepath.Join(root, p), &want); err != nil {
		t.Fatal(err)
	}
	var out []string
	filepath.Walk(root, func(q string, fi os.FileInfo, err error) error {
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(root, q)
		if strings.HasPrefix(rel, ".store") {
			return filepath.SkipDir
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && !fi.IsDir() && st.Ino == want.Ino && st.Dev == want.Dev {
			out = append(out, rel)
		}
		return nil
	})
	return out
}

func diffSnap(want, got snapshot) string {
	var out []string
	keys := map[string]bool{}
	for k := range want {
		keys[k] = true
	}
	for k := range got {
		keys[k] = true
	}
	var sorted []string
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	for _, k := range sorted {
		w, wok := want[k]
		g, gok := got[k]
		if wok != gok || w != g {
			out = append(out, fmt.Sprintf("  %s: want %v (%v) got %v (%v)", k, w, wok, g, gok))
		}
	}
	return strings.Join(out, "\n")
}

// sim applies random mutations to a real directory the way the overlay
// does: capture the prior state, then make the change.
type sim struct {
	t     testing.TB
	rng   *rand.Rand
	root  string
	tree  *backing.Tree
	store *Store
	link  bool // offer Link for unlink and rename-over
	moves bool // half the steps rename or exchange
	ops   int
	// linkOps weighs hard links among the steps (0: 2, against 1 for
	// each other kind of step); flat keeps to eight names in the top
	// directory.
	linkOps int
	flat    bool
	dirOver bool // a directory may be renamed over an empty one
	// ranges: writes at offsets and truncates capture only the range
	// they change (the overlay's captureRangeLocked), with bigger files.
	ranges bool
}

var names = []string{"a", "b", "c", "d.txt"}

func (m *sim) randPath() string {
	if m.flat {
		return string(rune('a' + m.rng.Intn(8)))
	}
	depth := 1 + m.rng.Intn(3)
	var els []string
	for i := 0; i < depth; i++ {
		els = append(els, names[m.rng.Intn(len(names))])
	}
	return strings.Join(els, "/")
}

// movePath is a random path; with moves, mostly one that exists.
func (m *sim) movePath() string {
	if !m.moves || m.rng.Intn(4) == 0 {
		return m.randPath()
	}
	var all []string
	filepath.Walk(m.root, func(p string, fi os.FileInfo, err error) error {
		if rel, _ := filepath.Rel(m.root, p); err == nil && rel != "." && !strings.HasPrefix(rel, ".store") {
			all = append(all, filepath.ToSlash(rel))
		}
		return nil
	})
	if len(all) == 0 {
		return m.randPath()
	}
	return all[m.rng.Intn(len(all))]
}

func (m *sim) abs(p string) string { return filepath.Join(m.root, p) }

func (m *sim) lstat(p string) ckpt.State {
	st, err := m.tree.Lstat(p)
	if err != nil {
		m.t.Fatal(err)
	}
	return st
}

// capture records p's state as the overlay does: anything but a directory
// with its inode and that inode's other names, and a link into the attic
// offered only for the last name of a regular file's inode.
func (m *sim) capture(p string, withLink bool) {
	m.captureAs(p, withLink, false)
}

func (m *sim) captureAs(p string, withLink, metaOnly bool) {
	m.captureWith(p, withLink, metaOnly, nil)
}

func (m *sim) captureWith(p string, withLink, metaOnly bool, rng *ckpt.ByteRange) {
	st, ino, err := m.tree.LstatInode(p)
	if err != nil {
		m.t.Fatal(err)
	}
	c := ckpt.Capture{Path: p, Prior: st, MetaOnly: metaOnly && st.Type == ckpt.Regular, Range: rng}
	if st.Type == ckpt.Regular {
		c.Open = func() (*os.File, error) { return m.tree.Open(p) }
		if withLink && m.link && ino.Nlink == 1 {
			c.Link = func(dir *os.File, name string) error { return m.tree.Link(p, dir, name) }
		}
	}
	if st.Type.Linkable() {
		c.Inode = ino
		if ino.Nlink > 1 {
			for _, q := range inodeNames(m.t, m.root, p) {
				if q != p {
					c.Links = append(c.Links, q)
				}
			}
		}
	}
	if err := m.store.Record(c, ckpt.Program{Comm: "sim"}); err != nil {
		m.t.Fatalf("record %s: %v", p, err)
	}
}

// captureAll captures every name of the file at p not yet captured in the
// turn, before a change of its inode (the overlay's captureSelf).
func (m *sim) captureAll(p string, metaOnly bool) {
	names := []string{p}
	if st, ino, _ := m.tree.LstatInode(p); st.Type.Linkable() && ino.Nlink > 1 {
		names = inodeNames(m.t, m.root, p)
	}
	for _, q := range names {
		if m.store.NeedsCapture(q, metaOnly) {
			m.captureAs(q, false, metaOnly)
		}
	}
}

// captureRange captures every name of the regular file at p before a
// change of its bytes [off, end) only, as the overlay does.
func (m *sim) captureRange(p string, off, end int64) {
	names := []string{p}
	if _, ino, _ := m.tree.LstatInode(p); ino.Nlink > 1 {
		names = inodeNames(m.t, m.root, p)
	}
	for _, q := range names {
		if m.store.NeedsRange(q, off, end) {
			m.captureWith(q, false, false, &ckpt.ByteRange{Off: off, End: end})
		}
	}
}

// rangeWrite writes at an offset of the regular file at p, truncates it
// (shorter or longer) or appends to it, capturing the range changed.
func (m *sim) rangeWrite(p string, st ckpt.State) {
	f, err := os.OpenFile(m.abs(p), os.O_WRONLY, 0)
	if err != nil {
		m.t.Fatal(err)
	}
	defer f.Close()
	size := st.Size
	switch m.rng.Intn(4) {
	case 0: // truncate
		n := int64(m.rng.Intn(int(size) + 10000))
		m.captureRange(p, min(n, size), ckpt.ToTheEnd)
		if err := f.Truncate(n); err != nil {
			m.t.Fatal(err)
		}
	case 1: // append
		b := m.randData()
		m.captureRange(p, size, size+int64(len(b)))
		if _, err := f.WriteAt(b, size); err != nil {
			m.t.Fatal(err)
		}
	default: // overwrite at an offset, maybe past the end
		off := int64(m.rng.Intn(int(size) + 5000))
		b := make([]byte, 1+m.rng.Intn(12000))
		for i := range b {
			b[i] = "xyz\n"[m.rng.Intn(4)]
		}
		m.captureRange(p, off, off+int64(len(b)))
		if _, err := f.WriteAt(b, off); err != nil {
			m.t.Fatal(err)
		}
	}
}

func (m *sim) randData() []byte {
	n := m.rng.Intn(64)
	if m.ranges && m.rng.Intn(2) == 0 {
		n = m.rng.Intn(40000)
	}
	if m.rng.Intn(20) == 0 {
		n = 40000 + m.rng.Intn(300000) // multi-chunk now and then
	}
	b := make([]byte, n)
	for i := range b {
		b[i] = "abc\n"[m.rng.Intn(4)]
	}
	return b
}

func parentIsDir(m *sim, p string) bool {
	d := filepath.Dir(p)
	if d == "." {
		return true
	}
	return m.lstat(d).Type == ckpt.Dir
}

// step applies one random operation.
func (m *sim) step() {
	p := m.randPath()
	st := m.lstat(p)
	m.ops++
	op := m.rng.Intn(m.nOps())
	if m.moves && m.rng.Intn(2) == 0 {
		op = []int{5, 9}[m.rng.Intn(2)]
		p = m.movePath()
		st = m.lstat(p)
	}
	switch {
	case op <= 2: // write (create, overwrite or append)
		if !parentIsDir(m, p) || (st.Exists() && st.Type != ckpt.Regular) {
			return
		}
		if m.ranges && st.Type == ckpt.Regular && m.rng.Intn(3) > 0 {
			m.rangeWrite(p, st)
			return
		}
		if m.ranges && st.Type == ckpt.Regular {
			m.captureRange(p, 0, ckpt.ToTheEnd) // O_TRUNC or O_APPEND: the range is all (or the end)
		}
		m.captureAll(p, false)
		flags := os.O_WRONLY | os.O_CREATE
		if m.rng.Intn(2) == 0 {
			flags |= os.O_APPEND
		} else {
			flags |= os.O_TRUNC
		}
		f, err := os.OpenFile(m.abs(p), flags, 0o644)
		if err != nil {
			m.t.Fatal(err)
		}
		f.Write(m.randData())
		f.Close()
	case op == 3: // mkdir
		if st.Exists() || !parentIsDir(m, p) {
			return
		}
		m.capture(p, false)
		if err := os.Mkdir(m.abs(p), 0o755); err != nil {
			m.t.Fatal(err)
		}
	case op == 4: // unlink or rmdir
		if !st.Exists() {
			return
		}
		if st.Type == ckpt.Dir {
			if ents, _ := os.ReadDir(m.abs(p)); len(ents) > 0 {
				return
			}
		}
		m.capture(p, true)
		if err := os.Remove(m.abs(p)); err != nil {
			m.t.Fatal(err)
		}
	case op == 5: // rename
		q := m.movePath()
		qs := m.lstat(q)
		if !st.Exists() || p == q || !parentIsDir(m, q) {
			return
		}
		if _, under := ckpt.Under(q, p); under {
			return
		}
		if _, under := ckpt.Under(p, q); under {
			return
		}
		if qs.Exists() && m.dirOver && qs.Type == ckpt.Dir && st.Type == ckpt.Dir {
			if ents, _ := os.ReadDir(m.abs(q)); len(ents) > 0 {
				return
			}
			m.capture(q, true)
			commit, err := m.store.RecordRename(p, q, false, ckpt.Program{Comm: "mv"})
			if err != nil {
				m.t.Fatal(err)
			}
			err = unix.Rename(m.abs(p), m.abs(q)) // os.Rename refuses a directory as the target
			commit(err == nil)
			if err != nil {
				m.t.Fatal(err)
			}
			return
		}
		if qs.Exists() {
			if qs.Type == ckpt.Dir || st.Type == ckpt.Dir {
				return // keep to the simple, always-valid cases
			}
			if sameInode(m, p, q) {
				return // rename(2) of two names of one inode does nothing
			}
			m.capture(q, true)
		}
		mvRecorded(m, p, q)
	case op == 6: // chmod
		if !st.Exists() || st.Type == ckpt.Symlink {
			return
		}
		m.captureAll(p, true)
		mode := []os.FileMode{0o755, 0o644, 0o600, 0o700, 0o4755}[m.rng.Intn(5)]
		if st.Type == ckpt.Dir {
			mode |= 0o700
		}
		if err := os.Chmod(m.abs(p), mode); err != nil {
			m.t.Fatal(err)
		}
	case op == 7: // symlink
		if st.Exists() || !parentIsDir(m, p) {
			return
		}
		m.capture(p, false)
		if err := os.Symlink([]string{"../x", "a", "/etc/passwd"}[m.rng.Intn(3)], m.abs(p)); err != nil {
			m.t.Fatal(err)
		}
	case op == 8: // truncate
		if st.Type != ckpt.Regular {
			return
		}
		if m.ranges {
			m.rangeWrite(p, st)
			return
		}
		m.captureAll(p, false)
		if err := os.Truncate(m.abs(p), int64(m.rng.Intn(10))); err != nil {
			m.t.Fatal(err)
		}
	case op == 10: // mknod: a FIFO, socket or device node
		if st.Exists() || !parentIsDir(m, p) {
			return
		}
		m.capture(p, false)
		kind := []uint32{syscall.S_IFIFO, syscall.S_IFSOCK, syscall.S_IFCHR, syscall.S_IFBLK}[m.rng.Intn(4)]
		dev := 0
		if kind == syscall.S_IFCHR || kind == syscall.S_IFBLK {
			dev = int(unix.Mkdev(uint32(1+m.rng.Intn(3)), uint32(m.rng.Intn(3))))
		}
		if err := unix.Mknod(m.abs(p), kind|0o640, dev); err != nil {
			m.t.Fatal(err)
		}
	case op >= 11: // ln p q, or ln -f (q replaced); p anything but a directory
		q := m.randPath()
		qs := m.lstat(q)
		if !st.Type.Linkable() || p == q || !parentIsDir(m, q) || qs.Type == ckpt.Dir || sameInode(m, p, q) {
			return
		}
		if qs.Exists() {
			m.capture(q, true)
			if err := os.Remove(m.abs(q)); err != nil {
				m.t.Fatal(err)
			}
		} else {
			m.capture(q, false)
		}
		// link(2) links a symlink itself, not its target.
		if err := unix.Linkat(unix.AT_FDCWD, m.abs(p), unix.AT_FDCWD, m.abs(q), 0); err != nil {
			m.t.Fatal(err)
		}
	case op == 9: // exchange
		q := m.movePath()
		qs := m.lstat(q)
		if !st.Exists() || !qs.Exists() || p == q {
			return
		}
		if _, under := ckpt.Under(q, p); under {
			return
		}
		if _, under := ckpt.Under(p, q); under {
			return
		}
		ip, _ := m.tree.Ident(p)
		iq, _ := m.tree.Ident(q)
		commit, err := m.store.RecordExchange(p, q, ip, iq, ckpt.Program{Comm: "mv"})
		if err != nil {
			m.t.Fatal(err)
		}
		err = m.tree.Exchange(p, q)
		commit(err == nil)
		if err != nil {
			m.t.Fatal(err)
		}
	}
}

// nOps is the number of kinds of step: eleven, and hard links (twice as
// often as the others by default: they need a file and a free name).
func (m *sim) nOps() int {
	if m.linkOps == 0 {
		return 13
	}
	return 11 + m.linkOps
}

func sameInode(m *sim, p, q string) bool {
	_, a, err := m.tree.LstatInode(p)
	if err != nil {
		m.t.Fatal(err)
	}
	_, b, err := m.tree.LstatInode(q)
	if err != nil {
		m.t.Fatal(err)
	}
	return a.Known() && a.Same(b)
}

// checkHistory checks the store's answer for every path of every snapshot.
func checkHistory(t *testing.T, s *Store, tree ckpt.Tree, snaps []snapshot, turns []uint64) {
	t.Helper()
	all := map[string]bool{}
	for _, sn := range snaps {
		for p := range sn {
			all[p] = true
		}
	}
	paths := slices.Sorted(maps.Keys(all))
	for i, n := range turns {
		after, err := s.endSeq(n)
		if err != nil {
			t.Fatal(err)
		}
		rs, err := s.resolveMany(after, paths, tree)
		if err != nil {
			t.Fatal(err)
		}
		// Which paths shared an inode: the paths whose records (or live
		// inodes) name the same inode, and only those.
		first := map[inoKey]string{}
		count := map[inoKey]int{}
		for k, p := range paths {
			if e, ok := snaps[i][p]; ok && e.Type.Linkable() {
				if !rs[k].Inode.Known() {
					t.Fatalf("turn %d: %s: no inode recorded", n, p)
				}
				key := keyOf(rs[k].Inode)
				if f, ok := first[key]; !ok || p < f {
					first[key] = p
				}
				count[key]++
			}
		}
		for k, p := range paths {
			if e, ok := snaps[i][p]; ok && e.Type.Linkable() {
				got := ""
				if key := keyOf(rs[k].Inode); count[key] > 1 {
					got = first[key]
				}
				if got != e.Link {
					t.Fatalf("turn %d: %s shares its inode with %q, store says with %q", n, p, e.Link, got)
				}
			}
		}
		for k, p := range paths {
			want, ok := snaps[i][p]
			got := rs[k].State
			if !ok {
				if got.Exists() {
					t.Fatalf("turn %d: %s should be absent, store says %v", n, p, got.Type)
				}
				continue
			}
			if got.Type != want.Type || (got.Type != ckpt.Symlink && got.Mode != want.Mode) || got.Target != want.Target || got.Rdev != want.Rdev {
				t.Fatalf("turn %d: %s: want %v, store says %v %o %q", n, p, want, got.Type, got.Mode, got.Target)
			}
			if want.Type == ckpt.Regular {
				rc, err := s.open(rs[k], tree)
				if err != nil {
					t.Fatalf("turn %d: %s: %v", n, p, err)
				}
				b, err := io.ReadAll(rc)
				rc.Close()
				if err != nil || !bytes.Equal(b, []byte(want.Data)) {
					t.Fatalf("turn %d: %s: bytes differ (%d vs %d, %v)", n, p, len(b), len(want.Data), err)
				}
			}
		}
	}
}

// modelOps is how many random operations one model run makes (fewer under
// the race detector, which slows it tenfold).
func modelOps() int {
	if raceEnabled {
		return 400
	}
	return 1500
}

func runModel(t *testing.T, seed int64, s *Store, root string, link bool, nOps int) {
	runModelWith(t, seed, s, root, &sim{link: link}, nOps)
}

// runModelWith is runModel with m's settings; with m.ranges, turns also
// end steps now and then, and the step points are checked as turns are.
func runModelWith(t *testing.T, seed int64, s *Store, root string, m *sim, nOps int) {
	tree, err := backing.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	defer tree.Close()
	m.t, m.rng, m.root, m.tree, m.store = t, rand.New(rand.NewSource(seed)), root, tree, s
	snaps := []snapshot{takeSnapshot(t, root)}
	turns := []uint64{0}
	for m.ops < nOps {
		if _, err := s.Begin(ckpt.KindAgent, fmt.Sprintf("t%d", len(turns)), ""); err != nil {
			t.Fatal(err)
		}
		k := 1 + m.rng.Intn(25)
		for i := 0; i < k; i++ {
			m.step()
			if m.ranges && m.rng.Intn(6) == 0 {
				st, ok, err := s.Step("", "")
				if err != nil {
					t.Fatal(err)
				}
				if ok {
					snaps = append(snaps, takeSnapshot(t, root))
					turns = append(turns, StepPoint(st.Turn, st.Num))
				}
			}
		}
		tn, err := s.End("")
		if err != nil {
			t.Fatal(err)
		}
		snaps = append(snaps, takeSnapshot(t, root))
		turns = append(turns, tn.Num)
	}
	checkHistory(t, s, tree, snaps, turns)

	// Rewind to random turns; each rewind is itself a turn whose end state
	// is the target's snapshot.
	for i := 0; i < 8; i++ {
		j := m.rng.Intn(len(turns))
		before := takeSnapshot(t, root)
		res, err := s.Rewind(turns[j], tree, RewindOptions{})
		if err != nil {
			t.Fatalf("seed %d: rewind to %d: %v", seed, turns[j], err)
		}
		got := takeSnapshot(t, root)
		if d := diffSnap(snaps[j], got); d != "" {
			t.Fatalf("seed %d: after rewind to %d the tree differs:\n%s", seed, turns[j], d)
		}
		if len(res.Changes) > 0 {
			snaps = append(snaps, got)
			turns = append(turns, res.Turn.Num)
		}
		if len(res.Changes) > 0 && i%4 == 0 {
			// Undo it, and undo the undo (not on every rewind: each
			// records as many events as the rewind, and checkHistory
			// costs turns times events).
			for k, target := range []uint64{res.Turn.Num - 1, res.Turn.Num} {
				want := []snapshot{before, got}[k]
				if _, err := s.Rewind(target, tree, RewindOptions{}); err != nil {
					t.Fatalf("seed %d: undo of rewind to %d: %v", seed, turns[j], err)
				}
				now := takeSnapshot(t, root)
				if d := diffSnap(want, now); d != "" {
					t.Fatalf("seed %d: undo (to %d) of rewind to %d: the tree differs:\n%s", seed, target, turns[j], d)
				}
			}
		}
		// Some more random work after the rewind.
		s.Begin(ckpt.KindAgent, "after", "")
		for k := 0; k < 5; k++ {
			m.step()
		}
		tn, _ := s.End("")
		snaps = append(snaps, takeSnapshot(t, root))
		turns = append(turns, tn.Num)
	}
	checkHistory(t, s, tree, snaps, turns)

	// Restore a few single paths.
	for i := 0; i < 10; i++ {
		j := m.rng.Intn(len(turns))
		p := m.randPath()
		p = strings.Split(p, "/")[0]
		if _, err := s.Rewind(turns[j], tree, RewindOptions{Paths: []string{p}}); err != nil {
			t.Fatalf("seed %d: restore %s from %d: %v", seed, p, turns[j], err)
		}
		got := takeSnapshot(t, root)
		if w, g := groupsUnder(snaps[j], p), groupsUnder(got, p); w != g {
			t.Fatalf("seed %d: restore %s from %d: the paths below share inodes as %s, want %s", seed, p, turns[j], g, w)
		}
		for path, want := range snaps[j] {
			if _, ok := ckpt.Under(path, p); ok && !sameEntry(got[path], want) {
				stop, _ := s.endSeq(turns[j])
				t.Logf("stop=%d events:\n%s", stop, s.dumpEvents(stop+1, ""))
				t.Fatalf("seed %d: restore %s from %d: %s = %v, want %v", seed, p, turns[j], path, got[path], want)
			}
		}
		for path := range got {
			if _, ok := ckpt.Under(path, p); ok {
				if _, want := snaps[j][path]; !want {
					t.Fatalf("seed %d: restore %s from %d: %s should be absent", seed, p, turns[j], path)
				}
			}
		}
	}
	t.Logf("seed %d: %d ops, %d turns, %d fix-ups, %d events", seed, m.ops, len(turns), fixups.Load(), s.nextSeq)
}

// sameEntry compares two entries but for which paths they share an inode
// with.
func sameEntry(a, b snapEntry) bool {
	a.Link, b.Link = "", ""
	return a == b
}

// groupsUnder describes which of the paths below dir share an inode.
func groupsUnder(snap snapshot, dir string) string {
	g := map[string][]string{}
	for p, e := range snap {
		if _, ok := ckpt.Under(p, dir); ok && e.Link != "" {
			g[e.Link] = append(g[e.Link], p)
		}
	}
	var out []string
	for _, l := range g {
		if len(l) > 1 {
			sort.Strings(l)
			out = append(out, strings.Join(l, "="))
		}
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

func TestModelMemStore(t *testing.T) {
	for seed := int64(1); seed <= 3; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			runModel(t, seed, NewTestStore(t), t.TempDir(), false, modelOps())
		})
	}
}

// TestModelRanges: the same with range capture of every file: writes at
// offsets, truncates and appends record the prior bytes of the ranges
// they change only, in steps as well as turns, among renames and
// exchanges; every turn and step resolves, rewinds and restores exactly.
func TestModelRanges(t *testing.T) {
	for seed := int64(31); seed <= 34; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			var s *Store
			root := t.TempDir()
			link := seed%2 == 0
			if link {
				s, root = atticStore(t)
			} else {
				s = NewTestStore(t)
			}
			s.rangeFrom = 0
			runModelWith(t, seed, s, root, &sim{link: link, ranges: true, moves: seed > 32}, modelOps())
			if n := countOps(t, s, opRange); n == 0 {
				t.Fatal("no range records: the test tests nothing")
			}
		})
	}
}

// countOps counts the events of op in s.
func countOps(t *testing.T, s *Store, op string) int {
	n := 0
	if err := s.scanEvents(0, s.nextSeq, func(r *record) (bool, error) {
		if r.Op == op {
			n++
		}
		return true, nil
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestModelNetRewind: the same, with every whole-tree rewind done by the
// fix-up pass alone (what a rewind over a long, circular history does).
func TestModelNetRewind(t *testing.T) {
	defer func(l func(int, int) uint64) { replayLimit = l }(replayLimit)
	replayLimit = func(int, int) uint64 { return 0 }
	for seed := int64(21); seed <= 23; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			runModel(t, seed, NewTestStore(t), t.TempDir(), false, modelOps())
		})
	}
}

func TestModelAtticStore(t *testing.T) {
	for seed := int64(11); seed <= 12; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			s, root := atticStore(t)
			runModel(t, seed, s, root, true, modelOps())
		})
	}
}

// atticStore opens a store on disk in .store of a new tree (so it has an
// attic), closed when the test ends; it returns the store and the tree.
func atticStore(t *testing.T) (*Store, string) {
	t.Helper()
	root := t.TempDir()
	s, err := Open(filepath.Join(root, ".store"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, root
}
