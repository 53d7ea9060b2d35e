package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"sync"

	"github.com/prefixd/prefixd/engine"
	"github.com/prefixd/prefixd/grammar"
)

// Structured outputs: OpenAI's response_format and vLLM's
// structured_outputs compile to a grammar.Constraint that the engine
// makes every choice follow.

// responseFormat is OpenAI's response_format.
type responseFormat struct {
	Type       string          `json:"type"`
	JSONSchema *jsonSchemaSpec `json:"json_schema"`
}

// schemaLabel is what OpenAI sends beside a schema: response_format's
// json_schema and a tool's function both carry it.
type schemaLabel struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Strict      *bool  `json:"strict"` // constrained either way
}

// jsonSchemaSpec is response_format's json_schema.
type jsonSchemaSpec struct {
	schemaLabel
	Schema json.RawMessage `json:"schema"`
}

// structuredOutputs is vLLM's structured_outputs: exactly one of its
// constraints.
type structuredOutputs struct {
	JSON       json.RawMessage `json:"json"` // a schema, or a string holding one
	Regex      *string         `json:"regex"`
	Choice     []string        `json:"choice"`
	Grammar    *string         `json:"grammar"`
	JSONObject *bool           `json:"json_object"`
}

// maxConstraintCache bounds the compiled constraints the server keeps,
// so that requests repeating a schema share its grammar and masks.
const maxConstraintCache = 32

// grammarSetup builds the vocabulary trie once, on the first structured
// request, and keeps recently compiled constraints.
type grammarSetup struct {
	src   grammar.TokenSource
	stops []int32

	once  sync.Once
	vocab *grammar.Vocab

	mu    sync.Mutex
	cache map[string]*grammar.Constraint
	order []string // cache keys, oldest first
}

// vocabSource is the tokenizer as a grammar.TokenSource over the model's
// vocabulary size (IDs past the tokenizer's have no bytes).
type vocabSource struct {
	Tokenizer
	n int
}

// VocabSize implements grammar.TokenSource: the model's vocabulary size.
func (v vocabSource) VocabSize() int { return v.n }

func newGrammarSetup(tok Tokenizer, vocab int, stops []int32) *grammarSetup {
	return &grammarSetup{src: vocabSource{tok, vocab}, stops: stops, cache: map[string]*grammar.Constraint{}}
}

// constraint returns the Constraint of a grammar of kind (schema, gbnf,
// regex, choice, object) over spec, compiling it unless it is cached.
func (gs *grammarSetup) constraint(kind string, spec []byte, compile func() (*grammar.Grammar, error)) (*grammar.Constraint, error) {
	key := kind + "\x00" + string(spec)
	gs.mu.Lock()
	c, ok := gs.cache[key]
	gs.mu.Unlock()
	if ok {
		return c, nil
	}
	g, err := compile()
	if err != nil {
		return nil, err
	}
	if err := g.NewMatcher().Err(); err != nil { // too ambiguous to start
		return nil, err
	}
	gs.once.Do(func() { gs.vocab = grammar.NewVocab(gs.src, gs.stops) })
	c = grammar.NewConstraint(g, gs.vocab)
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if _, ok := gs.cache[key]; !ok {
		if len(gs.order) >= maxConstraintCache {
			delete(gs.cache, gs.order[0])
			gs.order = gs.order[1:]
		}
		gs.cache[key] = c
		gs.order = append(gs.order, key)
	}
	return c, nil
}

// grammarError is the 400 of a grammar that does not compile: the
// message says where in it (a JSON pointer into a schema, a GBNF line).
func grammarError(param string, err error) *apiError {
	var ge *grammar.Error
	if errors.As(err, &ge) && ge.Path != "" {
		return badRequest(param, "%s: at %s: %s", param, ge.Path, ge.Msg)
	}
	return badRequest(param, "%s: %v", param, err)
}

// grammarSpec is a request's structured-output constraint before it is
// compiled: its kind and text (the cache key), the field it came from
// and how to compile it.
type grammarSpec struct {
	kind, param string
	spec        []byte
	compile     func() (*grammar.Grammar, error)
}

func schemaSpec(param string, schema []byte) *grammarSpec {
	return &grammarSpec{"schema", param, schema, func() (*grammar.Grammar, error) { return grammar.CompileSchema(schema, grammar.Limits{}) }}
}

func objectSpec(param string) *grammarSpec {
	return &grammarSpec{"object", param, nil, func() (*grammar.Grammar, error) { return grammar.JSONObject(grammar.Limits{}) }}
}

func gbnfSpec(param, src string) *grammarSpec {
	return &grammarSpec{"gbnf", param, []byte(src), func() (*grammar.Grammar, error) { return grammar.ParseGBNF(src, grammar.Limits{}) }}
}

