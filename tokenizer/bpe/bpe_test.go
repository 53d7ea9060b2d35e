package bpe

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// shared caches the two tokenizer.json vocabularies across tests, fuzzing
// and benchmarks (each takes a fraction of a second to load).
var shared struct {
	sync.Mutex
	m map[string]*Tokenizer
}

func sharedHF(t testing.TB, name string) *Tokenizer {
	t.Helper()
	shared.Lock()
	defer shared.Unlock()
	if tk, ok := shared.m[name]; ok {
		return tk
	}
	tk := loadHF(t, name)
	if shared.m == nil {
		shared.m = map[string]*Tokenizer{}
	}
	shared.m[name] = tk
	return tk
}

func TestSpecialTokens(t *testing.T) {
	qwen := sharedHF(t, "qwen3")
	llama := sharedHF(t, "llama3")
	cases := []struct {
		name    string
		tk      *Tokenizer
		text    string
		special bool
		want    []int32
	}{
		{"qwen chat markers parsed", qwen, "<|im_start|>user\nhi<|im_end|>", true, []int32{151644, 872, 198, 6023, 151645}},
		{"qwen user-defined token always matches", qwen, "<think>", false, []int32{151667}},
		{"llama header parsed", llama, "<|start_header_id|>user<|end_header_id|>", true, []int32{128006, 882, 128007}},
		{"llama longest match", llama, "<|eot_id|><|eot_id|>", true, []int32{128009, 128009}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := c.tk.Encode(c.text)
			if c.special {
				got = c.tk.EncodeSpecial(c.text)
			}
			if !slices.Equal(got, c.want) {
				t.Fatalf("got %v, want %v", got, c.want)
			}
		})
	}
	// Without special parsing a control token's text is only text.
	for _, text := range []string{"<|im_start|>", "<|im_end|>x"} {
		ids := qwen.Encode(text)
		if slices.Contains(ids, 151644) || slices.Contains(ids, 151645) {
			t.Errorf("Encode(%q) = %v holds a control token", text, ids)
		}
		if got := qwen.Decode(ids); got != text {
			t.Errorf("Decode(Encode(%q)) = %q", text, got)
		}
	}
}

func TestHFMetadata(t *testing.T) {
	llama, qwen := sharedHF(t, "llama3"), sharedHF(t, "qwen3")
	if llama.BOS() != 128000 || llama.EOS() != 128001 || !slices.Contains(llama.EOT(), 128009) {
		t.Errorf("llama3: BOS %d EOS %d EOT %v", llama.BOS(), llama.EOS(), llama.EOT())
	}
	if qwen.BOS() != -1 || qwen.EOS() != 151645 || qwen.AddBOS() || !slices.Contains(qwen.EOT(), 151643) {
		t.Errorf("qwen3: BOS %d EOS %d AddBOS %v EOT %v", qwen.BOS(), qwen.EOS(), qwen.AddBOS(), qwen.EOT())
	}
	if llama.VocabSize() != 128256 || qwen.VocabSize() != 151669 {
		t.Errorf("vocab sizes %d, %d", llama.VocabSize(), qwen.VocabSize())
	}
	if !strings.Contains(llama.ChatTemplate(), "<|start_header_id|>") || !strings.Contains(qwen.ChatTemplate(), "<|im_start|>") {
		t.Errorf("chat templates not loaded: %.60q, %.60q", llama.ChatTemplate(), qwen.ChatTemplate())
	}
}

func TestCheckVocabSize(t *testing.T) {
	if err := CheckVocabSize(151669, 151936); err != nil {
		t.Errorf("fewer tokens than embedding rows: %v", err)
	}
	if err := CheckVocabSize(128256, 128256); err != nil {
		t.Errorf("equal: %v", err)
	}
	err := CheckVocabSize(151669, 128256)
	if err == nil || !strings.Contains(err.Error(), "151669") || !strings.Contains(err.Error(), "128256") {
		t.Errorf("more tokens than the model: error %v", err)
	}
}

// TestStreamingDecode checks that pieces, some of them parts of a UTF-8
// character, concatenate to the text, and that AppendPiece allocates
// nothing into a buffer with room.
func TestStreamingDecode(t *testing.T) {
	tk := sharedHF(t, "llama3")
	text := "Führer 🦙 我想在apple工作 ✅"
	ids := tk.Encode(text)
	var b []byte
	partial := 0
	for _, id := range ids {
		b = tk.AppendPiece(b, id)
		if !utf8.Valid(b) {
			partial++
		}
	}
	if string(b) != text {
		t.Fatalf("pieces join to %q, want %q", b, text)
	}
	if partial == 0 {
		t.Fatalf("no token of %v ends inside a character: the test proves nothing", ids)
	}
	if got := tk.AppendPiece(nil, tk.BOS()); len(got) != 0 {
		t.Errorf("BOS decodes to %q", got)
	}
	if got := tk.AppendPiece(nil, 1<<30); len(got) != 0 {
		t.Errorf("an ID outside the vocabulary decodes to %q", got)
	}
	buf := make([]byte, 0, 64)
	if n := testing.AllocsPerRun(100, func() { buf = tk.AppendPiece(buf[:0], ids[0]) }); n != 0 {
		t.Errorf("AppendPiece allocates %v times", n)
	}
}

