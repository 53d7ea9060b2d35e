package bench

import (
	"testing"
	"time"
)

func TestSynthShape(t *testing.T) {
	recs, err := Synth(SynthConfig{Prefixes: 2, PeriodMin: 10 * time.Second, PeriodMax: 10 * time.Second, Jitter: -1,
		Duration: time.Minute, Prefix: 32, Suffix: 4, MaxTokens: 5, Seed: 9})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 12 {
		t.Fatalf("%d requests, want 2 prefixes x 6 in a minute", len(recs))
	}
	for i, r := range recs {
		if err := r.Validate(); err != nil || len(r.Tokens) != 36 || r.MaxTokens != 5 {
			t.Fatalf("record %d: %+v (%v)", i, r, err)
		}
		if i > 0 && r.At < recs[i-1].At {
			t.Fatal("not sorted by arrival")
		}
		if i >= 2 && recs[i].At-recs[i-2].At != 10000 {
			t.Fatalf("a prefix's requests are %d ms apart, want 10000", recs[i].At-recs[i-2].At)
		}
	}
}
