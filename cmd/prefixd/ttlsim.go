package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/prefixd/prefixd/bench"
	"github.com/prefixd/prefixd/sim/ttlsim"
	"github.com/prefixd/prefixd/trace"
)

func init() {
	register("ttl-sim", "replay a request trace through the prefix cache for a grid of TTLs and pool sizes", runTTLSim)
}

// runTTLSim implements `prefixd ttl-sim`.
func runTTLSim(args []string, stdout, stderr io.Writer) int {
	return exitCode("ttl-sim", ttlSim(args, stdout, stderr), stderr)
}

func ttlSim(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("prefixd ttl-sim", flag.ContinueOnError)
	tracePath := fs.String("trace", "", "trace file (JSON lines; see package trace), e.g. from prefixd serve --trace-out")
	synth := fs.Bool("synth", false, "replay a synthetic trace instead (seeded; see --seed), and write it to --out")
	seed := fs.Uint64("seed", 1, "synthetic trace seed")
	ttls := fs.String("ttls", "1s,2s,5s,10s,20s,30s,1m,2m,5m,10m", "default TTLs to try, comma-separated")
	pools := fs.String("pool-blocks", "512,2048,8192", "KV pool sizes to try, in blocks, comma-separated")
	blockSize := fs.Int("block-size", 16, "cache block size in tokens (must match a hashed trace's)")
	tokenTime := fs.Duration("token-time", 20*time.Millisecond, "simulated time per output token, for how long a request holds its blocks")
	target := fs.Float64("target", 0.95, "choose the smallest TTL reaching this fraction of the best hit rate")
	out := fs.String("out", "bench-out", "directory for ttl-sim.json, the plots and the synthetic trace")
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	switch {
	case (*tracePath == "") == !*synth:
		return usagef("give exactly one of --trace and --synth")
	case *target <= 0 || *target > 1:
		return usagef("--target %v must be in (0, 1]", *target)
	case *blockSize < 1:
		return usagef("--block-size %d must be positive", *blockSize)
	case *tokenTime <= 0:
		return usagef("--token-time %v must be positive", *tokenTime)
	}
	ttlList, err := parseDurations(*ttls)
	if err != nil || len(ttlList) == 0 {
		return usagef("--ttls: %v", err)
	}
	poolList, err := parseInts(*pools)
	if err != nil || len(poolList) == 0 {
		return usagef("--pool-blocks: %v", err)
	}
	var recs []trace.Record
	if *synth {
		if recs, err = bench.Synth(bench.SynthConfig{Seed: *seed}); err != nil {
			return err
		}
		if err := os.MkdirAll(*out, 0o755); err != nil {
			return err
		}
		path := filepath.Join(*out, "synth-trace.jsonl")
		if err := writeFile(path, func(w io.Writer) error {
			tw := trace.NewWriter(w, time.Time{})
			for _, r := range recs {
				if err := tw.Write(r); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "wrote the synthetic trace (%d requests) to %s\n", len(recs), path)
	} else if recs, err = readTrace(*tracePath, stderr); err != nil {
		return err
	}
	if len(recs) == 0 {
		return fmt.Errorf("the trace has no requests")
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	results, err := ttlsim.Simulate(recs, ttlsim.Config{TTLs: ttlList, PoolBlocks: poolList, BlockSize: *blockSize, TokenTime: *tokenTime,
		Progress: newProgress(stderr, "ttl-sim").steps("simulations")})
	if err != nil {
		return err
	}
	if err := ttlsim.WriteTable(stdout, results); err != nil {
		return err
	}
	choices := ttlsim.ChooseTTL(results, *target)
	for _, c := range choices {
		fmt.Fprintf(stdout, "pool %d blocks: best hit rate %.1f%%; smallest TTL reaching %.0f%% of it: %v (hit %.1f%%, %.0f blocks held on average)\n",
			c.PoolBlocks, 100*c.Best, 100**target, c.TTL, 100*c.HitRate, c.AvgBlocks)
	}
	if err := writeJSON(filepath.Join(*out, "ttl-sim.json"), struct {
		Requests int             `json:"requests"`
		Target   float64         `json:"target"`
		Results  []ttlsim.Result `json:"results"`
		Choices  []ttlsim.Choice `json:"choices"`
	}{len(recs), *target, results, choices}); err != nil {
		return err
	}
	plots, err := ttlsim.WritePlots(*out, results)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "wrote %s and %v\n", filepath.Join(*out, "ttl-sim.json"), plots)
	return nil
}
