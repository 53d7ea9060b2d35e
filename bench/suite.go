package bench

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/prefixd/prefixd/engine"
)

// Size scales the suite: Default is what `prefixd bench` runs (a few
// minutes on two CPU cores with the built-in model); Tiny is for tests.
type Size int

// Suite sizes.
const (
	Default Size = iota
	Tiny
)

// Workload names, in the order the suite runs them.
const (
	SkewSeed     = "skew-seed"
	SkewLongTail = "skew-longtail"
	SharedPref   = "shared-prefix"
	SharedBurst  = "shared-prefix-burst"
	ChatName     = "chat"
	BeamName     = "beam"
	KVName       = "kv-alloc"
)

// Names lists the suite's workloads in order.
var Names = []string{SkewSeed, SkewLongTail, SharedPref, SharedBurst, ChatName, BeamName, KVName}

// Mode names shared by workloads and targets.
const (
	ModeCacheOn    = "cache-on"
	ModeCacheOff   = "cache-off"
	ModePaged      = "paged"
	ModeContiguous = "contiguous"
)

// skewMode names the skew workload's modes: batching and width.
func skewMode(b engine.Batching, width int) string {
	name := "continuous"
	if b == engine.Static {
		name = "static"
	}
	return name + "/w" + strconv.Itoa(width)
}

// ChatShortTTL is the chat workload's short-TTL mode's TTL: shorter than
// its think time, so a conversation's prefix has expired when it returns.
const chatShortTTL = 100 * time.Millisecond

