package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/prefixd/prefixd/bench"
	"github.com/prefixd/prefixd/sim/cachesim"
	"github.com/prefixd/prefixd/sim/routesim"
	"github.com/prefixd/prefixd/trace"
)

func init() {
	register("route-sim", "simulate replicas behind round-robin, least-loaded and prefix-aware (KV-event) routing", runRouteSim)
}

// runRouteSim implements `prefixd route-sim`.
func runRouteSim(args []string, stdout, stderr io.Writer) int {
	return exitCode("route-sim", routeSim(args, stdout, stderr), stderr)
}

func routeSim(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("prefixd route-sim", flag.ContinueOnError)
	tracePath := fs.String("trace", "", "trace file (JSON lines; see package trace), e.g. from prefixd serve --trace-out")
	synth := fs.Bool("synth", false, "route a synthetic multi-tenant trace instead (seeded; see --seed)")
	seed := fs.Uint64("seed", 1, "synthetic trace seed")
	prefixes := fs.Int("prefixes", 256, "synthetic trace: shared prompt prefixes (system prompts, documents)")
	tenants := fs.Int("tenants", 16, "synthetic trace: tenants the prefixes belong to")
	duration := fs.Duration("duration", 10*time.Minute, "synthetic trace: length")
	replicas := fs.String("replicas", "1,2,4,8,16,32", "replica counts to simulate, comma-separated")
	blocks := fs.Int("blocks-per-replica", 2048, "KV pool of each replica, in blocks")
	blockSize := fs.Int("block-size", 16, "cache block size in tokens (must match a hashed trace's)")
	policies := fs.String("policies", "round-robin,least-loaded,prefix-aware", "routing policies, comma-separated")
	delay := fs.Duration("event-delay", 50*time.Millisecond, "how late KV events reach the prefix-aware router")
	tokenTime := fs.Duration("token-time", 20*time.Millisecond, "simulated time per output token, for how long a request holds its blocks")
	ttl := fs.Duration("ttl", 10*time.Minute, "the replicas' default cache TTL")
	sharedBlocks := fs.Int("shared-tier-blocks", 0, "also run every policy with a remote tier of this many blocks that the replicas share (every cached block written through; a prompt continuing past its replica's cache takes the tier's run); 0: off")
	sharedTTL := fs.Duration("shared-tier-ttl", time.Hour, "with --shared-tier-blocks: how long a block stays in the shared tier after its last use")
	out := fs.String("out", "bench-out", "directory for route-sim.json")
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	switch {
	case (*tracePath == "") == !*synth:
		return usagef("give exactly one of --trace and --synth")
	case *blocks < 1 || *blockSize < 1:
		return usagef("--blocks-per-replica and --block-size must be positive")
	case *delay < 0 || *tokenTime <= 0 || *ttl <= 0:
		return usagef("want --event-delay >= 0, --token-time > 0 and --ttl > 0")
	case *sharedBlocks < 0 || *sharedTTL <= 0:
		return usagef("want --shared-tier-blocks >= 0 and --shared-tier-ttl > 0")
	}
	counts, err := parseInts(*replicas)
	if err != nil || len(counts) == 0 {
		return usagef("--replicas: %v", err)
	}
	var pols []routesim.Policy
	for p := range strings.SplitSeq(*policies, ",") {
		pol, err := routesim.ParsePolicy(strings.TrimSpace(p))
		if err != nil {
			return usagef("--policies: %v", err)
		}
		pols = append(pols, pol)
	}
	var recs []trace.Record
	if *synth {
		recs, err = bench.Synth(bench.SynthConfig{Seed: *seed, Prefixes: *prefixes, Namespaces: *tenants, Duration: *duration})
	} else {
		recs, err = readTrace(*tracePath, stderr)
	}
	if err != nil {
		return err
	}
	if len(recs) == 0 {
		return fmt.Errorf("the trace has no requests")
	}
	prompts, err := cachesim.PromptTokens(recs, *blockSize)
	if err != nil {
		return err
	}
	results, err := routesim.Sweep(recs, prompts, counts, pols, routesim.Config{BlocksPerReplica: *blocks,
		BlockSize: *blockSize, EventDelay: *delay, TokenTime: *tokenTime, TTL: *ttl, SharedTierBlocks: *sharedBlocks, SharedTierTTL: *sharedTTL,
		Progress: newProgress(stderr, "route-sim").steps("simulations")})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%d requests; event delay %v\n\n", len(recs), *delay)
	if err := routesim.WriteTable(stdout, results); err != nil {
		return err
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	path := filepath.Join(*out, "route-sim.json")
	if err := writeJSON(path, results); err != nil {
		return err
	}
	png := filepath.Join(*out, "route-sim.png")
	if err := routesim.WritePlot(png, results); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "wrote %s and %s\n", path, png)
	return nil
}

// readTrace reads a trace file, reporting its progress to stderr: a
// production trace may be gigabytes.
func readTrace(path string, stderr io.Writer) ([]trace.Record, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var size int64
	if fi, err := f.Stat(); err == nil {
		size = fi.Size()
	}
	return trace.ReadAll(io.TeeReader(f, &countingWriter{w: io.Discard, total: size, p: newProgress(stderr, "reading "+path), verb: "read"}))
}