// TestByteFallback builds a small vocabulary without the byte-level rune
// of 'z' but with <0x7A>, and one without either, where the byte is
// dropped as llama.cpp drops it (or becomes the unknown token).
func TestByteFallback(t *testing.T) {
	tokens := []string{"a", "b", "ab", "<0x7A>", "<unk>"}
	types := []TokenType{Normal, Normal, Normal, Byte, Unknown}
	tk, err := New(Config{Tokens: tokens, Types: types, Merges: []Merge{{"a", "b"}}, BOS: -1, EOS: -1, Unknown: -1})
	if err != nil {
		t.Fatal(err)
	}
	if got := tk.Encode("abz"); !slices.Equal(got, []int32{2, 3}) {
		t.Errorf("Encode(abz) = %v, want [2 3]", got)
	}
	if got := tk.Decode([]int32{2, 3}); got != "abz" {
		t.Errorf("Decode = %q", got)
	}
	if got := tk.Encode("ayb"); !slices.Equal(got, []int32{0, 1}) {
		t.Errorf("Encode(ayb) = %v, want [0 1] (y dropped)", got)
	}
	tk, err = New(Config{Tokens: tokens, Types: types, BOS: -1, EOS: -1, Unknown: 4})
	if err != nil {
		t.Fatal(err)
	}
	if got := tk.Encode("y"); !slices.Equal(got, []int32{4}) {
		t.Errorf("Encode(y) = %v, want the unknown token", got)
	}
}

func TestNewErrors(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"empty", Config{}, "empty vocabulary"},
		{"types", Config{Tokens: []string{"a"}, Types: []TokenType{1, 1}}, "2 token types"},
		{"bos", Config{Tokens: []string{"a"}, BOS: 3}, "BOS 3"},
		{"add bos", Config{Tokens: []string{"a"}, BOS: -1, EOS: -1, Unknown: -1, AddBOS: true}, "AddBOS"},
		{"byte token", Config{Tokens: []string{"<0xZZ>"}, Types: []TokenType{Byte}}, "not <0xNN>"},
		{"type", Config{Tokens: []string{"a"}, Types: []TokenType{9}}, "type 9"},
	} {
		if _, err := New(c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one saying %q", c.name, err, c.want)
		}
	}
}

const hfModel = `"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}`

// hfErrorCases are tokenizer.json files FromHF must refuse, with what the
// error must name.
var hfErrorCases = []struct {
	name, json, want string
}{
	{"not json", `{`, "tokenizer.json"},
	{"wordpiece", `{"model": {"type": "WordPiece"}}`, `"WordPiece"`},
	{"unigram", `{"model": {"type": "Unigram", "vocab": [["a", 0]]}}`, `"Unigram"`},
	{"behavior", `{` + hfModel + `, "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "\\p{N}"}, "behavior": "Sideways"}}`, `"Sideways"`},
	{"pre type", `{` + hfModel + `, "pre_tokenizer": {"type": "BertPreTokenizer"}}`, `"BertPreTokenizer"`},
	{"normalizer", `{` + hfModel + `, "normalizer": {"type": "BertNormalizer"}, "pre_tokenizer": {"type": "ByteLevel"}}`, `"BertNormalizer"`},
	{"decoder", `{` + hfModel + `, "decoder": {"type": "WordPiece"}}`, `"WordPiece"`},
	{"strip stop", `{` + hfModel + `, "decoder": {"type": "Sequence", "decoders": [{"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 0, "stop": 1}]}}`, "stop 1"},
	{"dropout", `{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [], "dropout": 0.1}}`, "dropout 0.1"},
	{"suffix", `{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [], "end_of_word_suffix": "</w>"}}`, `"</w>"`},
	{"metaspace scheme", `{` + hfModel + `, "pre_tokenizer": {"type": "Metaspace", "prepend_scheme": "sometimes"}}`, `"sometimes"`},
	{"replace pattern", `{` + hfModel + `, "normalizer": {"type": "Replace", "pattern": {"Regex": "(x"}, "content": ""}}`, `"(x"`},
	{"huge ID", `{"added_tokens": [{"id": 2000000000, "content": "<x>"}], ` + hfModel + `}`, "2000000000"},
	{"largest int32 ID", `{"model": {"type": "BPE", "vocab": {"a": 0, "b": 2147483647}, "merges": []}}`, "2147483647"},
	{"largest int32 added ID", `{"added_tokens": [{"id": 2147483647, "content": "<x>"}], ` + hfModel + `}`, "2147483647"},
	{"negative ID", `{"model": {"type": "BPE", "vocab": {"a": -1}, "merges": []}}`, "-1"},
	{"merge", `{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["ab"]}, "pre_tokenizer": {"type": "ByteLevel"}}`, `"ab"`},
}

