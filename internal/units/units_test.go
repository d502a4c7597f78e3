package units

import (
	"strings"
	"testing"
	"time"
)

func TestBytes(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 1536: "1.5 KiB", 5 << 30: "5.0 GiB"} {
		if got := Bytes(n); got != want {
			t.Errorf("Bytes(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestParseBytes(t *testing.T) {
	for in, want := range map[string]int64{"4096": 4096, "10GiB": 10 << 30, "500M": 500 << 20, "1.5g": 3 << 29, "2 KB": 2048, "0": 0} {
		if got, err := ParseBytes(in); err != nil || got != want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "abc", "10x", "-5", "G", "1e400"} {
		if _, err := ParseBytes(in); err == nil {
			t.Errorf("ParseBytes(%q) should fail", in)
		}
	}
}

// A budget needs a unit: "100" meant as 100 MiB would forget all the
// history it may as 100 bytes. 0 (the default) and "100B" are fine.
func TestParseBudget(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "0.0": 0, "100B": 100, "500M": 500 << 20, "1.5g": 3 << 29, " 2 KiB ": 2048} {
		if got, err := ParseBudget(in); err != nil || got != want {
			t.Errorf("ParseBudget(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	if _, err := ParseBudget("100"); err == nil || err.Error() != `bad size "100": give a unit, like 100M or 100G (100B for bytes)` {
		t.Errorf("ParseBudget(100): %v", err)
	}
	for _, in := range []string{"", "1.", "10x", "-5", "0.4"} {
		if _, err := ParseBudget(in); err == nil {
			t.Errorf("ParseBudget(%q) should fail", in)
		}
	}
}

func TestParseDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{"24h": 24 * time.Hour, "90m": 90 * time.Minute, "7d": 7 * 24 * time.Hour, "1w1d": 8 * 24 * time.Hour, "2d12h": 60 * time.Hour} {
		if got, err := ParseDuration(in); err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "abc", "5", "-1h", "3x"} {
		if _, err := ParseDuration(in); err == nil {
			t.Errorf("ParseDuration(%q) should fail", in)
		}
	}
	// Past what a time.Duration holds: refused as too long, never wrapped.
	for _, in := range []string{"99999999d", "2562048h", "106752d", "106751d24h", "15251w", "9999999999999999999999d"} {
		if d, err := ParseDuration(in); err == nil || !strings.Contains(err.Error(), "too long") {
			t.Errorf("ParseDuration(%q) = %v, %v; want too long", in, d, err)
		}
	}
	if d, err := ParseDuration("106751d"); err != nil || d != 106751*24*time.Hour {
		t.Errorf("ParseDuration(106751d) = %v, %v", d, err)
	}
}
