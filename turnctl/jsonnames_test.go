package turnctl

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"ckptfs/internal/ckpt"
)

type namesProbe struct {
	Path  string            `json:"path"`
	Paths []string          `json:"paths,omitempty"`
	State *FileState        `json:"state,omitempty"`
	ByKey map[string]string `json:"by_key,omitempty"`
	Any   any               `json:"any,omitempty"`
	Arr   [2]string         `json:"arr"`
	Num   int               `json:"num"`
	Data  []byte            `json:"data,omitempty"`
	note  string
}

// Names that are not UTF-8 cross the wire byte for byte, in every place a
// reply holds one; valid names are written as encoding/json writes them.
func TestNamesKeepTheirBytesOnTheWire(t *testing.T) {
	names := []string{
		"plain.go", "bad\xff\xfename", "caf\xe9", "\x80", "\xed\xa0\x80", // an encoded surrogate
		"emoji \U0001F480", "real \ufffd", "mark \ufdd0 and \ufdd0_ and \ufdd0ff", "\ufdd0", "mark\ufdd0\xff",
		`back\slash \udc80`, "quote\"\n\x00", "", "<&>",
	}
	for _, n := range names {
		in := namesProbe{
			Path: n, Paths: []string{"ok", n}, State: &FileState{Type: ckpt.Symlink, Mode: "0777", Target: n},
			ByKey: map[string]string{n: n}, Any: []any{n}, Arr: [2]string{n, "x"}, Num: 7, Data: []byte(n), note: n,
		}
		data, err := Marshal(in)
		if err != nil {
			t.Fatalf("%q: %v", n, err)
		}
		if !utf8.Valid(data) {
			t.Errorf("%q: Marshal wrote invalid UTF-8: %q", n, data)
		}
		if utf8.ValidString(n) {
			want, _ := json.Marshal(in)
			var a, b any
			json.Unmarshal(want, &a)
			json.Unmarshal(data, &b)
			if !reflect.DeepEqual(a, b) {
				t.Errorf("%q: valid UTF-8 written as %s, encoding/json writes %s", n, data, want)
			}
		}
		var out namesProbe
		if err := Unmarshal(data, &out); err != nil {
			t.Fatalf("%q: Unmarshal %s: %v", n, data, err)
		}
		in.note = ""
		if n == "" {
			in.Data = nil // omitempty
		}
		if !reflect.DeepEqual(out, in) {
			t.Errorf("%q: round trip through %s gives %#v", n, data, out)
		}
	}
}

// The escapes are Python's surrogateescape: what a script reads with
// json.loads and os.fsencode, and what a browser's JSON.stringify sends.
func TestNamesEscapeAsLoneLowSurrogates(t *testing.T) {
	data, err := Marshal(map[string]string{"path": "a\xffb\x80\U0001F480"})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"path":"a\udcffb\udc80` + "\U0001F480" + `"}`; string(data) != want {
		t.Errorf("Marshal wrote %s, want %s", data, want)
	}
	for body, want := range map[string]string{
		`{"path":"a\udcffb\uDC80"}`:          "a\xffb\x80",
		`{"path":"\ud83d\udc80"}`:            "\U0001F480", // a pair is a character
		`{"path":"\\udc80"}`:                 `\udc80`,     // an escaped backslash
		`{"path":"\udc7f"}`:                  "\ufffd",     // no byte gives it
		`{"path":"x\ufdd0y", "other":"\ud"}`: "",           // malformed: refused
	} {
		var got struct {
			Path  string `json:"path"`
			Other string `json:"other"`
		}
		err := Unmarshal([]byte(body), &got)
		if want == "" {
			if err == nil {
				t.Errorf("%s: accepted", body)
			}
			continue
		}
		if err != nil || got.Path != want {
			t.Errorf("%s: %q %v, want %q", body, got.Path, err, want)
		}
	}
}

func TestUnmarshalStrictRefusesWhatTheServerRefused(t *testing.T) {
	var r CatRequest
	for _, body := range []string{`{"turn":"1","path":"a","x":1}`, `{"turn":"1","path":"a"} {}`, `{"turn":`} {
		if err := UnmarshalStrict([]byte(body), &r); err == nil {
			t.Errorf("%s: accepted", body)
		}
	}
	if err := UnmarshalStrict([]byte(`{"turn":"1","path":"a\udcff"}`), &r); err != nil || r.Path != "a\xff" {
		t.Errorf("strict: %q %v", r.Path, err)
	}
	if !strings.Contains(errMoreThanOne.Error(), "more than one") {
		t.Error(errMoreThanOne)
	}
}
