package bpe_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/prefixd/prefixd/internal/vocabtest"
	"github.com/prefixd/prefixd/model"
	"github.com/prefixd/prefixd/tokenizer/bpe"
)

// gpt2Model is the "model" of a tokenizer.json over GPT-2's vocabulary
// (from llama.cpp's vocab-only GGUF), with the pre-tokenizer,
// normalizer, decoder and added tokens left to the caller.
func gpt2Model(t *testing.T) map[string]any {
	t.Helper()
	meta, err := model.ReadGGUFMetadata(vocabtest.Path(t, "vocab/ggml-vocab-gpt-2.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	toks, _ := meta["tokenizer.ggml.tokens"].([]any)
	merges, _ := meta["tokenizer.ggml.merges"].([]any)
	vocab := make(map[string]int, len(toks))
	for i, v := range toks {
		vocab[v.(string)] = i
	}
	return map[string]any{"type": "BPE", "vocab": vocab, "merges": merges}
}

// hfRefVariants are tokenizer.json files none of the other tests read,
// each built to exercise a group of components.
func hfRefVariants(t *testing.T) map[string]map[string]any {
	g := gpt2Model(t)
	bl := func(prefix, regex bool) map[string]any {
		return map[string]any{"type": "ByteLevel", "add_prefix_space": prefix, "trim_offsets": true, "use_regex": regex}
	}
	seq := func(kind, field string, items ...any) map[string]any {
		return map[string]any{"type": "Sequence", field: items}
	}
	split := func(pattern map[string]any, behavior string, invert bool) map[string]any {
		return map[string]any{"type": "Split", "pattern": pattern, "behavior": behavior, "invert": invert}
	}
	byteDecoder := map[string]any{"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true}
	isolatedSplit := func(regex string) map[string]any {
		return map[string]any{"model": g, "decoder": byteDecoder,
			"pre_tokenizer": seq("", "pretokenizers", split(map[string]any{"Regex": regex}, "Isolated", false), bl(false, false))}
	}
	const o200k = `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	addedTok := func(id int, content string, special, lstrip, rstrip, singleWord, normalized bool) map[string]any {
		return map[string]any{"id": id, "content": content, "special": special, "lstrip": lstrip, "rstrip": rstrip,
			"single_word": singleWord, "normalized": normalized}
	}
	added := []any{
		addedTok(50256, "<|endoftext|>", true, false, false, false, false),
		addedTok(50257, "<mask>", false, true, true, false, false),
		addedTok(50258, "word", false, false, false, true, true),
	}
	return map[string]map[string]any{
		"gpt2 prefix space, NFKC, lowercase": {
			"model": g, "pre_tokenizer": bl(true, true), "decoder": byteDecoder,
			"normalizer": seq("", "normalizers", map[string]any{"type": "NFKC"}, map[string]any{"type": "Lowercase"}),
		},
		"digits, punctuation, byte level": {
			"model": g, "decoder": byteDecoder,
			"pre_tokenizer": seq("", "pretokenizers", map[string]any{"type": "Digits", "individual_digits": true},
				map[string]any{"type": "Punctuation", "behavior": "Contiguous"}, bl(false, true)),
		},
		"o200k split": {
			"model": g, "decoder": byteDecoder,
			"pre_tokenizer": seq("", "pretokenizers", split(map[string]any{"Regex": o200k}, "Isolated", false), bl(false, false)),
		},
		"split behaviors": {
			"model": g, "decoder": byteDecoder,
			"pre_tokenizer": seq("", "pretokenizers", split(map[string]any{"Regex": `\s+`}, "MergedWithNext", false),
				split(map[string]any{"String": "e"}, "MergedWithPrevious", false),
				split(map[string]any{"Regex": `\p{N}+`}, "Removed", true), bl(false, false)),
		},
		"whitespace, replace": {
			"model": g, "decoder": byteDecoder,
			"normalizer":    map[string]any{"type": "Replace", "pattern": map[string]any{"Regex": `\s+`}, "content": " "},
			"pre_tokenizer": seq("", "pretokenizers", map[string]any{"type": "Whitespace"}, bl(true, false)),
		},
		// Where Oniguruma's meaning differs from Rust's or from .NET's.
		"regex \\s+$":                    isolatedSplit(`\s+$`),
		"regex \\w":                      isolatedSplit(`\w+`),
		"regex (?i)":                     isolatedSplit(`(?i:'s|'t|'k)`),
		"regex \\b \\B":                  isolatedSplit(`\bx|\Bn`),
		"regex intersection, possessive": isolatedSplit(`[\p{L}&&[^\p{Han}]]+|\p{N}{1,2}+|a*+`),
		"regex ^ $":                      isolatedSplit(`^.|.$|\s`),
		"regex property names":           isolatedSplit(`\p{Letter}+|[\p{Alphabetic}\p{Decimal_Number}]|\pN|\p{^L}`),
		"added token options": {
			"model": g, "decoder": byteDecoder, "added_tokens": added,
			"normalizer":    map[string]any{"type": "Lowercase"},
			"pre_tokenizer": seq("", "pretokenizers", map[string]any{"type": "WhitespaceSplit"}, bl(true, true)),
		},
	}
}

// hfRefTexts are the texts each variant encodes: llama.cpp's test cases
// and the mixed corpus.
func hfRefTexts(t *testing.T) []string {
	var texts []string
	for _, name := range []string{"ggml-vocab-gpt-2.gguf", "ggml-vocab-llama-bpe.gguf.inp"} {
		for _, c := range vocabtest.Cases(t, strings.TrimSuffix(name, ".inp")) {
			texts = append(texts, c.Text)
		}
	}
	return append(texts, "a <mask>  b", "word words sword word_ WORD", " <|endoftext|>x", "1,234.5e-6 !?…", "\u00a0\u3000x\u0085y\ufeffz",
		"IT'S we'LL 'ſ \u212a", "👩\u200d💻 👍🏽 🇺🇸", "e\u0301 a\u0308b क्षि", "٣٤٥ ①② Ⅻ 1234567", "   \t\n\r\n\v\f x  ",
		"日本語のテキスト 한국어", "<s> </s> <unk>", "", "a  \nb  \n", "x\u0903x xx  nn", "'ſ 'S 'K '\u212a", "我们ab12345 aaab", "ab\ncd\n", "e\u0301xx\u0903n", "Ⓐb\u200dc Ⅻd", "a² b³ c¹ d¼ ½ ¾ ① ⑴ ❶ 〇 ᛮ 𐄇 ª º µ")
}

// TestHFTokenizersReference compares FromHF with Hugging Face's own
// tokenizers (the npm package of its Rust library) on tokenizer.json files
// built for the purpose, token for token and decoded text. It needs
// PREFIXD_HF_TOKENIZERS, the folder scripts/hftokenizers/install.sh
// prints; without it the test skips, unless CI is set.
func TestHFTokenizersReference(t *testing.T) {
	dir := vocabtest.Env(t, "PREFIXD_HF_TOKENIZERS", "scripts/hftokenizers/install.sh")
	texts := hfRefTexts(t)
	type job struct {
		File  string   `json:"file"`
		Texts []string `json:"texts"`
	}
	var jobs []job
	var names []string
	var tks []*bpe.Tokenizer
	tmp := t.TempDir()
	variants := hfRefVariants(t)
	// The llama-spm vocabulary as Hugging Face's converter writes it, and
	// as newer exports do: Metaspace pre-tokenizer and decoder instead of
	// the normalizer and Strip, with an NFD and Strip normalizer.
	var spm map[string]any
	if err := json.Unmarshal(spmTokenizerJSON(t, vocabtest.Path(t, "vocab/ggml-vocab-llama-spm.gguf")), &spm); err != nil {
		t.Fatal(err)
	}
	variants["llama-spm as tokenizer.json"] = spm
	meta := map[string]any{"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": false}
	metaSplit := map[string]any{"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": true}
	variants["llama-spm with Metaspace"] = map[string]any{"model": spm["model"], "added_tokens": spm["added_tokens"],
		"pre_tokenizer": meta, "decoder": map[string]any{"type": "Sequence", "decoders": []any{meta, map[string]any{"type": "ByteFallback"}, map[string]any{"type": "Fuse"}}}}
	variants["llama-spm with split Metaspace, NFD, Strip"] = map[string]any{"model": spm["model"], "added_tokens": spm["added_tokens"],
		"normalizer":    map[string]any{"type": "Sequence", "normalizers": []any{map[string]any{"type": "NFD"}, map[string]any{"type": "Strip", "strip_left": false, "strip_right": true}}},
		"pre_tokenizer": metaSplit, "decoder": map[string]any{"type": "Sequence", "decoders": []any{metaSplit, map[string]any{"type": "ByteFallback"}, map[string]any{"type": "Fuse"}}}}
	// And the two tokenizer.json files the other tests read, on these texts.
	for _, name := range []string{"llama3", "qwen3"} {
		raw, err := os.ReadFile(filepath.Join(vocabtest.Path(t, "tokenizers/"+name), "tokenizer.json"))
		if err != nil {
			t.Fatal(err)
		}
		var doc map[string]any
		if err := json.Unmarshal(raw, &doc); err != nil {
			t.Fatal(err)
		}
		variants[name] = doc
	}
	for name, doc := range variants {
		js, err := json.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		tk, err := bpe.FromHF(js, nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		file := filepath.Join(tmp, strings.ReplaceAll(name, " ", "_")+".json")
		if err := os.WriteFile(file, js, 0o644); err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, job{file, texts})
		names, tks = append(names, name), append(tks, tk)
	}
	manifest := filepath.Join(tmp, "jobs.json")
	b, _ := json.Marshal(jobs)
	if err := os.WriteFile(manifest, b, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("node", "testdata/hfref.js", dir, manifest)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v: %s", err, stderr.String())
	}
	var ref []struct {
		IDs     [][]int32 `json:"ids"`
		Decoded []string  `json:"decoded"`
	}
	if err := json.Unmarshal(out, &ref); err != nil || len(ref) != len(jobs) {
		t.Fatalf("node output: %v (%d results)", err, len(ref))
	}
	for i, name := range names {
		pass := 0
		for k, text := range texts {
			got := tks[i].EncodeSpecial(text)
			if !slices.Equal(got, ref[i].IDs[k]) {
				t.Errorf("%s: %q:\n got %v\nwant %v", name, text, got, ref[i].IDs[k])
				continue
			}
			if dec := tks[i].Decode(got); dec != ref[i].Decoded[k] && !strings.ContainsRune(ref[i].Decoded[k], '\ufffd') {
				t.Errorf("%s: Decode(%v) = %q, Hugging Face %q", name, got, dec, ref[i].Decoded[k])
				continue
			}
			pass++
		}
		t.Logf("%s: %d of %d texts equal", name, pass, len(texts))
	}
}

// spmTokenizerJSON converts a llama.cpp SentencePiece vocabulary (GGUF
// tokens, scores, types) into the tokenizer.json Hugging Face's converter
// writes for Llama 2: a BPE on the text itself with byte_fallback and
// fuse_unk, merges ordered by the merged piece's score, normalizer
// Prepend ▁ and Replace space with ▁, and decoders Replace, ByteFallback,
// Fuse, Strip.
func spmTokenizerJSON(t testing.TB, path string) []byte {
	t.Helper()
	meta, err := model.ReadGGUFMetadata(path)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := meta["tokenizer.ggml.tokens"].([]any)
	scores, _ := meta["tokenizer.ggml.scores"].([]any)
	types, _ := meta["tokenizer.ggml.token_type"].([]any)
	if len(raw) == 0 || len(scores) != len(raw) || len(types) != len(raw) {
		t.Fatalf("%s: tokens, scores or types missing", path)
	}
	vocab := map[string]int32{}
	type addedTok struct {
		ID         int32  `json:"id"`
		Content    string `json:"content"`
		Special    bool   `json:"special"`
		Normalized bool   `json:"normalized"`
		SingleWord bool   `json:"single_word"`
		LStrip     bool   `json:"lstrip"`
		RStrip     bool   `json:"rstrip"`
	}
	var added []addedTok
	type cand struct {
		a, b   string
		score  float64
		ia, ib int32
	}
	var cands []cand
	for i, v := range raw {
		s := v.(string)
		vocab[s] = int32(i)
		if typ, _ := types[i].(int64); typ == 2 || typ == 3 {
			added = append(added, addedTok{ID: int32(i), Content: s, Special: true})
		}
	}
	for i, v := range raw {
		s := v.(string)
		if typ, _ := types[i].(int64); typ != 1 {
			continue
		}
		rs := []rune(s)
		var local []cand
		for k := 1; k < len(rs); k++ {
			a, b := string(rs[:k]), string(rs[k:])
			ia, okA := vocab[a]
			ib, okB := vocab[b]
			if okA && okB {
				local = append(local, cand{a, b, scores[i].(float64), ia, ib})
			}
		}
		slices.SortFunc(local, func(x, y cand) int {
			if x.ia != y.ia {
				return int(x.ia - y.ia)
			}
			return int(x.ib - y.ib)
		})
		cands = append(cands, local...)
	}
	slices.SortStableFunc(cands, func(x, y cand) int {
		switch {
		case x.score > y.score:
			return -1
		case x.score < y.score:
			return 1
		}
		return 0
	})
	merges := make([][2]string, len(cands))
	for i, c := range cands {
		merges[i] = [2]string{c.a, c.b}
	}
	doc := map[string]any{
		"added_tokens": added,
		"normalizer": map[string]any{"type": "Sequence", "normalizers": []any{
			map[string]any{"type": "Prepend", "prepend": "▁"},
			map[string]any{"type": "Replace", "pattern": map[string]any{"String": " "}, "content": "▁"},
		}},
		"pre_tokenizer": nil,
		"decoder": map[string]any{"type": "Sequence", "decoders": []any{
			map[string]any{"type": "Replace", "pattern": map[string]any{"String": "▁"}, "content": " "},
			map[string]any{"type": "ByteFallback"},
			map[string]any{"type": "Fuse"},
			map[string]any{"type": "Strip", "content": " ", "start": 1, "stop": 0},
		}},
		"model": map[string]any{"type": "BPE", "vocab": vocab, "merges": merges, "byte_fallback": true,
			"fuse_unk": true, "unk_token": "<unk>"},
	}
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestSentencePieceBPEReference encodes llama.cpp's llama-spm and phi-3
// test cases with their SentencePiece vocabularies converted to
// tokenizer.json (byte fallback, ▁ word boundaries) and compares token for
// token; and decodes them back, the leading ▁ dropped.
func TestSentencePieceBPEReference(t *testing.T) {
	for _, name := range []string{"llama-spm", "phi-3"} {
		t.Run(name, func(t *testing.T) {
			path := vocabtest.Path(t, "vocab/ggml-vocab-"+name+".gguf")
			tk, err := bpe.FromHF(spmTokenizerJSON(t, path), []byte(`{"bos_token": "<s>"}`))
			if err != nil {
				t.Fatal(err)
			}
			cases := vocabtest.Cases(t, "ggml-vocab-"+name+".gguf")
			pass := 0
			for _, c := range cases {
				got := tk.Encode(c.Text)
				if !slices.Equal(got, c.IDs) {
					t.Errorf("%q:\n got %v\nwant %v", c.Text, got, c.IDs)
					continue
				}
				pass++
				// After BOS too, whose piece is empty, the text loses only
				// the ▁ the normalizer prepended.
				withBOS := append([]int32{tk.BOS()}, got...)
				if dec := tk.Decode(withBOS); dec != c.Text && !strings.ContainsRune(c.Text, '\ufffd') {
					t.Errorf("Decode(BOS + Encode(%q)) = %q", c.Text, dec)
				}
			}
			t.Logf("%s: %d of %d cases equal", name, pass, len(cases))
		})
	}
}

// FuzzEncodeCharLevel checks the SentencePiece-style BPE (llama-spm's
// vocabulary as tokenizer.json) on any text: Encode never panics, and
// valid UTF-8 without ▁ (which decodes to a space) decodes back to itself,
// streamed piece by piece or whole.
func FuzzEncodeCharLevel(f *testing.F) {
	for _, s := range []string{"Hello world", "  x\n\n\ty'all 2024!!", "нещо 我想在apple工作 🦙.cpp", "\xff\xfe\x00 ok", " "} {
		f.Add(s)
	}
	tk, err := bpe.FromHF(spmTokenizerJSON(f, vocabtest.Path(f, "vocab/ggml-vocab-llama-spm.gguf")), nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ids := tk.Encode(s)
		if !utf8.ValidString(s) || strings.Contains(s, "▁") {
			return
		}
		var b []byte
		started := false
		for _, id := range ids {
			b, started = tk.AppendTextPiece(b, id, started)
		}
		if got := tk.Decode(ids); got != s || string(b) != s {
			t.Fatalf("Decode(Encode(%q)) = %q, streamed %q", s, got, b)
		}
	})
}
