package agenthooks

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// A small JSON editor that changes a settings file in place, by byte
// offsets, so that everything it does not touch keeps its bytes: key
// order, indentation, comments (Gemini CLI's settings.json may hold // and
// /* */ comments) and the final newline. encoding/json would re-encode the
// whole file.
//
// Insertions go after the last member or element, as
//
//	<value end of the previous one>,\n<indent>"key": value
//
// (with "\r\n" for "\n" in a file whose lines end so), and removing the
// last member deletes exactly that span again, so an install followed by
// an uninstall gives back the original bytes.

// node is one JSON value: its bytes are doc[start:end].
type node struct {
	kind       byte // '{', '[', '"', or 'v' (number, true, false, null)
	start, end int
	members    []member // kind '{'
	elems      []*node  // kind '['
}

type member struct {
	key      string
	keyStart int
	val      *node
}

func (n *node) member(key string) (int, *node) {
	for i, m := range n.members {
		if m.key == key {
			return i, m.val
		}
	}
	return -1, nil
}

// parseDoc parses doc, which must hold one JSON object.
func parseDoc(doc []byte) (*node, error) {
	p := &parser{doc: doc}
	p.space()
	n, err := p.value(0)
	if err != nil {
		return nil, err
	}
	p.space()
	if p.err != nil {
		return nil, p.err
	}
	if p.pos != len(doc) {
		return nil, p.errorf("unexpected %q after the top-level value", doc[p.pos])
	}
	if n.kind != '{' {
		return nil, fmt.Errorf("the file does not hold a JSON object")
	}
	return n, nil
}

type parser struct {
	doc []byte
	pos int
	err error
}

func (p *parser) errorf(format string, args ...any) error {
	line := 1 + bytes.Count(p.doc[:min(p.pos, len(p.doc))], []byte("\n"))
	return fmt.Errorf("line %d: %s", line, fmt.Sprintf(format, args...))
}

// space skips white space and comments.
func (p *parser) space() {
	for p.pos < len(p.doc) {
		switch c := p.doc[p.pos]; {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			p.pos++
		case c == '/' && p.pos+1 < len(p.doc) && p.doc[p.pos+1] == '/':
			for p.pos < len(p.doc) && p.doc[p.pos] != '\n' {
				p.pos++
			}
		case c == '/' && p.pos+1 < len(p.doc) && p.doc[p.pos+1] == '*':
			end := bytes.Index(p.doc[p.pos+2:], []byte("*/"))
			if end < 0 {
				p.err = p.errorf("unterminated comment")
				p.pos = len(p.doc)
				return
			}
			p.pos += 2 + end + 2
		default:
			return
		}
	}
}

func (p *parser) value(depth int) (*node, error) {
	if depth > 100 {
		return nil, p.errorf("nested too deeply")
	}
	if p.pos >= len(p.doc) {
		return nil, p.errorf("unexpected end of file")
	}
	n := &node{start: p.pos}
	switch c := p.doc[p.pos]; c {
	case '{':
		n.kind = '{'
		p.pos++
		for {
			p.space()
			if p.pos < len(p.doc) && p.doc[p.pos] == '}' && len(n.members) == 0 {
				break
			}
			keyStart := p.pos
			if p.pos >= len(p.doc) || p.doc[p.pos] != '"' {
				return nil, p.errorf("expected a key")
			}
			k, err := p.str()
			if err != nil {
				return nil, err
			}
			var key string
			if err := json.Unmarshal(p.doc[k.start:k.end], &key); err != nil {
				return nil, p.errorf("bad key: %v", err)
			}
			p.space()
			if p.pos >= len(p.doc) || p.doc[p.pos] != ':' {
				return nil, p.errorf("expected ':'")
			}
			p.pos++
			p.space()
			v, err := p.value(depth + 1)
			if err != nil {
				return nil, err
			}
			n.members = append(n.members, member{key: key, keyStart: keyStart, val: v})
			p.space()
			if p.pos < len(p.doc) && p.doc[p.pos] == ',' {
				p.pos++
				continue
			}
			break
		}
		if p.pos >= len(p.doc) || p.doc[p.pos] != '}' {
			return nil, p.errorf("expected ',' or '}'")
		}
		p.pos++
	case '[':
		n.kind = '['
		p.pos++
		for {
			p.space()
			if p.pos < len(p.doc) && p.doc[p.pos] == ']' && len(n.elems) == 0 {
				break
			}
			v, err := p.value(depth + 1)
			if err != nil {
				return nil, err
			}
			n.elems = append(n.elems, v)
			p.space()
			if p.pos < len(p.doc) && p.doc[p.pos] == ',' {
				p.pos++
				continue
			}
			break
		}
		if p.pos >= len(p.doc) || p.doc[p.pos] != ']' {
			return nil, p.errorf("expected ',' or ']'")
		}
		p.pos++
	case '"':
		return p.str()
	default:
		n.kind = 'v'
		for p.pos < len(p.doc) && !strings.ContainsRune(" \t\r\n,]}/", rune(p.doc[p.pos])) {
			p.pos++
		}
		if !json.Valid(p.doc[n.start:p.pos]) {
			return nil, p.errorf("bad value %q", p.doc[n.start:p.pos])
		}
	}
	if p.err != nil {
		return nil, p.err
	}
	n.end = p.pos
	return n, nil
}

func (p *parser) str() (*node, error) {
	n := &node{kind: '"', start: p.pos}
	p.pos++
	for p.pos < len(p.doc) {
		switch p.doc[p.pos] {
		case '\\':
			p.pos += 2
			continue
		case '"':
			p.pos++
			n.end = p.pos
			if !json.Valid(p.doc[n.start:n.end]) {
				return nil, p.errorf("bad string")
			}
			return n, nil
		case '\n':
			return nil, p.errorf("newline in a string")
		}
		p.pos++
	}
	return nil, p.errorf("unterminated string")
}

