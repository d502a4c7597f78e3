// Package schematest checks the --json outputs of turnctl and ckptfs
// against their JSON Schemas in doc/schema, for the tests that run the
// real commands (internal/turnctlcli, tests/): a schema and the code that
// prints its output cannot drift apart unnoticed.
package schematest

import (
	"bytes"
	"fmt"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Dir is the directory of the schemas: doc/schema in the module.
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "doc", "schema")
}

var (
	mu       sync.Mutex
	compiled = map[string]*jsonschema.Schema{}
)

// Names lists the schemas of the outputs (doc/schema/NAME.json, the shared
// definitions of common.json aside).
func Names(t testing.TB) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(Dir(), "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no schemas in %s (%v)", Dir(), err)
	}
	var names []string
	for _, f := range files {
		if n := strings.TrimSuffix(filepath.Base(f), ".json"); n != "common" {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}

// Schema compiles doc/schema/NAME.json (with the formats asserted: a
// "date-time" must be one).
func Schema(name string) (*jsonschema.Schema, error) {
	mu.Lock()
	defer mu.Unlock()
	if s := compiled[name]; s != nil {
		return s, nil
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	s, err := c.Compile(filepath.Join(Dir(), name+".json"))
	if err != nil {
		return nil, err
	}
	compiled[name] = s
	return s, nil
}

// Validate checks that out is one JSON value that doc/schema/NAME.json
// accepts.
func Validate(name string, out []byte) error {
	s, err := Schema(name)
	if err != nil {
		return err
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(out))
	if err != nil {
		return fmt.Errorf("not JSON: %v", err)
	}
	if err := s.Validate(v); err != nil {
		// %#v: every failing key, not only the first line.
		return fmt.Errorf("%s.json: %#v", name, err)
	}
	return nil
}

// Check fails t unless out is valid against doc/schema/NAME.json; what
// names the command that printed it.
func Check(t testing.TB, name, what string, out []byte) {
	t.Helper()
	if err := Validate(name, out); err != nil {
		t.Errorf("%s: output does not match its schema: %v\n%s", what, err, out)
	}
}
