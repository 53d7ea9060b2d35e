package server

import (
	"testing"

	"github.com/prefixd/prefixd/kvevents"
)

// TestTenantModelName checks that a tenant may name the model its KV
// events publish its blocks under, and no other tenant's.
func TestTenantModelName(t *testing.T) {
	h := newHarness(t, withServer(func(c *Config) { c.APIKeys = map[string]string{"ka": "acme", "kb": "globex"} }))
	name := h.srv.cfg.ModelName
	for _, c := range []struct {
		key, model string
		code       int
	}{
		{"ka", name, 200},
		{"ka", kvevents.TenantModel(name, "acme"), 200},
		{"kb", kvevents.TenantModel(name, "acme"), 404},
		{"kb", kvevents.TenantModel(name, "globex"), 200},
		{"ka", name + ":", 404},
	} {
		code, b, _ := h.do("POST", "/v1/completions", `{"model": "`+c.model+`", "prompt": "Hi", "max_tokens": 1}`,
			"Authorization", "Bearer "+c.key)
		if code != c.code {
			t.Errorf("key %s, model %q: %d %s, want %d", c.key, c.model, code, b, c.code)
		}
	}
}
