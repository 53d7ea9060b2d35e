package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prefixd/prefixd/bench"
	"github.com/prefixd/prefixd/engine"
)

func init() {
	register("bench", "run the benchmark suite (batching, KV allocation, prefix cache modes)", runBench)
}

// runBench implements `prefixd bench`.
func runBench(args []string, stdout, stderr io.Writer) int {
	return exitCode("bench", benchCmd(args, stdout, stderr), stderr)
}

// benchModel returns the model the suite runs on and its EOS token: the
// built-in model, a model file, "null" (no compute) or "sim" (no compute,
// a fixed cost per forward pass).
func benchModel(name string, threads int, dev deviceFlags, stderr io.Writer) (engine.Model, int32, func(), error) {
	switch name {
	case "null":
		return &bench.NullModel{}, 257, func() {}, nil
	case "sim":
		return &bench.NullModel{StepCost: 2 * time.Millisecond, TokenCost: 2 * time.Microsecond}, 257, func() {}, nil
	}
	path := name
	if name == "builtin" {
		path = ""
	}
	m, err := loadModel(path, "", mapsWeights(path, dev.mapWeights()))
	if err != nil {
		return nil, 0, nil, err
	}
	dr, err := dev.runner(m, threads, newLogger("info", stderr))
	if err != nil {
		return nil, 0, nil, err
	}
	return dr, m.Config.EOS, dr.close, nil
}

func benchCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("prefixd bench", flag.ContinueOnError)
	modelName := fs.String("model", "builtin", `model: "builtin", a GGUF or llama2.c file, "null" (no compute: scheduler only) or "sim" (no compute, 2 ms + 2 us/token per forward pass)`)
	threads := fs.Int("threads", 0, fmt.Sprintf("compute threads, at most %d (4 per CPU); 0: GOMAXPROCS", maxThreads()))
	out := fs.String("out", "bench-out", "directory for report.json and the plots")
	only := fs.String("workloads", "", "comma-separated workloads to run (default all: "+strings.Join(bench.Names, ", ")+")")
	seed := fs.Uint64("seed", 1, "workload generator seed")
	tiny := fs.Bool("tiny", false, "tiny sizes (seconds; for smoke tests)")
	md := fs.String("markdown", "", "also rewrite the generated section of this markdown file (e.g. BENCHMARKS.md), with plots copied under --plot-dir")
	plotDir := fs.String("plot-dir", "docs/bench", "with --markdown: where the plots go, relative to the markdown file")
	var dev deviceFlags
	dev.register(fs)
	var h httpFlags
	fs.StringVar(&h.url, "http", "", "drive a running prefixd serve at this loopback URL (e.g. http://127.0.0.1:8080) instead of in-process engines")
	fs.StringVar(&h.apiKey, "api-key", "", "with --http: API key of the generation requests")
	fs.StringVar(&h.adminToken, "admin-token", "", "with --http: admin token, to read the server's block accounting after the run (needed by --soak)")
	fs.StringVar(&h.workload, "workload", bench.HTTPSharedPrefix, "with --http: "+strings.Join(bench.HTTPWorkloads, ", "))
	fs.Float64Var(&h.rate, "rate", 0, "with --http: open-loop arrivals per second (chat: conversations started); 0: the workload's own")
	fs.DurationVar(&h.soak, "soak", 0, "with --http: repeat the workload for this long (at most "+bench.MaxSoak.String()+"), drain, and fail if the server still holds blocks")
	specMode := fs.Bool("speculative", false, "run the speculative decoding comparison (off vs on, side by side: agent loop, code edit with a prediction, concurrent sequences, a back-off sweep) on --model instead of the suite")
	specTokens := fs.Int("speculative-tokens", 128, "with --speculative: output tokens per request")
	specK := fs.Int("speculative-k", 0, fmt.Sprintf("with --speculative: tokens drafted per step, 1 to %d; 0: the server's default", engine.MaxSpecTokens))
	specRounds := fs.Int("speculative-rounds", 2, "with --speculative: off/on pairs per case (ABBA order), the fastest of each mode kept")
	specRows := fs.String("speculative-rows", "1,2,4,8,16", "with --speculative: the concurrencies of the back-off sweep, comma-separated; empty: no sweep")
	fs.BoolVar(&h.chatAPI, "chat-api", false, "with --http --workload chat: send the conversations as OpenAI messages to /v1/chat/completions (the server's chat template renders them) instead of token IDs to /generate_stream")
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	if err := checkThreads(*threads); err != nil {
		return err
	}
	if err := dev.check(); err != nil {
		return err
	}
	if *modelName == "null" || *modelName == "sim" {
		for _, name := range []string{"device", "kv-type"} {
			if isSet(fs, name) {
				return usagef("--%s does not apply to --model %s, which computes nothing", name, *modelName)
			}
		}
	}
	if h.url != "" {
		for _, name := range []string{"model", "threads", "workloads", "markdown", "plot-dir", "device", "kv-type", "gpu-memory-fraction", "gpu-dtype", "gpu-graphs"} {
			if isSet(fs, name) {
				return usagef("--%s does not apply to --http: the server runs the model", name)
			}
		}
		return benchHTTP(h, *seed, *tiny, *out, stdout, stderr)
	}
	for _, name := range []string{"api-key", "admin-token", "workload", "rate", "soak", "chat-api"} {
		if isSet(fs, name) {
			return usagef("--%s needs --http", name)
		}
	}
	if *specMode {
		sc := bench.SpecConfig{Tokens: *specTokens, K: *specK, Seed: *seed, Rows: []int{}, Rounds: *specRounds}
		return benchSpeculative(*modelName, *threads, dev, sc, *specRows, *out, args, stdout, stderr)
	}
	var names []string
	if *only != "" {
		names = strings.Split(*only, ",")
	}
	size := bench.Default
	if *tiny {
		size = bench.Tiny
	}
	ws, err := bench.Suite(size, *seed, names...)
	if err != nil {
		return usagef("%w", err)
	}
	m, eos, closeModel, err := benchModel(*modelName, *threads, dev, stderr)
	if err != nil {
		return err
	}
	defer closeModel()
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	rep, err := bench.RunSuite(ctx, m, eos, ws, stderr)
	if err != nil {
		return err
	}
	rep.Model, rep.Seed, rep.Tiny = *modelName, *seed, *tiny
	rep.Command = "prefixd bench " + strings.Join(args, " ")
	if err := rep.WriteTable(stdout); err != nil {
		return err
	}
	for _, t := range rep.Targets() {
		line := fmt.Sprintf("target %-6s %s: want %s, got %s", t.Status(), t.Name, t.Want, t.Got)
		if t.NotApplicable {
			line += " (not applicable at --tiny: the goals are set for the default sizes)"
		}
		fmt.Fprintln(stdout, line)
	}
	if err := writeFile(filepath.Join(*out, "report.json"), rep.WriteJSON); err != nil {
		return err
	}
	plots, err := rep.WritePlots(*out)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "wrote %s and %d plots\n", filepath.Join(*out, "report.json"), len(plots))
	if *md == "" {
		return nil
	}
	dst := filepath.Join(filepath.Dir(*md), *plotDir)
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	rel := make([]string, len(plots))
	for i, p := range plots {
		b, err := os.ReadFile(filepath.Join(*out, p))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dst, p), b, 0o644); err != nil {
			return err
		}
		rel[i] = filepath.ToSlash(filepath.Join(*plotDir, p))
	}
	doc, err := os.ReadFile(*md)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return os.WriteFile(*md, []byte(bench.SpliceMarkdown(string(doc), rep.Markdown(rel))), 0o644)
}

