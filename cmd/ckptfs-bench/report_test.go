package main

import (
	"math"
	"strings"
	"testing"
)

func TestStats(t *testing.T) {
	for _, tc := range []struct {
		in               []float64
		median, min, max float64
	}{
		{[]float64{3}, 3, 3, 3},
		{[]float64{5, 1, 3}, 3, 1, 5},
		{[]float64{4, 1, 3, 2}, 2.5, 1, 4},
		{[]float64{2, 2, 9, 1, 2}, 2, 1, 9},
	} {
		med, lo, hi := stats(tc.in)
		if med != tc.median || lo != tc.min || hi != tc.max {
			t.Errorf("stats(%v) = %v, %v, %v; want %v, %v, %v", tc.in, med, lo, hi, tc.median, tc.min, tc.max)
		}
	}
	if med, _, _ := stats(nil); !math.IsNaN(med) {
		t.Errorf("stats(nil) median = %v, want NaN", med)
	}
	in := []float64{3, 1, 2}
	stats(in)
	if in[0] != 3 {
		t.Errorf("stats sorted its input: %v", in)
	}
}

func TestRowRatiosAndCPU(t *testing.T) {
	x := &row{Samples: map[string][]sample{}}
	for _, w := range []float64{1, 3, 2} {
		x.add("N", sample{Wall: w, CPU: -1})
	}
	for _, w := range []float64{4, 6} {
		x.add("L", sample{Wall: w, CPU: w / 2})
	}
	x.add("C", sample{Wall: 10, CPU: 1})
	x.summarize()
	if got := x.Summary["N"]; got.Median != 2 || got.Min != 1 || got.Max != 3 || got.CPUMedian != nil {
		t.Errorf("N summary = %+v", got)
	}
	if got := x.Summary["L"]; got.Median != 5 || *got.CPUMedian != 2.5 {
		t.Errorf("L summary = %+v", got)
	}
	want := map[string]float64{"L/N": 2.5, "C/N": 5, "C/L": 2}
	for k, v := range want {
		if x.Ratios[k] != v {
			t.Errorf("ratio %s = %v, want %v", k, x.Ratios[k], v)
		}
	}
	if _, ok := x.Ratios["C/L+"]; ok {
		t.Errorf("C/L+ without L+ samples: %v", x.Ratios)
	}
	if _, ok := ratio(1, 0); ok {
		t.Error("ratio(1, 0) ok")
	}
}

func TestFormatTable(t *testing.T) {
	got := formatTable([]string{"workload", "N", "C/N"}, [][]string{
		{"extract", "1.10 (1.00–1.20)", "2.00×"},
		{"git status", "0.22", "-"},
	})
	want := "" +
		"workload                   N    C/N\n" +
		"-----------------------------------\n" +
		"extract     1.10 (1.00–1.20)  2.00×\n" +
		"git status              0.22      -\n"
	if got != want {
		t.Errorf("formatTable:\n%s\nwant:\n%s", got, want)
	}
}

func TestFormatting(t *testing.T) {
	for v, want := range map[float64]string{0.0123: "0.012", 0.5: "0.50", 12.34: "12.3", 123.4: "123", math.NaN(): "-"} {
		if got := fmtSecs(v); got != want {
			t.Errorf("fmtSecs(%v) = %q, want %q", v, got, want)
		}
	}
	if got := fmtCell(summary{N: 3, Median: 2, Min: 1, Max: 3}, true); got != "2.00 (1.00–3.00)" {
		t.Errorf("fmtCell = %q", got)
	}
	if got := fmtCell(summary{N: 1, Median: 2, Min: 2, Max: 2}, true); got != "2.00" {
		t.Errorf("fmtCell one sample = %q", got)
	}
}

func TestParseStatCPU(t *testing.T) {
	// pid (comm with ") x") state ppid ... utime=150 stime=50 (fields 14, 15)
	stat := "123 (we) ird) S 1 123 123 0 -1 4194560 100 0 0 0 150 50 0 0 20 0 9 0 1000 0 0"
	if got := parseStatCPU(stat); got != 2.0 {
		t.Errorf("parseStatCPU = %v, want 2", got)
	}
	if got := parseStatCPU("garbage"); got != -1 {
		t.Errorf("parseStatCPU(garbage) = %v, want -1", got)
	}
}

func TestUnescapeMount(t *testing.T) {
	if got := unescapeMount(`/var/tmp/a\040b`); got != "/var/tmp/a b" {
		t.Errorf("unescapeMount = %q", got)
	}
}

func TestTableMarksUnavailable(t *testing.T) {
	r := &results{Configs: map[string]configInfo{"N": {Available: true}, "C": {Error: "no bin/ckptfs"}}, Host: map[string]string{}}
	r.row("extract", "extract").add("N", sample{Wall: 1, CPU: -1})
	out := r.table([]string{"N", "C"})
	if !strings.Contains(out, "C unavailable: no bin/ckptfs") || strings.Contains(out, "C/N") {
		t.Errorf("table:\n%s", out)
	}
}

func TestParseBegin(t *testing.T) {
	for out, want := range map[string]int{
		`{"turn":{"num":12,"kind":"agent"},"closed":{"num":11}}` + "\n": 12,
		"7\n":                            7,
		"closed turn 5 (manual); turn 6": 6,
	} {
		if got, err := parseBegin(out); err != nil || got != want {
			t.Errorf("parseBegin(%q) = %d, %v; want %d", out, got, err, want)
		}
	}
	if _, err := parseBegin("no number"); err == nil {
		t.Error("parseBegin without a number: no error")
	}
}

func TestFmtBytes(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 4096: "4 KiB", 131072: "128 KiB", 1 << 20: "1 MiB", 1536 << 20: "1.5 GiB", -8192: "-8 KiB"} {
		if got := fmtBytes(n); got != want {
			t.Errorf("fmtBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestCaptureTable(t *testing.T) {
	out := captureTable([]captureRow{{Config: "C", Big: "1 GiB", BigS: summary{N: 3, Median: 2, Min: 1.5, Max: 8}, SmallS: summary{N: 3, Median: 0.002, Min: 0.002, Max: 0.005}, Ratio: 1000, BigStored: 1 << 30, SmallStored: 1 << 20}})
	for _, want := range []string{"1 GiB/1 MiB ≤ 3×", "2.00 (1.50–8.00)", "1000.00×", "1 GiB / 1 MiB"} {
		if !strings.Contains(out, want) {
			t.Errorf("capture table lacks %q:\n%s", want, out)
		}
	}
}
