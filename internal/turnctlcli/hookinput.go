package turnctlcli

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"ckptfs/internal/ckpt"
)

// hookinput.go: reading a hook's JSON input of any size. A payload can be
// huge (a pasted prompt of many MiB, a PostToolUse whose tool_response
// holds a whole file); hook-event needs only a few short fields and the
// first ckpt.MaxText bytes of the prompt. shrinkJSON streams the input
// and cuts every long string, so what is decoded stays small.

// maxHookInput bounds what hook-event reads from standard input (a
// variable for the tests).
var maxHookInput int64 = 256 << 20

const (
	// maxShrunkInput bounds the input once its long strings are cut.
	maxShrunkInput = 16 << 20
	// maxHookString is the longest string kept whole, in raw JSON bytes:
	// enough for ckpt.MaxText decoded bytes however escaped (\u0041 is
	// 6 bytes for 1).
	maxHookString = 6*ckpt.MaxText + 16
)

// errHookInputTooLarge: the input is over one of the limits.
var errHookInputTooLarge = errors.New("hook input is too large")

// shrunkJSON is a JSON document with its long strings cut.
type shrunkJSON struct {
	data []byte
	// cut holds, for each string value of a top-level key that was cut,
	// its whole decoded length in bytes.
	cut map[string]int
}

// shrinkJSON copies the JSON document on r, cutting each string longer
// than maxStr raw bytes at a character boundary (not inside an escape), so
// that the result is valid JSON whenever the input is. Anything else,
// malformed input included, is copied as it is, for the decoder to judge.
func shrinkJSON(r io.Reader, maxStr, maxOut int, maxIn int64) (shrunkJSON, error) {
	res := shrunkJSON{cut: map[string]int{}}
	br := bufio.NewReaderSize(io.LimitReader(r, maxIn+1), 64<<10)
	var out, str []byte
	var (
		inStr       bool
		esc         bool // after a backslash
		uLeft       int  // hex digits of a \u escape still to come
		uVal        rune
		decoded     int // the string's decoded length so far
		safe        int // len(str) at the last point the string may be cut
		read        int64
		stack       []byte // '{' or '[' of each open container
		wantKey     bool   // in an object, before a key
		lastKey     string // the last key read in the top-level object
		strIsTopKey bool
		strIsTopVal bool
	)
	for {
		b, err := br.ReadByte()
		if err == io.EOF {
			break
		}
		if err != nil {
			return res, err
		}
		if read++; read > maxIn {
			return res, fmt.Errorf("%w: over %s", errHookInputTooLarge, sizeText(maxIn))
		}
		if !inStr {
			switch b {
			case '"':
				inStr, esc, uLeft, decoded, safe, str = true, false, 0, 0, 0, str[:0]
				strIsTopKey = len(stack) == 1 && stack[0] == '{' && wantKey
				strIsTopVal = len(stack) == 1 && stack[0] == '{' && !wantKey
				continue
			case '{', '[':
				stack = append(stack, b)
				wantKey = b == '{'
			case '}', ']':
				if len(stack) > 0 {
					stack = stack[:len(stack)-1]
				}
				wantKey = false
			case ',':
				wantKey = len(stack) > 0 && stack[len(stack)-1] == '{'
			case ':':
				wantKey = false
			case ' ', '\t', '\n', '\r':
				continue // insignificant
			}
			out = append(out, b)
			if len(out) > maxOut {
				return res, fmt.Errorf("%w: over %s even with its long strings cut", errHookInputTooLarge, sizeText(int64(maxOut)))
			}
			continue
		}
		// Inside a string.
		clean := !esc && uLeft == 0
		switch {
		case uLeft > 0:
			uLeft--
			if v, err := strconv.ParseUint(string(b), 16, 8); err == nil {
				uVal = uVal<<4 | rune(v)
			}
			if uLeft == 0 {
				switch {
				case uVal >= 0xD800 && uVal < 0xDC00:
					decoded += 4 // with the low surrogate that follows
				case uVal >= 0xDC00 && uVal < 0xE000:
				default:
					decoded += utf8.RuneLen(uVal)
				}
			}
		case esc:
			esc = false
			if b == 'u' {
				uLeft, uVal = 4, 0
			} else {
				decoded++
			}
		case b == '\\':
			esc = true
		case b == '"':
			inStr = false
			if len(str) <= maxStr {
				out = append(append(append(out, '"'), str...), '"')
			} else {
				out = append(append(append(out, '"'), str[:safe]...), '"')
				if strIsTopVal {
					res.cut[lastKey] = decoded
				}
			}
			if strIsTopKey {
				lastKey = string(str)
			}
			if len(out) > maxOut {
				return res, fmt.Errorf("%w: over %s even with its long strings cut", errHookInputTooLarge, sizeText(int64(maxOut)))
			}
			continue
		default:
			decoded++
		}
		if len(str) <= maxStr {
			if clean && b&0xC0 != 0x80 {
				safe = len(str) // before a character or an escape
			}
			str = append(str, b)
		}
	}
	if inStr { // cut short: leave it to the decoder to say so
		out = append(append(out, '"'), str[:min(len(str), maxStr)]...)
	}
	res.data = out
	return res, nil
}

// fixCutNote corrects the cut of text, a prompt that shrinkJSON had cut
// before and ckpt.CutText cut again: the note counts the bytes dropped
// from the whole prompt, of total bytes, and leaves room for its digits.
func fixCutNote(text string, total int) string {
	i := strings.LastIndex(text, "\n[... ")
	if i < 0 {
		return text
	}
	return ckpt.CutTextOf(text[:i], total)
}

// sizeText says n bytes in MiB.
func sizeText(n int64) string {
	return fmt.Sprintf("%d MiB", n>>20)
}
