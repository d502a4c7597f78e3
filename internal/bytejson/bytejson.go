// Package bytejson is encoding/json for values whose strings are bytes:
// file names, and the labels and program names made of them.
//
// A JSON string is Unicode text, and encoding/json writes each byte of a
// string that is not part of valid UTF-8 as U+FFFD, so that a file named
// caf\xe9.txt would come back as another name. Marshal writes such a byte
// as a lone low surrogate escape, "\udc80" to "\udcff" for the bytes 0x80
// to 0xff, and Unmarshal reads such an escape back as the byte: the
// convention of Python's surrogateescape (PEP 383), so that a script's
// os.fsencode(json.loads(...)) gives the bytes, and a browser's
// JSON.stringify sends back the string it was given. Valid UTF-8 is
// written as encoding/json writes it (without HTML escapes); a lone low
// surrogate escape outside 0xdc80–0xdcff, which no byte gives, reads as
// U+FFFD, as before.
//
// Marshal and Unmarshal do so for the strings encoding/json sees: in
// exported fields not tagged "-" (also those promoted from an embedded
// struct, though not through an embedded pointer to an unexported struct
// type), slices, arrays, maps (keys too), pointers and interfaces, and in
// the exported fields a type's own MarshalJSON or UnmarshalJSON passes to
// encoding/json. A type that writes itself without a replaced byte keeps
// its bytes its own way (base64, say) and is left as it is, as is one
// that read itself without an escape. A json.RawMessage is written as it
// is and read with its escapes as they came.
package bytejson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"unicode/utf8"
)

// Between the rewrite of a value's strings and encoding/json, a byte that
// is not UTF-8 is carried as a marker rune followed by two hex digits.
// The marker is a noncharacter that neither the JSON text nor the strings
// hold: any of these would do.
const (
	firstMarker = '\ufdd0'
	lastMarker  = '\ufdef'
)

const hexDigits = "0123456789abcdef"

// Marshal is json.Marshal, without HTML escapes, that writes a string's
// bytes that are not UTF-8 as "\udcXX" escapes.
func Marshal(v any) ([]byte, error) {
	data, err := marshal(v)
	if err != nil || !replacedBytes(data) {
		return data, err
	}
	// Every valid rune of every string encoding/json wrote is in data as
	// itself: a marker data lacks is in none of them.
	m, ok := pickMarker(func(r rune) bool { return bytes.ContainsRune(data, r) })
	if !ok {
		return data, nil
	}
	w := walker{f: func(s string) (string, bool) { return markBytes(s, m) }}
	c, _ := w.copy(reflect.ValueOf(v))
	if data, err = marshal(c.Interface()); err != nil {
		return nil, err
	}
	data, _ = unmarkEscapes(data, m)
	return data, nil
}

