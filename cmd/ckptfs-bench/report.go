package main

// Results, their statistics, the terminal table and the JSON file.

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"sort"
	"strings"
)

// sample is one timed repetition: wall seconds and the daemon's CPU
// seconds (-1: no daemon).
type sample struct {
	Wall float64 `json:"wall_s"`
	CPU  float64 `json:"cpu_s"`
	// SettleWall and SettleCPU: how long the daemon stayed busy after the
	// repetition ended, and the CPU it used meanwhile (C only).
	SettleWall float64 `json:"settle_wall_s,omitempty"`
	SettleCPU  float64 `json:"settle_cpu_s,omitempty"`
}

type configInfo struct {
	Available bool   `json:"available"`
	Error     string `json:"error,omitempty"`
	Dir       string `json:"dir,omitempty"`
	DaemonPID int    `json:"daemon_pid,omitempty"`
	What      string `json:"what"`
}

// row is one measured step on every configuration.
type row struct {
	Workload string              `json:"workload"`
	Step     string              `json:"step"`
	Samples  map[string][]sample `json:"samples"`
	Errors   map[string]string   `json:"errors,omitempty"`
	Summary  map[string]summary  `json:"summary"`
	Ratios   map[string]float64  `json:"ratios"`
}

// summary is the statistics of one row on one configuration.
type summary struct {
	N         int      `json:"n"`
	Median    float64  `json:"median_s"`
	Min       float64  `json:"min_s"`
	Max       float64  `json:"max_s"`
	CPUMedian *float64 `json:"cpu_median_s,omitempty"`
	// SettleCPUMedian is the median CPU the daemon used after the
	// repetition, until idle (C only).
	SettleCPUMedian *float64 `json:"settle_cpu_median_s,omitempty"`
}

type results struct {
	Started  string                `json:"started"`
	Finished string                `json:"finished"`
	Quick    bool                  `json:"quick"`
	Reps     int                   `json:"reps"`
	Work     string                `json:"work"`
	Host     map[string]string     `json:"host"`
	Configs  map[string]configInfo `json:"configs"`
	Rows     []*row                `json:"workloads"`
	History  []*row                `json:"history,omitempty"`
	Stored   []storedRow           `json:"bytes_stored,omitempty"`
	Capture  []captureRow          `json:"capture,omitempty"`
	Session  *sessionResult        `json:"session,omitempty"`
	GC       *gcResult             `json:"gc,omitempty"`
	Notes    []string              `json:"notes,omitempty"`
}

// storedRow is one bytes-stored-per-byte-changed figure.
type storedRow struct {
	Op      string  `json:"op"`
	Changed int64   `json:"bytes_changed"`
	Stored  int64   `json:"bytes_stored"`
	PerByte float64 `json:"stored_per_changed"`
}

// captureRow is the big-file capture figure of one configuration (issue
// 16): the first 4 KiB write of a turn into the big file against the same
// into a 1 MiB file, and the space the first capture of each took.
type captureRow struct {
	Config      string  `json:"config"`
	Big         string  `json:"big"` // the big file's size: "1 GiB"
	BigS        summary `json:"big_write"`
	SmallS      summary `json:"small_write"`
	Ratio       float64 `json:"big_per_small"` // of the medians
	BigStored   int64   `json:"big_stored_bytes"`
	SmallStored int64   `json:"small_stored_bytes"`
}

// Issue 16's targets for the capture figure.
const (
	captureRatioTarget  = 3
	captureStoredTarget = 1 << 20
)

// captureTable renders the capture rows.
func captureTable(rs []captureRow) string {
	if len(rs) == 0 {
		return ""
	}
	var rows [][]string
	big := rs[0].Big
	for _, r := range rs {
		rows = append(rows, []string{r.Config, fmtCell(r.BigS, true), fmtCell(r.SmallS, true),
			fmtRatio(r.Ratio, r.Ratio > 0), fmtBytes(r.BigStored) + " / " + fmtBytes(r.SmallStored)})
	}
	return fmt.Sprintf("\nbig-file capture: the first 4 KiB write of a turn, wall seconds median (min–max); space the first capture took (targets: %s/1 MiB ≤ %d×, ≤ %s for the %s file)\n",
		big, captureRatioTarget, fmtBytes(captureStoredTarget), big) +
		formatTable([]string{"config", big + " file", "1 MiB file", big + " / 1 MiB", "space, " + big + " / 1 MiB"}, rows)
}

