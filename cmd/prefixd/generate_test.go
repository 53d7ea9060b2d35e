package main

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/prefixd/prefixd/kernels"
	"github.com/prefixd/prefixd/model"
)

// sharedModel returns the path of a test model in ../shared/models next to
// the module root, skipping the test when it is absent.
func sharedModel(t *testing.T, name string) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Skip("go.mod not found above the test directory")
		}
		dir = parent
	}
	p := filepath.Join(dir, "..", "shared", "models", name)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("test model %s not available: %v", p, err)
	}
	return p
}

func runArgs(args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = dispatch(args, &o, &e)
	return code, o.String(), e.String()
}

// parseOut parses --ids output: one line of space-separated integers.
func parseOut(t *testing.T, s string) []int32 {
	t.Helper()
	if !strings.HasSuffix(s, "\n") || strings.Count(s, "\n") != 1 {
		t.Fatalf("--ids output %q is not exactly one line", s)
	}
	var ids []int32
	for _, f := range strings.Fields(s) {
		v, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("--ids output %q: %v", s, err)
		}
		ids = append(ids, int32(v))
	}
	return ids
}

func TestGenerateUsageErrors(t *testing.T) {
	cases := []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"no subcommand", nil, 2, "usage: prefixd"},
		{"unknown subcommand", []string{"frobnicate"}, 2, "unknown subcommand"},
		{"no prompt", []string{"generate"}, 2, "exactly one of"},
		{"both prompts", []string{"generate", "--prompt", "a", "--prompt-ids", "1"}, 2, "exactly one of"},
		{"bad flag", []string{"generate", "--nope"}, 2, "not defined"},
		{"stray argument", []string{"generate", "--prompt", "a", "extra"}, 2, "unexpected argument"},
		{"id out of range", []string{"generate", "--prompt-ids", "1 258"}, 2, "outside the vocabulary"},
		{"negative id", []string{"generate", "--prompt-ids", "-1"}, 2, "outside the vocabulary"},
		{"non-numeric id", []string{"generate", "--prompt-ids", "1 x"}, 2, "not an integer"},
		{"zero max tokens", []string{"generate", "--prompt", "a", "--max-tokens", "0"}, 2, "--max-tokens"},
		{"negative temperature", []string{"generate", "--prompt", "a", "--temperature", "-1"}, 2, "temperature"},
		{"missing model file", []string{"generate", "--prompt", "a", "--model", "/nonexistent/m.gguf"}, 1, "no such file"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, out, errOut := runArgs(c.args...)
			if code != c.code {
				t.Fatalf("exit %d, want %d (stderr %q)", code, c.code, errOut)
			}
			if out != "" {
				t.Fatalf("stdout %q on error", out)
			}
			if !strings.Contains(errOut, c.msg) {
				t.Fatalf("stderr %q does not mention %q", errOut, c.msg)
			}
		})
	}
}

func TestGenerateBuiltinIDs(t *testing.T) {
	code, out, errOut := runArgs("generate", "--prompt", "Hello", "--max-tokens", "12", "--ids")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	got := parseOut(t, out)
	if len(got) == 0 || len(got) > 12 {
		t.Fatalf("%d tokens, want 1..12: %v", len(got), got)
	}
	for i, id := range got {
		if id < 0 || int(id) >= model.BuiltinConfig.Vocab || id == model.ByteEOS && i != len(got)-1 {
			t.Fatalf("token %d at %d out of place in %v", id, i, got)
		}
	}
	// Greedy is deterministic, and the text prompt is BOS + its bytes.
	_, again, _ := runArgs("generate", "--prompt-ids", "256 72 101 108 108 111", "--max-tokens", "12", "--ids")
	if again != out {
		t.Fatalf("--prompt-ids of the same tokens gave %q, --prompt gave %q", again, out)
	}
	// Sampling with a seed repeats itself.
	a1, s1, _ := runArgs("generate", "--prompt", "Hi", "--temperature", "1", "--seed", "5", "--ids")
	_, s2, _ := runArgs("generate", "--prompt", "Hi", "--temperature", "1", "--seed", "5", "--ids")
	if a1 != 0 || s1 != s2 {
		t.Fatalf("seeded sampling differs: %q vs %q", s1, s2)
	}
}

func TestGenerateBuiltinText(t *testing.T) {
	code, out, errOut := runArgs("generate", "--prompt", "Hello", "--max-tokens", "8")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	_, ids, _ := runArgs("generate", "--prompt", "Hello", "--max-tokens", "8", "--ids")
	gen := parseOut(t, ids)
	if want := (model.ByteTokenizer{}).Decode(gen) + "\n"; out != want {
		t.Fatalf("text %q, want the decoded ids %q", out, want)
	}
}

