package tests

import (
	"os"
	"strconv"
	"testing"
	"time"
)

// long reports whether the long randomized and crash suites run
// (CKPTFS_LONG=1, set by `make test-long`).
func long(t *testing.T) bool {
	t.Helper()
	v, _ := strconv.ParseBool(os.Getenv("CKPTFS_LONG"))
	return v
}

// scale returns fast in `make test` and long in `make test-long`.
func scale(t *testing.T, fast, long_ int) int {
	t.Helper()
	if long(t) {
		return long_
	}
	return fast
}

// testSeed returns CKPTFS_SEED if set, else a fresh seed, and logs how to
// reproduce the run.
func testSeed(t *testing.T) int64 {
	t.Helper()
	seed := time.Now().UnixNano()
	if s := os.Getenv("CKPTFS_SEED"); s != "" {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("CKPTFS_SEED=%q: %v", s, err)
		}
		seed = v
	}
	t.Logf("seed %d (CKPTFS_SEED=%d reproduces)", seed, seed)
	return seed
}
