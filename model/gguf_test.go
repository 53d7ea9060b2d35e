package model

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/prefixd/prefixd/gguf"
	"github.com/prefixd/prefixd/internal/vocabtest"
)

func TestGGUFLoadsAndRuns(t *testing.T) {
	path := sharedModel(t, "llama-2-tiny-random.gguf")
	m, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	c := m.Config
	// The file's metadata: llama.embedding_length 8, block_count 1,
	// feed_forward_length 32, attention.head_count 2, head_count_kv 2,
	// context_length 4096, layer_norm_rms_epsilon 1e-5 (float32), no
	// rope.freq_base (10000 by default), tokenizer.ggml.bos/eos_token_id
	// 1/2, 32,000 tokens, and an output.weight tensor.
	want := Config{Dim: 8, Hidden: 32, Layers: 1, Heads: 2, KVHeads: 2, Vocab: 32000, MaxSeqLen: 4096,
		RopeTheta: 10000, NormEps: float32(9.999999747378752e-06), BOS: 1, EOS: 2}
	if c != want {
		t.Fatalf("config %+v, want %+v", c, want)
	}
	if m.Tokenizer == nil || m.Tokenizer.VocabSize() != 32000 || c.BOS != 1 || c.EOS != 2 {
		t.Fatalf("tokenizer %v, BOS %d EOS %d", m.Tokenizer, c.BOS, c.EOS)
	}
	h := newHarness(t, m, 8, 16)
	tb := h.pool.NewTable()
	ids := append([]int32{c.BOS}, m.Tokenizer.Encode("Hello world")...)
	logits := h.prefill(t, tb, ids)
	if len(logits) != c.Vocab {
		t.Fatalf("%d logits", len(logits))
	}
	for i, v := range logits {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			t.Fatalf("logit %d is %v", i, v)
		}
	}
}

var sampleTexts = []string{
	"Hello world",
	"The quick brown fox jumps over the lazy dog.",
	"  leading spaces, trailing spaces  ",
	"multiple   spaces\tand\ttabs",
	"line one\nline two\n\nline four",
	"numbers 12345 and 3.14159, punctuation!?;:",
	"unicode: café naïve résumé",
	"emoji 🙂🚀 and CJK 中文字符 日本語",
	"a",
	" ",
	"<0x41> looks like a byte token",
}

