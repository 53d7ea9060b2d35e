// Package schematest is a test helper: the reference JSON Schema
// validator (santhosh-tekuri/jsonschema v6, formats asserted) that the
// structured-output tests check generated text against.
package schematest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Compile compiles schema, with format assertions on.
func Compile(schema string) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource("mem://schema.json", doc); err != nil {
		return nil, err
	}
	return c.Compile("mem://schema.json")
}

// Validate reports why text is not JSON that s accepts, nil if it is.
func Validate(s *jsonschema.Schema, text string) error {
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	if err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	return s.Validate(v)
}

// MustCompile is Compile that fails t on an error.
func MustCompile(t testing.TB, schema string) *jsonschema.Schema {
	t.Helper()
	s, err := Compile(schema)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