func TestFromHFErrors(t *testing.T) {
	for _, c := range hfErrorCases {
		if _, err := FromHF([]byte(c.json), nil); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one saying %q", c.name, err, c.want)
		}
	}
	good := `{` + hfModel + `, "pre_tokenizer": {"type": "ByteLevel"}}`
	if _, err := FromHF([]byte(good), []byte(`{"bos_token": "<s>"}`)); err == nil || !strings.Contains(err.Error(), `"<s>"`) {
		t.Errorf("a BOS that is no token: error %v", err)
	}
	tk, err := FromHF([]byte(good), []byte(`{"chat_template": [{"name": "tool_use", "template": "x"}, {"name": "default", "template": "y"}]}`))
	if err != nil || tk.ChatTemplate() != "y" {
		t.Errorf("named chat templates: %v, %q", err, tk.ChatTemplate())
	}
}

// naiveEncodeWord is BPE as the papers state it, on strings: rescan every
// adjacent pair, merge the lowest rank (leftmost on ties), repeat.
func naiveEncodeWord(tk *Tokenizer, ranks map[Merge]int, word string) []int32 {
	var syms []string
	for i := range len(word) {
		syms = append(syms, string(byteRune[word[i]]))
	}
	for {
		best, bestRank := -1, math.MaxInt
		for i := 0; i+1 < len(syms); i++ {
			if r, ok := ranks[Merge{syms[i], syms[i+1]}]; ok && r < bestRank {
				best, bestRank = i, r
			}
		}
		if best < 0 {
			break
		}
		syms[best] += syms[best+1]
		syms = slices.Delete(syms, best+1, best+2)
	}
	out := make([]int32, len(syms))
	for i, s := range syms {
		out[i] = tk.index[s]
	}
	return out
}

// mergeRanks is the naive model's rank table, holding only merges whose
// result is a token (as New keeps them).
func mergeRanks(tk *Tokenizer) map[Merge]int {
	ranks := make(map[Merge]int, len(tk.cfg.Merges))
	for r, m := range tk.cfg.Merges {
		if _, dup := ranks[m]; !dup {
			if _, ok := tk.index[m[0]+m[1]]; ok {
				ranks[m] = r
			}
		}
	}
	return ranks
}

var roundTripSeeds = []string{"Hello world", "  x\n\n\ty'all 2024!!", "нещо 我想在apple工作 🦙.cpp", "<|im_start|>user\n<think>", "\xff\xfe\x00 ok"}

// FuzzEncode checks on the Llama 3 and Qwen3 vocabularies that Encode never
// panics, that each pre-token's heap merge equals the naive merge, and
// that decoding gives back the text (NFC-normalised for Qwen) when it is
// valid UTF-8; byte-level vocabularies cover every byte.
func FuzzEncode(f *testing.F) {
	for _, s := range roundTripSeeds {
		f.Add(s)
	}
	type vocab struct {
		tk    *Tokenizer
		ranks map[Merge]int
	}
	var vs []vocab
	for _, name := range []string{"llama3", "qwen3"} {
		tk := sharedHF(f, name)
		vs = append(vs, vocab{tk, mergeRanks(tk)})
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, v := range vs {
			ids := v.tk.Encode(s)
			v.tk.EncodeSpecial(s)
			if utf8.ValidString(s) {
				want := s
				if v.tk.cfg.Normalize != nil {
					want = norm.NFC.String(s)
				}
				if got := v.tk.Decode(ids); got != want {
					t.Fatalf("Decode(Encode(%q)) = %q", s, got)
				}
			}
			for _, word := range v.tk.cfg.Pre.Split(nil, s) {
				w := new(work)
				got := v.tk.mergeWord(nil, w, word)
				if _, whole := v.tk.index[string(appendByteLevel(nil, word))]; whole && v.tk.cfg.IgnoreMerges {
					continue
				}
				if want := naiveEncodeWord(v.tk, v.ranks, word); !slices.Equal(got, want) {
					t.Fatalf("word %q: merge %v, naive %v", word, got, want)
				}
			}
		}
	})
}

