package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prefixd/prefixd/engine"
	"github.com/prefixd/prefixd/kernels/cpu"
	"github.com/prefixd/prefixd/model"
	"github.com/prefixd/prefixd/server"
	"github.com/prefixd/prefixd/trace"
)

func init() {
	register("serve", "run the HTTP daemon (generation, OpenAI completions, cache admin, metrics)", runServe)
}

// runServe implements `prefixd serve`: it serves until SIGINT or SIGTERM,
// then drains and exits 0.
func runServe(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return exitCode("serve", serve(ctx, stop, args, os.LookupEnv, stderr), stderr)
}

// serveOptions is the daemon's configuration after flags, environment and
// config file.
type serveOptions struct {
	addr, modelPath, tokenizerPath, logLevel string
	blocks, blockSize, maxRunning, maxBatch  int
	prefillChunk, maxWaiting, maxTokens      int
	maxPromptTokens, maxModelLen, threads    int
	maxBodyBytes                             int
	defaultTTL, maxTTL, drainTimeout         time.Duration
	hostTierBytes, kvBytes                   byteSize
	batching, kvAlloc, prefixCache           string
	cachedFirst, traceTokens                 bool
	traceOut                                 string
	adminToken, apiKeys                      string
	keys                                     map[string]string
	kvEvents                                 kvEventsOptions
	flags                                    *flag.FlagSet
}

// envName is the environment variable of a flag: PREFIXD_ and the name in
// upper case, dashes as underscores.
func envName(flagName string) string {
	return "PREFIXD_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// parseServe reads the configuration: defaults, then the config file, then
// the environment, then the command line, each overriding the one before.
func parseServe(args []string, lookupEnv func(string) (string, bool), stderr io.Writer) (*serveOptions, error) {
	o := &serveOptions{}
	fs := flag.NewFlagSet("prefixd serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	config := fs.String("config", "", "JSON file of settings: an object of flag names to values (env PREFIXD_CONFIG)")
	fs.StringVar(&o.addr, "addr", "127.0.0.1:8080", "listen address; port 0 picks a free port (logged)")
	fs.StringVar(&o.modelPath, "model", "", "model file (GGUF or llama2.c checkpoint); default: the built-in model")
	fs.StringVar(&o.tokenizerPath, "tokenizer", "", "llama2.c tokenizer.bin for a checkpoint that carries no vocabulary, so text prompts work")
	fs.IntVar(&o.blocks, "blocks", 0, "KV pool size in blocks; default: max-running sequences of 512 tokens, and at least one of the model's full length")
	fs.IntVar(&o.blockSize, "block-size", 16, "token positions per KV block")
	fs.IntVar(&o.maxRunning, "max-running", 32, "most sequences in the running batch")
	fs.IntVar(&o.maxBatch, "max-batch-tokens", 2048, "most tokens per forward pass (decode rows plus prefill chunks)")
	fs.IntVar(&o.prefillChunk, "prefill-chunk", 512, "most prompt tokens of one sequence per forward pass")
	fs.IntVar(&o.maxWaiting, "max-waiting", 1024, "queued requests before 429")
	fs.IntVar(&o.maxTokens, "max-tokens", 0, "most tokens a request may generate; 0: the model length")
	fs.IntVar(&o.maxPromptTokens, "max-prompt-tokens", 0, "most prompt tokens; 0: the model length")
	fs.IntVar(&o.maxModelLen, "max-model-len", 0, "longest prompt + output; 0: the model's")
	fs.DurationVar(&o.defaultTTL, "default-ttl", 5*time.Minute, "prefix cache TTL of requests that ask for none")
	fs.DurationVar(&o.maxTTL, "max-ttl", time.Hour, "longest prefix cache TTL a request may ask for")
	fs.Var(&o.kvBytes, "kv-bytes", "KV pool size in bytes instead of --blocks, e.g. 2GiB: as many blocks as fit")
	fs.Var(&o.hostTierBytes, "host-tier-bytes", "host-memory cache tier for evicted blocks, e.g. 512MiB; 0 disables it")
	fs.StringVar(&o.batching, "batching", "continuous", "scheduling: continuous or static")
	fs.StringVar(&o.kvAlloc, "kv-alloc", "paged", "KV allocation: paged or contiguous")
	fs.StringVar(&o.prefixCache, "prefix-cache", "on", "prefix cache: on or off")
	fs.BoolVar(&o.cachedFirst, "cached-first", false, "admit waiting requests with the longest cached prefix first")
	fs.StringVar(&o.adminToken, "admin-token", "", "bearer token of the /v1/cache admin endpoints; empty disables them")
	fs.StringVar(&o.apiKeys, "api-keys", "", "tenant API keys: key=namespace,key2=namespace2; empty: no auth, one shared namespace")
	fs.IntVar(&o.maxBodyBytes, "max-body-bytes", 1<<20, "largest request body")
	fs.DurationVar(&o.drainTimeout, "drain-timeout", 30*time.Second, "on SIGTERM, how long in-flight requests may finish before they are cancelled")
	fs.IntVar(&o.threads, "threads", 0, "compute threads; 0: GOMAXPROCS")
	fs.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&o.traceOut, "trace-out", "", "write a trace of the generation requests to this file (JSON lines, see trace/README.md; for prefixd ttl-sim --trace)")
	fs.BoolVar(&o.traceTokens, "trace-tokens", false, "with --trace-out: record prompts' token IDs instead of their block hashes")
	o.kvEvents.register(fs)
	o.flags = fs
	if err := fs.Parse(args); err != nil {
		return nil, usageError{err}
	}
	if fs.NArg() > 0 {
		return nil, usagef("unexpected argument %q", fs.Arg(0))
	}
	onCommandLine := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { onCommandLine[f.Name] = true })

	settings := map[string]string{} // flag name -> value, later sources win
	source := map[string]string{}
	path := *config
	if !onCommandLine["config"] {
		if v, ok := lookupEnv(envName("config")); ok {
			path = v
		}
	}
	if path != "" {
		fromFile, err := readConfigFile(path, fs)
		if err != nil {
			return nil, err
		}
		for k, v := range fromFile {
			settings[k], source[k] = v, "config file "+path
		}
	}
	fs.VisitAll(func(f *flag.Flag) {
		if v, ok := lookupEnv(envName(f.Name)); ok && f.Name != "config" {
			settings[f.Name], source[f.Name] = v, envName(f.Name)
		}
	})
	names := make([]string, 0, len(settings))
	for k := range settings {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		if onCommandLine[k] {
			continue
		}
		if err := fs.Set(k, settings[k]); err != nil {
			return nil, usagef("%s: %s=%q: %v", source[k], k, settings[k], err)
		}
	}
	return o, o.check()
}

