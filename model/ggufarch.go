package model

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/prefixd/prefixd/kernels"
)

// ggufArchs maps the GGUF architectures prefixd runs to the options of the
// one layer loop. The RoPE layouts are llama.cpp's: its converter permutes
// Llama's (and Mistral's) q and k rows so that GGUF llama rotates adjacent
// pairs, while Qwen2 and Qwen3 keep Hugging Face's rotate-halves order
// (llama.cpp's LLAMA_ROPE_TYPE_NEOX). Mistral 7B files usually say
// "llama"; "mistral" is accepted as the same layer.
var ggufArchs = map[string]Arch{
	"llama":   {Rope: kernels.RopeAdjacent},
	"mistral": {Rope: kernels.RopeAdjacent},
	"qwen2":   {Rope: kernels.RopeHalves, QKVBias: true},
	"qwen3":   {Rope: kernels.RopeHalves, QKNorm: true},
}

// ggufMeta reads typed values from a GGUF file's metadata.
type ggufMeta map[string]any

// size reads a non-negative integer; def < 0 makes the key required.
func (m ggufMeta) size(key string, def int64) (int, error) {
	v, ok := m[key]
	if !ok {
		if def < 0 {
			return 0, fmt.Errorf("model: GGUF metadata %q missing", key)
		}
		return int(def), nil
	}
	n, ok := v.(int64)
	if !ok || n < 0 || n > 1<<30 {
		return 0, fmt.Errorf("model: GGUF metadata %q = %v is not a size", key, v)
	}
	return int(n), nil
}

// float reads a finite number, def when the key is absent.
func (m ggufMeta) float(key string, def float64) (float64, error) {
	v, ok := m[key]
	if !ok {
		return def, nil
	}
	f, ok := v.(float64)
	if !ok {
		if n, isInt := v.(int64); isInt {
			f, ok = float64(n), true
		}
	}
	if !ok || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("model: GGUF metadata %q = %v is not a number", key, v)
	}
	return f, nil
}

// ggufConfig reads a model's shape from its GGUF metadata, under the keys
// of its architecture ("<arch>.embedding_length", ...). Vocab, BOS and EOS
// are left for the caller, which finds them in the tensors and tokenizer.
func ggufConfig(meta ggufMeta) (Config, error) {
	arch, _ := meta["general.architecture"].(string)
	a, ok := ggufArchs[arch]
	if !ok {
		return Config{}, fmt.Errorf("model: GGUF architecture %q is not supported (supported: %s)",
			arch, strings.Join(slices.Sorted(maps.Keys(ggufArchs)), ", "))
	}
	p := arch + "."
	c := Config{Arch: a}
	var err error
	for _, f := range []struct {
		dst *int
		key string
		def int64
	}{
		{&c.Dim, "embedding_length", -1}, {&c.Layers, "block_count", -1},
		{&c.Hidden, "feed_forward_length", -1}, {&c.Heads, "attention.head_count", -1},
		{&c.MaxSeqLen, "context_length", 2048},
	} {
		if *f.dst, err = meta.size(p+f.key, f.def); err != nil {
			return Config{}, err
		}
	}
	if c.KVHeads, err = meta.size(p+"attention.head_count_kv", int64(c.Heads)); err != nil {
		return Config{}, err
	}
	theta, err := meta.float(p+"rope.freq_base", 10000)
	if err != nil {
		return Config{}, err
	}
	eps, err := meta.float(p+"attention.layer_norm_rms_epsilon", 1e-5)
	if err != nil {
		return Config{}, err
	}
	c.RopeTheta, c.NormEps = float32(theta), float32(eps)
	if c.Heads == 0 {
		return Config{}, fmt.Errorf("model: GGUF metadata %q is 0", p+"attention.head_count")
	}
	// The head width is Dim/Heads unless the file says otherwise (Qwen3);
	// HeadWidth stays 0 for the default so configs compare as shapes.
	if _, ok := meta[p+"attention.key_length"]; ok {
		w, err := meta.size(p+"attention.key_length", -1)
		if err != nil {
			return Config{}, err
		}
		if w == 0 {
			return Config{}, fmt.Errorf("model: GGUF metadata %q is 0", p+"attention.key_length")
		}
		if w != c.Dim/c.Heads || c.Dim%c.Heads != 0 {
			c.HeadWidth = w
		}
	}
	if c.HeadWidth == 0 && c.Dim%c.Heads != 0 {
		return Config{}, fmt.Errorf("model: GGUF dim %d is not a multiple of %d heads, and %q is missing", c.Dim, c.Heads, p+"attention.key_length")
	}
	keyLen := c.HeadDim()
	if v, err := meta.size(p+"attention.value_length", int64(keyLen)); err != nil {
		return Config{}, err
	} else if v != keyLen {
		return Config{}, fmt.Errorf("model: GGUF value head width %d differs from key head width %d; not supported", v, keyLen)
	}
	if rot, err := meta.size(p+"rope.dimension_count", int64(keyLen)); err != nil {
		return Config{}, err
	} else if rot != keyLen {
		return Config{}, fmt.Errorf("model: GGUF rope.dimension_count %d rotates part of a %d-wide head; not supported", rot, keyLen)
	}
	return c, nil
}

