package bytejson

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// state has its own JSON methods over a type of exported fields, as
// turnctl.FileState does.
type state struct {
	Kind   int    `json:"-"`
	Target string `json:"target,omitempty"`
}

type stateJSON struct {
	Kind string `json:"kind"`
	stateFields
}

type stateFields state

func (s state) MarshalJSON() ([]byte, error) {
	return json.Marshal(stateJSON{strings.Repeat("k", s.Kind), stateFields(s)})
}

func (s *state) UnmarshalJSON(b []byte) error {
	var w stateJSON
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*s = state(w.stateFields)
	s.Kind = len(w.Kind)
	return nil
}

type inner struct {
	Name string `json:"name"`
}

type probe struct {
	inner
	Path   string            `json:"path"`
	Paths  []string          `json:"paths,omitempty"`
	State  *state            `json:"state,omitempty"`
	ByKey  map[string]string `json:"by_key,omitempty"`
	Any    any               `json:"any,omitempty"`
	Arr    [2]string         `json:"arr"`
	Num    int               `json:"num"`
	Data   []byte            `json:"data,omitempty"`
	Hidden string            `json:"-"`
	Parent *probe            `json:"-"`
	Kids   []*probe          `json:"kids,omitempty"`
	note   string
}

// Names that are not UTF-8 cross the wire byte for byte, in every place a
// value holds one that encoding/json writes; valid names are written as
// encoding/json writes them.
func TestStringsKeepTheirBytes(t *testing.T) {
	names := []string{
		"plain.go", "bad\xff\xfename", "caf\xe9", "\x80", "\xed\xa0\x80", // an encoded surrogate
		"emoji \U0001F480", "real \ufffd", "noncharacters \ufdd0ab \ufdd0_ \ufdefff", "\ufdd0", "mark\ufdd0\xff",
		`back\slash \udc80`, "quote\"\n\x00", "", "<&>",
	}
	for _, n := range names {
		in := &probe{
			inner: inner{n}, Path: n, Paths: []string{"ok", n}, State: &state{Kind: 2, Target: n},
			ByKey: map[string]string{n: n}, Any: []any{n}, Arr: [2]string{n, "x"}, Num: 7, Data: []byte(n + "!"),
			Hidden: n, note: n,
		}
		in.Kids = []*probe{{Path: n, Parent: in}} // a cycle encoding/json does not see
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
		var out probe
		if err := Unmarshal(data, &out); err != nil {
			t.Fatalf("%q: Unmarshal %s: %v", n, data, err)
		}
		want := *in
		want.Hidden, want.note = "", ""
		want.Kids = []*probe{{Path: n}}
		if !reflect.DeepEqual(out, want) {
			t.Errorf("%q: round trip through %s gives %#v", n, data, out)
		}
		if in.Path != n || in.Paths[1] != n || in.State.Target != n || in.ByKey[n] != n || in.Kids[0].Path != n || in.Hidden != n {
			t.Errorf("%q: Marshal changed the value it wrote: %#v", n, in)
		}
	}
}

