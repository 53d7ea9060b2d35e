package server

import (
	"bytes"
	"encoding/json"
	"maps"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"
)

// checkKeys walks the JSON in body and refuses an object key that is not,
// byte for byte, the JSON name of a field of the struct it decodes into
// (encoding/json matches names case-insensitively, so {"PROMPT": ...}
// would pass for prompt), and a key that appears twice in one object
// (encoding/json keeps the last, where a proxy may have checked the
// first). Objects decoded by a custom unmarshaler, into a map or a
// json.RawMessage are not a struct's: any keys pass there. Syntax errors
// are left to the decoder, which reports them first.
func checkKeys(body []byte, t reflect.Type, unsupported map[string]string) *apiError {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	return walkKeys(dec, t, "", unsupported)
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// fieldsOf returns the JSON names of t's fields and their types, or nil
// when t does not decode an object as a struct.
func fieldsOf(t reflect.Type) map[string]reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct || reflect.PointerTo(t).Implements(unmarshalerType) {
		return nil
	}
	fields := map[string]reflect.Type{}
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			// An embedded struct's fields are promoted, as encoding/json
			// promotes them (exported or not).
			maps.Copy(fields, fieldsOf(f.Type))
			continue
		}
		switch {
		case !f.IsExported() || name == "-":
			continue
		case name == "":
			name = f.Name
		}
		fields[name] = f.Type
	}
	return fields
}

// elemOf returns the element type of a slice or array t that decodes a
// JSON array itself, nil otherwise.
func elemOf(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || reflect.PointerTo(t).Implements(unmarshalerType) {
		return nil
	}
	if k := t.Kind(); k == reflect.Slice || k == reflect.Array {
		return t.Elem()
	}
	return nil
}

func walkKeys(dec *json.Decoder, t reflect.Type, path string, unsupported map[string]string) *apiError {
	tok, err := dec.Token()
	if err != nil {
		return nil
	}
	switch tok {
	case json.Delim('['):
		elem := elemOf(t)
		for dec.More() {
			if e := walkKeys(dec, elem, path, nil); e != nil {
				return e
			}
		}
	case json.Delim('{'):
		fields := fieldsOf(t)
		seen := map[string]bool{}
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				return nil
			}
			key, _ := tok.(string)
			name := key
			if path != "" {
				name = path + "." + key
			}
			var ft reflect.Type
			if fields != nil {
				var ok bool
				if ft, ok = fields[key]; !ok {
					if what, ok := unsupported[key]; ok && path == "" {
						return badRequest(key, "%q is not supported: prefixd does not implement %s", key, what)
					}
					return unknownField(name, key, fields)
				}
			}
			if seen[key] {
				return badRequest(name, "field %q appears twice", name)
			}
			seen[key] = true
			if e := walkKeys(dec, ft, name, nil); e != nil {
				return e
			}
		}
	default:
		return nil
	}
	dec.Token() // the closing delimiter
	return nil
}

// unknownField refuses key, suggesting the field it differs from only in
// case, if any.
func unknownField(name, key string, fields map[string]reflect.Type) *apiError {
	for f := range fields {
		if strings.EqualFold(f, key) {
			return badRequest(name, "unknown field %q: field names are case-sensitive; did you mean %q?", name, f)
		}
	}
	return badRequest(name, "unknown field %q", name)
}

// invalidUTF8 returns the offset of the first byte of b that is not part
// of valid UTF-8, or -1. encoding/json would silently decode such bytes
// as U+FFFD.
func invalidUTF8(b []byte) int {
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size == 1 {
			return i
		}
		i += size
	}
	return -1
}

// loneSurrogate returns the offset of the first \u escape in body's JSON
// strings that is half of a UTF-16 surrogate pair without its other half,
// or -1. encoding/json decodes one as U+FFFD, as it does invalid UTF-8.
// body must be valid JSON.
func loneSurrogate(body []byte) int {
	inString := false
	for i := 0; i < len(body); i++ {
		switch c := body[i]; {
		case c == '"':
			inString = !inString
		case c == '\\' && inString:
			r, ok := escapedUnit(body, i)
			if !ok {
				i++ // a one-character escape: skip the character
				continue
			}
			switch {
			case r >= 0xDC00 && r <= 0xDFFF:
				return i
			case r >= 0xD800 && r <= 0xDBFF:
				if lo, ok := escapedUnit(body, i+6); !ok || lo < 0xDC00 || lo > 0xDFFF {
					return i
				}
				i += 6
			}
			i += 5
		}
	}
	return -1
}

// escapedUnit reads the \uXXXX escape at body[i:], if there is one.
func escapedUnit(body []byte, i int) (rune, bool) {
	if i+6 > len(body) || body[i] != '\\' || body[i+1] != 'u' {
		return 0, false
	}
	n, err := strconv.ParseUint(string(body[i+2:i+6]), 16, 16)
	return rune(n), err == nil
}
