package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"

	"github.com/prefixd/prefixd/blockstore"
	"github.com/prefixd/prefixd/model"
	"github.com/prefixd/prefixd/sample"
)

func init() {
	register("generate", "generate text offline from a prompt (no server)", runGenerate)
}

// generateBlockSize is the K/V block size, in token positions, of the
// offline generator's pool.
const generateBlockSize = 16

// runGenerate implements `prefixd generate`.
func runGenerate(args []string, stdout, stderr io.Writer) int {
	return exitCode("generate", generate(args, stdout, stderr), stderr)
}

func generate(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("prefixd generate", flag.ContinueOnError)
	path := fs.String("model", "", "model file (GGUF or llama2.c checkpoint); default: the built-in model")
	prompt := fs.String("prompt", "", "prompt text (tokenized with the model's vocabulary, BOS prepended)")
	promptIDs := fs.String("prompt-ids", "", `prompt as space-separated token IDs, used as given (e.g. "1 2 3")`)
	tokenizer := fs.String("tokenizer", "", "llama2.c tokenizer.bin for a checkpoint that carries no vocabulary; refused if it holds more tokens than the model")
	maxTokens := fs.Int("max-tokens", 64, "most tokens to generate")
	temp := fs.Float64("temperature", 0, "sampling temperature; 0 is greedy")
	seed := fs.Uint64("seed", 0, "sampling seed")
	idsOnly := fs.Bool("ids", false, "print only the generated token IDs, space-separated")
	check := fs.Bool("check-tensors", false, checkTensorsUsage)
	var dev deviceFlags
	dev.register(fs)
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	if err := dev.check(); err != nil {
		return err
	}
	switch {
	case (*prompt == "") == (*promptIDs == ""):
		return usagef("give exactly one of --prompt and --prompt-ids")
	case *maxTokens < 1:
		return usagef("--max-tokens %d must be at least 1", *maxTokens)
	}
	smp, err := sample.New(sample.Params{Temperature: float32(*temp), Seed: *seed})
	if err != nil {
		return usagef("%w", err)
	}
	m, err := loadModel(*path, *tokenizer, mapsWeights(*path, dev.mapWeights()))
	if err != nil {
		return err
	}
	if *check {
		if err := checkTensors(context.Background(), m, slog.New(slog.NewTextHandler(stderr, nil))); err != nil {
			return err
		}
	}
	c := m.Config
	var ids []int32
	if *promptIDs != "" {
		if ids, err = parseIDs(*promptIDs, c.Vocab); err != nil {
			return usagef("--prompt-ids: %w", err)
		}
	} else {
		if m.Tokenizer == nil {
			return usagef("model %s has no vocabulary; use --prompt-ids", m.Name)
		}
		if c.BOS >= 0 {
			ids = append(ids, c.BOS)
		}
		ids = append(ids, m.Tokenizer.Encode(*prompt)...)
	}
	if len(ids) >= c.MaxSeqLen {
		return usagef("prompt of %d tokens leaves no room in the model's %d positions", len(ids), c.MaxSeqLen)
	}
	n := min(*maxTokens, c.MaxSeqLen-len(ids))
	var piece []byte
	dr, err := dev.runner(m, 0, newLogger("info", stderr))
	if err != nil {
		return err
	}
	defer dr.close()
	out, err := run(dr.Runner, ids, n, smp, func(tok int32) error {
		if *idsOnly || m.Tokenizer == nil {
			return nil
		}
		piece = m.Tokenizer.AppendPiece(piece[:0], tok)
		_, err := stdout.Write(piece)
		return err
	})
	if err != nil {
		return err
	}
	if *idsOnly || m.Tokenizer == nil {
		strs := make([]string, len(out))
		for i, t := range out {
			strs[i] = strconv.Itoa(int(t))
		}
		_, err = fmt.Fprintln(stdout, strings.Join(strs, " "))
		return err
	}
	_, err = fmt.Fprintln(stdout)
	return err
}

// parseIDs parses space-separated token IDs, each in [0, vocab).
func parseIDs(s string, vocab int) ([]int32, error) {
	var ids []int32
	for _, f := range strings.Fields(s) {
		v, err := strconv.ParseInt(f, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("token %q is not an integer", f)
		}
		if v < 0 || v >= int64(vocab) {
			return nil, fmt.Errorf("token %d outside the vocabulary of %d", v, vocab)
		}
		ids = append(ids, int32(v))
	}
	if len(ids) == 0 {
		return nil, errors.New("no token IDs")
	}
	return ids, nil
}

// run prefills prompt on a fresh pool sized for it plus n new tokens, then
// generates up to n tokens with r, stopping after EOS (which is returned
// but not passed to emit). emit sees each other new token as it is
// sampled.
func run(r *model.Runner, prompt []int32, n int, smp *sample.Sampler, emit func(tok int32) error) ([]int32, error) {
	blocks := blockstore.BlocksFor(len(prompt)+n, generateBlockSize)
	st, err := r.NewKV(blocks, generateBlockSize)
	if err != nil {
		return nil, err
	}
	pool, err := blockstore.New(blockstore.Config{NumBlocks: blocks, BlockSize: generateBlockSize, Storage: st})
	if err != nil {
		return nil, err
	}
	tb := pool.NewTable()
	defer tb.Release()
	in, gen := prompt, make([]int32, 0, n)
	for len(gen) < n {
		start := tb.Len()
		if err := tb.Append(len(in)); err != nil {
			return gen, err
		}
		logits, err := r.Forward([]model.Seq{{Tokens: in, Start: start, Blocks: tb.Blocks(), Logits: true}})
		if err != nil {
			return gen, err
		}
		tok := smp.Sample(logits)
		gen = append(gen, tok)
		if tok == r.Model().Config.EOS {
			break
		}
		if err := emit(tok); err != nil {
			return gen, err
		}
		in = []int32{tok}
	}
	return gen, nil
}
