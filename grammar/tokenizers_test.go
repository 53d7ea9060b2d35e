package grammar_test

import (
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"

	"github.com/prefixd/prefixd/grammar"
	"github.com/prefixd/prefixd/internal/schematest"
	"github.com/prefixd/prefixd/model"
	"github.com/prefixd/prefixd/tokenizer/bpe"
)

const modelsDir = "../../shared/models"

// vocabSource is what the tests need of a tokenizer.
type vocabSource interface {
	grammar.TokenSource
	EOS() int32
}

var (
	loadOnce sync.Once
	vocabs   map[string]vocabSource
)

// testVocabs loads the real vocabularies the shared test data holds:
// Llama 2's 32k SentencePiece (with byte fallback) and Llama 3's 128k
// byte-level BPE. Missing files skip the caller.
func testVocabs(t testing.TB) map[string]vocabSource {
	loadOnce.Do(func() {
		vocabs = map[string]vocabSource{}
		if tk, err := model.LoadGGUFTokenizer(filepath.Join(modelsDir, "llama-2-tiny-random.gguf")); err == nil {
			vocabs["llama2-32k"] = tk
		}
		if tk, err := bpe.LoadHF(filepath.Join(modelsDir, "tokenizers/llama3")); err == nil {
			vocabs["llama3-128k"] = tk
		}
	})
	if len(vocabs) == 0 {
		t.Skip("no test vocabularies under " + modelsDir)
	}
	return vocabs
}

const nestedSchema = `{"type":"object","properties":{
 "id":{"type":"integer","minimum":1,"maximum":100000},
 "name":{"type":"string","maxLength":24},
 "kind":{"enum":["book","film","song"]},
 "tags":{"type":"array","items":{"type":"string","maxLength":10},"maxItems":4},
 "owner":{"type":"object","properties":{"email":{"type":"string","format":"email"},"since":{"type":"string","format":"date"},
   "score":{"type":"number","minimum":0,"maximum":10}},"required":["email","since"]},
 "parts":{"type":"array","items":{"$ref":"#/$defs/part"},"maxItems":3}},
 "required":["id","name","kind","owner"],
 "$defs":{"part":{"type":"object","properties":{"n":{"type":"integer","minimum":0,"maximum":99},"ok":{"type":"boolean"}},"required":["n","ok"]}}}`

// allowedIDs lists the set bits of mask.
func allowedIDs(mask []uint64) []int32 {
	var ids []int32
	for w, bits := range mask {
		for bits != 0 {
			b := int32(0)
			for bits&(1<<b) == 0 {
				b++
			}
			ids = append(ids, int32(w*64)+b)
			bits &^= 1 << b
		}
	}
	return ids
}

// TestRealVocabWalks walks random allowed tokens of real vocabularies
// through a nested schema: at every step the mask must equal asking
// Allowed of every token (checked on some steps; it is slow), and every
// finished walk must decode to JSON that validates.
func TestRealVocabWalks(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: walks 128k-token masks")
	}
	g, err := grammar.CompileSchema([]byte(nestedSchema), grammar.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	sch := schematest.MustCompile(t, nestedSchema)
	for name, tk := range testVocabs(t) {
		t.Run(name, func(t *testing.T) {
			eos := tk.EOS()
			c := grammar.NewConstraint(g, grammar.NewVocab(tk, []int32{eos}))
			rng := rand.New(rand.NewPCG(11, 12))
			finished := 0
			for walk := range 20 {
				m := c.NewMatcher()
				var text []byte
				for step := 0; step < 400; step++ {
					mask := m.Mask()
					ids := allowedIDs(mask)
					if walk == 0 && step%5 == 0 {
						for id := range int32(tk.VocabSize()) {
							if in := mask[id>>6]>>(id&63)&1 != 0; in != m.Allowed(id) {
								t.Fatalf("step %d: mask %v, Allowed %v for token %d %q", step, in, !in, id, tk.AppendPiece(nil, id))
							}
						}
					}
					if len(ids) == 0 {
						t.Fatalf("no token allowed after %q", text)
					}
					id := ids[rng.IntN(len(ids))]
					if m.Allowed(eos) && rng.IntN(2) == 0 {
						id = eos
					}
					if !m.AcceptToken(id) {
						t.Fatalf("allowed token %d refused", id)
					}
					if id == eos {
						finished++
						if err := schematest.Validate(sch, string(text)); err != nil {
							t.Fatalf("walk %d produced %s: %v", walk, text, err)
						}
						break
					}
					text = tk.AppendPiece(text, id)
				}
			}
			if finished < 10 {
				t.Errorf("only %d of 20 walks finished", finished)
			}
		})
	}
}