// fmtBytes formats a byte count in binary units.
func fmtBytes(n int64) string {
	v, neg := float64(n), n < 0
	if neg {
		v = -v
	}
	s := fmt.Sprintf("%d B", int64(v))
	for i, u := range []string{"KiB", "MiB", "GiB", "TiB"} {
		if v < float64(int64(1)<<(10*(i+1))) {
			break
		}
		x := v / float64(int64(1)<<(10*(i+1)))
		if x >= 100 {
			s = fmt.Sprintf("%.0f %s", x, u)
		} else {
			s = fmt.Sprintf("%.3g %s", x, u)
		}
	}
	if neg {
		s = "-" + s
	}
	return s
}

func (r *results) row(workload, step string) *row {
	for _, x := range r.Rows {
		if x.Workload == workload && x.Step == step {
			return x
		}
	}
	x := &row{Workload: workload, Step: step, Samples: map[string][]sample{}}
	r.Rows = append(r.Rows, x)
	return x
}

func (r *results) historyRow(name string) *row {
	for _, x := range r.History {
		if x.Step == name {
			return x
		}
	}
	x := &row{Workload: "history", Step: name, Samples: map[string][]sample{}}
	r.History = append(r.History, x)
	return x
}

func (x *row) add(config string, s sample) {
	x.Samples[config] = append(x.Samples[config], s)
}

func (x *row) setError(config, msg string) {
	if x.Errors == nil {
		x.Errors = map[string]string{}
	}
	x.Errors[config] = msg
}

// summarize fills Summary and Ratios from Samples.
func (x *row) summarize() {
	x.Summary = map[string]summary{}
	for c, ss := range x.Samples {
		x.Summary[c] = summarizeSamples(ss)
	}
	x.Ratios = map[string]float64{}
	for _, p := range ratioPairs {
		if v, ok := x.ratio(p[0], p[1]); ok {
			x.Ratios[p[0]+"/"+p[1]] = v
		}
	}
}

// ratioPairs are the ratios reported, numerator first.
var ratioPairs = [][2]string{{"L", "N"}, {"L+", "N"}, {"C", "N"}, {"C", "L"}, {"C", "L+"}, {"Cu", "N"}, {"Cu", "L"}, {"Cu", "C"}, {"Lu", "N"}, {"Cu", "Lu"}, {"Nx", "N"}, {"C", "Nx"}}

func (x *row) ratio(a, b string) (float64, bool) {
	sa, ok1 := x.Summary[a]
	sb, ok2 := x.Summary[b]
	if !ok1 || !ok2 || sa.N == 0 || sb.N == 0 {
		return 0, false
	}
	return ratio(sa.Median, sb.Median)
}

func ratio(a, b float64) (float64, bool) {
	if b <= 0 || math.IsNaN(a) || math.IsNaN(b) {
		return 0, false
	}
	return a / b, true
}

func summarizeSamples(ss []sample) summary {
	var sm summary
	walls := make([]float64, len(ss))
	var cpus, settles []float64
	for i, s := range ss {
		walls[i] = s.Wall
		if s.CPU >= 0 {
			cpus = append(cpus, s.CPU)
		}
		if s.SettleWall > 0 {
			settles = append(settles, s.SettleCPU)
		}
	}
	if len(settles) > 0 {
		m, _, _ := stats(settles)
		sm.SettleCPUMedian = &m
	}
	sm.N = len(ss)
	sm.Median, sm.Min, sm.Max = stats(walls)
	if len(cpus) > 0 {
		m, _, _ := stats(cpus)
		sm.CPUMedian = &m
	}
	return sm
}

// stats returns the median (mean of the middle two for even counts), the
// minimum and the maximum; NaN for no values.
func stats(xs []float64) (median, min, max float64) {
	if len(xs) == 0 {
		return math.NaN(), math.NaN(), math.NaN()
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		median = s[n/2]
	} else {
		median = (s[n/2-1] + s[n/2]) / 2
	}
	return median, s[0], s[n-1]
}

