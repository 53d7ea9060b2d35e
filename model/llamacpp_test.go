package model

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/prefixd/prefixd/gguf"
	"github.com/prefixd/prefixd/kernels"
)

// llamaCppVocab is tokenizer metadata llama.cpp needs to load a model: a
// SentencePiece vocabulary of <unk>, <s>, </s>, the 256 byte tokens (its
// tokenizer falls back on them for any text, which node-llama-cpp
// tokenizes at load) and made-up pieces up to n.
func llamaCppVocab(n int) []gguf.KV {
	tokens := make([]string, n)
	scores := make([]float32, n)
	types := make([]int32, n)
	for i := range tokens {
		tokens[i], types[i] = fmt.Sprintf("tok%d", i), 1 // normal
		if b := i - 3; b >= 0 && b < 256 {
			tokens[i], types[i] = fmt.Sprintf("<0x%02X>", b), 6 // byte
		}
	}
	tokens[0], tokens[1], tokens[2] = "<unk>", "<s>", "</s>"
	types[0], types[1], types[2] = 2, 3, 3 // unknown, control, control
	return []gguf.KV{
		{Key: "tokenizer.ggml.model", Value: "llama"}, {Key: "tokenizer.ggml.tokens", Value: tokens},
		{Key: "tokenizer.ggml.scores", Value: scores}, {Key: "tokenizer.ggml.token_type", Value: types},
		{Key: "tokenizer.ggml.bos_token_id", Value: uint32(1)}, {Key: "tokenizer.ggml.eos_token_id", Value: uint32(2)},
	}
}

// maxAbs64 is the largest magnitude in x.
func maxAbs64(x []float64) float64 {
	m := 0.0
	for _, v := range x {
		m = max(m, v, -v)
	}
	return m
}

// TestGGUFMatchesLlamaCpp runs each architecture's GGUF file through
// llama.cpp itself and compares its logits with the Runner's: the
// independent check that prefixd reads every architecture's tensors and
// metadata as llama.cpp does. It needs node and node-llama-cpp (whose npm
// package ships llama.cpp's CPU build): set PREFIXD_LLAMACPP_NODE to the
// folder where `npm install node-llama-cpp@3.22.1` ran; it skips
// otherwise. (Mistral is left out: llama.cpp has no architecture of that
// name, and its Mistral files say llama.)
func TestGGUFMatchesLlamaCpp(t *testing.T) {
	dir := os.Getenv("PREFIXD_LLAMACPP_NODE")
	if dir == "" {
		t.Skip("PREFIXD_LLAMACPP_NODE not set (a folder with node_modules/node-llama-cpp)")
	}
	_, self, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(self), "..", "scripts", "llamacpp", "logits.mjs")
	prompt := []int32{1, 14, 150, 9, 260, 5, 35, 8, 299, 3, 22}
	cases := archCases()
	// Quantized files, kept in their types: llama.cpp multiplies them the
	// same way (activations quantized to Q8_0 or Q8_K blocks), on widths
	// of whole K-quant blocks.
	for _, typ := range []kernels.DType{kernels.Q8_0, kernels.Q4_K} {
		cases = append(cases, archCase{name: "llama " + typ.String(), c: quantConfig,
			file: ggufFile{arch: "llama", types: func(string) kernels.DType { return typ }}})
	}
	for i, a := range cases {
		if a.file.arch == "mistral" {
			continue
		}
		t.Run(a.name, func(t *testing.T) {
			a.c.Vocab, a.c.BOS, a.c.EOS = 300, 1, 2
			src := a.model(t, uint64(60+i))
			a.file.extra = llamaCppVocab(a.c.Vocab)
			path := writeGGUF(t, src, a.file)
			m, err := Load(path)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { m.Close() })
			h := newHarness(t, m, 8, 4)
			got := h.prefill(t, h.pool.NewTable(), prompt)
			args := []string{script, dir, path}
			for _, tok := range prompt {
				args = append(args, strconv.Itoa(int(tok)))
			}
			cmd := exec.Command("node", args...)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("node %v: %v\n%s", args, err, stderr.String())
			}
			var want []float64
			if err := json.Unmarshal(out, &want); err != nil || len(want) != len(got) {
				t.Fatalf("llama.cpp printed %d logits (%v) for %d: %.200s", len(want), err, len(got), out)
			}
			d := maxAbsDiff(got, want)
			t.Logf("max |prefixd - llama.cpp| = %.3g over %d logits", d, len(got))
			// llama.cpp keeps K/V as F16 by default, whose rounding moves
			// these logits by a few 1e-3; a wrong layout, bias or norm
			// moves them by tenths or more. With quantized weights both
			// round the activations to 8 bits, in blocks that are the same
			// but summed in other orders, and greedy ties may break apart.
			if a.file.types != nil {
				if tol := 0.05 * maxAbs64(want); d > tol {
					t.Fatalf("logits differ from llama.cpp's by %g (tolerance %g)", d, tol)
				}
				return
			}
			if d > 1e-2 || argmax32(got) != argmax64(want) {
				t.Fatalf("logits differ from llama.cpp's by %g (argmax %d vs %d)", d, argmax32(got), argmax64(want))
			}
		})
	}
}