// RopeScaling is Llama 3.x's "llama3" rope_scaling: the frequencies of
// RoPE pairs whose wavelength exceeds OriginalContext/LowFreqFactor are
// divided by Factor, those shorter than OriginalContext/HighFreqFactor
// are kept, and those between are interpolated smoothly.
type RopeScaling struct {
	Factor          float64 // 8 for Llama 3.1 and 3.2
	LowFreqFactor   float64 // 1
	HighFreqFactor  float64 // 4
	OriginalContext float64 // original_max_position_embeddings, 8192
}

// Llama3RopeFactors returns the divisor of each of the headDim/2 RoPE pair
// frequencies theta^(-2i/headDim) under s, as llama.cpp's converter writes
// them into rope_freqs.weight (and as Hugging Face rescales inv_freq). It
// fails for parameters that make no scaling: a factor that is not
// positive, or low and high frequency factors that do not bound a range.
func Llama3RopeFactors(theta float64, headDim int, s RopeScaling) ([]float32, error) {
	if !(s.Factor > 0) || !(s.LowFreqFactor > 0) || !(s.HighFreqFactor > s.LowFreqFactor) ||
		!(s.OriginalContext > 0) || !(theta > 0) || headDim <= 0 || headDim%2 != 0 {
		return nil, fmt.Errorf("model: llama3 rope scaling %+v with theta %v and head width %d is not valid", s, theta, headDim)
	}
	lowWave := s.OriginalContext / s.LowFreqFactor
	highWave := s.OriginalContext / s.HighFreqFactor
	out := make([]float32, headDim/2)
	for i := range out {
		wave := 2 * math.Pi * math.Pow(theta, float64(2*i)/float64(headDim))
		switch {
		case wave < highWave:
			out[i] = 1
		case wave > lowWave:
			out[i] = float32(s.Factor)
		default:
			smooth := (s.OriginalContext/wave - s.LowFreqFactor) / (s.HighFreqFactor - s.LowFreqFactor)
			out[i] = float32(1 / ((1-smooth)/s.Factor + smooth))
		}
	}
	return out, nil
}

// ggufRopeFactors returns a model's RoPE frequency divisors from
// freqs, the rope_freqs.weight tensor or nil when the file has none (it
// is how llama.cpp stores Llama 3.x's scaling), and arch's
// "<arch>.rope.scaling.*" metadata: type llama3 describes the same
// scaling by its parameters, for files without the tensor; linear divides
// every frequency by its factor as well, as llama.cpp's freq_scale does.
// It returns nil for plain RoPE and an error naming any other type.
func ggufRopeFactors(meta ggufMeta, arch string, c Config, freqs []float32) ([]float32, error) {
	p := arch + ".rope.scaling."
	typ, _ := meta[p+"type"].(string)
	var err error
	get := func(key string, def float64) float64 {
		v, e := meta.float(p+key, def)
		if err == nil {
			err = e
		}
		return v
	}
	switch typ {
	case "", "none":
		return freqs, nil
	case "linear":
		scale := get("factor", 1)
		if err != nil {
			return nil, err
		}
		if !(scale > 0) {
			return nil, fmt.Errorf("model: GGUF linear rope scaling factor %v is not positive", scale)
		}
		if freqs == nil {
			freqs = make([]float32, c.HeadDim()/2)
			for i := range freqs {
				freqs[i] = 1
			}
		}
		for i := range freqs {
			freqs[i] *= float32(scale)
		}
		return freqs, nil
	case "llama3":
		if freqs != nil {
			return freqs, nil // the converter computed this scaling into the tensor
		}
		s := RopeScaling{Factor: get("factor", 8), LowFreqFactor: get("low_freq_factor", 1),
			HighFreqFactor: get("high_freq_factor", 4), OriginalContext: get("original_context_length", 8192)}
		if err != nil {
			return nil, err
		}
		return Llama3RopeFactors(float64(c.RopeTheta), c.HeadDim(), s)
	}
	return nil, fmt.Errorf("model: GGUF rope scaling %q is not supported (none, linear, llama3)", typ)
}