func TestTokenizersAgreeAndRoundTrip(t *testing.T) {
	m, err := Load(sharedModel(t, "llama-2-tiny-random.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	bin, err := LoadLlama2CTokenizer(sharedModel(t, "llama2-tokenizer.bin"), 32000)
	if err != nil {
		t.Fatal(err)
	}
	gguf := m.Tokenizer
	for _, s := range sampleTexts {
		a, b := gguf.Encode(s), bin.Encode(s)
		if len(a) == 0 || !equalIDs(a, b) {
			t.Fatalf("%q: GGUF %v, tokenizer.bin %v", s, a, b)
		}
		if got := gguf.Decode(a); got != s {
			t.Fatalf("GGUF round trip of %q gave %q", s, got)
		}
		if got := bin.Decode(b); got != s {
			t.Fatalf("tokenizer.bin round trip of %q gave %q", s, got)
		}
		// Streaming piece by piece yields the dummy space and then s.
		if got := streamed(gguf, append([]int32{gguf.BOS()}, a...)); got != " "+s {
			t.Fatalf("streamed GGUF pieces of %q gave %q", s, got)
		}
	}
	if gguf.BOS() != 1 || gguf.EOS() != 2 || bin.BOS() != 1 || bin.EOS() != 2 {
		t.Fatalf("BOS/EOS: GGUF %d/%d, tokenizer.bin %d/%d", gguf.BOS(), gguf.EOS(), bin.BOS(), bin.EOS())
	}
	// Known SentencePiece output: "Hello world" is ▁Hello ▁world.
	if ids := gguf.Encode("Hello world"); len(ids) != 2 || ids[0] != 15043 || ids[1] != 3186 {
		t.Fatalf("Hello world = %v, want [15043 3186]", ids)
	}
}

// streamed concatenates the pieces of ids as a streaming client would.
func streamed(tk Tokenizer, ids []int32) string {
	var b []byte
	for _, id := range ids {
		b = tk.AppendPiece(b, id)
	}
	return string(b)
}

func equalIDs(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestByteTokenizerRoundTrips(t *testing.T) {
	var tk ByteTokenizer
	for _, s := range sampleTexts {
		if got := tk.Decode(tk.Encode(s)); got != s {
			t.Fatalf("%q round trip gave %q", s, got)
		}
		if got := streamed(tk, tk.Encode(s)); got != s {
			t.Fatalf("%q streamed gave %q", s, got)
		}
	}
	if tk.Decode([]int32{ByteBOS, 'h', 'i', ByteEOS}) != "hi" {
		t.Fatal("special tokens decoded to text")
	}
}

// ggufHeader builds a GGUF prefix for malformed-file tests.
func ggufHeader(version uint32, tensors, kvs uint64) []byte {
	b := []byte("GGUF")
	b = binary.LittleEndian.AppendUint32(b, version)
	b = binary.LittleEndian.AppendUint64(b, tensors)
	return binary.LittleEndian.AppendUint64(b, kvs)
}

func TestMalformedFilesAreRejected(t *testing.T) {
	real, err := os.ReadFile(sharedModel(t, "llama-2-tiny-random.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	stories, err := os.ReadFile(sharedModel(t, "stories260K.bin"))
	if err != nil {
		t.Fatal(err)
	}
	badType := append([]byte(nil), real...)
	// Corrupt the first tensor's type: find "token_embd.weight" in the
	// tensor infos and overwrite the type field after its dims.
	i := strings.Index(string(badType), "token_embd.weight")
	nd := binary.LittleEndian.Uint32(badType[i+17:])
	binary.LittleEndian.PutUint32(badType[i+17+4+8*int(nd):], 99)
	hugeHeader := append([]byte(nil), stories...)
	binary.LittleEndian.PutUint32(hugeHeader[0:], 1<<30)
	oddHeads := append([]byte(nil), stories...)
	binary.LittleEndian.PutUint32(oddHeads[12:], 7)
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "shorter than its header"},
		{"gguf magic only", []byte("GGUF"), "truncated"},
		{"gguf version 1", ggufHeader(1, 0, 0), "version 1"},
		{"gguf absurd counts", ggufHeader(3, 1<<60, 1<<60), "cannot fit"},
		{"gguf truncated metadata", real[:200], "truncated"},
		{"gguf truncated tensors", real[:len(real)/2], "past the end"},
		{"gguf unknown tensor type", badType, "type(99)"},
		{"llama2c truncated", stories[:len(stories)/3], "truncated"},
		{"llama2c absurd dim", hugeHeader, "implausible"},
		{"llama2c heads not dividing dim", oddHeads, "not a multiple"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := t.TempDir() + "/model"
			if err := os.WriteFile(path, tc.data, 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := Load(path)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Load = %v, want an error mentioning %q", err, tc.want)
			}
		})
	}
	if _, err := Load(t.TempDir() + "/missing"); err == nil {
		t.Fatal("missing file accepted")
	}
	if _, err := Load(t.TempDir()); err == nil || !strings.Contains(err.Error(), "config.json") {
		t.Fatalf("Load of a directory = %v, want an error naming config.json", err)
	}
}

// FuzzGGUF feeds arbitrary bytes to the GGUF reader: it must return a
// model or an error, never panic or allocate from an unchecked length.
func FuzzGGUF(f *testing.F) {
	if p, err := findSharedModel("llama-2-tiny-random.gguf"); err == nil {
		real, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		for _, n := range []int{24, 64, 1024, 4096, 65536} {
			f.Add(real[:n]) // the header, then ever longer truncations
		}
	}
	for _, seed := range archSeeds(f) {
		f.Add(seed) // a whole model of each architecture
	}
	f.Add(ggufHeader(3, 0, 0))
	f.Add(ggufHeader(3, 1, 1))
	f.Add(append(ggufHeader(3, 0, 1), []byte("\x05\x00\x00\x00\x00\x00\x00\x00hello\x09\x00\x00\x00\x08\x00\x00\x00\xff\xff\xff\xff\xff\xff\xff\x7f")...))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := parseGGUF(data)
		if err == nil && !bytes.HasPrefix(data, []byte("GGUF")) {
			t.Fatal("parseGGUF accepted a file without the GGUF magic")
		}
		if err == nil {
			if cerr := m.check(); cerr != nil {
				t.Fatalf("parseGGUF returned an inconsistent model: %v", cerr)
			}
		}
	})
}

