package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prefixd/prefixd/engine"
	"github.com/prefixd/prefixd/internal/cpufeat"
	"github.com/prefixd/prefixd/internal/sidefile"
	"github.com/prefixd/prefixd/model"
	"github.com/prefixd/prefixd/remotetier"
	"github.com/prefixd/prefixd/server"
	"github.com/prefixd/prefixd/speculate"
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
	return exitCode("serve", serve(ctx, stop, args, environ(), stdout, stderr), stderr)
}

// environ returns the process environment by name.
func environ() map[string]string {
	env := map[string]string{}
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	return env
}

// serveOptions is the daemon's configuration after flags, environment and
// config file.
type serveOptions struct {
	addr, modelPath, tokenizerPath, logLevel string
	servedModelName                          string
	blocks, blockSize, maxRunning, maxBatch  int
	prefillChunk, maxWaiting, maxTokens      int
	maxPromptTokens, maxModelLen, threads    int
	maxBodyBytes, maxLogprobEntries          int
	defaultTTL, maxTTL, drainTimeout         time.Duration
	hostTierBytes, kvBytes                   byteSize
	batching, kvAlloc, prefixCache           string
	cachedFirst, traceTokens, checkTensors   bool
	chatSpecialInContent                     bool
	traceOut, chatTemplate                   string
	adminToken, apiKeys                      string
	publicStats                              bool
	maxTenantPriority                        int
	keys                                     map[string]string
	unknownEnv                               []string // PREFIXD_* variables that name no flag
	kvEvents                                 kvEventsOptions
	diskTier                                 diskTierOptions
	remoteTier                               remoteTierOptions
	nsCacheShare                             float64
	speculative                              string
	specTokens, specMaxRows                  int
	device                                   deviceFlags
	listen                                   listenFlags // --host, --port
}

// envPrefix starts the name of every environment variable prefixd reads.
const envPrefix = "PREFIXD_"