// FuzzFromHF feeds FromHF mutated tokenizer.json and tokenizer_config.json
// files: errors are fine, panics are not, and a tokenizer it accepts
// encodes text.
func FuzzFromHF(f *testing.F) {
	for _, c := range hfErrorCases {
		f.Add(c.json, "")
	}
	f.Add(`{"added_tokens": [{"id": 1, "content": "<x>", "special": true}], `+hfModel+`, "pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "ByteLevel", "add_prefix_space": true}]}}`,
		`{"bos_token": {"content": "<x>"}, "add_bos_token": true, "chat_template": "x"}`)
	f.Add(`{"added_tokens": [{"id": 11, "content": "<x>", "lstrip": true, "single_word": true, "normalized": true}], `+charVocab+`, "normalizer": {"type": "Sequence", "normalizers": [{"type": "NFKC"}, {"type": "Lowercase"}, {"type": "Replace", "pattern": {"Regex": "\\s"}, "content": "▁"}]}, "pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "Metaspace", "prepend_scheme": "first"}, {"type": "Split", "pattern": {"String": "a"}, "behavior": "MergedWithNext", "invert": true}, {"type": "Digits"}]}, "decoder": {"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": "▁"}, "content": " "}, {"type": "ByteFallback"}, {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}}`, "")
	f.Fuzz(func(t *testing.T, tokenizerJSON, configJSON string) {
		if tk, err := FromHF([]byte(tokenizerJSON), []byte(configJSON)); err == nil {
			tk.EncodeSpecial("a <x> b")
		}
	})
}

// FuzzFromHFIDs builds tokenizer.json files around fuzzed token IDs, so
// that the fuzzer reaches the extremes of the ID range (which mutating
// JSON text finds only by luck): FromHF must refuse or accept, never
// panic, and an accepted tokenizer has a token at each ID it was given.
func FuzzFromHFIDs(f *testing.F) {
	f.Add(int32(0), int32(1), false)
	f.Add(int32(1<<31-1), int32(3), true)
	f.Add(int32(-1), int32(1<<31-1), false)
	f.Add(int32(maxHFTokens), int32(1<<20-1), true)
	f.Fuzz(func(t *testing.T, vocabID, addedID int32, special bool) {
		slow := func(id int32) bool { return id >= 1<<20 && id < maxHFTokens }
		if slow(vocabID) || slow(addedID) {
			return // valid, but a vocabulary that large takes seconds to build
		}
		js := fmt.Sprintf(`{"added_tokens": [{"id": %d, "content": "<x>", "special": %v}], "model": {"type": "BPE", "vocab": {"a": %d}, "merges": []}, "pre_tokenizer": {"type": "ByteLevel"}}`,
			addedID, special, vocabID)
		tk, err := FromHF([]byte(js), nil)
		if err != nil {
			return
		}
		if tk.TokenText(addedID) != "<x>" || vocabID != addedID && tk.TokenText(vocabID) != "a" {
			t.Fatalf("IDs %d, %d: tokens %q, %q", vocabID, addedID, tk.TokenText(vocabID), tk.TokenText(addedID))
		}
		tk.EncodeSpecial("a <x> b")
	})
}

// TestByteLevelOptions checks ByteLevel's add_prefix_space and use_regex on
// a vocabulary small enough to work out by hand.
func TestByteLevelOptions(t *testing.T) {
	const model = `"model": {"type": "BPE", "vocab": {"Ġ": 0, "a": 1, "Ġa": 2, "b": 3, "!": 4, "a!": 5}, "merges": ["Ġ a", "a !"]}`
	for _, c := range []struct {
		pre, text string
		want      []int32
	}{
		{`{"type": "ByteLevel", "add_prefix_space": false}`, "a b", []int32{1, 0, 3}},
		{`{"type": "ByteLevel", "add_prefix_space": true}`, "a b", []int32{2, 0, 3}},
		{`{"type": "ByteLevel", "add_prefix_space": true}`, " a", []int32{2}},
		{`{"type": "ByteLevel", "use_regex": true}`, "a!", []int32{1, 4}},
		{`{"type": "ByteLevel", "use_regex": false}`, "a!", []int32{5}},
	} {
		tk, err := FromHF([]byte(`{`+model+`, "pre_tokenizer": `+c.pre+`}`), nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := tk.Encode(c.text); !slices.Equal(got, c.want) {
			t.Errorf("%s: Encode(%q) = %v, want %v", c.pre, c.text, got, c.want)
		}
	}
}
