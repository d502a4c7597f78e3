package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestCountRequests(t *testing.T) {
	log := "2026/11/24 10:00:00 rx 2: LOOKUP n1 [\"go.mod\"] 7b p12\n" +
		"2026/11/24 10:00:00 tx 2:     OK, {n5 g1 tE=1h0m0s tA=1h0m0s}\n" +
		"rx 3: GETATTR n5 {Fh 0} p12\n"
	turn2 := "2026/11/24 10:00:01 rx 4: LOOKUP n1 [\"x\"] 2b p13\n" +
		"2026/11/24 10:00:01 rx 5: OPEN n5 {O_RDONLY} p13\n"
	p := filepath.Join(t.TempDir(), "daemon.log")
	if err := os.WriteFile(p, []byte(log+turn2), 0o644); err != nil {
		t.Fatal(err)
	}
	got := countRequests(p, []int64{0, int64(len(log)), int64(len(log + turn2))})
	want := []map[string]int{{"LOOKUP": 1, "GETATTR": 1}, {"LOOKUP": 1, "OPEN": 1}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("countRequests = %v, want %v", got, want)
	}
}

func TestSessionTable(t *testing.T) {
	r := &sessionResult{Source: "repo @ abc", Turns: []string{"a", "b"}, Samples: map[string][]sessionSample{
		"N": {{Wall: 2, Turn: []float64{1, 1}, CPU: -1}},
		"C": {{Wall: 3, Turn: []float64{2, 1}, Boundary: []float64{0.01, 0.02}, CPU: 1.5,
			Requests: []map[string]int{{"LOOKUP": 3}, {"OPEN": 1}}}},
		"G": {{Wall: 2.2, Turn: []float64{1.1, 1.1}, Boundary: []float64{0.1, 0.1}, CPU: -1}},
	}}
	out := r.table(1)
	for _, want := range []string{"1.50×", "1.10×", "2.00×", " 1 a", "session", "LOOKUP"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}