// envName is the environment variable of a flag: PREFIXD_ and the name in
// upper case, dashes as underscores.
func envName(flagName string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// serveFlags defines serve's flags on a new FlagSet, bound to o.
func serveFlags(o *serveOptions) (fs *flag.FlagSet, config *string) {
	fs = flag.NewFlagSet("prefixd serve", flag.ContinueOnError)
	config = fs.String("config", "", "JSON file of settings: an object of flag names to values (env PREFIXD_CONFIG)")
	fs.StringVar(&o.addr, "addr", "127.0.0.1:8080", "listen address; port 0 picks a free port (logged)")
	fs.StringVar(&o.modelPath, "model", "", "model file (GGUF or llama2.c checkpoint); default: the built-in model")
	fs.BoolVar(&o.checkTensors, "check-tensors", false, checkTensorsUsage)
	fs.StringVar(&o.tokenizerPath, "tokenizer", "", "llama2.c tokenizer.bin for a checkpoint that carries no vocabulary, so text prompts work; refused if it holds more tokens than the model")
	fs.StringVar(&o.chatTemplate, "chat-template", "", "chat template for /v1/chat/completions: a Jinja file, or (when no such file exists) a built-in template's name, as llama.cpp's --chat-template takes them (llama2, llama2-sys, llama3, mistral-v1, mistral-v3, mistral-v7, chatml, phi3, phi4, gemma, deepseek, deepseek2, deepseek3, command-r, zephyr, vicuna, ...; a wrong name lists them all); default: the model's own (GGUF tokenizer.chat_template), else the built-in one its vocabulary's marker tokens call for, else chatml")
	fs.BoolVar(&o.chatSpecialInContent, "chat-special-in-content", false, "encode control-token texts in chat messages' contents (<|im_end|>) as those tokens, as Hugging Face tokenizers do, letting a user forge turns; by default they stay text")
	fs.StringVar(&o.servedModelName, "served-model-name", "", "model id that /v1/models and completions report; default: the model file's base name (stories260K), or prefixd-builtin-byte-3m")
	fs.IntVar(&o.blocks, "blocks", 0, "KV pool size in blocks, at least one sequence of the context (--max-model-len or the model's); default on the CPU: a third of the free memory (less mapped weights and the host tier), at most max-running sequences of the context, at least one; on a GPU: what the weights leave of --gpu-memory-fraction")
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
	fs.Float64Var(&o.nsCacheShare, "namespace-cache-share", 0, "each namespace's share of the KV pool, in (0, 1]: under pressure a namespace holding more than its share loses its own cached blocks first, so one tenant cannot evict the others' at will; 0: no shares")
	fs.StringVar(&o.batching, "batching", "continuous", "scheduling: continuous or static")
	fs.StringVar(&o.kvAlloc, "kv-alloc", "paged", "KV allocation: paged or contiguous")
	fs.StringVar(&o.prefixCache, "prefix-cache", "on", "prefix cache: on or off")
	fs.BoolVar(&o.cachedFirst, "cached-first", false, "admit waiting requests with the longest cached prefix first")
	fs.StringVar(&o.speculative, "speculative", "off", "speculative decoding's drafts besides a request's prediction (which drafts in every mode): off; ngram (prompt lookup in the sequence's own prompt and output); suffix (also the same namespace's earlier outputs)")
	fs.IntVar(&o.specTokens, "num-speculative-tokens", 7, fmt.Sprintf("most tokens drafted per sequence and step, 1 to %d", engine.MaxSpecTokens))
	fs.IntVar(&o.specMaxRows, "speculative-max-rows", 4, "speculate only in steps of at most this many decoding sequences: beyond it a step is compute-bound and verifying drafts costs about what it saves; -1: no limit")
	fs.StringVar(&o.adminToken, "admin-token", "", "bearer token of the /v1/cache admin endpoints; empty disables them")
	fs.BoolVar(&o.publicStats, "public-stats", false, "with --api-keys, serve /metrics and /v1/stats without a key (by default they need an API key or the admin token)")
	fs.StringVar(&o.apiKeys, "api-keys", "", "tenant API keys: key=namespace,key2=namespace2, namespaces not empty; none: no auth, one shared namespace")
	fs.IntVar(&o.maxTenantPriority, "max-tenant-priority", 100, "with --api-keys, the highest cache.priority a tenant's key may set; higher needs the admin token in the X-Admin-Token header")
	fs.IntVar(&o.maxBodyBytes, "max-body-bytes", 1<<20, "largest request body")
	fs.IntVar(&o.maxLogprobEntries, "max-logprob-entries", 1<<18, "most log-probabilities, n × max_tokens × (1 + top_logprobs), an OpenAI answer that is not streamed may hold")
	fs.DurationVar(&o.drainTimeout, "drain-timeout", 30*time.Second, "on SIGTERM, how long in-flight requests may finish before they are cancelled")
	fs.IntVar(&o.threads, "threads", 0, fmt.Sprintf("compute threads, at most %d (4 per CPU); 0: GOMAXPROCS", maxThreads()))
	fs.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&o.traceOut, "trace-out", "", "write a trace of the generation requests to this file (JSON lines, see trace/README.md; for prefixd ttl-sim --trace)")
	fs.BoolVar(&o.traceTokens, "trace-tokens", false, "with --trace-out: record prompts' token IDs instead of their block hashes")
	o.kvEvents.register(fs)
	o.diskTier.register(fs)
	o.remoteTier.register(fs)
	o.device.register(fs)
	o.listen.register(fs, &o.modelPath)
	return fs, config
}