// benchSpeculative runs `prefixd bench --speculative`: the table on
// stdout and OUT/speculative.json.
func benchSpeculative(modelName string, threads int, dev deviceFlags, sc bench.SpecConfig, rows, out string, args []string, stdout, stderr io.Writer) error {
	if sc.Tokens < 2 {
		return usagef("--speculative-tokens %d: want at least 2", sc.Tokens)
	}
	if sc.K < 0 || sc.K > engine.MaxSpecTokens {
		return usagef("--speculative-k %d: want 0 to %d", sc.K, engine.MaxSpecTokens)
	}
	for r := range strings.SplitSeq(rows, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(r))
		if r == "" {
			continue
		}
		if err != nil || n < 1 {
			return usagef("--speculative-rows: %q is not a positive count", r)
		}
		sc.Rows = append(sc.Rows, n)
	}
	m, eos, closeModel, err := benchModel(modelName, threads, dev, stderr)
	if err != nil {
		return err
	}
	defer closeModel()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	sc.Model, sc.EOS = m, eos
	res, err := bench.RunSpeculative(ctx, sc, stderr)
	if err != nil {
		return err
	}
	if err := bench.WriteSpecTable(stdout, res); err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	path := filepath.Join(out, "speculative.json")
	report := struct {
		Command string             `json:"command"`
		Model   string             `json:"model"`
		Results []bench.SpecResult `json:"results"`
	}{"prefixd bench " + strings.Join(args, " "), modelName, res}
	if err := writeJSON(path, report); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "wrote %s\n", path)
	return nil
}

// writeFile creates path and writes it with fn.
func writeFile(path string, fn func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := fn(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// writeJSON writes v to path as indented JSON.
func writeJSON(path string, v any) error {
	return writeFile(path, func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	})
}

// isSet reports whether the flag name was given.
func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// httpFlags are the flags of `prefixd bench --http`.
type httpFlags struct {
	url, apiKey, adminToken, workload string
	rate                              float64
	soak                              time.Duration
	chatAPI                           bool
}

// benchHTTP runs `prefixd bench --http`: the workload against a running
// server, the client-side figures on stdout and in OUT/http-report.json,
// and exit status 1 if the server still holds blocks after draining.
func benchHTTP(h httpFlags, seed uint64, tiny bool, out string, stdout, stderr io.Writer) error {
	if _, err := bench.CheckLoopback(h.url); err != nil {
		return usagef("%w", err)
	}
	switch {
	case !slices.Contains(bench.HTTPWorkloads, h.workload):
		return usagef("--workload %q: want one of %s", h.workload, strings.Join(bench.HTTPWorkloads, ", "))
	case h.rate < 0:
		return usagef("--rate %v must not be negative", h.rate)
	case h.soak < 0 || h.soak > bench.MaxSoak:
		return usagef("--soak %v must be in [0, %v]", h.soak, bench.MaxSoak)
	case h.soak > 0 && h.rate == 0:
		return usagef("--soak needs --rate: a soak is an open-loop arrival process")
	case h.soak > 0 && h.adminToken == "":
		return usagef("--soak needs --admin-token: it ends with the server's block accounting (GET /v1/cache)")
	case h.chatAPI && h.workload != bench.HTTPChat:
		return usagef("--chat-api needs --workload %s", bench.HTTPChat)
	}
	size := bench.Default
	if tiny {
		size = bench.Tiny
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	res, err := bench.RunHTTP(ctx, bench.HTTPConfig{URL: h.url, APIKey: h.apiKey, AdminToken: h.adminToken,
		Workload: h.workload, Size: size, Seed: seed, Rate: h.rate, Soak: h.soak, ChatAPI: h.chatAPI}, stderr)
	if res != nil {
		if werr := res.WriteText(stdout); werr != nil && err == nil {
			err = werr
		}
		if err := os.MkdirAll(out, 0o755); err != nil {
			return err
		}
		path := filepath.Join(out, "http-report.json")
		if err := writeJSON(path, res); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "wrote %s\n", path)
	}
	if err != nil {
		return err
	}
	if n := res.Leaked(); n > 0 {
		fmt.Fprintf(stdout, "leak: %d blocks in use\n", n)
		return fmt.Errorf("leak: %d blocks still in use after every request finished", n)
	}
	return nil
}
