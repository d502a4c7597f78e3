package versionstore

import (
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"ckptfs/internal/backing"
	"ckptfs/internal/ckpt"
	"ckptfs/internal/crashpoint"
)

// The tests here kill the store at its named crash points
// (internal/crashpoint) in-process: the armed point panics, which unwinds
// the operation like a kill -9 cuts it short, and the store is reopened
// from what a kill leaves of its files (killClone). Every crash names its
// point and its seed; CKPTFS_CRASH_SEED=N runs that seed alone.

// crashed is what an armed crash point panics with.
type crashed struct{ point string }

// untilCrash runs fn with spec armed and returns the point it was killed
// at ("" when fn returned first).
func untilCrash(t *testing.T, spec string, fn func() error) (point string, err error) {
	t.Helper()
	disarm, aerr := crashpoint.Arm(spec, func(name string) { panic(crashed{name}) })
	if aerr != nil {
		t.Fatal(aerr)
	}
	defer disarm()
	defer func() {
		if r := recover(); r != nil {
			c, ok := r.(crashed)
			if !ok {
				panic(r)
			}
			point = c.point
		}
	}()
	return "", fn()
}

// crashSeeds returns the seeds to run: 1..n, or CKPTFS_CRASH_SEED alone.
func crashSeeds(n int) []int64 {
	if s := os.Getenv("CKPTFS_CRASH_SEED"); s != "" {
		v, _ := strconv.ParseInt(s, 10, 64)
		return []int64{v}
	}
	if s := os.Getenv("CKPTFS_CRASH_SEEDS"); s != "" {
		fmt.Sscan(s, &n)
	}
	var out []int64
	for i := 1; i <= n; i++ {
		out = append(out, int64(i))
	}
	return out
}

// longRun reports CKPTFS_LONG (make test-long).
func longRun() bool {
	v, _ := strconv.ParseBool(os.Getenv("CKPTFS_LONG"))
	return v
}

// pickHits chooses which hits of trace (1-based) to crash at: per of
// every point's hits at random (all, if fewer), and up to extra more
// anywhere.
func pickHits(rng *rand.Rand, trace []string, per, extra int) []int {
	byName := map[string][]int{}
	for i, n := range trace {
		byName[n] = append(byName[n], i+1)
	}
	seen := map[int]bool{}
	var out []int
	var names []string
	for n := range byName {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		hs := byName[n]
		rng.Shuffle(len(hs), func(i, j int) { hs[i], hs[j] = hs[j], hs[i] })
		for _, h := range hs[:min(per, len(hs))] {
			seen[h] = true
			out = append(out, h)
		}
	}
	for i := 0; i < extra && len(seen) < len(trace); i++ {
		h := 1 + rng.Intn(len(trace))
		if !seen[h] {
			seen[h] = true
			out = append(out, h)
		}
	}
	sort.Ints(out)
	return out
}

// crashCase is one history and the rewind to crash.
type crashCase struct {
	t      *testing.T
	seed   int64
	rng    *rand.Rand
	m      *sim
	mem    *vfs.MemFS
	turns  []uint64
	snaps  []snapshot
	j      int // the rewind's target is turns[j]
	before snapshot
}

func newCrashCase(t *testing.T, seed int64) *crashCase {
	rng := rand.New(rand.NewSource(seed))
	m, mem := newCrashSim(t, seed)
	m.moves = seed%2 == 0 // many renames and exchanges to undo
	turns, snaps := m.buildHistory(rng, 10, 15)
	c := &crashCase{t: t, seed: seed, rng: rng, m: m, mem: mem, turns: turns, snaps: snaps}
	c.j = rng.Intn(len(turns) - 1)
	if seed%3 == 0 {
		// An earlier rewind, and more turns after it: the crashed
		// rewind, to its target or before, jumps over it
		// (rewindJumps).
		k := 1 + rng.Intn(len(turns)-2)
		res, err := m.store.Rewind(turns[k], m.tree, RewindOptions{})
		if err != nil {
			t.Fatalf("seed %d: the earlier rewind to %d: %v", seed, turns[k], err)
		}
		if res.Turn.Num != 0 {
			c.turns = append(c.turns, res.Turn.Num)
			c.snaps = append(c.snaps, takeSnapshot(t, m.root))
		}
		more, moreSnaps := m.buildHistory(rng, 2, 8)
		c.turns = append(c.turns, more[1:]...)
		c.snaps = append(c.snaps, moreSnaps[1:]...)
		c.j = rng.Intn(k + 1)
	}
	c.before = takeSnapshot(t, m.root)
	return c
}

