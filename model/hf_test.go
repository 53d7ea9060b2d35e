package model

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/prefixd/prefixd/internal/vocabtest"
	"github.com/prefixd/prefixd/kernels"
	"github.com/prefixd/prefixd/kernels/quant"
	"github.com/prefixd/prefixd/safetensors"
	"github.com/prefixd/prefixd/safetensors/safetensorstest"
)

// hfCases are the Hugging Face architectures, the GGUF ones that llama.cpp's
// converter maps them to, and their layer options in GGUF.
var hfCases = []struct {
	hf, gguf string
	arch     Arch
}{
	{"LlamaForCausalLM", "llama", Arch{}},
	{"MistralForCausalLM", "mistral", Arch{}},
	{"Qwen2ForCausalLM", "qwen2", Arch{Rope: kernels.RopeHalves, QKVBias: true}},
	{"Qwen3ForCausalLM", "qwen3", Arch{Rope: kernels.RopeHalves, QKNorm: true}},
}

// roundTo replaces every value of m's tensors by the nearest value of
// dtype ("F16", "BF16"; "F32" keeps them), so that a file of that dtype
// holds m exactly.
func roundTo(m *Model, dtype string) {
	round := map[string]func(float32) float32{
		"F32":  func(f float32) float32 { return f },
		"F16":  func(f float32) float32 { return quant.F16ToF32(quant.F32ToF16(f)) },
		"BF16": func(f float32) float32 { return quant.BF16ToF32(quant.F32ToBF16(f)) },
	}[dtype]
	for _, t := range m.tensors() {
		for i, f := range fl(t) {
			fl(t)[i] = round(f)
		}
	}
}

// tensors lists every tensor of m (the classifier once, even when tied).
func (m *Model) tensors() []kernels.Tensor {
	out := []kernels.Tensor{m.Embedding, m.FinalNorm}
	if !m.Config.SharedClassifier {
		out = append(out, m.Classifier)
	}
	for _, l := range m.Layers {
		for _, t := range []kernels.Tensor{l.AttnNorm, l.Wq, l.Wk, l.Wv, l.Wo, l.FFNNorm, l.W1, l.W2, l.W3, l.Bq, l.Bk, l.Bv, l.QNorm, l.KNorm} {
			if t.Rows != 0 {
				out = append(out, t)
			}
		}
	}
	return out
}