// parseServe reads the configuration: defaults, then the config file, then
// the environment, then the command line, each overriding the one before.
// Help goes to stdout.
func parseServe(args []string, env map[string]string, stdout io.Writer) (*serveOptions, error) {
	o := &serveOptions{}
	fs, config := serveFlags(o)
	args, err := modelArgument(fs, args)
	if err != nil {
		return nil, err
	}
	if err := parseFlags(fs, args, stdout); err != nil {
		return nil, err
	}
	onCommandLine := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { onCommandLine[f.Name] = true })

	settings := map[string]string{} // flag name -> value, later sources win
	source := map[string]string{}
	path := *config
	if v, ok := env[envName("config")]; ok && !onCommandLine["config"] {
		path = v
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
	// PREFIXD_CPU is no flag: the kernels read it as they initialize.
	known := map[string]bool{cpufeat.EnvVar: true}
	fs.VisitAll(func(f *flag.Flag) {
		if commandLineOnly[f.Name] {
			return
		}
		known[envName(f.Name)] = true
		if v, ok := env[envName(f.Name)]; ok && f.Name != "config" {
			settings[f.Name], source[f.Name] = v, envName(f.Name)
		}
	})
	known[remotetier.PasswordEnv] = true // the remote tier's password: no flag, so never on a command line
	for k := range env {
		if strings.HasPrefix(k, envPrefix) && !known[k] {
			o.unknownEnv = append(o.unknownEnv, k)
		}
	}
	slices.Sort(o.unknownEnv)
	names := make([]string, 0, len(settings))
	for k := range settings {
		names = append(names, k)
	}
	slices.Sort(names)
	restore := explainValues(fs)
	defer restore()
	for _, k := range names {
		if onCommandLine[k] {
			continue
		}
		if err := fs.Set(k, settings[k]); err != nil {
			return nil, usagef("%s: %s=%s: %v", source[k], k, shownValue(k, strconv.Quote(settings[k])), err)
		}
	}
	if o.addr, err = o.listen.addr(o.addr); err != nil {
		return nil, err
	}
	return o, o.check()
}

// secretFlags are the flags whose values are credentials: no message
// quotes them, whichever source (config file, environment, command line)
// gave them.
var secretFlags = map[string]bool{"admin-token": true, "api-keys": true, "remote-tier": true}

// shownValue returns value, as a message may quote it for flag name, or
// a placeholder for a secret flag's.
func shownValue(name, value string) string {
	if secretFlags[name] {
		return "(a value not shown: it is a secret)"
	}
	return value
}

// maxConfigBytes bounds the --config file; one of every flag is a few KB.
const maxConfigBytes = 1 * sidefile.MiB

