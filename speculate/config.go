package speculate

import (
	"errors"
	"fmt"
	"math"
)

// Mode selects where drafts come from besides a request's prediction.
type Mode int

const (
	// Off drafts only from a request's predicted output.
	Off Mode = iota
	// Ngram drafts by prompt lookup: the continuation of the most recent
	// earlier occurrence of the sequence's last n tokens in its own prompt
	// and output (vLLM's ngram, llama.cpp's lookup decoding).
	Ngram
	// Suffix drafts from suffix tries over the sequence's own text and over
	// its namespace's finished sequences (vLLM's and Arctic's suffix
	// decoding).
	Suffix
)

var modeNames = [...]string{Off: "off", Ngram: "ngram", Suffix: "suffix"}

// String returns the flag value that ParseMode reads back.
func (m Mode) String() string {
	if m >= 0 && int(m) < len(modeNames) {
		return modeNames[m]
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// ErrConfig is wrapped by every error of an invalid Config or mode name.
var ErrConfig = errors.New("speculate: invalid config")

// ParseMode reads a mode from its flag value: "off", "ngram" or "suffix".
func ParseMode(s string) (Mode, error) {
	for m, name := range modeNames {
		if s == name {
			return Mode(m), nil
		}
	}
	return Off, fmt.Errorf("%w: speculative mode %q: want off, ngram or suffix", ErrConfig, s)
}

// Defaults and limits of Config's fields.
const (
	DefaultK                  = 4
	DefaultNgramMin           = 2
	DefaultNgramMax           = 5
	DefaultMaxDepth           = 24
	DefaultMinTokenProb       = 0.1
	DefaultMaxSpecFactor      = 1.0
	DefaultMaxNamespaceTokens = 32768
	DefaultMaxNamespaces      = 64

	maxKLimit      = 256
	maxNgramLimit  = 32
	maxDepthLimit  = 64
	maxFactorLimit = 1024
)

// Config configures a Speculator. A zero field takes its default; a
// negative or out-of-range one is an error that names it.
type Config struct {
	// Mode is where drafts come from besides a request's prediction.
	Mode Mode
	// K is the most tokens drafted per step (a Draft's k is capped at it);
	// default 4, at most 256.
	K int
	// NgramMin and NgramMax bound the length in tokens of the sequence's
	// tail that Ngram mode and a prediction's resynchronization look up,
	// longest first; defaults 2 and 5, at most 32.
	NgramMin, NgramMax int
	// MaxDepth is the suffix tries' depth in tokens: the longest match plus
	// draft they see; default 24 (vLLM's), 2 to 64. Each token a trie holds
	// costs at most MaxDepth nodes of 48 bytes (and a child-table entry),
	// about 2 on repeating text (BenchmarkFinished).
	MaxDepth int
	// MinTokenProb is the least cumulative empirical probability of a
	// Suffix draft's token (its continuations' frequencies multiplied along
	// the draft); default 0.1 (vLLM's), in (0, 1].
	MinTokenProb float64
	// MaxSpecFactor bounds a Suffix draft to MaxSpecFactor × the length of
	// the match it continues (and to K); default 1 (vLLM's), at most 1024.
	MaxSpecFactor float64
	// MaxNamespaceTokens is the most tokens of finished sequences Suffix
	// mode keeps per namespace; the oldest sequences go first. Default
	// 32768.
	MaxNamespaceTokens int
	// MaxNamespaces is the most namespaces Suffix mode keeps finished
	// sequences for; a new namespace beyond it is not kept (no namespace's
	// data is evicted for another's). Default 64.
	MaxNamespaces int
}

// withDefaults returns c with defaults for its zero fields, or an error
// naming the first invalid field.
func (c Config) withDefaults() (Config, error) {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.K, DefaultK)
	def(&c.NgramMin, DefaultNgramMin)
	def(&c.NgramMax, max(DefaultNgramMax, c.NgramMin))
	def(&c.MaxDepth, DefaultMaxDepth)
	def(&c.MaxNamespaceTokens, DefaultMaxNamespaceTokens)
	def(&c.MaxNamespaces, DefaultMaxNamespaces)
	if c.MinTokenProb == 0 {
		c.MinTokenProb = DefaultMinTokenProb
	}
	if c.MaxSpecFactor == 0 {
		c.MaxSpecFactor = DefaultMaxSpecFactor
	}
	bad := func(field string, v any, want string) (Config, error) {
		return c, fmt.Errorf("%w: %s is %v, want %s", ErrConfig, field, v, want)
	}
	switch {
	case c.Mode < Off || c.Mode > Suffix:
		return bad("Mode", c.Mode, "Off, Ngram or Suffix")
	case c.K < 1 || c.K > maxKLimit:
		return bad("K", c.K, fmt.Sprintf("1 to %d", maxKLimit))
	case c.NgramMin < 1 || c.NgramMin > maxNgramLimit:
		return bad("NgramMin", c.NgramMin, fmt.Sprintf("1 to %d", maxNgramLimit))
	case c.NgramMax < c.NgramMin || c.NgramMax > maxNgramLimit:
		return bad("NgramMax", c.NgramMax, fmt.Sprintf("NgramMin (%d) to %d", c.NgramMin, maxNgramLimit))
	case c.MaxDepth < 2 || c.MaxDepth > maxDepthLimit:
		return bad("MaxDepth", c.MaxDepth, fmt.Sprintf("2 to %d", maxDepthLimit))
	case !(c.MinTokenProb > 0 && c.MinTokenProb <= 1):
		return bad("MinTokenProb", c.MinTokenProb, "a probability in (0, 1]")
	case !(c.MaxSpecFactor > 0 && c.MaxSpecFactor <= maxFactorLimit) || math.IsNaN(c.MaxSpecFactor):
		return bad("MaxSpecFactor", c.MaxSpecFactor, fmt.Sprintf("in (0, %d]", maxFactorLimit))
	case c.MaxNamespaceTokens < 1 || c.MaxNamespaceTokens > math.MaxInt32/maxDepthLimit:
		return bad("MaxNamespaceTokens", c.MaxNamespaceTokens, fmt.Sprintf("1 to %d", math.MaxInt32/maxDepthLimit))
	case c.MaxNamespaces < 1:
		return bad("MaxNamespaces", c.MaxNamespaces, "at least 1")
	}
	return c, nil
}
