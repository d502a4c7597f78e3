package main

import (
	"math"
	"strings"
	"testing"
)

func TestGCBudgetSummary(t *testing.T) {
	b := &gcBudget{BudgetBytes: 1000, Sizes: []int64{500, 1000, 1050, 1101, 1200, 900}}
	b.summarize()
	if b.MaxBytes != 1200 || b.MaxRatio != 1.2 || b.Over != 3 || b.Over10 != 2 || b.FinalBytes != 900 {
		t.Errorf("summary = max %d ratio %v over %d over10 %d final %d; want 1200 1.2 3 2 900", b.MaxBytes, b.MaxRatio, b.Over, b.Over10, b.FinalBytes)
	}
	empty := &gcBudget{}
	empty.summarize()
	if empty.MaxRatio != 0 || empty.FinalBytes != 0 {
		t.Errorf("empty summary = %+v", empty)
	}
}

func TestGCForegroundSummary(t *testing.T) {
	f := &gcForeground{Alone: []float64{1, 3, 2}, WithGC: []float64{2.4, 2.6}, WithBG: []float64{2, 3, 2.2}}
	f.summarize()
	if f.MedianAlone != 2 || f.MedianWithGC != 2.5 || f.Ratio != 1.25 || f.MedianWithBG != 2.2 || f.RatioBG != 1.1 {
		t.Errorf("summary = %v %v %v %v %v; want 2 2.5 1.25 2.2 1.1", f.MedianAlone, f.MedianWithGC, f.Ratio, f.MedianWithBG, f.RatioBG)
	}
	f = &gcForeground{Alone: []float64{1}}
	f.summarize()
	if f.Ratio != 0 || f.RatioBG != 0 {
		t.Errorf("no gc samples: ratios %v, %v; want 0", f.Ratio, f.RatioBG)
	}
}

func TestGCThroughputRate(t *testing.T) {
	tp := &gcThroughput{Runs: []gcRun{
		{Wall: 1, Reclaimed: 100e6},
		{Wall: 2, Reclaimed: 100e6},
		{Wall: 1, Reclaimed: 300e6},
		{Wall: 1, Reclaimed: 0}, // reclaimed nothing: not a rate
	}}
	mbps, perGiB := tp.rate()
	if mbps != 100 {
		t.Errorf("MB/s = %v, want 100 (the median of 50, 100, 300)", mbps)
	}
	if want := float64(1<<30) / 100e6; math.Abs(perGiB-want) > 1e-9 {
		t.Errorf("s per GiB = %v, want %v", perGiB, want)
	}
	if mbps, perGiB := (&gcThroughput{}).rate(); !math.IsNaN(mbps) || !math.IsNaN(perGiB) {
		t.Errorf("no runs: %v, %v; want NaN", mbps, perGiB)
	}
}

func TestGCPolicySummary(t *testing.T) {
	p := &gcPolicyRow{BaseBytes: 100, StoreBytes: 400, Replaced: 200}
	p.summarize()
	if p.PerReplace != 1.5 {
		t.Errorf("growth/replaced = %v, want 1.5", p.PerReplace)
	}
	p = &gcPolicyRow{StoreBytes: 400}
	p.summarize()
	if p.PerReplace != 0 {
		t.Errorf("nothing replaced: %v, want 0", p.PerReplace)
	}
}

func TestGCTable(t *testing.T) {
	g := &gcResult{
		Budgets: []*gcBudget{{Turns: 2, TurnBytes: 50e6, BudgetBytes: 1 << 30, Policy: "--keep-size 1GiB", GCEvery: "1s", Sizes: []int64{1 << 29, 3 << 29}, BackgroundGCs: 4}},
		Foreground: &gcForeground{Files: 2000, GarbageBytes: 1 << 30, Alone: []float64{1}, WithGC: []float64{1.1}, GCWall: []float64{0.5},
			BGEvery: "250ms", WithBG: []float64{1.05}, BGWall: []float64{2}, BGOutlasted: 1, BGFreed: []string{"1.0 GiB"}},
		Throughput: []*gcThroughput{{Kind: "attic", Garbage: 1 << 30, Runs: []gcRun{{Wall: 0.5, Reclaimed: 1 << 30, Freed: 1 << 30}}}},
		Policies:   []gcPolicyRow{{Policy: "tight", Flags: "--keep-turns 20", Turns: 100, Kept: 20, Written: 300 << 20, Replaced: 200 << 20, BaseBytes: 50 << 20, StoreBytes: 150 << 20}},
	}
	out := g.table()
	for _, want := range []string{
		"store max 1536 MiB = 1.50× the budget of 1024 MiB",
		"over it after 1 of 2 turns, over +10% after 1; at the end 1536 MiB; 4 background gcs",
		"sed -i over 2000 files, medians of 1, each gc reclaiming 1024 MiB of chunks",
		"alone 1.00 s; during turnctl gc 1.10 s: 1.10×, gc 0.50 s (0.50–0.50), still running at the sed's end in 0 of 1",
		"during the background gc (looks every 250ms) 1.05 s: 1.05×, gc done after 2.00 s (2.00–2.00), still running at the sed's end in 1 of 1; freed 1.0 GiB",
		"attic       1   1024 MiB       1024 MiB    0.50  2147       0.50",
		"tight --keep-turns 20          20  300 MiB   200 MiB",
		"0.50\n", // growth/replaced
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

func TestMiB(t *testing.T) {
	for n, want := range map[int64]string{0: "0 MiB", 1536 << 10: "2 MiB", 9 << 30: "9216 MiB", 12 << 30: "12.0 GiB"} {
		if got := mib(n); got != want {
			t.Errorf("mib(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestLoggedFreed(t *testing.T) {
	for line, want := range map[string]string{
		"2026/11/26 20:12:48 background gc (the store holds 76972032 bytes, over its budget of 1): freed 38.2 MiB; the store holds 35.2 MiB":    "38.2 MiB",
		"2026/11/26 20:11:13 background gc (over): freed 19.1 MiB, history starts at turn 3; the store holds 35.2 MiB":                          "19.1 MiB",
		"2026/11/26 20:12:48 background gc (the store holds 36933632 bytes, over its budget of 1): freed 0 B; the store holds 35.2 MiB":         "0 B",
		"2026/11/26 20:12:48 background gc (the store holds 36933632 bytes, over its budget of 1): versionstore: busy: a gc is running already": "?",
	} {
		if got := loggedFreed(line); got != want {
			t.Errorf("loggedFreed(%q) = %q, want %q", line, got, want)
		}
	}
}
