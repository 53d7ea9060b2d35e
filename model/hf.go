package model

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/prefixd/prefixd/internal/sidefile"
	"github.com/prefixd/prefixd/kernels"
	"github.com/prefixd/prefixd/safetensors"
	"github.com/prefixd/prefixd/tokenizer/bpe"
)

// hfArchs maps the Hugging Face architectures prefixd runs to the options
// of the one layer loop. Hugging Face checkpoints keep q and k in their
// training layout, which rotates halves (llama.cpp's converter permutes
// Llama's rows into adjacent pairs for GGUF; nothing is permuted here).
var hfArchs = map[string]Arch{
	"LlamaForCausalLM":   {Rope: kernels.RopeHalves},
	"MistralForCausalLM": {Rope: kernels.RopeHalves},
	"Qwen2ForCausalLM":   {Rope: kernels.RopeHalves, QKVBias: true},
	"Qwen3ForCausalLM":   {Rope: kernels.RopeHalves, QKNorm: true},
}

// hfDTypes are the safetensors element types kept as they are.
var hfDTypes = map[string]kernels.DType{"F32": kernels.F32, "F16": kernels.F16, "BF16": kernels.BF16}

// hfConfig is the part of a Hugging Face config.json the layer loop
// needs.
type hfConfig struct {
	Architectures     []string        `json:"architectures"`
	HiddenSize        int             `json:"hidden_size"`
	IntermediateSize  int             `json:"intermediate_size"`
	Layers            int             `json:"num_hidden_layers"`
	Heads             int             `json:"num_attention_heads"`
	KVHeads           int             `json:"num_key_value_heads"`
	HeadDim           int             `json:"head_dim"`
	VocabSize         int             `json:"vocab_size"`
	MaxPositions      int             `json:"max_position_embeddings"`
	RMSNormEps        float64         `json:"rms_norm_eps"`
	RopeTheta         float64         `json:"rope_theta"`
	TieWordEmbeddings bool            `json:"tie_word_embeddings"`
	BOS               json.RawMessage `json:"bos_token_id"`
	EOS               json.RawMessage `json:"eos_token_id"`
	RopeScaling       *struct {
		RopeType        string  `json:"rope_type"`
		Type            string  `json:"type"`
		Factor          float64 `json:"factor"`
		LowFreqFactor   float64 `json:"low_freq_factor"`
		HighFreqFactor  float64 `json:"high_freq_factor"`
		OriginalContext float64 `json:"original_max_position_embeddings"`
	} `json:"rope_scaling"`
}

// tokenID reads a config's token id: a number, the first of a list
// (generation may stop at several EOS tokens), or -1 when absent or null.
func tokenID(raw json.RawMessage) int32 {
	var id int32
	if json.Unmarshal(raw, &id) == nil && raw != nil && string(raw) != "null" {
		return id
	}
	var ids []int32
	if json.Unmarshal(raw, &ids) == nil && len(ids) > 0 {
		return ids[0]
	}
	return -1
}

// config returns the Config the file describes, the architecture's Arch
// included, and the RoPE frequency divisors of its rope_scaling (nil for
// none).
func (h *hfConfig) config() (Config, []float32, error) {
	if len(h.Architectures) != 1 {
		return Config{}, nil, fmt.Errorf("model: config.json architectures %q: want exactly one", h.Architectures)
	}
	arch, ok := hfArchs[h.Architectures[0]]
	if !ok {
		return Config{}, nil, fmt.Errorf("model: architecture %q is not supported (supported: %s)",
			h.Architectures[0], strings.Join(slices.Sorted(maps.Keys(hfArchs)), ", "))
	}
	c := Config{
		Dim: h.HiddenSize, Hidden: h.IntermediateSize, Layers: h.Layers, Heads: h.Heads, KVHeads: h.KVHeads,
		Vocab: h.VocabSize, MaxSeqLen: h.MaxPositions, RopeTheta: float32(h.RopeTheta), NormEps: float32(h.RMSNormEps),
		BOS: tokenID(h.BOS), EOS: tokenID(h.EOS), SharedClassifier: h.TieWordEmbeddings, Arch: arch,
	}
	if c.KVHeads == 0 {
		c.KVHeads = c.Heads
	}
	if c.RopeTheta == 0 {
		c.RopeTheta = 10000
	}
	if c.NormEps == 0 {
		c.NormEps = 1e-6
	}
	if c.MaxSeqLen == 0 {
		c.MaxSeqLen = 2048
	}
	if h.HeadDim != 0 && (c.Heads == 0 || h.HeadDim != c.Dim/c.Heads || c.Dim%c.Heads != 0) {
		c.HeadWidth = h.HeadDim
	}
	if err := c.Validate(); err != nil {
		return Config{}, nil, err
	}
	s := h.RopeScaling
	if s == nil {
		return c, nil, nil
	}
	typ := s.RopeType
	if typ == "" {
		typ = s.Type
	}
	switch typ {
	case "", "default":
		return c, nil, nil
	case "llama3":
		f, err := Llama3RopeFactors(float64(c.RopeTheta), c.HeadDim(), RopeScaling{Factor: s.Factor,
			LowFreqFactor: s.LowFreqFactor, HighFreqFactor: s.HighFreqFactor, OriginalContext: s.OriginalContext})
		return c, f, err
	}
	return Config{}, nil, fmt.Errorf("model: config.json rope_scaling type %q is not supported (default, llama3)", typ)
}