func (c *crashCase) rewind(s *Store) error {
	_, err := s.Rewind(c.turns[c.j], c.m.tree, RewindOptions{})
	return err
}

// TestCrashPointsOfRewind kills a rewind at its named crash points — a
// hit of every point the rewind passes, and more at random — and, every
// other time, the recovery of that crash too; then the last recovery must
// leave exactly the rewind's target, no temporary behind, the rewind must
// undo exactly, and now and then two random turns must still rewind
// exactly. Both ways of rewinding are crashed: the replay of the events
// and the fix-up pass alone.
func TestCrashPointsOfRewind(t *testing.T) {
	seeds, per, extra := 8, 2, 8
	if raceEnabled {
		seeds, per, extra = 6, 1, 6
	}
	if longRun() {
		seeds, per, extra = 40, 3, 20
	}
	total, recoveries := map[string]int{}, 0
	for _, net := range []bool{false, true} {
		t.Run(map[bool]string{false: "replay", true: "net"}[net], func(t *testing.T) {
			if net {
				defer func(l func(int, int) uint64) { replayLimit = l }(replayLimit)
				replayLimit = func(int, int) uint64 { return 0 }
			}
			for _, seed := range crashSeeds(seeds) {
				// The points a whole rewind of this history passes.
				c := newCrashCase(t, seed)
				stop := crashpoint.Trace()
				err := c.rewind(c.m.store)
				trace := stop()
				c.m.store.Close()
				c.m.tree.Close()
				if err != nil {
					t.Fatalf("seed %d: rewind: %v", seed, err)
				}
				for _, n := range pickHits(rand.New(rand.NewSource(seed)), trace, per, extra) {
					p, rp := crashRewindAtHit(t, seed, n)
					total[p]++
					if rp != "" {
						recoveries++
					}
					if t.Failed() {
						return
					}
				}
			}
		})
	}
	t.Logf("crashed at %d points, %d of them and their recovery: %v", sum(total), recoveries, total)
}

func sum(m map[string]int) (n int) {
	for _, v := range m {
		n += v
	}
	return n
}

// crashRewindAtHit builds seed's history, kills the rewind at the n-th hit
// of any crash point, recovers (crashing the recovery too, every other
// time), and checks. It returns the point it crashed at, and the
// recovery's ("" if none).
func crashRewindAtHit(t *testing.T, seed int64, n int) (point, recoveryPoint string) {
	t.Helper()
	c := newCrashCase(t, seed)
	defer c.m.tree.Close()
	s, tree := c.m.store, c.m.tree
	what := fmt.Sprintf("seed %d, rewind to %d, crash at hit %d", seed, c.turns[c.j], n)
	point, err := untilCrash(t, fmt.Sprintf("*@%d", n), func() error { return c.rewind(s) })
	if point == "" {
		s.Close()
		t.Fatalf("%s: no crash (%v)", what, err)
	}
	what += " (" + point + ")"
	s2, clone := killClone(t, c.mem)
	s.Close()
	if c.rng.Intn(2) == 0 {
		m := 1 + c.rng.Intn(3*n/2+2)
		p2, err := untilCrash(t, fmt.Sprintf("*@%d", m), func() error { _, err := s2.Recover(tree); return err })
		if p2 != "" {
			what += fmt.Sprintf(", its recovery at hit %d (%s)", m, p2)
			recoveryPoint = p2
			s3, _ := killClone(t, clone)
			s2.Close()
			s2 = s3
		} else if err != nil {
			t.Fatalf("%s: first recovery: %v", what, err)
		}
	}
	defer s2.Close()
	did, err := s2.Recover(tree)
	if err != nil {
		t.Fatalf("%s: recover: %v", what, err)
	}
	if now := takeSnapshot(t, c.m.root); !did && diffSnap(c.snaps[c.j], now) != "" {
		// No journal and not the target: killed before the journal was
		// written, so nothing changed, and the rewind can be made now.
		if d := diffSnap(c.before, now); d != "" {
			t.Fatalf("%s: no journal, and the tree is neither the target nor the start:\n%s", what, d)
		}
		if err := c.rewind(s2); err != nil {
			t.Fatalf("%s: the rewind again: %v", what, err)
		}
	}
	if d := diffSnap(c.snaps[c.j], takeSnapshot(t, c.m.root)); d != "" {
		stop, _ := s2.endSeq(c.turns[c.j])
		t.Logf("stop=%d turns=%v events:\n%s", stop, c.turns, s2.dumpEvents(1, ""))
		t.Fatalf("%s: after recovery the tree is not the target:\n%s", what, d)
	}
	filepath.Walk(c.m.root, func(p string, info os.FileInfo, err error) error {
		if err == nil && strings.HasPrefix(info.Name(), backing.TempPrefix) {
			t.Errorf("%s: temporary left behind: %s", what, p)
		}
		return nil
	})
	rt, err := s2.Turn(s2.Latest())
	if err != nil || rt.Kind != ckpt.KindRewind || rt.Open {
		t.Fatalf("%s: rewind turn: %+v %v", what, rt, err)
	}
	// The recovered rewind undoes exactly, and (now and then) two other
	// closed turns still rewind exactly.
	if _, err := s2.Rewind(rt.Num-1, tree, RewindOptions{}); err != nil {
		t.Fatalf("%s: undo: %v", what, err)
	}
	if d := diffSnap(c.before, takeSnapshot(t, c.m.root)); d != "" {
		t.Fatalf("%s: undoing the recovered rewind:\n%s", what, d)
	}
	if c.rng.Intn(4) == 0 {
		for i := 0; i < 2; i++ {
			k := c.rng.Intn(len(c.turns))
			if _, err := s2.Rewind(c.turns[k], tree, RewindOptions{}); err != nil {
				t.Fatalf("%s: rewind to %d: %v", what, c.turns[k], err)
			}
			if d := diffSnap(c.snaps[k], takeSnapshot(t, c.m.root)); d != "" {
				t.Fatalf("%s: then a rewind to %d:\n%s", what, c.turns[k], d)
			}
		}
	}
	return point, recoveryPoint
}

