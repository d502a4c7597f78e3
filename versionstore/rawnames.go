package versionstore

import (
	"encoding/json"
	"unicode/utf8"
)

// File names are bytes, not text: a name may hold invalid UTF-8, which
// encoding/json would silently replace with U+FFFD, so that history would
// name (and a rewind recreate) a different file. A record whose path,
// destination or symlink target is not valid UTF-8 therefore carries it as
// raw bytes (base64 in the JSON) beside an empty string.

type recordJSON record

type recordWire struct {
	*recordJSON
	RawPath   []byte `json:"pb,omitempty"`
	RawTo     []byte `json:"qb,omitempty"`
	RawTarget []byte `json:"sb,omitempty"`
}

func (r *record) MarshalJSON() ([]byte, error) {
	c := *r
	w := recordWire{recordJSON: (*recordJSON)(&c)}
	if !utf8.ValidString(c.Path) {
		w.RawPath, c.Path = []byte(c.Path), ""
	}
	if !utf8.ValidString(c.To) {
		w.RawTo, c.To = []byte(c.To), ""
	}
	if !utf8.ValidString(c.State.Target) {
		w.RawTarget, c.State.Target = []byte(c.State.Target), ""
	}
	return json.Marshal(w)
}

func (r *record) UnmarshalJSON(data []byte) error {
	w := recordWire{recordJSON: (*recordJSON)(r)}
	if err := json.Unmarshal(data, &w); err != nil {
		return err
	}
	if w.RawPath != nil {
		r.Path = string(w.RawPath)
	}
	if w.RawTo != nil {
		r.To = string(w.RawTo)
	}
	if w.RawTarget != nil {
		r.State.Target = string(w.RawTarget)
	}
	return nil
}