// layout is how a container's children are laid out: each on its own
// line with indent (multi-line), or all on one line.
type layout struct {
	multiline bool
	indent    string // of the children
	unit      string // one level of indentation
}

// lineIndent returns the white space that starts the line holding pos.
func lineIndent(doc []byte, pos int) string {
	ls := bytes.LastIndexByte(doc[:pos], '\n') + 1
	i := ls
	for i < pos && (doc[i] == ' ' || doc[i] == '\t') {
		i++
	}
	return string(doc[ls:i])
}

// layoutOf looks at the container n whose first child starts at first
// (-1: no children) to see how new children should be written.
func layoutOf(doc []byte, n *node, first int) layout {
	outer := lineIndent(doc, n.start)
	unit := "  "
	if first < 0 {
		return layout{multiline: true, indent: outer + unit, unit: unit}
	}
	if !bytes.Contains(doc[n.start:first], []byte("\n")) {
		return layout{}
	}
	in := lineIndent(doc, first)
	if strings.HasPrefix(in, outer) && len(in) > len(outer) {
		unit = in[len(outer):]
	}
	return layout{multiline: true, indent: in, unit: unit}
}

// encode writes v as JSON for a place with layout l.
func (l layout) encode(v any) (string, error) {
	var b []byte
	var err error
	if l.multiline {
		b, err = json.MarshalIndent(v, l.indent, l.unit)
	} else {
		b, err = json.Marshal(v)
	}
	if err != nil {
		return "", err
	}
	return jsonUnescape(string(b)), nil
}

// jsonUnescape undoes encoding/json's escaping of <, > and &, which JSON
// does not need and a person reading the file would wonder about.
func jsonUnescape(s string) string {
	return strings.NewReplacer(`\u003c`, "<", `\u003e`, ">", `\u0026`, "&").Replace(s)
}

func splice(doc []byte, from, to int, s string) []byte {
	out := make([]byte, 0, len(doc)-(to-from)+len(s))
	out = append(out, doc[:from]...)
	out = append(out, s...)
	return append(out, doc[to:]...)
}

// addMember adds "key": v as the last member of the object obj.
func addMember(doc []byte, obj *node, key string, v any) ([]byte, error) {
	first := -1
	if len(obj.members) > 0 {
		first = obj.members[0].keyStart
	}
	l := layoutOf(doc, obj, first)
	val, err := l.encode(v)
	if err != nil {
		return nil, err
	}
	k, _ := json.Marshal(key)
	eol := eolOf(doc)
	if len(obj.members) == 0 {
		return addFirst(doc, obj, string(k)+": "+val, l, eol), nil
	}
	sep := ", "
	if l.multiline {
		sep = ",\n" + l.indent
	}
	last := obj.members[len(obj.members)-1].val.end
	return splice(doc, last, last, withEOL(sep+string(k)+": "+val, eol)), nil
}

// addElem adds v as the last element of the array arr.
func addElem(doc []byte, arr *node, v any) ([]byte, error) {
	first := -1
	if len(arr.elems) > 0 {
		first = arr.elems[0].start
	}
	l := layoutOf(doc, arr, first)
	val, err := l.encode(v)
	if err != nil {
		return nil, err
	}
	eol := eolOf(doc)
	if len(arr.elems) == 0 {
		return addFirst(doc, arr, val, l, eol), nil
	}
	sep := ", "
	if l.multiline {
		sep = ",\n" + l.indent
	}
	last := arr.elems[len(arr.elems)-1].end
	return splice(doc, last, last, withEOL(sep+val, eol)), nil
}

// addFirst puts child, a member or element written for layout l, into
// the empty container n. Comments in it (a JSONC file's template of
// settings commented out: {\n  // "theme": "Default"\n}) stay, before
// the child; without any, the container becomes the child on its own
// line.
func addFirst(doc []byte, n *node, child string, l layout, eol string) []byte {
	inner := doc[n.start+1 : n.end-1]
	if len(bytes.TrimSpace(inner)) == 0 {
		outer := lineIndent(doc, n.start)
		return splice(doc, n.start+1, n.end-1, withEOL("\n"+l.indent+child+"\n"+outer, eol))
	}
	at := n.start + 1 + len(bytes.TrimRight(inner, " \t\r\n"))
	return splice(doc, at, at, withEOL("\n"+l.indent+child, eol))
}

// removeChild removes child i of the container n (its members or
// elements), with the separator before it (after it, for the first). The
// only child goes with the white space around it, and the container is
// left as addFirst found it: empty, or with its comments.
func removeChild(doc []byte, n *node, i int) []byte {
	starts, ends := n.childSpans()
	switch {
	case len(starts) == 1:
		before := doc[n.start+1 : starts[0]]
		if len(bytes.TrimSpace(before)) == 0 && len(bytes.TrimSpace(doc[ends[0]:n.end-1])) == 0 {
			return splice(doc, n.start+1, n.end-1, "")
		}
		from := n.start + 1 + len(bytes.TrimRight(before, " \t\r\n"))
		return splice(doc, from, ends[0], "")
	case i > 0:
		return splice(doc, ends[i-1], ends[i], "")
	default:
		return splice(doc, starts[0], starts[1], "")
	}
}

func (n *node) childSpans() (starts, ends []int) {
	for _, m := range n.members {
		starts, ends = append(starts, m.keyStart), append(ends, m.val.end)
	}
	for _, e := range n.elems {
		starts, ends = append(starts, e.start), append(ends, e.end)
	}
	return starts, ends
}