// replacedBytes reports whether JSON text written by encoding/json holds
// a "\ufffd" escape: it writes one only for a byte that is not UTF-8 (a
// real U+FFFD is written as itself). A name holding the six characters
// \ufffd is written "\\ufffd": an escape only where an even number of
// backslashes come before it.
func replacedBytes(data []byte) bool {
	for i := 0; ; {
		j := bytes.Index(data[i:], []byte(`\ufffd`))
		if j < 0 {
			return false
		}
		at := i + j
		n := 0
		for at-n-1 >= 0 && data[at-n-1] == '\\' {
			n++
		}
		if n%2 == 0 {
			return true
		}
		i = at + 1
	}
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

// UnmarshalStrict is Unmarshal that refuses unknown fields (and, as
// Unmarshal does, anything after the one JSON value).
func UnmarshalStrict(data []byte, v any) error {
	return unmarshal(data, v, true)
}

func unmarshal(data []byte, v any, strict bool) error {
	rv := reflect.ValueOf(v)
	var m rune
	if holdsLowSurrogateEscape(data) {
		// A marker neither the text (as itself or escaped) nor a string v
		// already holds has.
		held := map[rune]bool{}
		if rv.Kind() == reflect.Pointer && !rv.IsNil() {
			seen := walker{f: func(s string) (string, bool) {
				for _, r := range s {
					if r >= firstMarker && r <= lastMarker {
						held[r] = true
					}
				}
				return s, false
			}}
			seen.inPlace(rv.Elem())
		}
		lower := bytes.ToLower(data)
		m, _ = pickMarker(func(r rune) bool { return held[r] || containsRuneOrEscape(lower, r) })
	}
	marked, changed := data, false
	if m != 0 {
		marked, changed = markJSON(data, m)
	}
	var err error
	if strict {
		dec := json.NewDecoder(bytes.NewReader(marked))
		dec.DisallowUnknownFields()
		if err = dec.Decode(v); err == nil {
			if _, terr := dec.Token(); terr != io.EOF {
				err = errors.New("more than one JSON value")
			}
		}
	} else {
		err = json.Unmarshal(marked, v)
	}
	if err != nil {
		if changed {
			// An unknown field's name, say: encoding/json quotes it
			// with %q, which escapes the marker.
			msg := strings.ReplaceAll(err.Error(), fmt.Sprintf(`\u%04x`, m), string(m))
			return errors.New(unmarkText(msg, m, `\x`))
		}
		return err
	}
	if changed && rv.Kind() == reflect.Pointer && !rv.IsNil() {
		w := walker{
			f:    func(s string) (string, bool) { return unmarkBytes(s, m) },
			mark: m,
		}
		w.inPlace(rv.Elem())
	}
	return nil
}

// pickMarker returns the first marker rune not taken.
func pickMarker(taken func(rune) bool) (rune, bool) {
	for r := rune(firstMarker); r <= lastMarker; r++ {
		if !taken(r) {
			return r, true
		}
	}
	return 0, false
}

// holdsLowSurrogateEscape reports whether JSON text holds a "\udcXX"
// escape, in any case: one a byte may have been written as.
func holdsLowSurrogateEscape(data []byte) bool {
	for i := 0; ; {
		j := bytes.Index(data[i:], []byte(`\u`))
		if j < 0 {
			return false
		}
		i += j + 2
		if i+2 <= len(data) && data[i]|0x20 == 'd' && data[i+1]|0x20 == 'c' {
			return true
		}
	}
}

// containsRuneOrEscape reports whether JSON text, lowercased, holds r as
// itself or as a \u escape.
func containsRuneOrEscape(lower []byte, r rune) bool {
	esc := []byte{'\\', 'u', hexDigits[r>>12&0xf], hexDigits[r>>8&0xf], hexDigits[r>>4&0xf], hexDigits[r&0xf]}
	return bytes.ContainsRune(lower, r) || bytes.Contains(lower, esc)
}

// markBytes rewrites each byte of s that is not UTF-8 as marker m and its
// two hex digits.
func markBytes(s string, m rune) (string, bool) {
	if utf8.ValidString(s) {
		return s, false
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			b.WriteRune(m)
			b.WriteByte(hexDigits[s[i]>>4])
			b.WriteByte(hexDigits[s[i]&0xf])
		} else {
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String(), true
}

// unmarkBytes undoes markBytes.
func unmarkBytes(s string, m rune) (string, bool) {
	if !strings.ContainsRune(s, m) {
		return s, false
	}
	return unmarkText(s, m, ""), true
}

// unmarkText replaces each marker m and its two hex digits in s with the
// byte, or with prefix and the digits when prefix is not "".
func unmarkText(s string, m rune, prefix string) string {
	mark := string(m)
	var b strings.Builder
	for {
		i := strings.Index(s, mark)
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i])
		rest := s[i+len(mark):]
		if len(rest) < 2 || !isHex(rest[0]) || !isHex(rest[1]) {
			b.WriteString(mark)
			s = rest
			continue
		}
		if prefix != "" {
			b.WriteString(prefix)
			b.WriteString(rest[:2])
		} else {
			b.WriteByte(unhex(rest[0])<<4 | unhex(rest[1]))
		}
		s = rest[2:]
	}
}

// unmarkEscapes turns the marks in JSON text (what Marshal wrote from
// markBytes' strings, or a json.RawMessage read from marked text) into
// the "\udcXX" escapes they stand for.
func unmarkEscapes(b []byte, m rune) ([]byte, bool) {
	if !bytes.ContainsRune(b, m) {
		return b, false
	}
	return []byte(unmarkText(string(b), m, `\udc`)), true
}