// TestGGUFBPEModel loads a model whose GGUF carries a byte-level BPE
// vocabulary (tokenizer.ggml.model "gpt2", as Llama 3 and Qwen files do),
// taken from llama.cpp's GPT-2 vocabulary file: the model gets that
// tokenizer, and its BOS and EOS.
func TestGGUFBPEModel(t *testing.T) {
	meta, err := ReadGGUFMetadata(vocabtest.Path(t, "vocab/ggml-vocab-gpt-2.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	var extra []gguf.KV
	for k, v := range meta {
		if !strings.HasPrefix(k, "tokenizer.") {
			continue
		}
		switch v := v.(type) {
		case string:
			extra = append(extra, gguf.KV{Key: k, Value: v})
		case int64:
			extra = append(extra, gguf.KV{Key: k, Value: uint32(v)})
		case []any:
			switch v[0].(type) {
			case string:
				ss := make([]string, len(v))
				for i := range v {
					ss[i] = v[i].(string)
				}
				extra = append(extra, gguf.KV{Key: k, Value: ss})
			case int64:
				ns := make([]int32, len(v))
				for i := range v {
					ns[i] = int32(v[i].(int64))
				}
				extra = append(extra, gguf.KV{Key: k, Value: ns})
			}
		}
	}
	tokens := meta["tokenizer.ggml.tokens"].([]any)
	c := Config{Dim: 16, Hidden: 16, Layers: 1, Heads: 2, KVHeads: 1, Vocab: len(tokens), MaxSeqLen: 64,
		RopeTheta: 10000, NormEps: 1e-5, BOS: -1, EOS: -1, SharedClassifier: true}
	m, err := Load(writeGGUF(t, Random(c, 95), ggufFile{arch: "llama", f16: true, extra: extra}))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	tok := m.Tokenizer
	if tok == nil || tok.VocabSize() != len(tokens) || m.Config.EOS != tok.EOS() || m.Config.EOS < 0 {
		t.Fatalf("tokenizer %T, EOS %d", tok, m.Config.EOS)
	}
	if text := "Hello, world!"; tok.Decode(tok.Encode(text)) != text || len(tok.Encode(text)) != 4 {
		t.Fatalf("%q encodes as %v", text, tok.Encode(text))
	}
}

// TestGGUFArrayHeap: a large metadata array costs about its own size when
// a model loads. Each element used to become an int64 in an []any, some
// 17 bytes of heap per byte of a uint8 array (1.76 GB for 100 MB). The
// bound is on bytes allocated during Load, which bounds the peak: the
// difference between a file with a 10 MB array and one without, per
// element.
func TestGGUFArrayHeap(t *testing.T) {
	const n = 10 << 20
	junk := make([]uint8, n)
	for i := range junk {
		junk[i] = uint8(i)
	}
	c := Config{Dim: 16, Hidden: 16, Layers: 1, Heads: 2, KVHeads: 1, Vocab: 32, MaxSeqLen: 64,
		RopeTheta: 10000, NormEps: 1e-5, BOS: -1, EOS: -1, SharedClassifier: true}
	allocated := func(extra []gguf.KV) uint64 {
		path := writeGGUF(t, Random(c, 96), ggufFile{arch: "llama", extra: extra})
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		m, err := Load(path)
		runtime.ReadMemStats(&after)
		if err != nil {
			t.Fatal(err)
		}
		m.Close()
		return after.TotalAlloc - before.TotalAlloc
	}
	plain := allocated(nil)
	with := allocated([]gguf.KV{{Key: "junk.bytes", Value: junk}})
	if per := float64(with-plain) / n; per > 2 {
		t.Errorf("a %d-element uint8 array cost %.1f bytes of heap per element while loading (%d bytes without it, %d with)", n, per, plain, with)
	}
}