// The escapes are Python's surrogateescape: what a script reads with
// json.loads and os.fsencode, and what a browser's JSON.stringify sends.
func TestBytesEscapeAsLoneLowSurrogates(t *testing.T) {
	data, err := Marshal(map[string]string{"path": "a\xffb\x80\U0001F480<"})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"path":"a\udcffb\udc80` + "\U0001F480" + `<"}`; string(data) != want {
		t.Errorf("Marshal wrote %s, want %s", data, want)
	}
	for body, want := range map[string]string{
		`{"path":"a\udcffb\uDC80"}`:            "a\xffb\x80",
		`{"path":"\ud83d\udc80"}`:              "\U0001F480", // a pair is a character
		`{"path":"\ud83d\ud83d\udc80"}`:        "\ufffd\U0001F480",
		`{"path":"\\udc80"}`:                   `\udc80`, // an escaped backslash
		`{"path":"\udc7f"}`:                    "\ufffd", // no byte gives it
		`{"path":"\ufdd0e9\udce9\ufdd1"}`:      "\ufdd0e9\xe9\ufdd1",
		"{\"path\":\"\ufdd0e9\\udce9\ufdd1\"}": "\ufdd0e9\xe9\ufdd1",
		`{"path":"x\ufdd0y", "other":"\ud"}`:   "", // malformed: refused
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

// A json.RawMessage is written as it is, noncharacters and all, and read
// with its escapes as they came.
func TestRawMessagesStayAsTheyAre(t *testing.T) {
	type withRaw struct {
		Name string          `json:"name"`
		Raw  json.RawMessage `json:"raw"`
	}
	in := withRaw{"caf\xe9", json.RawMessage(`"x\ufdd0ab y` + "\ufdd0ab" + `"`)}
	data, err := Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"name":"caf\udce9","raw":"x\ufdd0ab y` + "\ufdd0ab" + `"}`; string(data) != want {
		t.Errorf("Marshal wrote %s, want %s", data, want)
	}
	var out withRaw
	if err := Unmarshal([]byte(`{"name":"caf\udce9","raw":["\udce9", "`+"\ufdd0ab"+`"]}`), &out); err != nil {
		t.Fatal(err)
	}
	if out.Name != "caf\xe9" || string(out.Raw) != `["\udce9", "`+"\ufdd0ab"+`"]` {
		t.Errorf("Unmarshal gave %q and %s", out.Name, out.Raw)
	}
}

// Unmarshal changes the strings the JSON set where they are, pointers and
// maps the value shares included, and no other.
func TestUnmarshalChangesWhatTheTextSet(t *testing.T) {
	st := &state{}
	m := map[string]any{}
	type target struct {
		State   *state         `json:"state"`
		Map     map[string]any `json:"map"`
		Default string         `json:"default"`
		Hidden  string         `json:"-"`
		Any     any            `json:"any"`
	}
	v := target{State: st, Map: m, Default: "x\ufdd0ab", Hidden: "y\ufdd0cd", Any: &state{}}
	body := `{"state":{"kind":"k","target":"caf\udce9"},"map":{"k\udce9":["\udce9"]},"any":{"kind":"","target":"\udcff"}}`
	if err := Unmarshal([]byte(body), &v); err != nil {
		t.Fatal(err)
	}
	if st.Target != "caf\xe9" || v.State != st {
		t.Errorf("the state pointed to: %#v", st)
	}
	if l, _ := m["k\xe9"].([]any); len(m) != 1 || len(l) != 1 || l[0] != "\xe9" {
		t.Errorf("the map shared: %#v", m)
	}
	if v.Default != "x\ufdd0ab" || v.Hidden != "y\ufdd0cd" {
		t.Errorf("strings the text did not set: %q %q", v.Default, v.Hidden)
	}
	if a, ok := v.Any.(*state); !ok || a.Target != "\xff" {
		t.Errorf("the interface's pointer: %#v", v.Any)
	}
}

func TestUnmarshalStrict(t *testing.T) {
	type req struct {
		Turn string `json:"turn"`
		Path string `json:"path"`
	}
	var r req
	for body, want := range map[string]string{
		`{"turn":"1","path":"a","x":1}`:           `unknown field "x"`,
		`{"turn":"1","path":"a","bogus\udce9":1}`: `unknown field "bogus\xe9"`,
		`{"turn":"1","path":"a"} {}`:              "more than one JSON value",
		`{"turn":`:                                "unexpected EOF",
	} {
		if err := UnmarshalStrict([]byte(body), &r); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %s", body, err, want)
		}
	}
	if err := UnmarshalStrict([]byte(`{"turn":"1","path":"a\udcff"}`), &r); err != nil || r.Path != "a\xff" {
		t.Errorf("strict: %q %v", r.Path, err)
	}
}

