package main

// The retention figures' results (gcfigures.go) and their table.

import (
	"fmt"
	"math"
	"strings"
)

type gcResult struct {
	Budgets    []*gcBudget     `json:"budget,omitempty"`
	Foreground *gcForeground   `json:"foreground,omitempty"`
	Throughput []*gcThroughput `json:"throughput,omitempty"`
	Policies   []gcPolicyRow   `json:"policies,omitempty"`
}

// gcBudget is figure 1: the store's size after each turn.
type gcBudget struct {
	Turns       int    `json:"turns"`
	TurnBytes   int64  `json:"turn_bytes"`
	BudgetBytes int64  `json:"budget_bytes"`
	Policy      string `json:"policy"`
	// GCEvery is how often the daemon's background gc looked for work.
	GCEvery string  `json:"gc_every"`
	Sizes   []int64 `json:"store_bytes"` // after each turn
	Wall    float64 `json:"wall_s"`
	// From Sizes (summarize).
	MaxBytes   int64   `json:"max_store_bytes"`
	MaxRatio   float64 `json:"max_over_budget"` // MaxBytes / BudgetBytes; target ≤ 1.10
	Over       int     `json:"turns_over_budget"`
	Over10     int     `json:"turns_over_budget_10pct"`
	FinalBytes int64   `json:"final_store_bytes"`
	// BackgroundGCs counts the daemon's log lines of a background gc.
	BackgroundGCs int `json:"background_gcs"`
}

func (b *gcBudget) summarize() {
	b.MaxBytes, b.Over, b.Over10, b.FinalBytes = 0, 0, 0, 0
	for _, s := range b.Sizes {
		b.MaxBytes = max(b.MaxBytes, s)
		if s > b.BudgetBytes {
			b.Over++
		}
		if float64(s) > 1.1*float64(b.BudgetBytes) {
			b.Over10++
		}
	}
	if len(b.Sizes) > 0 {
		b.FinalBytes = b.Sizes[len(b.Sizes)-1]
	}
	b.MaxRatio = 0
	if b.BudgetBytes > 0 {
		b.MaxRatio = float64(b.MaxBytes) / float64(b.BudgetBytes)
	}
}

// gcForeground is figure 2: sed -i alone and while a gc runs.
type gcForeground struct {
	Files        int       `json:"files"`
	GarbageBytes int64     `json:"garbage_bytes"` // made for each gc
	Alone        []float64 `json:"sed_alone_s"`
	WithGC       []float64 `json:"sed_with_gc_s"`
	GCWall       []float64 `json:"gc_wall_s"`
	// Outlasted counts the repetitions whose gc was still running when
	// the sed ended.
	Outlasted int `json:"gc_outlasted_sed"`
	// The same with the daemon's background gc (low priority, pauses
	// between batches), which looks for work every BGEvery; BGWall runs
	// from making it due to its log line.
	BGEvery     string    `json:"background_gc_every"`
	WithBG      []float64 `json:"sed_with_background_gc_s"`
	BGWall      []float64 `json:"background_gc_wall_s"`
	BGOutlasted int       `json:"background_gc_outlasted_sed"`
	BGFreed     []string  `json:"background_gc_freed"` // as its log line says
	// From the samples (summarize).
	MedianAlone  float64 `json:"median_alone_s"`
	MedianWithGC float64 `json:"median_with_gc_s"`
	Ratio        float64 `json:"ratio"` // target ≤ 1.2
	MedianWithBG float64 `json:"median_with_background_gc_s"`
	RatioBG      float64 `json:"ratio_background"`
}

func (f *gcForeground) summarize() {
	f.MedianAlone, _, _ = stats(f.Alone)
	f.MedianWithGC, _, _ = stats(f.WithGC)
	f.MedianWithBG, _, _ = stats(f.WithBG)
	f.Ratio, _ = ratio(f.MedianWithGC, f.MedianAlone)
	f.RatioBG, _ = ratio(f.MedianWithBG, f.MedianAlone)
}

// gcRun is one turnctl gc.
type gcRun struct {
	Wall      float64 `json:"wall_s"`
	Reclaimed int64   `json:"reclaimed_bytes"` // before_bytes - after_bytes
	Freed     int64   `json:"freed_bytes"`     // chunk_bytes + attic_bytes
}

// gcThroughput is figure 3: gc runs of one kind of garbage.
type gcThroughput struct {
	Kind    string  `json:"kind"`
	Garbage int64   `json:"garbage_bytes"` // made for each run
	Runs    []gcRun `json:"runs"`
}

// rate returns the median bytes reclaimed per second and seconds per GiB
// over the runs (NaN: no run reclaimed anything).
func (t *gcThroughput) rate() (mbps, perGiB float64) {
	var rates []float64
	for _, r := range t.Runs {
		if r.Wall > 0 && r.Reclaimed > 0 {
			rates = append(rates, float64(r.Reclaimed)/r.Wall)
		}
	}
	m, _, _ := stats(rates)
	return m / 1e6, float64(1<<30) / m
}

