package main

import (
	"strings"
	"testing"
)

// TestServeMaxModelLenClamped: --max-model-len above the model's context
// (the built-in model's 4096) is clamped, and the log says so, naming
// both values; one within it warns of nothing.
func TestServeMaxModelLenClamped(t *testing.T) {
	for _, tc := range []struct {
		asked, used string
		warn        bool
	}{
		{"99999", "4096", true},
		{"1024", "1024", false},
	} {
		_, stop, log := startServeLog(t, nil, "--max-model-len", tc.asked, "--blocks", "300", "--threads", "1")
		if c := stop(); c != 0 {
			t.Fatalf("--max-model-len %s: exit %d\n%s", tc.asked, c, log.String())
		}
		s := log.String()
		warned := strings.Contains(s, "level=WARN") && strings.Contains(s, "max_model_len="+tc.asked+" model_max_seq_len=4096")
		if warned != tc.warn || strings.Count(s, "level=WARN") > 1 {
			t.Errorf("--max-model-len %s: warned %v, want %v:\n%s", tc.asked, warned, tc.warn, s)
		}
		if !strings.Contains(s, "max_model_len="+tc.used+" ") {
			t.Errorf("--max-model-len %s: the kv pool log lacks max_model_len=%s:\n%s", tc.asked, tc.used, s)
		}
	}
}