// TestCrashPointsOfRecording kills the store while it records changes the
// way the overlay makes them (captures, renames, exchanges: sim), at a
// random hit of the recording's crash points; after the recovery the turn
// goes on, more turns follow, and every closed turn must rewind exactly.
func TestCrashPointsOfRecording(t *testing.T) {
	seeds := 40
	if raceEnabled {
		seeds = 24
	}
	if longRun() {
		seeds = 300
	}
	total := map[string]int{}
	for _, seed := range crashSeeds(seeds) {
		if p := crashRecordingAt(t, seed); p != "" {
			total[p]++
		}
		if t.Failed() {
			return
		}
	}
	t.Logf("%d runs crashed at %d points: %v", seeds, sum(total), total)
}

func crashRecordingAt(t *testing.T, seed int64) string {
	t.Helper()
	rng := rand.New(rand.NewSource(seed))
	m, mem := newCrashSim(t, seed)
	defer m.tree.Close()
	m.moves = seed%2 == 0
	turns, snaps := m.buildHistory(rng, 1+rng.Intn(5), 12)
	m.store.Begin(ckpt.KindAgent, "", "")
	// The recording's points: records, renames and exchanges, and the
	// boundary after the turn.
	n := 1 + rng.Intn(12)
	what := fmt.Sprintf("seed %d, crash at hit %d of the recording", seed, n)
	point, err := untilCrash(t, fmt.Sprintf("record.*,rename.*,turn.*@%d", n), func() error {
		for k := 0; k < 200; k++ {
			m.step()
		}
		_, err := m.store.End("")
		return err
	})
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	what += " (" + point + ")"
	s2, _ := killClone(t, mem)
	m.store.Close()
	m.store = s2
	defer s2.Close()
	if _, err := s2.Recover(m.tree); err != nil {
		t.Fatalf("%s: recover: %v", what, err)
	}
	// The turn cut short closes with the tree as the kill left it.
	if cur, ok := s2.Current(); ok {
		if _, err := s2.End(""); err != nil {
			t.Fatal(err)
		}
		turns = append(turns, cur.Num)
		snaps = append(snaps, takeSnapshot(t, m.root))
	}
	more, moreSnaps := m.buildHistory(rng, 3, 12)
	turns, snaps = append(turns, more[1:]...), append(snaps, moreSnaps[1:]...)
	order := rng.Perm(len(turns))
	for _, k := range order {
		if _, err := s2.Rewind(turns[k], m.tree, RewindOptions{}); err != nil {
			t.Fatalf("%s: rewind to %d: %v", what, turns[k], err)
		}
		if d := diffSnap(snaps[k], takeSnapshot(t, m.root)); d != "" {
			t.Logf("turns=%v events:\n%s", turns, s2.dumpEvents(1, ""))
			t.Fatalf("%s: rewind to %d:\n%s", what, turns[k], d)
		}
	}
	return point
}
