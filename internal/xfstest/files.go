package xfstest

import (
	"crypto/sha256"
	"io"
	"math/rand/v2"
	"os"
	"testing"
)

// WriteSeeded writes n incompressible bytes (the ChaCha8 stream of seed)
// to p, so that a copy of them costs about n bytes, and returns their
// SHA-256. It does not sync the file.
func WriteSeeded(t testing.TB, p string, n int64, seed byte) [32]byte {
	t.Helper()
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	src := rand.NewChaCha8([32]byte{seed})
	buf := make([]byte, 1<<20)
	for left := n; left > 0; left -= int64(len(buf)) {
		b := buf[:min(int64(len(buf)), left)]
		src.Read(b)
		h.Write(b)
		if _, err := f.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	return [32]byte(h.Sum(nil))
}

// WriteAt writes b into the file p at off, in place (the inode stays). It
// does not sync the file.
func WriteAt(t testing.TB, p string, off int64, b []byte) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// SyncFile flushes the file p to its disk (fsync).
func SyncFile(t testing.TB, p string) {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}

// SumOf returns the SHA-256 of what r reads.
func SumOf(t testing.TB, r io.Reader) [32]byte {
	t.Helper()
	h := sha256.New()
	if _, err := io.Copy(h, r); err != nil {
		t.Fatal(err)
	}
	return [32]byte(h.Sum(nil))
}

// FileSum returns the SHA-256 of the file p.
func FileSum(t testing.TB, p string) [32]byte {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return SumOf(t, f)
}