// writeHF writes m, whose Arch is a Hugging Face layout (rotate halves),
// as a Hugging Face folder of architecture arch with its weights in dtype:
// config.json and model.safetensors, or shards of 5 tensors and their
// index when sharded. extra adds to config.json.
func writeHF(t testing.TB, m *Model, arch, dtype string, sharded bool, extra map[string]any) string {
	t.Helper()
	c := m.Config
	cfg := map[string]any{
		"architectures": []string{arch}, "hidden_size": c.Dim, "intermediate_size": c.Hidden,
		"num_hidden_layers": c.Layers, "num_attention_heads": c.Heads, "num_key_value_heads": c.KVHeads,
		"head_dim": c.HeadDim(), "vocab_size": c.Vocab, "max_position_embeddings": c.MaxSeqLen,
		"rms_norm_eps": c.NormEps, "rope_theta": c.RopeTheta, "tie_word_embeddings": c.SharedClassifier,
		"bos_token_id": nil, "eos_token_id": nil, "torch_dtype": strings.ToLower(dtype),
	}
	for k, v := range extra {
		cfg[k] = v
	}
	dir := t.TempDir()
	js, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), js, 0o644); err != nil {
		t.Fatal(err)
	}
	var ts []safetensors.Tensor
	add := func(name string, w kernels.Tensor) {
		if w.Rows == 0 {
			return
		}
		var data []byte
		for _, f := range fl(w) {
			switch dtype {
			case "F32":
				data = binary.LittleEndian.AppendUint32(data, math.Float32bits(f))
			case "F16":
				data = binary.LittleEndian.AppendUint16(data, quant.F32ToF16(f))
			case "BF16":
				data = binary.LittleEndian.AppendUint16(data, quant.F32ToBF16(f))
			}
		}
		shape := []int{w.Rows, w.Cols}
		if w.Rows == 1 && !strings.HasSuffix(name, "embed_tokens.weight") {
			shape = []int{w.Cols}
		}
		ts = append(ts, safetensors.Tensor{Name: name, DType: dtype, Shape: shape, Data: data})
	}
	add("model.embed_tokens.weight", m.Embedding)
	add("model.norm.weight", m.FinalNorm)
	if !c.SharedClassifier {
		add("lm_head.weight", m.Classifier)
	}
	for i, l := range m.Layers {
		p := fmt.Sprintf("model.layers.%d.", i)
		add(p+"input_layernorm.weight", l.AttnNorm)
		add(p+"self_attn.q_proj.weight", l.Wq)
		add(p+"self_attn.k_proj.weight", l.Wk)
		add(p+"self_attn.v_proj.weight", l.Wv)
		add(p+"self_attn.o_proj.weight", l.Wo)
		add(p+"self_attn.q_proj.bias", l.Bq)
		add(p+"self_attn.k_proj.bias", l.Bk)
		add(p+"self_attn.v_proj.bias", l.Bv)
		add(p+"self_attn.q_norm.weight", l.QNorm)
		add(p+"self_attn.k_norm.weight", l.KNorm)
		add(p+"post_attention_layernorm.weight", l.FFNNorm)
		add(p+"mlp.gate_proj.weight", l.W1)
		add(p+"mlp.down_proj.weight", l.W2)
		add(p+"mlp.up_proj.weight", l.W3)
	}
	if sharded {
		err = safetensorstest.WriteSharded(dir, ts, 5)
	} else {
		err = safetensorstest.WriteFile(filepath.Join(dir, safetensors.SingleFile), ts, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// asGGUF returns the model llama.cpp's converter makes of hf, a Hugging
// Face model (rotate-halves layout): for llama and mistral, q and k rows
// permuted into adjacent pairs.
func asGGUF(hf *Model, arch Arch) *Model {
	gg := *hf
	gg.Config.Arch = arch
	gg.Layers = append([]Layer(nil), hf.Layers...)
	if arch.Rope == kernels.RopeAdjacent {
		c := hf.Config
		for i := range gg.Layers {
			gg.Layers[i].Wq = kernels.FromF32(hfPermute(fl(hf.Layers[i].Wq), c.Heads, c.HeadDim()), c.QDim(), c.Dim)
			gg.Layers[i].Wk = kernels.FromF32(hfPermute(fl(hf.Layers[i].Wk), c.KVHeads, c.HeadDim()), c.KVDim(), c.Dim)
		}
	}
	return &gg
}

// decodeLogits runs prompt as one prefill and then each of more as a
// decode step, and returns the logits of every step.
func decodeLogits(t *testing.T, m *Model, prompt, more []int32) [][]float32 {
	t.Helper()
	h := newHarness(t, m, 8, 4)
	tb := h.pool.NewTable()
	out := [][]float32{h.prefill(t, tb, prompt)}
	for _, tok := range more {
		out = append(out, h.prefill(t, tb, []int32{tok}))
	}
	return out
}

// maxDiffSteps is the largest difference between two runs' logits.
func maxDiffSteps(a, b [][]float32) float64 {
	d := 0.0
	for i := range a {
		d = math.Max(d, maxDiff32(a[i], b[i]))
	}
	return d
}

// TestHFMatchesGGUF writes the same random weights as a Hugging Face
// folder (every architecture, F32, F16 and BF16, single and sharded) and
// as GGUF the way llama.cpp's converter does (q/k permuted for llama and
// mistral), and checks that both load to the same logits: exactly where
// the two runs compute the same operations (F32, rotate-halves
// architectures), within float32 summation order where the GGUF's
// adjacent RoPE pairs change it, and within F16/BF16 products (converted
// on the fly) against the GGUF's F32 copy of the same rounded values.
// Both are also checked against the float64 reference.
func TestHFMatchesGGUF(t *testing.T) {
	prompt, more := []int32{3, 14, 15, 9, 26, 5}, []int32{35, 8, 39}
	for i, hc := range hfCases {
		for j, dtype := range []string{"F32", "F16", "BF16"} {
			t.Run(hc.hf+"/"+dtype, func(t *testing.T) {
				hfArch := hc.arch
				hfArch.Rope = kernels.RopeHalves
				c := Config{Dim: 32, Hidden: 48, Layers: 2, Heads: 4, KVHeads: 2, Vocab: 40, MaxSeqLen: 64,
					RopeTheta: 10000, NormEps: 1e-5, BOS: -1, EOS: -1, Arch: hfArch, SharedClassifier: j == 1}
				src := Random(c, uint64(60+i*3+j))
				roundTo(src, dtype)
				hm, err := Load(writeHF(t, src, hc.hf, dtype, j == 2, nil))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { hm.Close() })
				if err := sameWeights(hm, src); err != nil {
					t.Fatal(err)
				}
				gm, err := Load(writeGGUF(t, asGGUF(src, hc.arch), ggufFile{arch: hc.gguf}))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { gm.Close() })
				a, b := decodeLogits(t, hm, prompt, more), decodeLogits(t, gm, prompt, more)
				tol := 0.0
				switch {
				case dtype != "F32":
					tol = 1e-4
				case hc.arch.Rope == kernels.RopeAdjacent:
					tol = 1e-5
				}
				if d := maxDiffSteps(a, b); d > tol {
					t.Fatalf("safetensors and GGUF logits differ by %g (tolerance %g)", d, tol)
				}
				compareWithReference(t, hm, newReference(src), append(prompt, more...))
			})
		}
	}
}