// constrain reads response_format and structured_outputs and sets the
// request's Constraint.
func (p *openAIParams) constrain(req *engine.Request, lim limits) *apiError {
	var spec *grammarSpec
	if len(p.ResponseFormat) > 0 && string(p.ResponseFormat) != "null" {
		var rf responseFormat
		if err := decodeStrict(p.ResponseFormat, &rf); err != nil {
			err.Param = joinParam("response_format", err.Param)
			return err
		}
		switch rf.Type {
		case "text":
		case "json_object":
			spec = objectSpec("response_format")
		case "json_schema":
			if rf.JSONSchema == nil || len(rf.JSONSchema.Schema) == 0 || string(rf.JSONSchema.Schema) == "null" {
				return badRequest("response_format.json_schema.schema", "response_format of type json_schema needs json_schema.schema")
			}
			spec = schemaSpec("response_format.json_schema.schema", rf.JSONSchema.Schema)
		default:
			return badRequest("response_format.type", "response_format.type must be text, json_object or json_schema, got %q", rf.Type)
		}
	}
	if len(p.StructuredOutputs) > 0 && string(p.StructuredOutputs) != "null" {
		if spec != nil {
			return badRequest("structured_outputs", "send response_format or structured_outputs, not both")
		}
		var err *apiError
		if spec, err = parseStructuredOutputs(p.StructuredOutputs); err != nil {
			return err
		}
	}
	return spec.apply(req, lim)
}

// parseStructuredOutputs reads vLLM's structured_outputs.
func parseStructuredOutputs(raw json.RawMessage) (*grammarSpec, *apiError) {
	var so structuredOutputs
	if err := decodeStrict(raw, &so); err != nil {
		err.Param = joinParam("structured_outputs", err.Param)
		return nil, err
	}
	var specs []*grammarSpec
	if len(so.JSON) > 0 && string(so.JSON) != "null" {
		schema := []byte(so.JSON)
		var text string
		if json.Unmarshal(so.JSON, &text) == nil {
			schema = []byte(text) // a schema sent as a JSON string
		}
		specs = append(specs, schemaSpec("structured_outputs.json", schema))
	}
	if so.Regex != nil {
		re := *so.Regex
		specs = append(specs, &grammarSpec{"regex", "structured_outputs.regex", []byte(re),
			func() (*grammar.Grammar, error) { return grammar.ParseRegex(re, grammar.Limits{}) }})
	}
	if so.Choice != nil {
		choices := so.Choice
		key, _ := json.Marshal(choices)
		specs = append(specs, &grammarSpec{"choice", "structured_outputs.choice", key,
			func() (*grammar.Grammar, error) { return grammar.Choice(choices, grammar.Limits{}) }})
	}
	if so.Grammar != nil {
		specs = append(specs, gbnfSpec("structured_outputs.grammar", *so.Grammar))
	}
	if so.JSONObject != nil && *so.JSONObject {
		specs = append(specs, objectSpec("structured_outputs.json_object"))
	}
	if len(specs) != 1 {
		return nil, badRequest("structured_outputs", "structured_outputs must set exactly one of json, regex, choice, grammar and json_object, got %d", len(specs))
	}
	return specs[0], nil
}

// generateSpec reads /generate's json_schema and grammar, llama.cpp's
// spellings on its native endpoint.
func (g *generateRequest) generateSpec() (*grammarSpec, *apiError) {
	hasSchema := len(g.JSONSchema) > 0 && string(g.JSONSchema) != "null"
	switch {
	case hasSchema && g.Grammar != nil:
		return nil, badRequest("grammar", "send json_schema or grammar, not both")
	case hasSchema:
		return schemaSpec("json_schema", g.JSONSchema), nil
	case g.Grammar != nil:
		return gbnfSpec("grammar", *g.Grammar), nil
	}
	return nil, nil
}

// apply compiles the spec (or takes it from the cache), sets it as the
// request's Constraint and adds the vocabulary's stop tokens to the
// request's (the grammar allows them only where it can end). A nil spec
// changes nothing.
func (gs *grammarSpec) apply(req *engine.Request, lim limits) *apiError {
	if gs == nil {
		return nil
	}
	if lim.grammars == nil {
		return badRequest(gs.param, "structured outputs need the model's tokenizer, and this model has none")
	}
	c, err := lim.grammars.constraint(gs.kind, bytes.Clone(gs.spec), gs.compile)
	if err != nil {
		return grammarError(gs.param, err)
	}
	req.Constraint = c
	for _, s := range lim.grammars.stops {
		if !slices.Contains(req.StopTokens, s) {
			req.StopTokens = append(req.StopTokens, s)
		}
	}
	return nil
}

// joinParam prefixes a nested object's field with its parent's name.
func joinParam(parent, field string) string {
	if field == "" {
		return parent
	}
	return parent + "." + field
}