// markJSON rewrites, inside the strings of JSON text, each lone
// "\udc80"–"\udcff" escape as marker m and the byte's two hex digits, for
// unmarkBytes to undo after decoding. It reports whether it changed
// anything; text it cannot follow is left for the decoder to refuse.
func markJSON(data []byte, m rune) ([]byte, bool) {
	var out []byte
	changed := false
	inString := false
	highBefore := false // the escape just before was a high surrogate
	for i := 0; i < len(data); {
		c := data[i]
		switch {
		case !inString:
			inString = c == '"'
			out = append(out, c)
			i++
		case c == '"':
			inString, highBefore = false, false
			out = append(out, c)
			i++
		case c == '\\' && i+6 <= len(data) && data[i+1] == 'u' && allHex(data[i+2:i+6]):
			r := rune(unhex(data[i+2]))<<12 | rune(unhex(data[i+3]))<<8 | rune(unhex(data[i+4]))<<4 | rune(unhex(data[i+5]))
			if r >= 0xdc80 && r <= 0xdcff && !highBefore {
				out = utf8.AppendRune(out, m)
				out = append(out, hexDigits[r>>4&0xf], hexDigits[r&0xf])
				changed = true
			} else {
				out = append(out, data[i:i+6]...)
			}
			highBefore = r >= 0xd800 && r <= 0xdbff
			i += 6
		case c == '\\' && i+1 < len(data):
			out = append(out, c, data[i+1])
			highBefore = false
			i += 2
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

// walker applies f to the strings of a value that encoding/json sees, by
// the package's rules (and, after a decode, unmarks its json.RawMessages).
type walker struct {
	f func(string) (string, bool)
	// on are the pointers being walked: a cycle through one stops there
	// (encoding/json refuses a cycle it sees; one through a field it does
	// not see is no concern of the walk).
	on map[pointer]bool
	// mark, after a decode: the marker the text was given (0 otherwise).
	mark rune
}

// pointer is a pointer as the walk knows it: a struct and its first
// field share an address, not a type.
type pointer struct {
	t reflect.Type
	p uintptr
}

var marshalerType = reflect.TypeFor[json.Marshaler]()

var rawMessageType = reflect.TypeFor[json.RawMessage]()

// visible reports whether encoding/json sees struct field sf, or (for an
// embedded struct of an unexported type) the fields it promotes.
func visible(sf reflect.StructField) bool {
	if sf.Tag.Get("json") == "-" {
		return false
	}
	if sf.IsExported() {
		return true
	}
	return sf.Anonymous && sf.Type.Kind() == reflect.Struct
}

// enter marks pointer p as being walked; false if it already is.
func (w *walker) enter(p reflect.Value) bool {
	if w.on == nil {
		w.on = map[pointer]bool{}
	}
	k := pointer{p.Type(), p.Pointer()}
	if w.on[k] {
		return false
	}
	w.on[k] = true
	return true
}

func (w *walker) leave(p reflect.Value) { delete(w.on, pointer{p.Type(), p.Pointer()}) }

// keepsItsBytes reports whether v writes itself (json.Marshaler) and
// writes no byte as U+FFFD: it keeps its bytes its own way (the store's
// events carry names as base64), and its strings must not be rewritten
// before it reads them.
func keepsItsBytes(v reflect.Value) bool {
	if !v.CanInterface() {
		return false
	}
	switch {
	case v.Type().Implements(marshalerType):
	case v.CanAddr() && reflect.PointerTo(v.Type()).Implements(marshalerType):
		v = v.Addr() // encoding/json calls a pointer method where it can
	default:
		return false
	}
	if v.Kind() == reflect.Pointer && v.IsNil() {
		return true
	}
	data, err := json.Marshal(v.Interface())
	return err == nil && !replacedBytes(data)
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// readItsBytes reports whether v read itself (json.Unmarshaler) and
// holds no mark where it writes itself back: what it holds it read its
// own way (base64, say), not from the marked text, and must stay as it is.
func (w *walker) readItsBytes(v reflect.Value) bool {
	if w.mark == 0 || !v.CanAddr() || !v.CanInterface() || !reflect.PointerTo(v.Type()).Implements(unmarshalerType) {
		return false
	}
	data, err := json.Marshal(v.Addr().Interface())
	return err == nil && !bytes.ContainsRune(data, w.mark)
}

// copy returns a copy of v with f applied, and whether f changed any
// string; v and what it points to are not changed, and a part nothing
// changed in is shared with v.
func (w *walker) copy(v reflect.Value) (reflect.Value, bool) {
	if v.Type() == rawMessageType {
		if w.mark == 0 {
			return v, false
		}
		b, ok := unmarkEscapes(v.Bytes(), w.mark)
		if !ok {
			return v, false
		}
		c := reflect.New(v.Type()).Elem()
		c.SetBytes(b)
		return c, true
	}
	if keepsItsBytes(v) {
		return v, false
	}
	switch v.Kind() {
	case reflect.String:
		s, ok := w.f(v.String())
		if !ok {
			return v, false
		}
		c := reflect.New(v.Type()).Elem()
		c.SetString(s)
		return c, true
	case reflect.Pointer:
		if v.IsNil() || !w.enter(v) {
			return v, false
		}
		defer w.leave(v)
		e, ok := w.copy(v.Elem())
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
		e, ok := w.copy(v.Elem())
		if !ok {
			return v, false
		}
		c := reflect.New(v.Type()).Elem()
		c.Set(e)
		return c, true
	case reflect.Struct:
		var c reflect.Value
		copied := func() reflect.Value {
			if !c.IsValid() {
				c = reflect.New(v.Type()).Elem()
				c.Set(v)
			}
			return c
		}
		if !w.copyFields(v, copied) {
			return v, false
		}
		return c, true
	case reflect.Slice, reflect.Array:
		if !mayHoldStrings(v.Type().Elem()) || v.Kind() == reflect.Slice && v.IsNil() {
			return v, false
		}
		var c reflect.Value
		for i := 0; i < v.Len(); i++ {
			e, ok := w.copy(v.Index(i))
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
			k, kok := w.copy(it.Key())
			e, eok := w.copy(it.Value())
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

// copyFields applies f to the fields of struct v that encoding/json sees,
// and sets those it changed in dst(), a copy of v made at the first call.
// An embedded struct of an unexported type, which cannot be read or set
// whole, is walked field by field.
func (w *walker) copyFields(v reflect.Value, dst func() reflect.Value) bool {
	changed := false
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		switch {
		case !visible(sf):
		case !sf.IsExported():
			if w.copyFields(v.Field(i), func() reflect.Value { return dst().Field(i) }) {
				changed = true
			}
		default:
			if e, ok := w.copy(v.Field(i)); ok {
				dst().Field(i).Set(e)
				changed = true
			}
		}
	}
	return changed
}

// inPlace applies f to the strings of v, an addressable value, where they
// are: a pointer, map or slice v shares with others has them changed too.
func (w *walker) inPlace(v reflect.Value) {
	if w.readItsBytes(v) {
		return
	}
	switch v.Kind() {
	case reflect.String:
		if s, ok := w.f(v.String()); ok && v.CanSet() {
			v.SetString(s)
		}
	case reflect.Pointer:
		if v.IsNil() || !w.enter(v) {
			return
		}
		defer w.leave(v)
		w.inPlace(v.Elem())
	case reflect.Interface:
		if v.IsNil() {
			return
		}
		if e := v.Elem(); sharesItsStrings(e) {
			w.inPlace(e)
		} else if c, ok := w.copy(e); ok && v.CanSet() {
			v.Set(c)
		}
	case reflect.Struct:
		t := v.Type()
		for i := 0; i < t.NumField(); i++ {
			if visible(t.Field(i)) {
				w.inPlace(v.Field(i))
			}
		}
	case reflect.Slice, reflect.Array:
		if v.Type() == rawMessageType {
			if w.mark != 0 && v.CanSet() {
				if b, ok := unmarkEscapes(v.Bytes(), w.mark); ok {
					v.SetBytes(b)
				}
			}
			return
		}
		if !mayHoldStrings(v.Type().Elem()) {
			return
		}
		for i := 0; i < v.Len(); i++ {
			w.inPlace(v.Index(i))
		}
	case reflect.Map:
		if v.IsNil() {
			return
		}
		type entry struct{ k, e reflect.Value }
		var changed []entry
		for it := v.MapRange(); it.Next(); {
			k, kok := w.copy(it.Key())
			e := it.Value()
			if sharesItsStrings(e) {
				w.inPlace(e)
				if kok {
					changed = append(changed, entry{k, e})
				}
			} else {
				c, eok := w.copy(e)
				if kok || eok {
					changed = append(changed, entry{k, c})
				}
			}
			if kok {
				v.SetMapIndex(it.Key(), reflect.Value{})
			}
		}
		for _, c := range changed {
			v.SetMapIndex(c.k, c.e)
		}
	}
}

// sharesItsStrings reports whether v, not addressable itself, reaches
// strings inPlace can change where they are (through a pointer, a map or
// a slice's elements).
func sharesItsStrings(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Pointer, reflect.Map:
		return true
	case reflect.Slice:
		return v.Type() != rawMessageType
	}
	return false
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
