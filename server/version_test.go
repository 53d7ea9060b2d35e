package server

import (
	"encoding/json"
	"testing"
)

// TestVersionEndpoint: GET /version answers the configured build as
// vLLM's does, {"version": ...}, without a key even when keys are
// required, and "unknown" when the build is not known.
func TestVersionEndpoint(t *testing.T) {
	want := BuildVersion{Version: "v1.2.3", Revision: "0123abcd", Modified: true, GoVersion: "go1.26.0"}
	h := newHarness(t, withServer(func(c *Config) {
		c.Version = want
		c.APIKeys = map[string]string{"k": "tenant"}
	}))
	code, b, _ := h.do("GET", "/version", "")
	var got BuildVersion
	if err := json.Unmarshal(b, &got); err != nil || code != 200 || got != want {
		t.Errorf("/version: %d %s (%v), want 200 %+v", code, b, err, want)
	}
	if code, b, _ := h.do("POST", "/version", ""); code != 405 {
		t.Errorf("POST /version: %d %s, want 405", code, b)
	}

	bare := newHarness(t)
	code, b, _ = bare.do("GET", "/version", "")
	got = BuildVersion{}
	if err := json.Unmarshal(b, &got); err != nil || code != 200 || got != (BuildVersion{Version: "unknown"}) {
		t.Errorf("/version of an unknown build: %d %s (%v)", code, b, err)
	}
}
