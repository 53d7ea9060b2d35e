package engine

import (
	"context"
	"errors"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/prefixd/prefixd/grammar"
	"github.com/prefixd/prefixd/internal/schematest"
	"github.com/prefixd/prefixd/model"
)

// validitySchemas can all close within validityMaxTokens bytes, so a
// random model's every run must end in JSON that validates.
var validitySchemas = []string{
	`{"type":"object","properties":{"name":{"type":"string","maxLength":8},"age":{"type":"integer","minimum":0,"maximum":120}},"required":["name","age"],"additionalProperties":false}`,
	`{"type":"array","items":{"type":"integer","minimum":-50,"maximum":50},"minItems":1,"maxItems":5}`,
	`{"enum":["red","green","blue",42,null]}`,
	`{"type":"object","properties":{"ok":{"type":"boolean"},"tags":{"type":"array","items":{"enum":["a","b","c"]},"maxItems":3}},"required":["ok"]}`,
	`{"type":"object","properties":{"when":{"type":"string","format":"date"},"id":{"type":"string","format":"uuid"}},"required":["when","id"]}`,
	`{"anyOf":[{"type":"string","maxLength":5},{"type":"number","minimum":0,"maximum":9},{"type":"null"}]}`,
	`{"type":"object","properties":{"p":{"$ref":"#/$defs/pt"},"q":{"$ref":"#/$defs/pt"}},"required":["p"],"$defs":{"pt":{"type":"object","properties":{"x":{"type":"integer","minimum":0,"maximum":99},"y":{"type":"integer","minimum":0,"maximum":99}},"required":["x","y"]}}}`,
	`{"type":"string","pattern":"^[A-Z]{2}-[0-9]{3}$"}`,
	`{"type":"array","prefixItems":[{"type":"boolean"},{"type":"string","maxLength":4},{"const":"end"}],"items":false}`,
	`{"type":"object","properties":{"kind":{"const":"pt"},"v":{"type":"array","items":{"type":"number","minimum":-1,"maximum":1},"maxItems":3}},"required":["kind","v"]}`,
}

const validityMaxTokens = 250

// TestConstrainedOutputValidates runs the built-in model (random weights,
// a byte vocabulary) at temperature 1: 200 seeded runs over 10 schemas,
// two choices each, must all end with EOS in text that a real JSON Schema
// validator accepts.
func TestConstrainedOutputValidates(t *testing.T) {
	e := realEngine(t, model.Builtin(), func(c *Config) { c.EOS = model.ByteEOS })
	voc := grammar.NewVocab(model.ByteTokenizer{}, []int32{model.ByteEOS})
	p := model.ByteTokenizer{}.Encode("Answer in JSON:")
	type run struct {
		schema int
		seed   uint64
		st     []*Stream
	}
	var runs []run
	vals := make([]*jsonschema.Schema, len(validitySchemas))
	for i, src := range validitySchemas {
		g, err := grammar.CompileSchema([]byte(src), grammar.Limits{})
		if err != nil {
			t.Fatalf("schema %d: %v", i, err)
		}
		vals[i] = schematest.MustCompile(t, src)
		c := grammar.NewConstraint(g, voc)
		for seed := range uint64(10) {
			st, err := e.SubmitN(context.Background(), Request{Prompt: p, MaxTokens: validityMaxTokens, N: 2,
				Sampling: Sampling{Temperature: 1, Seed: seed}, Constraint: c})
			if err != nil {
				t.Fatal(err)
			}
			runs = append(runs, run{i, seed, st})
		}
	}
	outputs := 0
	for _, r := range runs {
		for choice, st := range r.st {
			res := st.Result()
			var text []byte
			for _, id := range res.Tokens {
				text = model.ByteTokenizer{}.AppendPiece(text, id)
			}
			if res.Finish != FinishStop {
				t.Fatalf("schema %d seed %d choice %d: finished %q (%v) after %q", r.schema, r.seed, choice, res.Finish, res.Err, text)
			}
			if err := schematest.Validate(vals[r.schema], string(text)); err != nil {
				t.Fatalf("schema %d seed %d choice %d: %s does not validate: %v", r.schema, r.seed, choice, text, err)
			}
			outputs++
		}
	}
	if outputs != 200 {
		t.Fatalf("%d outputs, want 200", outputs)
	}
	checkDrained(t, e)
}

func TestConstraintRefusesBeams(t *testing.T) {
	e := realEngine(t, model.Builtin(), nil)
	g, err := grammar.Choice([]string{"yes", "no"}, grammar.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	c := grammar.NewConstraint(g, grammar.NewVocab(model.ByteTokenizer{}, []int32{model.ByteEOS}))
	_, err = e.Submit(context.Background(), Request{Prompt: []int32{1, 2}, MaxTokens: 4, Beam: Beam{Width: 2}, Constraint: c})
	var inv *InvalidError
	if !errors.As(err, &inv) || inv.Param != "beam_width" {
		t.Fatalf("beam search with a grammar: %v, want an InvalidError for beam_width", err)
	}
}

// TestConstraintGreedyChoice: greedy decoding under a choice grammar
// returns one of the choices and stops.
func TestConstraintGreedyChoice(t *testing.T) {
	e := realEngine(t, model.Builtin(), func(c *Config) { c.EOS = model.ByteEOS })
	g, err := grammar.Choice([]string{"alpha", "beta", "gamma delta"}, grammar.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	c := grammar.NewConstraint(g, grammar.NewVocab(model.ByteTokenizer{}, []int32{model.ByteEOS}))
	res := run(t, e, Request{Prompt: model.ByteTokenizer{}.Encode("Pick:"), MaxTokens: 20, Constraint: c})
	text := model.ByteTokenizer{}.Decode(res.Tokens)
	if res.Finish != FinishStop || (text != "alpha" && text != "beta" && text != "gamma delta") {
		t.Fatalf("greedy output %q (%s), want one of the choices then EOS", text, res.Finish)
	}
}
