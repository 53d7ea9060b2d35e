package server

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"

	"github.com/prefixd/prefixd/blockstore"
	"github.com/prefixd/prefixd/engine"
	"github.com/prefixd/prefixd/model"
)

// vocabModel is a model the fuzz tests never run: a closed engine over it
// validates submissions and refuses the rest with ErrClosed.
type vocabModel struct{}

func (vocabModel) VocabSize() int { return 258 }
func (vocabModel) MaxSeqLen() int { return 1024 }
func (vocabModel) NewKV(int, int) (blockstore.Storage, error) {
	return nil, nil
}
func (vocabModel) Forward([]engine.Row) ([]float32, error) {
	return nil, errors.New("vocabModel does not run")
}

// checkEngine has the limits of testLimits and a pool big enough for any
// request they allow; its Validate is the engine's verdict. It is closed:
// only Validate is called.
var checkEngine = sync.OnceValue(func() *engine.Engine {
	e, err := engine.New(engine.Config{Model: vocabModel{}, Tokenizer: model.ByteTokenizer{}, EOS: model.ByteEOS,
		NumBlocks: 2048, BlockSize: 8, MaxModelLen: 1024, MaxBeamWidth: 8})
	if err != nil {
		panic(err)
	}
	e.Close(context.Background())
	return e
})

// checkAccepted fails when the engine refuses, as invalid, a request the
// server's validation accepted.
func checkAccepted(t *testing.T, body string, req engine.Request) {
	lim := testLimits()
	switch {
	case len(req.Prompt) == 0 || len(req.Prompt) > lim.maxPrompt:
		t.Fatalf("%s: accepted a prompt of %d tokens", body, len(req.Prompt))
	case req.MaxTokens < 1 || len(req.Prompt)+req.MaxTokens > lim.maxModelLen:
		t.Fatalf("%s: accepted max_tokens %d with a %d-token prompt", body, req.MaxTokens, len(req.Prompt))
	}
	if err := checkEngine().Validate(&req); err != nil {
		t.Fatalf("%s: accepted, but the engine says %v", body, err)
	}
}

// fuzzSeeds are request bodies, good and bad, from the table tests.
func fuzzSeeds() []string {
	seeds := []string{
		`{"prompt": "Once upon a time", "max_tokens": 12, "ignore_eos": true}`,
		`{"prompt_ids": [256, 10, 20], "max_tokens": 6, "beam_width": 3, "length_penalty": 0.5}`,
		`{"prompt": "x", "temperature": 0.9, "top_p": 0.9, "top_k": 40, "seed": 11, "stop": ["a", "b"], "stop_ids": [1]}`,
		`{"prompt": "x", "cache": {"ttl": "30s", "priority": 2, "enabled": false}}`,
		`{"model": "m", "prompt": ["x"], "max_tokens": 3, "n": 1, "stream": true, "user": "u"}`,
		`{"prompt": [1, 2, 3], "stop": "\n"}`,
		`{"prompt": "x", "max_tokens": 8, "json_schema": {"type": "array", "items": {"enum": [1, 2]}, "maxItems": 3}}`,
		`{"prompt": "x", "grammar": "root ::= [a-z]{2,4} (\",\" root)?", "beam_width": 2}`,
	}
	seeds = append(seeds, chatFuzzSeeds...)
	for _, c := range badInputs() {
		if len(c.body) < 2000 {
			seeds = append(seeds, c.body)
		}
	}
	return seeds
}

// fuzzBodies fuzzes parse, one endpoint's decoding and validation, with
// the seed bodies: a refusal must be a well-formed client error, and an
// accepted request one the engine accepts too.
func fuzzBodies(f *testing.F, parse func(body []byte) (engine.Request, *apiError)) {
	for _, s := range fuzzSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		req, err := parse([]byte(body))
		if err != nil {
			checkAPIError(t, body, err)
			return
		}
		checkAccepted(t, body, req)
	})
}

func FuzzDecodeGenerate(f *testing.F) {
	fuzzBodies(f, func(body []byte) (engine.Request, *apiError) {
		var g generateRequest
		if err := decodeStrict(body, &g); err != nil {
			return engine.Request{}, err
		}
		return g.toEngine(model.ByteTokenizer{}, fuzzLimits())
	})
}

func FuzzDecodeCompletion(f *testing.F) {
	fuzzBodies(f, func(body []byte) (engine.Request, *apiError) {
		var c completionRequest
		if err := decodeRefusing(body, &c, unsupportedOpenAI); err != nil {
			return engine.Request{}, err
		}
		return c.toEngine(model.ByteTokenizer{}, fuzzLimits())
	})
}

// checkAPIError checks a refusal is a well-formed client error.
func checkAPIError(t *testing.T, body string, e *apiError) {
	if e.Status < 400 || e.Status > 499 || e.Message == "" || e.Type == "" {
		t.Fatalf("%s: malformed refusal %+v", body, e)
	}
	if _, err := json.Marshal(e); err != nil {
		t.Fatalf("%s: refusal does not encode: %v", body, err)
	}
}

// fuzzGrammars compiles the fuzzers' structured outputs over the byte
// vocabulary; one setup, so repeated grammars come from its cache.
var fuzzGrammars = newGrammarSetup(model.ByteTokenizer{}, model.ByteTokenizer{}.VocabSize(), []int32{model.ByteEOS})

// fuzzLimits is testLimits with structured outputs enabled.
func fuzzLimits() limits {
	lim := testLimits()
	lim.grammars = fuzzGrammars
	return lim
}