// own keeps its bytes its own way, as the store's events do: base64.
type own struct{ Name string }

func (o *own) MarshalJSON() ([]byte, error) {
	return json.Marshal(map[string][]byte{"b": []byte(o.Name)})
}

func (o *own) UnmarshalJSON(data []byte) error {
	var w map[string][]byte
	err := json.Unmarshal(data, &w)
	o.Name = string(w["b"])
	return err
}

// What the review of the store's use found: a type that keeps its own
// bytes is not rewritten before it writes itself, trailing text is
// refused as encoding/json refuses it, a RawMessage in a map keeps its
// escapes, and a struct and its first field are not one pointer.
func TestAsEncodingJSONDoes(t *testing.T) {
	in := struct {
		O     *own     `json:"o"`
		Os    []own    `json:"os"`
		Other []string `json:"other"`
	}{&own{"caf\xe9"}, []own{{"x\xff"}}, []string{"y\xfe"}}
	data, err := Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"o":{"b":"Y2Fm6Q=="},"os":[{"b":"eP8="}],"other":["y\udcfe"]}`; string(data) != want {
		t.Errorf("Marshal wrote %s, want %s", data, want)
	}
	out := in
	out.O, out.Os, out.Other = nil, nil, nil
	if err := Unmarshal(data, &out); err != nil || out.O.Name != "caf\xe9" || out.Os[0].Name != "x\xff" || out.Other[0] != "y\xfe" {
		t.Errorf("%s reads back as %+v %v", data, out, err)
	}

	for _, body := range []string{`{"a":1} garbage`, `{"a":1}{"a":2}`, `{"a":"\udce9"} x`, `{"a":1}}`} {
		var m map[string]any
		if err := Unmarshal([]byte(body), &m); err == nil {
			t.Errorf("Unmarshal %s: accepted", body)
		}
		if err := UnmarshalStrict([]byte(body), &m); err == nil {
			t.Errorf("UnmarshalStrict %s: accepted", body)
		}
	}

	raw := map[string]json.RawMessage{}
	if err := Unmarshal([]byte(`{"a":"caf\udce9"}`), &raw); err != nil || string(raw["a"]) != `"caf\udce9"` {
		t.Errorf("a RawMessage in a map: %s %v", raw["a"], err)
	}

	type in2 struct{ Name string }
	type outer struct {
		In in2
		P  *in2
	}
	o := &outer{In: in2{"a\xff"}}
	o.P = &o.In
	if data, err := Marshal(o); err != nil || string(data) != `{"In":{"Name":"a\udcff"},"P":{"Name":"a\udcff"}}` {
		t.Errorf("a struct and a pointer to its first field: %s %v", data, err)
	}
}

// The text \ufffd in a string is no replaced byte: Marshal writes it as
// encoding/json does, and a type keeping its own bytes beside it keeps
// them.
func TestEscapeTextIsNoReplacedByte(t *testing.T) {
	in := map[string]string{"p": `a\ufffd`}
	data, err := Marshal(in)
	want, _ := json.Marshal(in)
	if err != nil || string(data) != string(want) {
		t.Errorf("Marshal wrote %s %v, want %s", data, err, want)
	}
	if !replacedBytes([]byte(`"\\\ufffd"`)) || replacedBytes([]byte(`"\\ufffd"`)) || replacedBytes([]byte(`"\\\\\\ufffd"`)) {
		t.Error("replacedBytes miscounts the backslashes")
	}
	o := struct {
		O *own   `json:"o"`
		P string `json:"p"`
	}{&own{"caf\xe9"}, `x\ufffd`}
	if data, err := Marshal(o); err != nil || string(data) != `{"o":{"b":"Y2Fm6Q=="},"p":"x\\ufffd"}` {
		t.Errorf("Marshal wrote %s %v", data, err)
	}
}
