package turnctl

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"unicode/utf8"
)

// File names are bytes, not text, and a JSON string is text:
// encoding/json writes each byte that is not UTF-8 as U+FFFD, so a name
// holding one would reach the daemon as another name. The control
// protocol, every --json output and the timeline page's API therefore
// write such a byte as a lone low surrogate escape, "\udc80" to "\udcff"
// for the bytes 0x80 to 0xff, and read such an escape back as the byte:
// the convention of Python's surrogateescape (PEP 383), so json.loads
// then os.fsencode gives a script the exact bytes, and a browser's
// JSON.stringify sends back the string it was given. Valid UTF-8 is
// written as encoding/json writes it (without HTML escapes), and a lone
// low surrogate escape outside 0xdc80–0xdcff, which no byte gives, reads
// as U+FFFD as before.
//
// Marshal and Unmarshal do this for every string a value holds, in
// exported fields, slices, arrays, maps (keys too), pointers and
// interfaces, including those a type's own MarshalJSON writes from its
// exported fields.

// escapeRune marks, inside a Go string between the rewrite and
// encoding/json, an escaped byte ("\ufdd0" + two hex digits) or the rune
// itself ("\ufdd0_"). It is a noncharacter: a name may still hold it, and
// then it is escaped like a byte.
const escapeRune = '\ufdd0'

var escapeUTF8 = []byte(string(escapeRune))

// Marshal is json.Marshal (without HTML escapes) that keeps a string's
// bytes that are not UTF-8 as "\udcXX" escapes.
func Marshal(v any) ([]byte, error) {
	data, err := marshal(v)
	if err != nil || !bytes.Contains(data, []byte(`\ufffd`)) {
		// encoding/json writes `\ufffd` only for a byte that is not
		// UTF-8 (a real U+FFFD is written as itself).
		return data, err
	}
	c, _ := mapStrings(reflect.ValueOf(v), markBytes)
	if data, err = marshal(c.Interface()); err != nil {
		return nil, err
	}
	return unmarkJSON(data), nil
}

// MarshalIndent is Marshal with json.MarshalIndent's layout.
func MarshalIndent(v any, prefix, indent string) ([]byte, error) {
	data, err := Marshal(v)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if err := json.Indent(&b, data, prefix, indent); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// Unmarshal is json.Unmarshal that reads "\udc80"–"\udcff" escapes back
// as the bytes Marshal wrote them for.
func Unmarshal(data []byte, v any) error {
	return unmarshal(data, v, false)
}

// errMoreThanOne is UnmarshalStrict's error for a body holding more than
// one JSON value.
var errMoreThanOne = errors.New("more than one JSON value")

// UnmarshalStrict is Unmarshal that refuses unknown fields and anything
// after the one JSON value.
func UnmarshalStrict(data []byte, v any) error {
	return unmarshal(data, v, true)
}

func unmarshal(data []byte, v any, strict bool) error {
	marked, changed := markJSON(data)
	dec := json.NewDecoder(bytes.NewReader(marked))
	if strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		return err
	}
	if strict && dec.More() {
		return errMoreThanOne
	}
	if changed {
		rv := reflect.ValueOf(v)
		if rv.Kind() == reflect.Pointer && !rv.IsNil() {
			if c, ok := mapStrings(rv.Elem(), unmarkBytes); ok {
				rv.Elem().Set(c)
			}
		}
	}
	return nil
}

const hexDigits = "0123456789abcdef"

