package versionstore

import (
	"encoding/json"
	"math/rand/v2"
	"testing"

	"ckptfs/internal/ckpt"
)

// The names-only read of an event gives what the full decode gives, for
// every op and for names it must leave to the full decode (not UTF-8,
// quotes, backslashes, HTML characters, control characters, empty); and it
// does read plain names itself.
func TestDecodeNamesMatchesTheFullDecode(t *testing.T) {
	names := []string{"a", "dir/file.go", "", "bad\xff\xfename", `q"uote`, `back\slash`,
		"<html>&", "tab\tnl\n", "ünï/cødé", "x\u2028y", `a"pb":b`, `"qb":`}
	ops := []string{opPrior, opRange, opMeta, opRename, opExchange}
	rng := rand.New(rand.NewPCG(7, 7))
	fast := 0
	for i := 0; i < 5000; i++ {
		r := &record{
			Turn: rng.Uint64N(1 << 40),
			Op:   ops[rng.IntN(len(ops))],
			Path: names[rng.IntN(len(names))],
			State: ckpt.State{Type: ckpt.Type(rng.IntN(5)), Mode: rng.Uint32N(0o7777), Size: rng.Int64N(1 << 30),
				Target: names[rng.IntN(len(names))]},
		}
		if r.Op == opRename || r.Op == opExchange {
			r.To = names[rng.IntN(len(names))]
		}
		if rng.IntN(2) == 0 {
			r.Content = &contentRef{Size: 10, Attic: "span-1", Part: true, Off: 4096, Sum: 9}
		}
		if rng.IntN(3) == 0 {
			r.Inode = &ckpt.Inode{Dev: 1, Ino: 2}
			r.Links = []string{names[rng.IntN(len(names))]}
		}
		if r.Op == opRange {
			r.Spans = []int64{0, 4096, 8192, 4096}
		}
		data, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		var full record
		if err := decodeRecord(1, data, &full); err != nil {
			t.Fatal(err)
		}
		var got record
		if !decodeNames(data, &got) {
			continue
		}
		fast++
		if got.Op != full.Op || got.Path != full.Path || got.To != full.To {
			t.Fatalf("%s: names %q %q %q, full decode %q %q %q", data, got.Op, got.Path, got.To, full.Op, full.Path, full.To)
		}
	}
	if fast < 1000 {
		t.Fatalf("only %d of 5000 records read by names alone", fast)
	}
}

// A listing of changes over renames to and from names that only the full
// decode reads names them all.
func TestChangesOverRenamesOfRawNames(t *testing.T) {
	s := NewTestStore(t)
	s.Begin(ckpt.KindAgent, "", "")
	recordBytes(t, s, "plain", []byte("data"))
	for _, mv := range [][2]string{{"plain", "bad\xff"}, {"bad\xff", `q"x`}, {`q"x`, "last"}} {
		commit, err := s.RecordRename(mv[0], mv[1], false, ckpt.Program{})
		if err != nil {
			t.Fatal(err)
		}
		commit(true)
	}
	var seen []string
	s.scanNames(1, 100, func(r *record) (bool, error) {
		seen = append(seen, r.Op+":"+r.Path+">"+r.To)
		return true, nil
	})
	want := []string{"p:plain>", "r:plain>bad\xff", "r:bad\xff>q\"x", "r:q\"x>last"}
	if len(seen) != len(want) {
		t.Fatalf("scanNames: %q, want %q", seen, want)
	}
	for i := range want {
		if seen[i] != want[i] {
			t.Fatalf("scanNames: %q, want %q", seen, want)
		}
	}
}
