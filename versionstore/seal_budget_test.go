package versionstore

import (
	"crypto/rand"
	"os"
	"path/filepath"
	"testing"
	"time"

	"ckptfs/internal/ckpt"
)

// The seals of an unmount do not count against the budget (no forgetting
// of turns frees them): an offline gc (turnctl gc with no daemon) right
// after the unmount forgets no turn that the same gc before it keeps.
func TestSealsDoNotMakeAGCForgetTurns(t *testing.T) {
	s, tree, root := rangeFixture(t)
	p := filepath.Join(root, "big")
	data := make([]byte, 64<<20)
	rand.Read(data)
	os.WriteFile(p, data, 0o644)
	for i := 0; i < 5; i++ {
		s.Begin(ckpt.KindAgent, "", "")
		recordRange(t, s, tree, "big", int64(i)*rangeBlock, int64(i+1)*rangeBlock)
		f, _ := os.OpenFile(p, os.O_WRONLY, 0)
		f.WriteAt(fill(rangeBlock, byte('a'+i)), int64(i)*rangeBlock)
		f.Close()
		if _, err := s.End(""); err != nil {
			t.Fatal(err)
		}
	}
	s.db.Flush()
	before := s.StoreBytes()
	if err := s.SetPolicy(ckpt.Policy{KeepSize: before + 40<<20, KeepTurns: 1, KeepAge: time.Hour, KeepHourly: -1, KeepDaily: -1}); err != nil {
		t.Fatal(err)
	}
	rep, err := s.GC(GCOptions{DryRun: true})
	if err != nil || len(rep.Forgot) != 0 {
		t.Fatalf("gc before the unmount: %+v %v", rep, err)
	}
	if err := s.SaveManifest(tree, nil, nil); err != nil {
		t.Fatal(err)
	}
	s.db.Flush()
	t.Logf("store: %d bytes before the unmount, %d after", before, s.StoreBytes())
	rep, err = s.GC(GCOptions{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Forgot) != 0 {
		t.Errorf("an offline gc after the unmount would forget turns %v (start %+v): the seal's copy put the store over its budget", rep.Forgot, rep.Start)
	}
	rep, err = s.GC(GCOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Forgot) != 0 {
		m := s.db.Metrics()
		t.Errorf("an offline gc after the unmount forgot turns %v: the store held %d bytes before it (budget %d); pebble: %d compactions in progress, %d obsolete and %d zombie tables, WAL %d bytes",
			rep.Forgot, rep.Before, before+40<<20, m.Compact.NumInProgress, m.Table.ObsoleteCount, m.Table.ZombieCount, m.WAL.PhysicalSize)
	}
	if sl, err := s.seals(); err != nil || len(sl) != 1 {
		t.Errorf("seals after the gc: %v %v", sl, err)
	}
}
