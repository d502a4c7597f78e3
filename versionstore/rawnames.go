package versionstore

import (
	"encoding/json"
	"slices"
	"unicode/utf8"
)

// File names are bytes, not text: a name may hold invalid UTF-8, which
// encoding/json would silently replace with U+FFFD, so that history would
// name (and a rewind recreate) a different file. A record whose path,
// destination or symlink target is not valid UTF-8 therefore carries it as
// raw bytes (base64 in the JSON) beside an empty string, and one with a
// link name that is not carries all its link names so, in place of Links.

type recordJSON record

type recordWire struct {
	*recordJSON
	RawPath   []byte   `json:"pb,omitempty"`
	RawTo     []byte   `json:"qb,omitempty"`
	RawTarget []byte   `json:"sb,omitempty"`
	RawLinks  [][]byte `json:"lb,omitempty"`
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
	if slices.ContainsFunc(c.Links, func(l string) bool { return !utf8.ValidString(l) }) {
		for _, l := range c.Links {
			w.RawLinks = append(w.RawLinks, []byte(l))
		}
		c.Links = nil
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
	if w.RawLinks != nil {
		r.Links = make([]string, len(w.RawLinks))
		for i, l := range w.RawLinks {
			r.Links[i] = string(l)
		}
	}
	return nil
}
