package control

import (
	"bytes"
	"compress/zlib"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"strings"
)

// GIT binary patches, as git diff --binary writes them and git apply
// reads them: a full index line (git apply checks the bytes it patches
// against the old blob's id and the result against the new one), then a
// forward and a reverse hunk, each "literal SIZE" and the zlib-deflated
// bytes in git's base85, 52 bytes a line, each line led by its length
// ('A'-'Z' for 1-26, 'a'-'z' for 27-52), and an empty line.

// zeroID is the blob id git writes for "no file".
const zeroID = "0000000000000000000000000000000000000000"

// blobID is git's (SHA-1) object id of a blob holding data.
func blobID(data []byte) string {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", len(data))
	h.Write(data)
	return hex.EncodeToString(h.Sum(nil))
}

// writeBinary writes "GIT binary patch" and the literal hunks that turn
// old into new (forward) and new into old (reverse).
func writeBinary(w *strings.Builder, old, new []byte) {
	w.WriteString("GIT binary patch\n")
	writeLiteral(w, new)
	writeLiteral(w, old)
}

func writeLiteral(w *strings.Builder, data []byte) {
	var z bytes.Buffer
	zw, _ := zlib.NewWriterLevel(&z, zlib.BestCompression)
	zw.Write(data)
	zw.Close()
	fmt.Fprintf(w, "literal %d\n", len(data))
	deflated := z.Bytes()
	for len(deflated) > 0 {
		n := min(52, len(deflated))
		if n <= 26 {
			w.WriteByte(byte('A' + n - 1))
		} else {
			w.WriteByte(byte('a' + n - 27))
		}
		encode85(w, deflated[:n])
		w.WriteByte('\n')
		deflated = deflated[n:]
	}
	w.WriteByte('\n')
}

// en85 is git's base85 alphabet (base85.c), not Ascii85's.
const en85 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz!#$%&()*+-;<=>?@^_`{|}~"

// encode85 writes data as git's encode_85 does: each group of 4 bytes
// (the last padded with zeros) as 5 characters, most significant first.
func encode85(w *strings.Builder, data []byte) {
	for len(data) > 0 {
		var acc uint32
		for i := 0; i < 4; i++ {
			acc <<= 8
			if i < len(data) {
				acc |= uint32(data[i])
			}
		}
		var out [5]byte
		for i := 4; i >= 0; i-- {
			out[i] = en85[acc%85]
			acc /= 85
		}
		w.Write(out[:])
		data = data[min(4, len(data)):]
	}
}