// readConfigFile reads a JSON object of flag names to values.
func readConfigFile(path string, fs *flag.FlagSet) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, usagef("--config: %w", err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, usagef("config file %s: want a JSON object of flag names to values: %v", path, err)
	}
	out := map[string]string{}
	for k, v := range raw {
		if fs.Lookup(k) == nil || k == "config" {
			return nil, usagef("config file %s: unknown setting %q", path, k)
		}
		var s string
		switch t := strings.TrimSpace(string(v)); {
		case strings.HasPrefix(t, `"`):
			if err := json.Unmarshal(v, &s); err != nil {
				return nil, usagef("config file %s: %s: %v", path, k, err)
			}
		case t == "true" || t == "false" || (t != "" && (t[0] == '-' || t[0] >= '0' && t[0] <= '9')):
			s = t
		default:
			return nil, usagef("config file %s: %s must be a string, number or boolean, got %s", path, k, t)
		}
		out[k] = s
	}
	return out, nil
}

// check validates values the flag package cannot, and parses the keys.
func (o *serveOptions) check() error {
	oneOf := func(name, v string, allowed ...string) error {
		if !slices.Contains(allowed, v) {
			return usagef("--%s %q: want %s", name, v, strings.Join(allowed, " or "))
		}
		return nil
	}
	for _, err := range []error{
		oneOf("batching", o.batching, "continuous", "static"),
		oneOf("kv-alloc", o.kvAlloc, "paged", "contiguous"),
		oneOf("prefix-cache", o.prefixCache, "on", "off"),
		oneOf("log-level", o.logLevel, "debug", "info", "warn", "error"),
	} {
		if err != nil {
			return err
		}
	}
	for _, f := range []struct {
		name string
		v    int
	}{
		{"blocks", o.blocks}, {"block-size", o.blockSize}, {"max-running", o.maxRunning}, {"max-batch-tokens", o.maxBatch},
		{"prefill-chunk", o.prefillChunk}, {"max-waiting", o.maxWaiting}, {"max-tokens", o.maxTokens},
		{"max-prompt-tokens", o.maxPromptTokens}, {"max-model-len", o.maxModelLen}, {"threads", o.threads},
		{"max-body-bytes", o.maxBodyBytes},
	} {
		if f.v < 0 {
			return usagef("--%s %d must not be negative", f.name, f.v)
		}
	}
	if o.blockSize > maxBlockSize {
		return usagef("--block-size %d is above %d", o.blockSize, maxBlockSize)
	}
	if o.blockSize == 0 || o.maxRunning == 0 || o.maxBatch == 0 || o.prefillChunk == 0 || o.maxWaiting == 0 || o.maxBodyBytes == 0 {
		return usagef("--block-size, --max-running, --max-batch-tokens, --prefill-chunk, --max-waiting and --max-body-bytes must be positive")
	}
	if o.blocks > 0 && o.kvBytes > 0 {
		return usagef("give --blocks or --kv-bytes, not both")
	}
	if o.defaultTTL <= 0 || o.maxTTL < o.defaultTTL || o.drainTimeout < 0 {
		return usagef("want 0 < --default-ttl (%v) <= --max-ttl (%v) and --drain-timeout >= 0", o.defaultTTL, o.maxTTL)
	}
	if err := o.kvEvents.check(); err != nil {
		return err
	}
	keys, err := parseAPIKeys(o.apiKeys)
	if err != nil {
		return usagef("--api-keys: %w", err)
	}
	o.keys = keys
	return nil
}