// fmtSecs formats seconds with 3 significant-ish digits.
func fmtSecs(v float64) string {
	switch {
	case math.IsNaN(v):
		return "-"
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	case v >= 0.1:
		return fmt.Sprintf("%.2f", v)
	default:
		return fmt.Sprintf("%.3f", v)
	}
}

// fmtCell is "median (min–max)" or the error / absence.
func fmtCell(sm summary, ok bool) string {
	if !ok || sm.N == 0 {
		return "-"
	}
	if sm.N == 1 {
		return fmtSecs(sm.Median)
	}
	return fmt.Sprintf("%s (%s–%s)", fmtSecs(sm.Median), fmtSecs(sm.Min), fmtSecs(sm.Max))
}

func fmtRatio(v float64, ok bool) string {
	if !ok {
		return "-"
	}
	return fmt.Sprintf("%.2f×", v)
}

// formatTable aligns cells in columns: the first left-aligned, the others
// right-aligned, with a rule under the header. Widths count runes.
func formatTable(header []string, rows [][]string) string {
	w := make([]int, len(header))
	for _, r := range append([][]string{header}, rows...) {
		for i, c := range r {
			if i < len(w) && runeLen(c) > w[i] {
				w[i] = runeLen(c)
			}
		}
	}
	var sb strings.Builder
	line := func(r []string) {
		for i := range w {
			c := ""
			if i < len(r) {
				c = r[i]
			}
			pad := strings.Repeat(" ", w[i]-runeLen(c))
			if i > 0 {
				sb.WriteString("  ")
			}
			if i == 0 {
				sb.WriteString(c + pad)
			} else {
				sb.WriteString(pad + c)
			}
		}
		sb.WriteString("\n")
	}
	line(header)
	total := 0
	for _, x := range w {
		total += x
	}
	sb.WriteString(strings.Repeat("-", total+2*(len(w)-1)) + "\n")
	for _, r := range rows {
		line(r)
	}
	return sb.String()
}

func runeLen(s string) int { return len([]rune(s)) }