// loadHF loads a Hugging Face model folder: config.json, the weights in
// model.safetensors or the shards model.safetensors.index.json names
// (F32, F16 or BF16, kept in their type until Model.Close, copied into
// huge pages if resident, mapped otherwise), and tokenizer.json when
// present.
func loadHF(dir string, resident bool) (*Model, error) {
	js, err := sidefile.Read(filepath.Join(dir, "config.json"), MaxConfigJSONBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("model: a model folder needs config.json: %w", err)
	}
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	var h hfConfig
	if err := json.Unmarshal(js, &h); err != nil {
		return nil, fmt.Errorf("model: config.json: %w", err)
	}
	c, factors, err := h.config()
	if err != nil {
		return nil, err
	}
	tok, err := loadHFTokenizer(dir)
	if err != nil {
		return nil, err
	}
	if tok != nil {
		if tok.VocabSize() > c.Vocab {
			return nil, fmt.Errorf("model: tokenizer.json has %d tokens, the model %d", tok.VocabSize(), c.Vocab)
		}
		if c.BOS < 0 {
			c.BOS = tok.BOS()
		}
		if c.EOS < 0 {
			c.EOS = tok.EOS()
		}
	}
	st, err := safetensors.OpenDir(dir)
	if err != nil {
		return nil, err
	}
	if resident {
		if err := st.Resident(); err != nil {
			return nil, errors.Join(err, st.Close())
		}
	}
	m, err := fromSafetensors(st, c, factors)
	if err != nil {
		return nil, errors.Join(err, st.Close())
	}
	m.closers, m.mapped = append(m.closers, st), !resident
	m.Name = filepath.Base(filepath.Clean(dir))
	if tok != nil {
		m.Tokenizer = tok
	}
	return m, nil
}

// The most bytes read of a model folder's JSON side files: real ones are a
// few KB (config.json, tokenizer_config.json, which may carry a chat
// template) and some MB (tokenizer.json of a 256K-token vocabulary is
// under 20 MB). A larger file is refused with an error naming it.
const (
	MaxConfigJSONBytes          = 1 * sidefile.MiB
	MaxTokenizerJSONBytes       = 64 * sidefile.MiB
	MaxTokenizerConfigJSONBytes = 16 * sidefile.MiB
)

// loadHFTokenizer reads the folder's tokenizer.json and, if present,
// tokenizer_config.json, each bounded by its limit; nil when the folder
// has no tokenizer.json.
func loadHFTokenizer(dir string) (*bpe.Tokenizer, error) {
	tj, err := sidefile.Read(filepath.Join(dir, "tokenizer.json"), MaxTokenizerJSONBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	cj, err := sidefile.Read(filepath.Join(dir, "tokenizer_config.json"), MaxTokenizerConfigJSONBytes)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("model: %w", err)
	}
	return bpe.FromHF(tj, cj)
}

// fromSafetensors builds the Model of config c from st's tensors under
// Hugging Face's names.
func fromSafetensors(st *safetensors.Model, c Config, factors []float32) (*Model, error) {
	if n := len(st.Names()); c.Layers > n/9 {
		return nil, fmt.Errorf("model: config.json num_hidden_layers %d, but the weights have %d tensors", c.Layers, n)
	}
	m := &Model{Config: c, Layers: make([]Layer, c.Layers)}
	var errs []error
	load := func(dst *kernels.Tensor, name string) {
		t, ok := st.Tensor(name)
		if !ok {
			errs = append(errs, fmt.Errorf("model: tensor %q missing", name))
			return
		}
		typ, ok := hfDTypes[t.DType]
		if !ok {
			errs = append(errs, fmt.Errorf("model: tensor %q has dtype %s; F32, F16 and BF16 are supported", name, t.DType))
			return
		}
		// Shapes are outermost first: a matrix is [out, in]. Model.check
		// compares them with the config.
		var rows, cols int
		switch len(t.Shape) {
		case 1:
			rows, cols = 1, t.Shape[0]
		case 2:
			rows, cols = t.Shape[0], t.Shape[1]
		default:
			errs = append(errs, fmt.Errorf("model: tensor %q has shape %v, not a vector or a matrix", name, t.Shape))
			return
		}
		*dst = kernels.Tensor{Type: typ, Rows: rows, Cols: cols, Data: t.Data}
		m.named = append(m.named, namedTensor{name, *dst})
	}
	load(&m.Embedding, "model.embed_tokens.weight")
	load(&m.FinalNorm, "model.norm.weight")
	m.Classifier = m.Embedding
	if _, ok := st.Tensor("lm_head.weight"); ok && !c.SharedClassifier {
		load(&m.Classifier, "lm_head.weight")
	} else {
		m.Config.SharedClassifier = true
	}
	for i := range m.Layers {
		l := &m.Layers[i]
		p := fmt.Sprintf("model.layers.%d.", i)
		load(&l.AttnNorm, p+"input_layernorm.weight")
		load(&l.Wq, p+"self_attn.q_proj.weight")
		load(&l.Wk, p+"self_attn.k_proj.weight")
		load(&l.Wv, p+"self_attn.v_proj.weight")
		load(&l.Wo, p+"self_attn.o_proj.weight")
		if c.Arch.QKVBias {
			load(&l.Bq, p+"self_attn.q_proj.bias")
			load(&l.Bk, p+"self_attn.k_proj.bias")
			load(&l.Bv, p+"self_attn.v_proj.bias")
		}
		if c.Arch.QKNorm {
			load(&l.QNorm, p+"self_attn.q_norm.weight")
			load(&l.KNorm, p+"self_attn.k_norm.weight")
		}
		load(&l.FFNNorm, p+"post_attention_layernorm.weight")
		load(&l.W1, p+"mlp.gate_proj.weight")
		load(&l.W2, p+"mlp.down_proj.weight")
		load(&l.W3, p+"mlp.up_proj.weight")
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return m.finish(factors)
}