// parseAPIKeys parses key=namespace,key2=namespace2.
func parseAPIKeys(s string) (map[string]string, error) {
	keys := map[string]string{}
	if strings.TrimSpace(s) == "" {
		return keys, nil
	}
	for i, entry := range strings.Split(s, ",") {
		k, ns, ok := strings.Cut(strings.TrimSpace(entry), "=")
		if !ok || k == "" {
			// The entry is not quoted: it may hold a secret.
			return nil, fmt.Errorf("entry %d is not key=namespace", i+1)
		}
		if _, dup := keys[k]; dup {
			return nil, fmt.Errorf("a key is listed twice")
		}
		keys[k] = ns
	}
	return keys, nil
}

// byteSize is a flag of bytes with an optional unit: 512MiB, 2GB, 4096.
type byteSize int64

func (b *byteSize) String() string { return strconv.FormatInt(int64(*b), 10) }

func (b *byteSize) Set(s string) error {
	units := []struct {
		suffix string
		mult   int64
	}{
		{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
		{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1},
	}
	mult := int64(1)
	num := strings.TrimSpace(s)
	for _, u := range units {
		if strings.HasSuffix(num, u.suffix) {
			num, mult = strings.TrimSpace(strings.TrimSuffix(num, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return fmt.Errorf("%q is not a size like 4096, 512MiB or 2GB", s)
	}
	*b = byteSize(n * mult)
	return nil
}

// serve runs the daemon until ctx ends, then drains. stopSignals restores
// the default signal handling, so a second signal ends a slow drain.
func serve(ctx context.Context, stopSignals func(), args []string, lookupEnv func(string) (string, bool), stderr io.Writer) error {
	o, err := parseServe(args, lookupEnv, stderr)
	if err != nil {
		return err
	}
	var level slog.Level
	level.UnmarshalText([]byte(o.logLevel))
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	m, err := loadModel(o.modelPath, o.tokenizerPath)
	if err != nil {
		return err
	}
	c := m.Config
	maxLen := c.MaxSeqLen
	if o.maxModelLen > 0 {
		maxLen = min(o.maxModelLen, maxLen)
	}
	blocks := o.blocks
	if blocks == 0 && o.kvBytes == 0 {
		perSeq := (min(512, maxLen) + o.blockSize - 1) / o.blockSize
		blocks = max(o.maxRunning*perSeq, (maxLen+o.blockSize-1)/o.blockSize)
	}
	w := cpu.NewWorkers(o.threads)
	defer w.Close()
	runner := model.NewRunner(m, w)
	if err := fitsMemory(runner, blocks, o.blockSize, int64(o.kvBytes)); err != nil {
		return err
	}
	metrics := server.NewMetrics()
	ecfg := engine.Config{
		Model: runner, EOS: c.EOS,
		NumBlocks: blocks, KVBytes: int64(o.kvBytes), BlockSize: o.blockSize, MaxRunning: o.maxRunning, MaxBatchTokens: o.maxBatch,
		PrefillChunk: o.prefillChunk, MaxWaiting: o.maxWaiting, MaxModelLen: maxLen,
		DisablePrefixCache: o.prefixCache == "off", CachedFirst: o.cachedFirst,
		DefaultTTL: o.defaultTTL, MaxTTL: o.maxTTL, HostTierBytes: int64(o.hostTierBytes),
		Observer: metrics, Samples: metrics.Samples(),
	}
	var tok server.Tokenizer
	if m.Tokenizer != nil {
		ecfg.Tokenizer, tok = m.Tokenizer, m.Tokenizer
	}
	if o.batching == "static" {
		ecfg.Batching = engine.Static
	}
	if o.kvAlloc == "contiguous" {
		ecfg.KVAlloc = engine.Contiguous
	}
	var tw *trace.Writer
	if o.traceOut != "" {
		// Opened before the engine, so a bad path fails fast; closed last,
		// after Shutdown has written every record.
		f, err := os.OpenFile(o.traceOut, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			return fmt.Errorf("--trace-out: %w", err)
		}
		defer func() {
			if err := f.Close(); err != nil {
				log.Error("closing the trace", "path", o.traceOut, "err", err)
			}
		}()
		tw = trace.NewWriter(f, time.Now())
		log.Info("tracing requests", "path", o.traceOut, "tokens", o.traceTokens)
	}
	events, err := o.kvEvents.start(m.Name, o.blockSize, log)
	if err != nil {
		return err
	}
	if events != nil {
		ecfg.CacheEvents = events
		defer events.Close()
	}
	eng, err := engine.New(ecfg)
	if err != nil {
		return usagef("%w", err)
	}
	srv, err := server.New(server.Config{
		Engine: eng, Tokenizer: tok, ModelName: m.Name, AdminToken: o.adminToken, APIKeys: o.keys,
		MaxBodyBytes: o.maxBodyBytes, MaxPromptTokens: o.maxPromptTokens, MaxTokens: o.maxTokens,
		Metrics: metrics, Logger: log, Trace: tw, TraceTokens: o.traceTokens,
	})
	if err != nil {
		eng.Close(context.Background())
		return err
	}
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		eng.Close(context.Background())
		return err
	}
	name := m.Name
	if o.modelPath != "" {
		name = o.modelPath
	}
	log.Info("model", "name", name, "dim", c.Dim, "layers", c.Layers, "heads", c.Heads, "kv_heads", c.KVHeads,
		"vocab", c.Vocab, "max_model_len", maxLen, "tokenizer", m.Tokenizer != nil)
	blocks = eng.Config().NumBlocks
	log.Info("kv pool", "blocks", blocks, "block_size", o.blockSize, "bytes", int64(blocks)*int64(eng.KVBlockBytes()),
		"host_tier_bytes", int64(o.hostTierBytes), "prefix_cache", o.prefixCache, "batching", o.batching, "kv_alloc", o.kvAlloc)
	log.Info("listening", "addr", ln.Addr().String(), "admin", o.adminToken != "", "tenants", len(o.keys))

	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		eng.Close(context.Background())
		return fmt.Errorf("serving: %w", err)
	case <-ctx.Done():
	}
	stopSignals()
	log.Info("draining", "timeout", o.drainTimeout)
	dctx, cancel := context.WithTimeout(context.Background(), o.drainTimeout)
	defer cancel()
	if err := srv.Shutdown(dctx); err != nil {
		log.Warn("drain cut short: unfinished requests were cancelled", "err", err)
	}
	if err := <-served; err != nil {
		log.Warn("serve", "err", err)
	}
	log.Info("stopped")
	return nil
}

// maxBlockSize bounds --block-size: blocks far larger than a prompt's
// shared prefix would cache nothing.
const maxBlockSize = 1024

// fitsMemory refuses a KV pool (blocks, or kvBytes) larger than the
// machine's memory, which would otherwise end the process when allocated.
func fitsMemory(r *model.Runner, blocks, blockSize int, kvBytes int64) error {
	total := physicalMemory()
	if total == 0 {
		return nil
	}
	if blocks > 0 {
		probe, err := r.NewKV(1, blockSize)
		if err != nil {
			return err
		}
		if per := int64(probe.BlockBytes()); int64(blocks) > total/per {
			return usagef("a KV pool of %d blocks of %d bytes does not fit this machine's %d bytes of memory", blocks, per, total)
		}
		return nil
	}
	if kvBytes > total {
		return usagef("a KV pool of %d bytes does not fit this machine's %d bytes of memory", kvBytes, total)
	}
	return nil
}