// readConfigFile reads a JSON object of flag names to values.
// A file over maxConfigBytes is refused.
func readConfigFile(path string, fs *flag.FlagSet) (map[string]string, error) {
	b, err := sidefile.Read(path, maxConfigBytes)
	if err != nil {
		return nil, usagef("--config: %w", err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, usagef("config file %s: want a JSON object of flag names to values: %v", path, err)
	}
	out := map[string]string{}
	for k, v := range raw {
		if fs.Lookup(k) == nil || k == "config" || commandLineOnly[k] {
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
			return nil, usagef("config file %s: %s must be a string, number or boolean, got %s", path, k, shownValue(k, t))
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
		oneOf("speculative", o.speculative, "off", "ngram", "suffix"),
		oneOf("log-level", o.logLevel, "debug", "info", "warn", "error"),
		o.device.check(),
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
		{"max-body-bytes", o.maxBodyBytes}, {"max-logprob-entries", o.maxLogprobEntries},
	} {
		if f.v < 0 {
			return usagef("--%s %d must not be negative", f.name, f.v)
		}
	}
	if err := checkThreads(o.threads); err != nil {
		return err
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
	if err := o.remoteTier.check(); err != nil {
		return err
	}
	if err := o.diskTier.check(); err != nil {
		return err
	}
	if o.maxTenantPriority < 1 || o.maxTenantPriority > math.MaxInt32 {
		return usagef("--max-tenant-priority %d must be in [1, %d]", o.maxTenantPriority, math.MaxInt32)
	}
	if o.specTokens < 1 || o.specTokens > engine.MaxSpecTokens {
		return usagef("--num-speculative-tokens %d must be in [1, %d]", o.specTokens, engine.MaxSpecTokens)
	}
	if o.specMaxRows == 0 || o.specMaxRows < -1 {
		return usagef("--speculative-max-rows %d must be positive, or -1 for no limit", o.specMaxRows)
	}
	if o.nsCacheShare < 0 || o.nsCacheShare > 1 {
		return usagef("--namespace-cache-share %v must be in [0, 1]", o.nsCacheShare)
	}
	keys, err := parseAPIKeys(o.apiKeys)
	if err != nil {
		return usagef("--api-keys: %w", err)
	}
	o.keys = keys
	return o.kvEvents.checkNamespaces(keys)
}

// parseAPIKeys parses key=namespace,key2=namespace2.
func parseAPIKeys(s string) (map[string]string, error) {
	keys := map[string]string{}
	if strings.TrimSpace(s) == "" {
		return keys, nil
	}
	for i, entry := range strings.Split(s, ",") {
		k, ns, ok := strings.Cut(entry, "=")
		k, ns = strings.TrimSpace(k), strings.TrimSpace(ns)
		// No message quotes an entry: it may hold a secret.
		switch {
		case !ok || k == "":
			return nil, fmt.Errorf("entry %d is not key=namespace", i+1)
		case ns == "":
			// "" is the namespace of a server without keys; a key mapped
			// to it would share its cache with nobody and mean nothing.
			return nil, fmt.Errorf("entry %d has an empty namespace: give each key a tenant name", i+1)
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
// the default signal handling, so a second signal ends a slow drain. env
// is the process environment; help goes to stdout, the log to stderr.
func serve(ctx context.Context, stopSignals func(), args []string, env map[string]string, stdout, stderr io.Writer) error {
	o, err := parseServe(args, env, stdout)
	if err != nil {
		return err
	}
	log := newLogger(o.logLevel, stderr)
	for _, name := range o.unknownEnv {
		// The value is not logged: it may be a misspelt secret.
		log.Warn("ignoring an environment variable that names no flag", "name", name)
	}
	m, mapped, err := loadServeModel(ctx, o, log)
	if errors.Is(err, errStoppedLoading) {
		log.Info("stopped", "during", "model load")
		return nil
	}
	if err != nil {
		return err
	}
	warnModelLenClamped(log, o.maxModelLen, m.Config.MaxSeqLen)
	dr, err := o.device.runner(m, o.threads, log)
	if err != nil {
		return err
	}
	defer dr.close()
	if o.blocks == 0 && o.kvBytes == 0 { // the pool takes what is left of the GPU's share
		if err := dr.profile(o.maxBatch, o.maxRunning, o.blockSize, log); err != nil {
			return err
		}
	}
	metrics := server.NewMetrics()
	ecfg, pool, err := engineConfig(o, m, dr, metrics, poolInputs{
		mappedBytes: mapped,
		freeMemory:  func() (freeMemory, error) { return availableMemory(os.ReadFile) },
	})
	if err != nil {
		return err
	}
	tw, closeTrace, err := openTrace(o, log)
	if err != nil {
		return err
	}
	// Closed last, after Shutdown has written every record.
	defer closeTrace()
	events, err := o.kvEvents.start(o.servedModelName, o.blockSize, log)
	if err != nil {
		return err
	}
	if events != nil {
		ecfg.CacheEvents = events
		defer events.Close() // after the engine, which feeds it
	}
	disk, err := o.diskTier.start(o, m, pool.blockBytes, events, log)
	if err != nil {
		return err
	}
	if disk != nil {
		ecfg.DiskTier = disk
		defer disk.Close() // after the engine, whose Close saves the cache into it
	}
	remote, err := o.remoteTier.start(o, m, pool.blockBytes, metrics, log)
	if err != nil {
		return err
	}
	if remote != nil {
		ecfg.RemoteTier = remote
		defer remote.Close() // after the engine, which writes through it
	}
	eng, srv, ln, err := start(o, ecfg, pool, m, metrics, tw, dr.memInfo, log)
	if err != nil {
		return err
	}
	return serveUntilDone(ctx, stopSignals, o.drainTimeout, eng, srv, ln, log)
}

// newLogger returns the daemon's text logger at level, one of the values
// check allows.
func newLogger(level string, w io.Writer) *slog.Logger {
	var l slog.Level
	l.UnmarshalText([]byte(level))
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l}))
}

// errStoppedLoading is loadServeModel's answer to a signal (ctx ending)
// before the model is loaded.
var errStoppedLoading = errors.New("stopped while loading the model")

// loadModelFile loads the model and tokenizer files for loadServeModel;
// it is loadModel, which a test replaces with a slow load.
var loadModelFile = loadModel

// loadFreeMemory reads the memory free before the model loads, for
// weightsMapped; a test replaces it with a smaller figure.
var loadFreeMemory = func() (freeMemory, error) { return availableMemory(os.ReadFile) }

// loadServeModel loads the model and its tokenizer, logging where from
// before (a large file takes a while) and what it is after, and settles
// o.servedModelName when the command line left it to the model. mapped is
// the bytes of a file the tensors view through a mapping (Model.Mapped:
// GGUF or safetensors with --mmap, on a GPU, too large to copy
// (weightsMapped), or a Q8_0 file the CPU packs), which become resident
// only as they are read; otherwise the weights are copied in as they load
// (into huge pages, or a llama2.c checkpoint to the heap), and the
// built-in model is built on the heap, so the free memory read afterwards
// has them counted.
// When ctx ends first (SIGTERM during a slow load) it returns
// errStoppedLoading at once, and the abandoned load's model, if it ever
// comes, is closed: the process is about to exit.
func loadServeModel(ctx context.Context, o *serveOptions, log *slog.Logger) (m *model.Model, mapped int64, err error) {
	started := time.Now()
	mapWeights := o.device.mapWeights()
	format, size := "built-in", int64(0)
	if o.modelPath == "" {
		log.Info("loading model", "path", "built-in", "format", format)
	} else {
		if format, size, err = modelFile(o.modelPath); err != nil {
			return nil, 0, err
		}
		if format != "llama2.c" {
			var tooLarge bool
			if mapWeights, tooLarge = weightsMapped(size, mapWeights, loadFreeMemory); tooLarge {
				log.Warn("the model file is larger than the memory free: its weights stay in the file's mapping, as with --mmap", "bytes", size)
			}
		}
		log.Info("loading model", "path", o.modelPath, "format", format, "bytes", size, "tokenizer", o.tokenizerPath)
	}
	type loaded struct {
		m   *model.Model
		err error
	}
	done := make(chan loaded, 1)
	go func() {
		m, err := loadModelFile(o.modelPath, o.tokenizerPath, mapWeights)
		if err == nil && o.checkTensors {
			err = checkTensors(ctx, m, log)
		}
		done <- loaded{m, err}
	}()
	// A large file loads for a while: say so now and then.
	tick := time.NewTicker(loadProgressEvery)
	defer tick.Stop()
wait:
	for {
		select {
		case <-ctx.Done():
			go func() {
				if l := <-done; l.err == nil {
					l.m.Close()
				}
			}()
			return nil, 0, errStoppedLoading
		case <-tick.C:
			log.Info("still loading the model", "elapsed", time.Since(started).Round(time.Second))
		case l := <-done:
			if l.err != nil {
				return nil, 0, l.err
			}
			m = l.m
			break wait
		}
	}
	if o.servedModelName == "" {
		o.servedModelName = modelID(o.modelPath, m)
	}
	weights := "copied" // built in, or a llama2.c checkpoint's float32s
	if m.Mapped() {
		mapped, weights = size, "mapped"
	} else if format != "built-in" && format != "llama2.c" {
		weights = "copied into huge pages" // or base pages where Linux has no THP
	}
	c := m.Config
	log.Info("model", "id", o.servedModelName, "name", m.Name, "parameters", parameters(c), "dim", c.Dim,
		"layers", c.Layers, "heads", c.Heads, "kv_heads", c.KVHeads, "vocab", c.Vocab, "max_seq_len", c.MaxSeqLen,
		"tokenizer", m.Tokenizer != nil, "weights", weights, "took", time.Since(started).Round(time.Millisecond))
	return m, mapped, nil
}

// engineConfig sizes the KV pool (sizePool, from in, whose maxLen,
// blockBytes and gpuBytes it fills) and turns the options into the
// engine's configuration.
func engineConfig(o *serveOptions, m *model.Model, runner *deviceRunner, metrics *server.Metrics, in poolInputs) (engine.Config, kvPool, error) {
	c := m.Config
	in.maxLen = c.MaxSeqLen
	if o.maxModelLen > 0 {
		in.maxLen = min(o.maxModelLen, in.maxLen)
	}
	probe, err := runner.NewKV(1, o.blockSize)
	if err != nil {
		return engine.Config{}, kvPool{}, err
	}
	in.blockBytes, in.gpuBytes = int64(probe.BlockBytes()), runner.kvBytes
	pool, err := sizePool(o, in)
	if err != nil {
		return engine.Config{}, kvPool{}, err
	}
	ecfg := engine.Config{
		Model: runner, EOS: c.EOS, Tokenizer: m.Tokenizer,
		NumBlocks: pool.blocks, BlockSize: o.blockSize, MaxRunning: o.maxRunning, MaxBatchTokens: o.maxBatch,
		PrefillChunk: o.prefillChunk, MaxWaiting: o.maxWaiting, MaxModelLen: in.maxLen,
		DisablePrefixCache: o.prefixCache == "off", CachedFirst: o.cachedFirst,
		DefaultTTL: o.defaultTTL, MaxTTL: o.maxTTL, HostTierBytes: int64(o.hostTierBytes), NamespaceCacheShare: o.nsCacheShare,
		Observer: metrics, Samples: metrics.Samples(),
	}
	if o.batching == "static" {
		ecfg.Batching = engine.Static
	}
	mode, err := speculate.ParseMode(o.speculative)
	if err != nil {
		return engine.Config{}, kvPool{}, err
	}
	spec, err := speculate.New(speculate.Config{Mode: mode, K: o.specTokens})
	if err != nil {
		return engine.Config{}, kvPool{}, err
	}
	ecfg.Speculator, ecfg.SpecTokens, ecfg.SpecMaxRows = spec, o.specTokens, o.specMaxRows
	if o.kvAlloc == "contiguous" {
		ecfg.KVAlloc = engine.Contiguous
	}
	return ecfg, pool, nil
}

// openTrace opens --trace-out, if given, before the engine starts, so a
// bad path fails fast. The returned close function is never nil.
func openTrace(o *serveOptions, log *slog.Logger) (*trace.Writer, func(), error) {
	if o.traceOut == "" {
		return nil, func() {}, nil
	}
	f, err := os.OpenFile(o.traceOut, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, nil, fmt.Errorf("--trace-out: %w", err)
	}
	log.Info("tracing requests", "path", o.traceOut, "tokens", o.traceTokens)
	return trace.NewWriter(f, time.Now()), func() {
		if err := f.Close(); err != nil {
			log.Error("closing the trace", "path", o.traceOut, "err", err)
		}
	}, nil
}

// start builds the engine and the HTTP server and opens the listener. An
// engine configuration the engine refuses (--max-batch-tokens below
// --max-running, say) is a usage error: the flags chose it.
func start(o *serveOptions, ecfg engine.Config, pool kvPool, m *model.Model, metrics *server.Metrics, tw *trace.Writer, devMem server.DeviceMemory, log *slog.Logger) (*engine.Engine, *server.Server, net.Listener, error) {
	eng, err := engine.New(ecfg)
	if err != nil {
		return nil, nil, nil, usagef("%w", err)
	}
	tpl, err := loadChatTemplate(o.chatTemplate)
	if err != nil {
		eng.Close(context.Background())
		return nil, nil, nil, err
	}
	srv, err := server.New(server.Config{
		Engine: eng, Tokenizer: m.Tokenizer, ModelName: o.servedModelName, AdminToken: o.adminToken, APIKeys: o.keys, PublicStats: o.publicStats,
		MaxTenantPriority: int32(o.maxTenantPriority),
		ChatTemplate:      tpl, ChatSpecialInContent: o.chatSpecialInContent,
		MaxBodyBytes: o.maxBodyBytes, MaxPromptTokens: o.maxPromptTokens, MaxTokens: o.maxTokens, MaxLogprobEntries: o.maxLogprobEntries,
		Metrics: metrics, Logger: log, Trace: tw, TraceTokens: o.traceTokens, DeviceMemory: devMem,
		Version: runningVersion(),
	})
	if errors.Is(err, server.ErrModelChatTemplate) {
		err = fmt.Errorf("%w (override it with --chat-template FILE or NAME)", err)
	}
	if err != nil {
		eng.Close(context.Background())
		return nil, nil, nil, err
	}
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		eng.Close(context.Background())
		return nil, nil, nil, err
	}
	log.Info("kv pool", append([]any{"blocks", pool.blocks, "block_size", o.blockSize, "bytes", pool.bytes(), "kv_type", o.device.kvTypeName(),
		"max_model_len", ecfg.MaxModelLen, "host_tier_bytes", int64(o.hostTierBytes), "prefix_cache", o.prefixCache,
		"batching", o.batching, "kv_alloc", o.kvAlloc, "sized_by", pool.rule}, pool.figures...)...)
	log.Info("listening", "addr", ln.Addr().String(), "admin", o.adminToken != "", "tenants", len(o.keys))
	return eng, srv, ln, nil
}

// serveUntilDone serves on ln until ctx ends, then drains for up to
// drainTimeout.
func serveUntilDone(ctx context.Context, stopSignals func(), drainTimeout time.Duration, eng *engine.Engine, srv *server.Server, ln net.Listener, log *slog.Logger) error {
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		eng.Close(context.Background())
		return fmt.Errorf("serving: %w", err)
	case <-ctx.Done():
	}
	stopSignals()
	log.Info("draining", "timeout", drainTimeout)
	dctx, cancel := context.WithTimeout(context.Background(), drainTimeout)
	defer cancel()
	if err := srv.Shutdown(dctx); err != nil {
		log.Warn("drain cut short: unfinished requests were cancelled", "err", err)
	}
	// Shutdown closes only the listeners Serve has registered: one that
	// Serve had not reached when the signal came (a signal at start-up)
	// would accept forever. Closing it ends that Serve; after a Serve that
	// did register it, the second Close is a harmless error.
	ln.Close()
	if err := <-served; err != nil {
		log.Warn("serve", "err", err)
	}
	log.Info("stopped")
	return nil
}

// maxThreads bounds --threads: 4 per CPU this process may run on. The
// worker pool splits every matrix product into one part per thread, so
// threads beyond the cores only make the parts smaller and have them wait
// for the same cores; a few per core leave room to measure that, while
// 100000 (a typo) would start that many goroutines for nothing.
func maxThreads() int { return 4 * runtime.NumCPU() }

// checkThreads refuses a --threads value outside [0, maxThreads()].
func checkThreads(n int) error {
	if n < 0 || n > maxThreads() {
		return usagef("--threads %d: want 0 (one per CPU) to %d (4 per CPU; this machine has %d)", n, maxThreads(), runtime.NumCPU())
	}
	return nil
}

// maxBlockSize bounds --block-size: blocks far larger than a prompt's
// shared prefix would cache nothing.
const maxBlockSize = 1024