// Suite returns the benchmark workloads (all of them, or those named in
// only) at the given size, generated from seed.
func Suite(size Size, seed uint64, only ...string) ([]*Workload, error) {
	tiny := size == Tiny
	pick := func(def, t int) int {
		if tiny {
			return t
		}
		return def
	}
	var out []*Workload
	want := func(name string) bool {
		if len(only) == 0 {
			return true
		}
		for _, o := range only {
			if o == name {
				return true
			}
		}
		return false
	}
	for _, o := range only {
		found := false
		for _, n := range Names {
			found = found || n == o
		}
		if !found {
			return nil, fmt.Errorf("bench: unknown workload %q (have %v)", o, Names)
		}
	}

	widths := []int{4, 32}
	if tiny {
		widths = []int{2, 8}
	}
	var skewModes []Mode
	for _, w := range widths {
		for _, b := range []engine.Batching{engine.Continuous, engine.Static} {
			skewModes = append(skewModes, Mode{Name: skewMode(b, w), Batching: b, Width: w, Cache: true})
		}
	}
	for _, dist := range []string{"seed", "longtail"} {
		name := SkewSeed
		if dist == "longtail" {
			name = SkewLongTail
		}
		if !want(name) {
			continue
		}
		c := SkewConfig{Requests: pick(1024, 16), Prompt: 16, Dist: dist, Seed: seed}
		reqs, err := Skew(c)
		if err != nil {
			return nil, err
		}
		if tiny { // keep the seed example's shape at an eighth of its lengths
			for i := range reqs {
				reqs[i].MaxTokens = max(1, reqs[i].MaxTokens/8)
			}
		}
		out = append(out, &Workload{
			Name: name, Requests: reqs, Modes: skewModes,
			Params: fmt.Sprintf("%d requests at once, prompt %d, output lengths %s, EOS ignored; prefix cache on (prompts are distinct)",
				c.Requests, c.Prompt, map[string]string{"seed": "32/128/64/256 cycled", "longtail": "log-normal (median 48, sigma 1, clamped to [8, 512])"}[dist]),
			Shape: EngineShape{NumBlocks: pick(1024, 256), MaxBatchTokens: 2048},
		})
	}
	// Every workload below but kv-alloc runs continuous and paged.
	for _, burst := range []bool{false, true} {
		name, rate := SharedPref, float64(pick(24, 1000))
		if burst {
			name, rate = SharedBurst, 0
		}
		if !want(name) {
			continue
		}
		c := SharedPrefixConfig{Groups: pick(4, 2), PerGroup: pick(16, 4), System: pick(576, 144), Question: pick(64, 16),
			Output: pick(16, 4), Rate: rate, Seed: seed}
		reqs, err := SharedPrefix(c)
		if err != nil {
			return nil, err
		}
		arrivals := fmt.Sprintf("Poisson arrivals at %g/s", c.Rate)
		if burst {
			arrivals = "all at once"
		}
		out = append(out, &Workload{
			Name: name, Requests: reqs,
			Params: fmt.Sprintf("%d groups x %d prompts, system prompt %d + question %d tokens (%.0f%% shared), output %d, %s",
				c.Groups, c.PerGroup, c.System, c.Question, 100*float64(c.System)/float64(c.System+c.Question), c.Output, arrivals),
			Shape: EngineShape{NumBlocks: pick(2048, 256), MaxRunning: 32},
			Modes: []Mode{{Name: ModeCacheOn, Cache: true}, {Name: ModeCacheOff}},
		})
	}
	if want(ChatName) {
		c := ChatConfig{Conversations: pick(8, 3), Turns: pick(4, 3), System: pick(128, 32), Message: pick(48, 16), Reply: pick(32, 8), Seed: seed}
		chats, err := Chat(c)
		if err != nil {
			return nil, err
		}
		think := 250 * time.Millisecond
		if tiny {
			think = 0
		}
		out = append(out, &Workload{
			Name: ChatName, Chats: chats, Think: think,
			Params: fmt.Sprintf("%d conversations x %d turns, system prompt %d, messages %d, replies %d tokens, think time %v",
				c.Conversations, c.Turns, c.System, c.Message, c.Reply, think),
			Shape: EngineShape{NumBlocks: pick(1024, 256)},
			Modes: []Mode{
				{Name: ModeCacheOn, Cache: true},
				{Name: ModeCacheOn + "/ttl=" + chatShortTTL.String(), Cache: true, TTL: chatShortTTL},
				{Name: ModeCacheOff},
			},
		})
	}
	if want(BeamName) {
		c := BeamConfig{Requests: pick(8, 3), Width: 4, Shared: pick(384, 64), Unique: pick(32, 16), Output: pick(32, 8), Seed: seed}
		reqs, err := Beam(c)
		if err != nil {
			return nil, err
		}
		out = append(out, &Workload{
			Name: BeamName, Requests: reqs,
			Params: fmt.Sprintf("%d beam searches of width %d at once, shared prompt %d + own %d tokens, up to %d output",
				c.Requests, c.Width, c.Shared, c.Unique, c.Output),
			Shape: EngineShape{NumBlocks: pick(1024, 256)},
			Modes: []Mode{{Name: ModeCacheOn, Cache: true}, {Name: ModeCacheOff}},
		})
	}
	if want(KVName) {
		c := KVConfig{Requests: pick(64, 16), Prompt: pick(128, 32), OutputMin: pick(96, 8), OutputMax: pick(160, 16), Factor: 8, Seed: seed}
		reqs, err := KV(c)
		if err != nil {
			return nil, err
		}
		out = append(out, &Workload{
			Name: KVName, Requests: reqs, Scripted: true,
			Params: fmt.Sprintf("%d requests at once into a pool of %d blocks of 16, prompt %d, output %d..%d (scripted EOS), max_tokens %dx the mean output; prefix cache off",
				c.Requests, pick(1024, 64), c.Prompt, c.OutputMin, c.OutputMax, c.Factor),
			Shape: EngineShape{NumBlocks: pick(1024, 64), MaxRunning: c.Requests},
			Modes: []Mode{{Name: ModePaged}, {Name: ModeContiguous, KVAlloc: engine.Contiguous}},
		})
	}
	return out, nil
}

// RunSuite runs every workload under each of its modes, one after another
// on the same requests, and returns the report. progress, if not nil,
// gets a line per run.
func RunSuite(ctx context.Context, m engine.Model, eos int32, ws []*Workload, progress io.Writer) (*Report, error) {
	rep := &Report{Machine: ThisMachine(), Started: time.Now()}
	for _, w := range ws {
		rep.Workloads = append(rep.Workloads, WorkloadInfo{Name: w.Name, Params: w.Params})
		for _, mode := range w.Modes {
			res, err := Run(ctx, m, eos, w, mode)
			if err != nil {
				return rep, err
			}
			rep.Results = append(rep.Results, res)
			if progress != nil {
				fmt.Fprintf(progress, "%-14s %-22s %8.0f tok/s  TTFT p50 %8.1f ms  %6.2f s\n",
					w.Name, mode.Name, res.TokensPerSec, res.TTFTp50, res.Seconds)
			}
		}
	}
	rep.Seconds = time.Since(rep.Started).Seconds()
	rep.LoadEnd = loadAvg()
	return rep, nil
}
