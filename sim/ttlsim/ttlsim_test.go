package ttlsim

import (
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/prefixd/prefixd/trace"
)

// periodic returns a trace in which each of prefixes prompts recurs every
// period for n rounds, each time with a new suffix.
func periodic(prefixes, n int, period time.Duration) []trace.Record {
	r := rand.New(rand.NewPCG(3, 0))
	tokens := func(n int) []int32 {
		out := make([]int32, n)
		for i := range out {
			out[i] = 3 + r.Int32N(250)
		}
		return out
	}
	var out []trace.Record
	ps := make([][]int32, prefixes)
	for i := range ps {
		ps[i] = tokens(256)
	}
	for k := range n {
		for i, p := range ps {
			at := time.Duration(k)*period + time.Duration(i)*time.Millisecond
			out = append(out, trace.Record{At: at.Milliseconds(), Namespace: "t", Tokens: append(append([]int32(nil), p...), tokens(16)...), MaxTokens: 10})
		}
	}
	return out
}

// TestTTLSimCacheOff replays requests that opted out of the cache: they
// neither hit nor leave anything cached, and do not count as lookups.
func TestTTLSimCacheOff(t *testing.T) {
	recs := periodic(2, 6, time.Second)
	for i := range recs {
		recs[i].CacheOff = i%2 == 1 // the second prefix never uses the cache
	}
	res, err := Simulate(recs, Config{TTLs: []time.Duration{time.Minute}, PoolBlocks: []int{4096}, TokenTime: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	// Only the first prefix's 6 requests look up 271 tokens; 5 find 256.
	if want := 5.0 * 256 / (6 * 271); math.Abs(res[0].HitRate-want) > 1e-9 {
		t.Fatalf("hit rate %.4f, want %.4f", res[0].HitRate, want)
	}
}

func TestTTLSimPeriodic(t *testing.T) {
	recs := periodic(3, 10, 10*time.Second)
	res, err := Simulate(recs, Config{TTLs: []time.Duration{5 * time.Second, 15 * time.Second}, PoolBlocks: []int{4096}, TokenTime: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	short, long := res[0], res[1]
	if short.HitRate > 0.01 {
		t.Errorf("TTL 5s on a 10s period: hit rate %.3f, want about 0", short.HitRate)
	}
	// Every request but each prefix's first finds its 256 tokens (16
	// blocks) cached: 27 of 30 requests x 256 of 271 looked-up tokens.
	if want := 27.0 * 256 / (30 * 271); long.HitRate < want-0.001 {
		t.Errorf("TTL 15s on a 10s period: hit rate %.3f, want %.3f", long.HitRate, want)
	}
	if long.AvgCached <= short.AvgCached || long.AvgBlocks <= short.AvgBlocks {
		t.Errorf("the longer TTL held less memory: %+v vs %+v", long, short)
	}
	if short.Rejected+long.Rejected != 0 {
		t.Error("requests rejected from a large pool")
	}
	// A pool too small to keep the prefixes between uses loses the hits.
	tiny, err := Simulate(recs, Config{TTLs: []time.Duration{15 * time.Second}, PoolBlocks: []int{18}, TokenTime: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if tiny[0].HitRate >= long.HitRate || tiny[0].AvgBlocks > 18 {
		t.Errorf("an 18-block pool: %+v", tiny[0])
	}
}

// TestTTLSimHashes checks that a trace of block hashes replays like the
// same trace with tokens.
func TestTTLSimHashes(t *testing.T) {
	recs := periodic(2, 6, 4*time.Second)
	hashed := make([]trace.Record, len(recs))
	for i, r := range recs {
		hashed[i] = r
		hashed[i].Tokens = nil
		hashed[i].Blocks = trace.BlockHashes(r.Namespace, r.Tokens, 16)
		hashed[i].BlockSize, hashed[i].PromptTokens = 16, len(r.Tokens)
	}
	c := Config{TTLs: []time.Duration{time.Second, 10 * time.Second}, PoolBlocks: []int{64, 1024}}
	a, err := Simulate(recs, c)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Simulate(hashed, c)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("tokens:\n%+v\nhashes:\n%+v", a, b)
	}
	c.BlockSize = 32
	if _, err := Simulate(hashed, c); err == nil {
		t.Fatal("a block size other than the hashes' was accepted")
	}
}

func TestChooseTTL(t *testing.T) {
	s := time.Second
	res := []Result{
		{TTL: 1 * s, PoolBlocks: 10, HitRate: 0.10},
		{TTL: 5 * s, PoolBlocks: 10, HitRate: 0.50},
		{TTL: 10 * s, PoolBlocks: 10, HitRate: 0.58},
		{TTL: 20 * s, PoolBlocks: 10, HitRate: 0.60},
		{TTL: 60 * s, PoolBlocks: 10, HitRate: 0.59},
		{TTL: 1 * s, PoolBlocks: 99, HitRate: 0},
		{TTL: 5 * s, PoolBlocks: 99, HitRate: 0},
	}
	got := ChooseTTL(res, 0.95)
	if len(got) != 2 {
		t.Fatalf("%+v", got)
	}
	if c := got[0]; c.PoolBlocks != 10 || c.Best != 0.60 || c.TTL != 10*s || c.HitRate != 0.58 {
		t.Errorf("pool 10: %+v, want TTL 10s (0.58 >= 0.95 x 0.60, 0.50 is not)", c)
	}
	if c := got[1]; c.TTL != 1*s {
		t.Errorf("no hits at all: %+v, want the smallest TTL", c)
	}
	if c := ChooseTTL(res, 1)[0]; c.TTL != 20*s {
		t.Errorf("target 1: %+v, want the best TTL", c)
	}
}

func TestSimPlots(t *testing.T) {
	// One TTL of a second or less once made the log axis reach zero.
	for _, ttls := range [][]time.Duration{{time.Second, 2 * time.Second}, {time.Second}, {500 * time.Millisecond}} {
		res, err := Simulate(periodic(2, 3, time.Second), Config{TTLs: ttls, PoolBlocks: []int{64, 128}})
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		names, err := WritePlots(dir, res)
		if err != nil || len(names) != 2 {
			t.Fatalf("TTLs %v: %v, %v", ttls, names, err)
		}
		for _, n := range names {
			if b, err := os.ReadFile(filepath.Join(dir, n)); err != nil || len(b) < 8 || string(b[1:4]) != "PNG" {
				t.Fatalf("%s is not a PNG (%v)", n, err)
			}
		}
	}
}

// TestTTLSimProgress: Progress hears of every simulation, in order, with
// the total.
func TestTTLSimProgress(t *testing.T) {
	var calls [][2]int
	_, err := Simulate(periodic(2, 3, 10*time.Second), Config{TTLs: []time.Duration{time.Second, time.Minute}, PoolBlocks: []int{64, 4096, 8192},
		Progress: func(done, total int) { calls = append(calls, [2]int{done, total}) }})
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) != 6 || calls[0] != [2]int{1, 6} || calls[5] != [2]int{6, 6} {
		t.Errorf("progress calls %v, want 1..6 of 6", calls)
	}
}