func TestGenerateStories260K(t *testing.T) {
	path := sharedModel(t, "stories260K.bin")
	code, _, errOut := runArgs("generate", "--model", path, "--prompt", "Once")
	if code != 2 || !strings.Contains(errOut, "--prompt-ids") {
		t.Fatalf("--prompt on a model without vocabulary: exit %d, stderr %q", code, errOut)
	}
	code, out, errOut := runArgs("generate", "--model", path, "--prompt-ids", "1", "--max-tokens", "20", "--ids")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if got := parseOut(t, out); len(got) == 0 || len(got) > 20 {
		t.Fatalf("%d tokens, want 1..20", len(got))
	}
	if code, _, errOut = runArgs("generate", "--model", path, "--prompt-ids", "512"); code != 2 {
		t.Fatalf("token 512 of a 512-token vocabulary: exit %d, stderr %q", code, errOut)
	}
}

// TestGenerateWithTokenizerFile gives the GGUF model llama2.c's file of the
// same Llama-2 vocabulary: a text prompt then encodes, and generates, as
// with the vocabulary the GGUF file carries.
func TestGenerateWithTokenizerFile(t *testing.T) {
	gguf, bin := sharedModel(t, "llama-2-tiny-random.gguf"), sharedModel(t, "llama2-tokenizer.bin")
	args := []string{"generate", "--model", gguf, "--prompt", "Hello world", "--max-tokens", "6", "--ids"}
	code, own, stderr := runArgs(args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	code, file, stderr := runArgs(append(args, "--tokenizer", bin)...)
	if code != 0 || file != own {
		t.Fatalf("with --tokenizer: exit %d, %q (%s), want %q", code, file, stderr, own)
	}
	if code, _, stderr := runArgs(append(args, "--tokenizer", gguf)...); code != 2 || !strings.Contains(stderr, "--tokenizer") {
		t.Fatalf("a GGUF file as tokenizer.bin: exit %d, %q (want a usage error naming --tokenizer)", code, stderr)
	}
}

// TestCheckTensorsFlag writes a GGUF model with one NaN weight: generate
// and serve run it without --check-tensors (nothing looks at the values
// before a forward pass) and refuse it with the flag, naming the tensor
// and the index; a clean file passes the check.
func TestCheckTensorsFlag(t *testing.T) {
	c := model.Config{Dim: 32, Hidden: 64, Layers: 1, Heads: 2, KVHeads: 1, Vocab: 40, MaxSeqLen: 64,
		RopeTheta: 10000, NormEps: 1e-5, BOS: -1, EOS: -1, SharedClassifier: true}
	dir := t.TempDir()
	write := func(name string, spoil bool) string {
		m := model.Random(c, 3)
		if spoil {
			f, _ := m.Layers[0].W3.F32()
			f[5*c.Dim+7] = float32(math.NaN())
		}
		var buf bytes.Buffer
		if err := model.WriteGGUF(&buf, m, kernels.F32); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	bad, good := write("bad.gguf", true), write("good.gguf", false)
	want := `tensor "blk.0.ffn_up.weight": value 167 (row 5, column 7) is NaN`
	if code, _, stderr := runArgs("generate", "--model", bad, "--prompt-ids", "1 2", "--max-tokens", "1"); code != 0 {
		t.Fatalf("without --check-tensors: exit %d: %s", code, stderr)
	}
	if code, _, stderr := runArgs("generate", "--model", bad, "--prompt-ids", "1 2", "--max-tokens", "1", "--check-tensors"); code != 1 || !strings.Contains(stderr, want) {
		t.Errorf("generate --check-tensors: exit %d, stderr %q lacks %q", code, stderr, want)
	}
	if code, _, stderr := runArgs("generate", "--model", good, "--prompt-ids", "1 2", "--max-tokens", "1", "--check-tensors"); code != 0 || !strings.Contains(stderr, "checked tensors") {
		t.Errorf("a clean model: exit %d: %s", code, stderr)
	}
	if code, stderr := serveRefused(t, []string{"--model", bad, "--check-tensors", "--addr", "127.0.0.1:0", "--blocks", "8"}, nil); code != 1 || !strings.Contains(stderr, want) {
		t.Errorf("serve --check-tensors: exit %d, stderr %q lacks %q", code, stderr, want)
	}
}

// TestGenerateMmap: a GGUF model generates the same greedy tokens from
// its copy in huge pages (the default) and from the file's mapping
// (--mmap).
func TestGenerateMmap(t *testing.T) {
	path := sharedModel(t, "llama-2-tiny-random.gguf")
	var outs []string
	for _, flag := range []string{"--mmap=false", "--mmap"} {
		code, out, errOut := runArgs("generate", "--model", path, "--prompt-ids", "1 15043 29892", "--max-tokens", "16", "--ids", flag)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", flag, code, errOut)
		}
		outs = append(outs, out)
	}
	if got := parseOut(t, outs[0]); len(got) == 0 || outs[0] != outs[1] {
		t.Errorf("copied %q, mapped %q: want the same tokens", outs[0], outs[1])
	}
}
