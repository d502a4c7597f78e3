package units

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// ParseBytes parses a size for people: a number with an optional unit, B,
// K/KB/KiB, M/MB/MiB, G/GB/GiB, T/TB/TiB (all binary: 1K = 1024 bytes),
// case-insensitive ("10GiB", "500M", "1.5g", "4096").
func ParseBytes(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.') {
		i++
	}
	num, unit := t[:i], strings.ToLower(strings.TrimSpace(t[i:]))
	v, err := strconv.ParseFloat(num, 64)
	if num == "" || err != nil || v < 0 {
		return 0, fmt.Errorf("bad size %q: want a number and a unit, like 10GiB or 500M", s)
	}
	unit = strings.TrimSuffix(strings.TrimSuffix(unit, "ib"), "b")
	mult := map[string]float64{"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}[unit]
	if mult == 0 {
		return 0, fmt.Errorf("bad size %q: unknown unit (use B, K, M, G or T)", s)
	}
	if v*mult > math.MaxInt64/2 {
		return 0, fmt.Errorf("bad size %q: too large", s)
	}
	return int64(v * mult), nil
}

// ParseBudget is ParseBytes for a budget of the store, which needs a unit
// unless it is 0 (the default): "100" is more likely meant as 100 MiB
// than as 100 bytes, a budget that would forget all the history it may.
// "100B" says bytes.
func ParseBudget(s string) (int64, error) {
	n, err := ParseBytes(s)
	if err != nil {
		return 0, err
	}
	t := strings.TrimSpace(s)
	if last := t[len(t)-1]; strings.Trim(t, "0.") != "" && (last >= '0' && last <= '9' || last == '.') {
		return 0, fmt.Errorf("bad size %q: give a unit, like %sM or %sG (%sB for bytes)", s, t, t, t)
	}
	return n, nil
}

// ParseDuration parses a duration for people: Go's form ("90m", "1h30m"),
// and whole days and weeks ("7d", "2w", "1w3d").
func ParseDuration(s string) (time.Duration, error) {
	t := strings.TrimSpace(s)
	var total time.Duration
	for t != "" {
		i := 0
		for i < len(t) && t[i] >= '0' && t[i] <= '9' {
			i++
		}
		if i == 0 || i == len(t) || (t[i] != 'd' && t[i] != 'w') {
			break
		}
		unit := 24 * time.Hour
		if t[i] == 'w' {
			unit *= 7
		}
		n, err := strconv.ParseInt(t[:i], 10, 64)
		if err != nil || n > int64((math.MaxInt64-total)/unit) {
			return 0, tooLong(s)
		}
		total += time.Duration(n) * unit
		t = t[i+1:]
	}
	if t != "" {
		d, err := time.ParseDuration(t)
		if err != nil && goDuration.MatchString(t) {
			return 0, tooLong(s)
		}
		if err != nil {
			return 0, fmt.Errorf("bad duration %q: want a number and a unit, like 24h, 90m or 7d", s)
		}
		if d > 0 && total > math.MaxInt64-d {
			return 0, tooLong(s)
		}
		total += d
	} else if total == 0 && strings.TrimSpace(s) == "" {
		return 0, fmt.Errorf("bad duration %q: want a number and a unit, like 24h, 90m or 7d", s)
	}
	if total < 0 {
		return 0, fmt.Errorf("bad duration %q: must not be negative", s)
	}
	return total, nil
}

// goDuration is the form time.ParseDuration takes, unsigned: what it
// refuses in this form is too long for a time.Duration.
var goDuration = regexp.MustCompile(`^(([0-9]+\.?[0-9]*|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+$`)

// tooLong is the error for a duration past what a time.Duration holds
// (about 292 years).
func tooLong(s string) error {
	return fmt.Errorf("bad duration %q: too long (at most %dd)", s, math.MaxInt64/int64(24*time.Hour))
}

// Duration formats d for people, in days when it is whole days.
func Duration(d time.Duration) string {
	if d > 0 && d%(24*time.Hour) == 0 {
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	}
	return d.String()
}

// ParseWindow parses a retention window: a duration (ParseDuration), or
// "off" for none, returned as -1.
func ParseWindow(s string) (time.Duration, error) {
	if t := strings.TrimSpace(s); t == "off" || t == "none" {
		return -1, nil
	}
	return ParseDuration(s)
}