// TestHFConfig checks what config.json sets beyond the shape: llama3
// rope scaling (the divisors Llama3RopeFactors computes), a head width
// apart from dim/heads, and the errors for what is not supported.
func TestHFConfig(t *testing.T) {
	c := Config{Dim: 32, Hidden: 48, Layers: 1, Heads: 4, KVHeads: 2, Vocab: 40, MaxSeqLen: 64, RopeTheta: 500000,
		NormEps: 1e-5, BOS: -1, EOS: -1, Arch: Arch{Rope: kernels.RopeHalves}, HeadWidth: 16}
	src := Random(c, 70)
	l3 := map[string]any{"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
		"original_max_position_embeddings": 16}
	m, err := Load(writeHF(t, src, "LlamaForCausalLM", "F32", false, map[string]any{"rope_scaling": l3}))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	want, err := Llama3RopeFactors(500000, 16, RopeScaling{Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalContext: 16})
	if err != nil {
		t.Fatal(err)
	}
	if m.Config.HeadDim() != 16 || fmt.Sprint(fl(m.RopeFactors)) != fmt.Sprint(want) {
		t.Fatalf("head width %d, rope factors %v; want 16, %v", m.Config.HeadDim(), fl(m.RopeFactors), want)
	}
	src.RopeFactors = vecT(want)
	compareWithReference(t, m, newReference(src), []int32{1, 2, 3, 30, 31, 32, 33, 34, 35, 36, 37})
	for _, tc := range []struct {
		name  string
		arch  string
		extra map[string]any
		want  string
	}{
		{"unknown architecture", "GPT2LMHeadModel", nil, `"GPT2LMHeadModel" is not supported`},
		{"yarn", "LlamaForCausalLM", map[string]any{"rope_scaling": map[string]any{"rope_type": "yarn", "factor": 4.0}}, `"yarn" is not supported`},
		{"bad shape", "LlamaForCausalLM", map[string]any{"hidden_size": 64}, "want"},
		{"no config", "", nil, "config.json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeHF(t, src, tc.arch, "F32", false, tc.extra)
			if tc.arch == "" {
				os.Remove(filepath.Join(dir, "config.json"))
			}
			_, err := Load(dir)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Load = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestHFTokenizer loads a folder with Llama 3's tokenizer.json and
// tokenizer_config.json beside random weights: the model carries that
// vocabulary (BOS and EOS from it when config.json has none) and refuses
// a tokenizer larger than its embedding.
func TestHFTokenizer(t *testing.T) {
	src := vocabtest.Path(t, "tokenizers/llama3")
	c := Config{Dim: 16, Hidden: 16, Layers: 1, Heads: 2, KVHeads: 1, Vocab: 128256, MaxSeqLen: 64,
		RopeTheta: 500000, NormEps: 1e-5, BOS: -1, EOS: -1, Arch: Arch{Rope: kernels.RopeHalves}, SharedClassifier: true}
	m := Random(c, 90)
	for _, tc := range []struct {
		vocab int
		want  string
	}{{128256, ""}, {1000, "tokenizer.json has 128256 tokens, the model 1000"}} {
		m.Config.Vocab = tc.vocab
		m.Embedding = kernels.FromF32(fl(m.Embedding)[:tc.vocab*c.Dim], tc.vocab, c.Dim)
		m.Classifier = m.Embedding
		dir := writeHF(t, m, "LlamaForCausalLM", "BF16", false, nil)
		for _, f := range []string{"tokenizer.json", "tokenizer_config.json"} {
			b, err := os.ReadFile(filepath.Join(src, f))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		got, err := Load(dir)
		if tc.want != "" {
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Load = %v, want an error containing %q", err, tc.want)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		defer got.Close()
		tok := got.Tokenizer
		if tok == nil || tok.VocabSize() != 128256 || got.Config.BOS != tok.BOS() || got.Config.EOS != tok.EOS() || tok.BOS() < 0 {
			t.Fatalf("tokenizer %v, BOS/EOS %d/%d", tok, got.Config.BOS, got.Config.EOS)
		}
		if text := "Hello, world!"; tok.Decode(tok.Encode(text)) != text {
			t.Fatalf("%q does not round-trip: %v", text, tok.Encode(text))
		}
	}
}

// TestHFTensorShapes refuses a folder whose final norm is a scalar (a
// tensor of no dimensions) or of the wrong width, naming it.
func TestHFTensorShapes(t *testing.T) {
	c := Config{Dim: 32, Hidden: 48, Layers: 1, Heads: 4, KVHeads: 2, Vocab: 40, MaxSeqLen: 64, RopeTheta: 10000,
		NormEps: 1e-5, BOS: -1, EOS: -1, Arch: Arch{Rope: kernels.RopeHalves}}
	for _, tc := range []struct {
		name  string
		shape []int
		want  string
	}{
		{"scalar", nil, `"model.norm.weight" has shape [], not a vector or a matrix`},
		{"narrow", []int{16}, "final norm is 1×16, want 1×32"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeHF(t, Random(c, 99), "LlamaForCausalLM", "F32", false, nil)
			st, err := safetensors.OpenDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			var ts []safetensors.Tensor
			for _, name := range st.Names() {
				x, _ := st.Tensor(name)
				x.Data = append([]byte(nil), x.Data...)
				if name == "model.norm.weight" {
					x.Shape, x.Data = []int{}, x.Data[:4] // a scalar
					if tc.shape != nil {
						x.Shape, x.Data = tc.shape, x.Data[:4*tc.shape[0]]
					}
				}
				ts = append(ts, x)
			}
			st.Close()
			if err := safetensorstest.WriteFile(filepath.Join(dir, safetensors.SingleFile), ts, nil); err != nil {
				t.Fatal(err)
			}
			if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Load = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// FuzzHFConfig feeds arbitrary config.json contents to the reader: it
// must return a valid Config (with factors of half its head width, if
// any) or an error, never panic.
func FuzzHFConfig(f *testing.F) {
	f.Add([]byte(`{"architectures":["LlamaForCausalLM"],"hidden_size":32,"intermediate_size":48,"num_hidden_layers":2,
		"num_attention_heads":4,"num_key_value_heads":2,"vocab_size":40,"rope_scaling":{"rope_type":"llama3","factor":8,
		"low_freq_factor":1,"high_freq_factor":4,"original_max_position_embeddings":8192},"eos_token_id":[2,3]}`))
	f.Add([]byte(`{"architectures":["Qwen3ForCausalLM"],"hidden_size":1024,"intermediate_size":3072,"num_hidden_layers":28,
		"num_attention_heads":16,"num_key_value_heads":8,"head_dim":128,"vocab_size":151936,"tie_word_embeddings":true}`))
	f.Add([]byte(`{"architectures":["Qwen2ForCausalLM"],"hidden_size":7,"num_attention_heads":0,"rope_scaling":{"type":"yarn"}}`))
	f.Fuzz(func(t *testing.T, js []byte) {
		var h hfConfig
		if json.Unmarshal(js, &h) != nil {
			return
		}
		c, factors, err := h.config()
		if err != nil {
			return
		}
		if verr := c.Validate(); verr != nil {
			t.Fatalf("config() accepted an invalid config: %v", verr)
		}
		if factors != nil && len(factors) != c.HeadDim()/2 {
			t.Fatalf("%d rope factors for a head of %d", len(factors), c.HeadDim())
		}
	})
}

// TestHFHostileSideFiles: a model folder's JSON files are read with a
// bound, and only when they are regular files: config.json or
// tokenizer.json linked to /dev/zero used to be read until memory ran out,
// and a named pipe blocked the load for ever. Each refusal names the file.
func TestHFHostileSideFiles(t *testing.T) {
	c := Config{Dim: 16, Hidden: 16, Layers: 1, Heads: 2, KVHeads: 1, Vocab: 32, MaxSeqLen: 64,
		RopeTheta: 10000, NormEps: 1e-5, BOS: -1, EOS: -1, Arch: Arch{Rope: kernels.RopeHalves}, SharedClassifier: true}
	m := Random(c, 91)
	devZero := func(t *testing.T, path string) {
		if _, err := os.Stat("/dev/zero"); err != nil {
			t.Skip("no /dev/zero")
		}
		os.Remove(path)
		if err := os.Symlink("/dev/zero", path); err != nil {
			t.Skip(err)
		}
	}
	pipe := func(t *testing.T, path string) {
		os.Remove(path)
		if err := syscall.Mkfifo(path, 0o600); err != nil {
			t.Skip(err)
		}
	}
	padded := func(limit int) func(*testing.T, string) {
		return func(t *testing.T, path string) {
			b, err := os.ReadFile(path)
			if err != nil {
				b = []byte("{}")
			}
			b = append(b, bytes.Repeat([]byte(" "), limit+1-len(b))...) // valid JSON, one byte too long
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, tc := range []struct {
		name, file string
		spoil      func(*testing.T, string)
		want       string
	}{
		{"config.json on /dev/zero", "config.json", devZero, "not a regular file"},
		{"tokenizer.json on /dev/zero", "tokenizer.json", devZero, "not a regular file"},
		{"tokenizer_config.json on /dev/zero", "tokenizer_config.json", func(t *testing.T, path string) {
			// tokenizer_config.json is read only beside a tokenizer.json.
			os.WriteFile(filepath.Join(filepath.Dir(path), "tokenizer.json"), []byte("{}"), 0o644)
			devZero(t, path)
		}, "not a regular file"},
		{"config.json a pipe", "config.json", pipe, "not a regular file"},
		{"tokenizer.json a pipe", "tokenizer.json", pipe, "not a regular file"},
		{"model.safetensors on /dev/zero", "model.safetensors", devZero, "not a regular file"},
		{"config.json too long", "config.json", padded(MaxConfigJSONBytes), "larger than 1 MiB"},
		{"tokenizer.json too long", "tokenizer.json", padded(MaxTokenizerJSONBytes), "larger than 64 MiB"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeHF(t, m, "LlamaForCausalLM", "F32", false, nil)
			path := filepath.Join(dir, tc.file)
			tc.spoil(t, path)
			got, err := Load(dir)
			if err == nil {
				got.Close()
				t.Fatalf("Load accepted a folder with %s", tc.name)
			}
			if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Load = %v, want an error naming %s and saying %q", err, path, tc.want)
			}
		})
	}
	t.Run("model file on /dev/zero", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "model.gguf")
		devZero(t, path)
		if _, err := Load(path); err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Fatalf("Load = %v", err)
		}
	})
	t.Run("model file a pipe", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "model.gguf")
		pipe(t, path)
		if _, err := Load(path); err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Fatalf("Load = %v", err)
		}
	})
}
