// Package jsontest holds a test helper shared by packages that stream text
// through JSON.
package jsontest

import (
	"encoding/json"
	"testing"
)

// RoundTrip returns s as it comes back through JSON: invalid UTF-8 bytes
// become U+FFFD, as a client decoding a response sees them.
func RoundTrip(t testing.TB, s string) string {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var out string
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}