// table renders the results for the terminal.
func (r *results) table(configs []string) string {
	var sb strings.Builder
	var live []string
	for _, c := range configs {
		if r.Configs[c].Available {
			live = append(live, c)
		}
	}
	fmt.Fprintf(&sb, "\nckptfs-bench  %s  reps=%d quick=%v  kernel %s, %s cpus, %s\n",
		r.Started, r.Reps, r.Quick, r.Host["kernel"], r.Host["cpus"], r.Host["go"])
	for _, c := range configs {
		if ci, ok := r.Configs[c]; ok && !ci.Available {
			fmt.Fprintf(&sb, "%s unavailable: %s\n", c, ci.Error)
		}
	}

	if len(r.Rows) > 0 {
		sb.WriteString("\nwall seconds: median (min–max); ratios of medians\n")
	}
	header := []string{"workload"}
	header = append(header, live...)
	var pairs [][2]string
	for _, p := range ratioPairs {
		if contains(live, p[0]) && contains(live, p[1]) {
			pairs = append(pairs, p)
			header = append(header, p[0]+"/"+p[1])
		}
	}
	var rows, cpuRows [][]string
	if len(r.Rows) == 0 {
		header = nil
	}
	for _, x := range r.Rows {
		x.summarize()
		cells := []string{x.Step}
		cpu := []string{x.Step}
		for _, c := range live {
			sm, ok := x.Summary[c]
			cell := fmtCell(sm, ok)
			if _, bad := x.Errors[c]; bad && !ok {
				cell = "error"
			}
			cells = append(cells, cell)
			if c != "N" {
				if ok && sm.CPUMedian != nil {
					cell := fmtSecs(*sm.CPUMedian)
					if sm.SettleCPUMedian != nil && *sm.SettleCPUMedian >= 0.01 {
						cell += " +" + fmtSecs(*sm.SettleCPUMedian)
					}
					cpu = append(cpu, cell)
				} else {
					cpu = append(cpu, "-")
				}
			}
		}
		for _, p := range pairs {
			cells = append(cells, fmtRatio(x.ratio(p[0], p[1])))
		}
		rows = append(rows, cells)
		cpuRows = append(cpuRows, cpu)
	}
	if header != nil {
		sb.WriteString(formatTable(header, rows))
	}

	cpuHeader := []string{"daemon CPU s (median; +after end)"}
	for _, c := range live {
		if c != "N" {
			cpuHeader = append(cpuHeader, c)
		}
	}
	if len(cpuHeader) > 1 && len(cpuRows) > 0 {
		sb.WriteString("\n")
		sb.WriteString(formatTable(cpuHeader, cpuRows))
	}

	var errs []string
	for _, x := range r.Rows {
		for c, e := range x.Errors {
			errs = append(errs, fmt.Sprintf("  %s / %s on %s: %s", x.Workload, x.Step, c, e))
		}
	}

	if len(r.History) > 0 {
		sb.WriteString("\nhistory (C unless named): wall seconds\n")
		var hrows [][]string
		for _, x := range r.History {
			x.summarize()
			for _, c := range sortedKeys(x.Samples) {
				sm := x.Summary[c]
				cpu := "-"
				if sm.CPUMedian != nil {
					cpu = fmtSecs(*sm.CPUMedian)
				}
				name := x.Step
				if c != "C" {
					name += " [" + c + "]"
				}
				// G is the peer C must beat (G/C: how many times
				// cheaper C is); N is the limit C must come near (C/N);
				// A, a view of a turn (mount --at), too (A/C).
				vsC := "-"
				switch c {
				case "C":
				case "N":
					vsC = "C/N " + fmtRatio(x.ratio("C", c))
				default:
					vsC = c + "/C " + fmtRatio(x.ratio(c, "C"))
				}
				hrows = append(hrows, []string{name, fmtSecs(sm.Median), fmtSecs(sm.Min) + "–" + fmtSecs(sm.Max), fmt.Sprint(sm.N), cpu, vsC})
			}
			for c, e := range x.Errors {
				errs = append(errs, fmt.Sprintf("  history / %s on %s: %s", x.Step, c, e))
			}
		}
		sb.WriteString(formatTable([]string{"figure", "median", "min–max", "n", "daemon CPU", "ratio"}, hrows))
	}
	if r.Session != nil {
		sb.WriteString(r.Session.table(r.Reps))
	}
	if r.GC != nil {
		sb.WriteString(r.GC.table())
	}
	if len(r.Stored) > 0 {
		sb.WriteString("\nbytes stored per byte changed (C; du -sb of the store before the turn and after its end, daemon idle)\n")
		var srows [][]string
		for _, s := range r.Stored {
			srows = append(srows, []string{s.Op, fmt.Sprint(s.Changed), fmt.Sprint(s.Stored), fmt.Sprintf("%.3f", s.PerByte)})
		}
		sb.WriteString(formatTable([]string{"op", "changed", "stored", "stored/changed"}, srows))
	}
	sb.WriteString(captureTable(r.Capture))
	if len(errs) > 0 {
		sort.Strings(errs)
		sb.WriteString("\nerrors:\n" + strings.Join(errs, "\n") + "\n")
	}
	if len(r.Notes) > 0 {
		sb.WriteString("\nnotes:\n")
		for _, n := range r.Notes {
			sb.WriteString("  - " + n + "\n")
		}
	}
	return sb.String()
}

func contains(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}

// sortedKeys orders configuration names N, L, L+, C, then others (G).
func sortedKeys(m map[string][]sample) []string {
	rank := func(s string) int {
		for i, n := range configNames {
			if n == s {
				return i
			}
		}
		return len(configNames)
	}
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool {
		if rank(ks[i]) != rank(ks[j]) {
			return rank(ks[i]) < rank(ks[j])
		}
		return ks[i] < ks[j]
	})
	return ks
}

func (r *results) writeJSON(path string) error {
	for _, x := range r.Rows {
		x.summarize()
	}
	for _, x := range r.History {
		x.summarize()
	}
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}