// gcPolicyRow is figure 4: one policy's store after the scripted history.
type gcPolicyRow struct {
	Policy     string  `json:"policy"`
	Flags      string  `json:"flags"`
	Turns      int     `json:"turns"`
	Kept       int     `json:"turns_kept"`
	Forgot     int     `json:"turns_forgotten_by_gc"`
	Written    int64   `json:"bytes_written"`
	Replaced   int64   `json:"bytes_replaced"`   // prior bytes of the files overwritten or deleted
	BaseBytes  int64   `json:"base_store_bytes"` // the store before the history (the tree created)
	StoreBytes int64   `json:"store_bytes"`      // after it and a gc
	PerReplace float64 `json:"growth_per_replaced"`
}

func (p *gcPolicyRow) summarize() {
	p.PerReplace = 0
	if p.Replaced > 0 {
		p.PerReplace = float64(p.StoreBytes-p.BaseBytes) / float64(p.Replaced)
	}
}

// mib formats bytes in MiB (GiB from 10 GiB).
func mib(n int64) string {
	if n >= 10<<30 {
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	}
	return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20))
}

func fmtFloat(v float64, format string) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "-"
	}
	return fmt.Sprintf(format, v)
}

// table renders the retention figures.
func (g *gcResult) table() string {
	var sb strings.Builder
	sb.WriteString("\nretention (issue 15)\n")
	for _, b := range g.Budgets {
		b.summarize()
		fmt.Fprintf(&sb, "budget: %d turns, each %.0f MB new and the last turn's deleted, %s, background gc looks every %s (%.0f s)\n",
			len(b.Sizes), float64(b.TurnBytes)/1e6, b.Policy, b.GCEvery, b.Wall)
		fmt.Fprintf(&sb, "  store max %s = %.2f× the budget of %s (target ≤ 1.10×); over it after %d of %d turns, over +10%% after %d; at the end %s; %d background gcs\n",
			mib(b.MaxBytes), b.MaxRatio, mib(b.BudgetBytes), b.Over, len(b.Sizes), b.Over10, mib(b.FinalBytes), b.BackgroundGCs)
	}
	if f := g.Foreground; f != nil {
		f.summarize()
		gcMed, gcMin, gcMax := stats(f.GCWall)
		fmt.Fprintf(&sb, "foreground: sed -i over %d files, medians of %d, each gc reclaiming %s of chunks; target ≤ 1.2×\n",
			f.Files, len(f.Alone), mib(f.GarbageBytes))
		fmt.Fprintf(&sb, "  alone %s s; during turnctl gc %s s: %s, gc %s s (%s–%s), still running at the sed's end in %d of %d\n",
			fmtSecs(f.MedianAlone), fmtSecs(f.MedianWithGC), fmtRatio(f.Ratio, f.Ratio > 0),
			fmtSecs(gcMed), fmtSecs(gcMin), fmtSecs(gcMax), f.Outlasted, len(f.WithGC))
		if len(f.WithBG) > 0 {
			bgMed, bgMin, bgMax := stats(f.BGWall)
			fmt.Fprintf(&sb, "  during the background gc (looks every %s) %s s: %s, gc done after %s s (%s–%s), still running at the sed's end in %d of %d; freed %s\n",
				f.BGEvery, fmtSecs(f.MedianWithBG), fmtRatio(f.RatioBG, f.RatioBG > 0), fmtSecs(bgMed), fmtSecs(bgMin), fmtSecs(bgMax), f.BGOutlasted, len(f.WithBG), strings.Join(f.BGFreed, ", "))
		}
	}
	if len(g.Throughput) > 0 {
		sb.WriteString("gc throughput (turnctl gc --json: before_bytes - after_bytes over wall time; median of runs)\n")
		var rows [][]string
		for _, t := range g.Throughput {
			mbps, perGiB := t.rate()
			var walls []float64
			var rec, freed int64
			for _, r := range t.Runs {
				walls = append(walls, r.Wall)
				rec += r.Reclaimed
				freed += r.Freed
			}
			w, _, _ := stats(walls)
			n := int64(max(len(t.Runs), 1))
			rows = append(rows, []string{t.Kind, fmt.Sprint(len(t.Runs)), mib(rec / n), mib(freed / n), fmtSecs(w), fmtFloat(mbps, "%.0f"), fmtFloat(perGiB, "%.2f")})
		}
		sb.WriteString(formatTable([]string{"garbage", "runs", "reclaimed", "content freed", "wall s", "MB/s", "s per GiB"}, rows))
	}
	if len(g.Policies) > 0 {
		p0 := g.Policies[0]
		fmt.Fprintf(&sb, "policies: %d scripted turns, then turnctl gc; replaced: prior bytes of the files overwritten or deleted; growth: store after - before the history\n", p0.Turns)
		var rows [][]string
		for _, p := range g.Policies {
			p.summarize()
			rows = append(rows, []string{p.Policy + " " + p.Flags, fmt.Sprint(p.Kept), mib(p.Written), mib(p.Replaced), mib(p.BaseBytes), mib(p.StoreBytes), fmt.Sprintf("%.2f", p.PerReplace)})
		}
		sb.WriteString(formatTable([]string{"policy", "turns kept", "written", "replaced", "store before", "store after", "growth/replaced"}, rows))
	}
	return sb.String()
}
