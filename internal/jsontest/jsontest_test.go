package jsontest

import "testing"

func TestRoundTrip(t *testing.T) {
	for in, want := range map[string]string{"héllo": "héllo", "a\xffb": "a\uFFFDb", "\xe2\x82": "\uFFFD\uFFFD"} {
		if got := RoundTrip(t, in); got != want {
			t.Errorf("RoundTrip(%q) = %q, want %q", in, got, want)
		}
	}
}