// markBytes rewrites s, when it is not valid UTF-8 or holds escapeRune,
// with each such byte and rune marked.
func markBytes(s string) (string, bool) {
	if utf8.ValidString(s) && !strings.ContainsRune(s, escapeRune) {
		return s, false
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			b.WriteRune(escapeRune)
			b.WriteByte(hexDigits[s[i]>>4])
			b.WriteByte(hexDigits[s[i]&0xf])
		case r == escapeRune:
			b.WriteRune(escapeRune)
			b.WriteByte('_')
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String(), true
}

// unmarkBytes undoes markBytes.
func unmarkBytes(s string) (string, bool) {
	if !strings.ContainsRune(s, escapeRune) {
		return s, false
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		if !strings.HasPrefix(s[i:], string(escapeRune)) {
			b.WriteByte(s[i])
			i++
			continue
		}
		rest := s[i+len(escapeUTF8):]
		if len(rest) >= 1 && rest[0] == '_' {
			b.WriteRune(escapeRune)
			i += len(escapeUTF8) + 1
		} else if len(rest) >= 2 && isHex(rest[0]) && isHex(rest[1]) {
			b.WriteByte(unhex(rest[0])<<4 | unhex(rest[1]))
			i += len(escapeUTF8) + 2
		} else {
			b.WriteRune(escapeRune)
			i += len(escapeUTF8)
		}
	}
	return b.String(), true
}

// unmarkJSON turns the marks in JSON text written from markBytes' strings
// into "\udcXX" escapes and escapeRune itself.
func unmarkJSON(data []byte) []byte {
	var out []byte
	for {
		i := bytes.Index(data, escapeUTF8)
		if i < 0 {
			return append(out, data...)
		}
		out = append(out, data[:i]...)
		rest := data[i+len(escapeUTF8):]
		switch {
		case len(rest) >= 1 && rest[0] == '_':
			out = append(out, escapeUTF8...)
			data = rest[1:]
		case len(rest) >= 2 && isHex(rest[0]) && isHex(rest[1]):
			out = append(out, `\udc`...)
			out = append(out, rest[0], rest[1])
			data = rest[2:]
		default:
			out = append(out, escapeUTF8...)
			data = rest
		}
	}
}

// markJSON rewrites, inside the strings of JSON text, each lone
// "\udc80"–"\udcff" escape as the byte's mark and each escapeRune (raw or
// escaped) as its own mark, for unmarkBytes to undo after decoding. It
// reports whether it changed anything; text it cannot follow is left for
// the decoder to refuse.
func markJSON(data []byte) ([]byte, bool) {
	if !bytes.Contains(data, []byte(`\u`)) && !bytes.Contains(data, escapeUTF8) {
		return data, false
	}
	var out []byte
	changed := false
	inString := false
	highBefore := false // the escape just before was a high surrogate
	for i := 0; i < len(data); {
		c := data[i]
		if !inString {
			if c == '"' {
				inString = true
			}
			out = append(out, c)
			i++
			continue
		}
		switch {
		case c == '"':
			inString, highBefore = false, false
			out = append(out, c)
			i++
		case c == '\\' && i+1 < len(data) && data[i+1] == 'u' && i+6 <= len(data) && allHex(data[i+2:i+6]):
			r := rune(unhex(data[i+2]))<<12 | rune(unhex(data[i+3]))<<8 | rune(unhex(data[i+4]))<<4 | rune(unhex(data[i+5]))
			switch {
			case r >= 0xdc80 && r <= 0xdcff && !highBefore:
				out = append(out, escapeUTF8...)
				out = append(out, hexDigits[r>>4&0xf], hexDigits[r&0xf])
				changed = true
			case r == escapeRune:
				out = append(out, escapeUTF8...)
				out = append(out, '_')
				changed = true
			default:
				out = append(out, data[i:i+6]...)
			}
			highBefore = r >= 0xd800 && r <= 0xdbff
			i += 6
		case c == '\\' && i+1 < len(data):
			out = append(out, c, data[i+1])
			highBefore = false
			i += 2
		case bytes.HasPrefix(data[i:], escapeUTF8):
			out = append(out, escapeUTF8...)
			out = append(out, '_')
			changed = true
			highBefore = false
			i += len(escapeUTF8)
		default:
			out = append(out, c)
			highBefore = false
			i++
		}
	}
	return out, changed
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func allHex(b []byte) bool {
	for _, c := range b {
		if !isHex(c) {
			return false
		}
	}
	return true
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c >= 'a':
		return c - 'a' + 10
	default:
		return c - 'A' + 10
	}
}

// mapStrings returns a copy of v with f applied to every string it holds
// (see the file's comment for where it looks), and whether f changed any;
// v itself is not changed, and a part nothing changed in is shared.
func mapStrings(v reflect.Value, f func(string) (string, bool)) (reflect.Value, bool) {
	switch v.Kind() {
	case reflect.String:
		s, ok := f(v.String())
		if !ok {
			return v, false
		}
		c := reflect.New(v.Type()).Elem()
		c.SetString(s)
		return c, true
	case reflect.Pointer:
		if v.IsNil() {
			return v, false
		}
		e, ok := mapStrings(v.Elem(), f)
		if !ok {
			return v, false
		}
		c := reflect.New(v.Type().Elem())
		c.Elem().Set(e)
		return c, true
	case reflect.Interface:
		if v.IsNil() {
			return v, false
		}
		e, ok := mapStrings(v.Elem(), f)
		if !ok {
			return v, false
		}
		c := reflect.New(v.Type()).Elem()
		c.Set(e)
		return c, true
	case reflect.Struct:
		var c reflect.Value
		t := v.Type()
		for i := 0; i < t.NumField(); i++ {
			if !t.Field(i).IsExported() {
				continue
			}
			e, ok := mapStrings(v.Field(i), f)
			if !ok {
				continue
			}
			if !c.IsValid() {
				c = reflect.New(t).Elem()
				c.Set(v)
			}
			c.Field(i).Set(e)
		}
		if !c.IsValid() {
			return v, false
		}
		return c, true
	case reflect.Slice, reflect.Array:
		if !mayHoldStrings(v.Type().Elem()) || v.Kind() == reflect.Slice && v.IsNil() {
			return v, false
		}
		var c reflect.Value
		for i := 0; i < v.Len(); i++ {
			e, ok := mapStrings(v.Index(i), f)
			if !ok {
				continue
			}
			if !c.IsValid() {
				if v.Kind() == reflect.Slice {
					c = reflect.MakeSlice(v.Type(), v.Len(), v.Len())
					reflect.Copy(c, v)
				} else {
					c = reflect.New(v.Type()).Elem()
					c.Set(v)
				}
			}
			c.Index(i).Set(e)
		}
		if !c.IsValid() {
			return v, false
		}
		return c, true
	case reflect.Map:
		if v.IsNil() {
			return v, false
		}
		changed := false
		c := reflect.MakeMapWithSize(v.Type(), v.Len())
		for it := v.MapRange(); it.Next(); {
			k, kok := mapStrings(it.Key(), f)
			e, eok := mapStrings(it.Value(), f)
			changed = changed || kok || eok
			c.SetMapIndex(k, e)
		}
		if !changed {
			return v, false
		}
		return c, true
	}
	return v, false
}

// mayHoldStrings reports whether a value of type t may hold a string.
func mayHoldStrings(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128:
		return false
	}
	return true
}
