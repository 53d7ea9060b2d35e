package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
)

// decodeStrict decodes exactly one JSON object into v, refusing invalid
// UTF-8 (and escapes of half a surrogate pair), unknown fields (matched exactly, case included), fields given
// twice and trailing data, and names the offending field on type errors.
func decodeStrict(body []byte, v any) *apiError { return decodeRefusing(body, v, nil) }

// decodeRefusing is decodeStrict, answering a top-level field named in
// unsupported (an API's fields prefixd does not implement, with what each
// is) by saying so: the body is decoded once and its keys walked once.
func decodeRefusing(body []byte, v any, unsupported map[string]string) *apiError {
	if len(bytes.TrimSpace(body)) == 0 {
		return badRequest("", "request body is empty: send a JSON object")
	}
	if off := invalidUTF8(body); off >= 0 {
		return badRequest("", "request body is not valid UTF-8: byte 0x%02x at offset %d", body[off], off)
	}
	// Unknown fields are checkKeys' to refuse, with the field's path.
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(v); err != nil {
		var syn *json.SyntaxError
		var typ *json.UnmarshalTypeError
		var fe *fieldError
		switch {
		case errors.As(err, &fe):
			return badRequest(fe.param, "%s", fe.msg)
		case errors.As(err, &syn):
			return badRequest("", "invalid JSON at byte %d: %v", syn.Offset, err)
		case errors.As(err, &typ):
			if typ.Field == "" {
				return badRequest("", "the request body must be a JSON object, got %s", typ.Value)
			}
			param, field := clientParam(reflect.TypeOf(v), typ.Field)
			return badRequest(param, "%s", typeMismatch(param, field, typ))
		case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
			return badRequest("", "invalid JSON: unexpected end of input")
		}
		return badRequest("", "invalid request body: %v", err)
	}
	if len(bytes.TrimSpace(body[dec.InputOffset():])) > 0 {
		return badRequest("", "invalid JSON: data after the object")
	}
	if off := loneSurrogate(body); off >= 0 {
		return badRequest("", "request body has an unpaired UTF-16 surrogate escape %s at offset %d", body[off:off+6], off)
	}
	return checkKeys(body, reflect.TypeOf(v), unsupported)
}

// clientParam is the request field a decoding error's Go path names, as
// the client spelled it, and the field's type (nil past a map or a custom
// unmarshaler): encoding/json puts the Go name of an embedded struct
// (openAIParams) in the path, where the client sees its fields.
func clientParam(t reflect.Type, path string) (string, reflect.Type) {
	var out []string
	for seg := range strings.SplitSeq(path, ".") {
		for t != nil && (t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice ||
			t.Kind() == reflect.Array || t.Kind() == reflect.Map) {
			t = t.Elem()
		}
		if t != nil && t.Kind() == reflect.Struct {
			if f, ok := t.FieldByName(seg); ok && f.Anonymous {
				t = f.Type
				continue
			}
		}
		out = append(out, seg)
		t = fieldsOf(t)[seg]
	}
	return strings.Join(out, "."), t
}

// typeMismatch says what is wrong with param's JSON value, which could not
// decode into its Go type: the JSON type the field takes and the one it
// got, or, for a number, why it does not fit (not a whole number, out of
// range). field is param's type, if known: when it is an array and the
// error one element's, the field's type is what the client must send.
func typeMismatch(param string, field reflect.Type, typ *json.UnmarshalTypeError) string {
	want := jsonType(typ.Type)
	if k := typ.Type.Kind(); elemOf(field) != nil && k != reflect.Slice && k != reflect.Array {
		want = jsonType(field)
	}
	num, isNum := strings.CutPrefix(typ.Value, "number ")
	if !isNum {
		return fmt.Sprintf("field %q must be %s, got %s", param, want, typ.Value)
	}
	switch k := typ.Type.Kind(); {
	case k == reflect.Float32 || k == reflect.Float64:
		return fmt.Sprintf("field %q: %s is out of range for a number", param, num)
	case strings.ContainsAny(num, ".eE"),
		strings.HasPrefix(num, "-") && k >= reflect.Uint && k <= reflect.Uintptr:
		return fmt.Sprintf("field %q must be %s, got %s", param, want, num)
	}
	return fmt.Sprintf("field %q: %s is out of range for %s", param, num, want)
}

// jsonType names a Go type the way an API user thinks of it.
func jsonType(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Pointer:
		return jsonType(t.Elem())
	case reflect.Slice, reflect.Array:
		elem := jsonType(t.Elem())
		_, noun, _ := strings.Cut(elem, " ") // "a string": "string"
		return "an array of " + noun + "s"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int32:
		return "a 32-bit integer"
	case reflect.Uint64:
		return "a non-negative integer"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uintptr:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	}
	return "an object"
}
