package bench

import (
	"context"
	"fmt"
	"io"
	"slices"
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
// only) at the given size, generated from seed, in the order of Names.
func Suite(size Size, seed uint64, only ...string) ([]*Workload, error) {
	for _, o := range only {
		if !slices.Contains(Names, o) {
			return nil, fmt.Errorf("bench: unknown workload %q (have %v)", o, Names)
		}
	}
	z := sizer{tiny: size == Tiny}
	var out []*Workload
	for _, name := range Names {
		if len(only) > 0 && !slices.Contains(only, name) {
			continue
		}
		w, err := builders[name](z, seed)
		if err != nil {
			return nil, err
		}
		out = append(out, w)
	}
	return out, nil
}

// sizer picks a workload's figures for the suite's size.
type sizer struct{ tiny bool }

// pick returns def, or t for the tiny suite.
func (z sizer) pick(def, t int) int {
	if z.tiny {
		return t
	}
	return def
}

// builders generates each of Names from the suite's size and seed.
var builders = map[string]func(z sizer, seed uint64) (*Workload, error){
	SkewSeed:     func(z sizer, seed uint64) (*Workload, error) { return skewWorkload(z, seed, SkewSeed, "seed") },
	SkewLongTail: func(z sizer, seed uint64) (*Workload, error) { return skewWorkload(z, seed, SkewLongTail, "longtail") },
	SharedPref:   func(z sizer, seed uint64) (*Workload, error) { return sharedPrefixWorkload(z, seed, false) },
	SharedBurst:  func(z sizer, seed uint64) (*Workload, error) { return sharedPrefixWorkload(z, seed, true) },
	ChatName:     chatWorkload,
	BeamName:     beamWorkload,
	KVName:       kvWorkload,
}

// skewWorkload is a skew workload of output lengths dist, run continuous
// and static at two batch widths. Every workload after it runs continuous
// and paged.
func skewWorkload(z sizer, seed uint64, name, dist string) (*Workload, error) {
	widths := []int{4, 32}
	if z.tiny {
		widths = []int{2, 8}
	}
	var modes []Mode
	for _, w := range widths {
		for _, b := range []engine.Batching{engine.Continuous, engine.Static} {
			modes = append(modes, Mode{Name: skewMode(b, w), Batching: b, Width: w, Cache: true})
		}
	}
	c := SkewConfig{Requests: z.pick(1024, 16), Prompt: 16, Dist: dist, Seed: seed}
	reqs, err := Skew(c)
	if err != nil {
		return nil, err
	}
	if z.tiny { // keep the seed example's shape at an eighth of its lengths
		for i := range reqs {
			reqs[i].MaxTokens = max(1, reqs[i].MaxTokens/8)
		}
	}
	return &Workload{
		Name: name, Requests: reqs, Modes: modes,
		Params: fmt.Sprintf("%d requests at once, prompt %d, output lengths %s, EOS ignored; prefix cache on (prompts are distinct)",
			c.Requests, c.Prompt, map[string]string{"seed": "32/128/64/256 cycled", "longtail": "log-normal (median 48, sigma 1, clamped to [8, 512])"}[dist]),
		Shape: EngineShape{NumBlocks: z.pick(1024, 256), MaxBatchTokens: 2048},
	}, nil
}

// sharedPrefixWorkload is groups of prompts sharing a system prompt,
// arriving as a Poisson process or, for burst, all at once.
func sharedPrefixWorkload(z sizer, seed uint64, burst bool) (*Workload, error) {
	name, rate := SharedPref, float64(z.pick(24, 1000))
	if burst {
		name, rate = SharedBurst, 0
	}
	c := SharedPrefixConfig{Groups: z.pick(4, 2), PerGroup: z.pick(16, 4), System: z.pick(576, 144), Question: z.pick(64, 16),
		Output: z.pick(16, 4), Rate: rate, Seed: seed}
	reqs, err := SharedPrefix(c)
	if err != nil {
		return nil, err
	}
	arrivals := fmt.Sprintf("Poisson arrivals at %g/s", c.Rate)
	if burst {
		arrivals = "all at once"
	}
	return &Workload{
		Name: name, Requests: reqs,
		Params: fmt.Sprintf("%d groups x %d prompts, system prompt %d + question %d tokens (%.0f%% shared), output %d, %s",
			c.Groups, c.PerGroup, c.System, c.Question, 100*float64(c.System)/float64(c.System+c.Question), c.Output, arrivals),
		Shape: EngineShape{NumBlocks: z.pick(2048, 256), MaxRunning: 32},
		Modes: []Mode{{Name: ModeCacheOn, Cache: true}, {Name: ModeCacheOff}},
	}, nil
}

// chatWorkload is multi-turn conversations, each turn's prompt the whole
// conversation so far.
func chatWorkload(z sizer, seed uint64) (*Workload, error) {
	c := ChatConfig{Conversations: z.pick(8, 3), Turns: z.pick(4, 3), System: z.pick(128, 32), Message: z.pick(48, 16), Reply: z.pick(32, 8), Seed: seed}
	chats, err := Chat(c)
	if err != nil {
		return nil, err
	}
	think := 250 * time.Millisecond
	if z.tiny {
		think = 0
	}
	return &Workload{
		Name: ChatName, Chats: chats, Think: think,
		Params: fmt.Sprintf("%d conversations x %d turns, system prompt %d, messages %d, replies %d tokens, think time %v",
			c.Conversations, c.Turns, c.System, c.Message, c.Reply, think),
		Shape: EngineShape{NumBlocks: z.pick(1024, 256)},
		Modes: []Mode{
			{Name: ModeCacheOn, Cache: true},
			{Name: ModeCacheOn + "/ttl=" + chatShortTTL.String(), Cache: true, TTL: chatShortTTL},
			{Name: ModeCacheOff},
		},
	}, nil
}

// beamWorkload is beam searches over prompts sharing a prefix.
func beamWorkload(z sizer, seed uint64) (*Workload, error) {
	c := BeamConfig{Requests: z.pick(8, 3), Width: 4, Shared: z.pick(384, 64), Unique: z.pick(32, 16), Output: z.pick(32, 8), Seed: seed}
	reqs, err := Beam(c)
	if err != nil {
		return nil, err
	}
	return &Workload{
		Name: BeamName, Requests: reqs,
		Params: fmt.Sprintf("%d beam searches of width %d at once, shared prompt %d + own %d tokens, up to %d output",
			c.Requests, c.Width, c.Shared, c.Unique, c.Output),
		Shape: EngineShape{NumBlocks: z.pick(1024, 256)},
		Modes: []Mode{{Name: ModeCacheOn, Cache: true}, {Name: ModeCacheOff}},
	}, nil
}

// kvWorkload compares paged and contiguous KV allocation on requests whose
// max_tokens far exceeds their (scripted) output.
func kvWorkload(z sizer, seed uint64) (*Workload, error) {
	c := KVConfig{Requests: z.pick(64, 16), Prompt: z.pick(128, 32), OutputMin: z.pick(96, 8), OutputMax: z.pick(160, 16), Factor: 8, Seed: seed}
	reqs, err := KV(c)
	if err != nil {
		return nil, err
	}
	return &Workload{
		Name: KVName, Requests: reqs, Scripted: true,
		Params: fmt.Sprintf("%d requests at once into a pool of %d blocks of 16, prompt %d, output %d..%d (scripted EOS), max_tokens %dx the mean output; prefix cache off",
			c.Requests, z.pick(1024, 64), c.Prompt, c.OutputMin, c.OutputMax, c.Factor),
		Shape: EngineShape{NumBlocks: z.pick(1024, 64), MaxRunning: c.Requests},
		Modes: []Mode{{Name: ModePaged}, {Name: ModeContiguous, KVAlloc: engine.Contiguous}},
	}, nil
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
