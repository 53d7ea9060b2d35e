package bench

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/prefixd/prefixd/trace"
)

// SynthConfig shapes a synthetic trace: Prefixes shared prompt prefixes
// (system prompts, documents), spread over Namespaces tenants, each
// recurring with its own period, drawn log-uniformly from [PeriodMin,
// PeriodMax], every arrival moved by up to ±Jitter of the period. Each
// request is its prefix plus Suffix tokens of its own and asks for
// MaxTokens; the trace lasts Duration.
type SynthConfig struct {
	Prefixes             int           // default 24
	Namespaces           int           // default 4
	PeriodMin, PeriodMax time.Duration // defaults 2s and 5m
	Jitter               float64       // fraction of the period, in [0, 1); default 0.25 (negative: none)
	Duration             time.Duration // default 20m
	Prefix, Suffix       int           // prompt tokens; defaults 512 and 64
	MaxTokens            int           // default 64
	Seed                 uint64
}

// Synth returns a synthetic trace, sorted by arrival.
func Synth(c SynthConfig) ([]trace.Record, error) {
	orDefault(&c.Prefixes, 24)
	orDefault(&c.Namespaces, 4)
	orDefault(&c.Prefix, 512)
	orDefault(&c.Suffix, 64)
	orDefault(&c.MaxTokens, 64)
	if c.PeriodMin == 0 {
		c.PeriodMin = 2 * time.Second
	}
	if c.PeriodMax == 0 {
		c.PeriodMax = 5 * time.Minute
	}
	if c.Duration == 0 {
		c.Duration = 20 * time.Minute
	}
	switch {
	case c.Jitter == 0:
		c.Jitter = 0.25
	case c.Jitter < 0:
		c.Jitter = 0
	}
	if c.Prefixes < 0 || c.Namespaces < 1 || c.Prefix < 0 || c.Suffix < 1 || c.MaxTokens < 1 ||
		c.PeriodMin <= 0 || c.PeriodMax < c.PeriodMin || c.Jitter >= 1 || c.Duration <= 0 {
		return nil, fmt.Errorf("bench: synth: bad configuration %+v", c)
	}
	r := newRand(c.Seed)
	var out []trace.Record
	lo, hi := math.Log(float64(c.PeriodMin)), math.Log(float64(c.PeriodMax))
	for i := range c.Prefixes {
		prefix := tokens(r, c.Prefix)
		ns := fmt.Sprintf("tenant-%d", i%c.Namespaces)
		period := time.Duration(math.Exp(lo + r.Float64()*(hi-lo)))
		for t := time.Duration(r.Float64() * float64(period)); t < c.Duration; t += period {
			at := t + time.Duration(c.Jitter*(2*r.Float64()-1)*float64(period))
			if at < 0 || at >= c.Duration {
				continue
			}
			p := append(slices.Clip(prefix), tokens(r, c.Suffix)...)
			out = append(out, trace.Record{At: at.Milliseconds(), Namespace: ns, Tokens: p, MaxTokens: c.MaxTokens})
		}
	}
	slices.SortStableFunc(out, func(a, b trace.Record) int { return int(a.At - b.At) })
	return out, nil
}
