package bench

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// Request is one request of a workload.
type Request struct {
	// Arrival is when the request is submitted, counted from the start of
	// the run; requests at 0 all arrive before the first forward pass.
	Arrival   time.Duration
	Namespace string
	Prompt    []int32
	MaxTokens int
	// Output, if positive, is how many tokens the scripted model lets the
	// request generate before it emits EOS (see Workload.Scripted);
	// otherwise the request ignores EOS and runs to MaxTokens.
	Output int
	Beam   int // beam width; 0 for sampling
}

// Conversation is a multi-turn chat: turn k's prompt is the whole
// conversation so far (every earlier message and reply) followed by
// Messages[k]. Replies are generated, so prompts are built as the run goes.
type Conversation struct {
	Messages [][]int32
	Reply    int // tokens generated per turn
}

// lowToken is the smallest token ID workloads use: prompts avoid the IDs
// that llama2.c vocabularies reserve (unk, BOS, EOS).
const lowToken = 3

// newRand returns the generator of a workload: the same seed always gives
// the same requests.
func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x62656e6368)) }

// tokens returns n random token IDs in [lowToken, 256), which every model
// prefixd ships (byte vocabulary: 258) or tests with (512) accepts.
func tokens(r *rand.Rand, n int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = lowToken + int32(r.IntN(256-lowToken))
	}
	return out
}

// SeedLengths are the output lengths of the skew workload's seed example,
// cycled over the requests.
var SeedLengths = []int{32, 128, 64, 256}

// SkewConfig shapes the skew workload: requests of very different output
// lengths arriving at once, which static batching handles badly (a batch
// runs until its longest member ends).
type SkewConfig struct {
	Requests int    // default 64
	Prompt   int    // prompt tokens per request; default 16
	Dist     string // "seed": SeedLengths cycled; "longtail": log-normal, median 48, sigma 1, clamped to [8, 512]
	Seed     uint64
}

// Skew returns the skew workload's requests, in arrival order, all at
// time 0. Each ignores EOS and generates exactly its output length.
func Skew(c SkewConfig) ([]Request, error) {
	if c.Requests == 0 {
		c.Requests = 64
	}
	if c.Prompt == 0 {
		c.Prompt = 16
	}
	if c.Requests < 0 || c.Prompt < 0 {
		return nil, fmt.Errorf("bench: skew: negative size in %+v", c)
	}
	r := newRand(c.Seed)
	out := make([]Request, c.Requests)
	for i := range out {
		var n int
		switch c.Dist {
		case "seed", "":
			n = SeedLengths[i%len(SeedLengths)]
		case "longtail":
			n = int(math.Round(48 * math.Exp(r.NormFloat64())))
			n = min(max(n, 8), 512)
		default:
			return nil, fmt.Errorf("bench: skew: unknown length distribution %q", c.Dist)
		}
		out[i] = Request{Prompt: tokens(r, c.Prompt), MaxTokens: n}
	}
	return out, nil
}

// SharedPrefixConfig shapes the shared-prefix workload, after SGLang's
// generated-shared-prefix benchmark: Groups system prompts of System tokens,
// each followed by PerGroup distinct questions of Question tokens; every
// request generates Output tokens. The shared fraction of prompt tokens is
// System / (System + Question).
type SharedPrefixConfig struct {
	Groups, PerGroup int     // defaults 4 and 16
	System, Question int     // prompt tokens; defaults 576 and 64 (90% shared)
	Output           int     // default 16
	Rate             float64 // open-loop arrivals per second (Poisson); 0: all at once
	Seed             uint64
}

// SharedPrefix returns the shared-prefix requests in arrival order: the
// groups' questions interleaved at random, arriving as a Poisson process
// at Rate.
func SharedPrefix(c SharedPrefixConfig) ([]Request, error) {
	orDefault(&c.Groups, 4)
	orDefault(&c.PerGroup, 16)
	orDefault(&c.System, 576)
	orDefault(&c.Question, 64)
	orDefault(&c.Output, 16)
	if c.Groups < 0 || c.PerGroup < 0 || c.System < 0 || c.Question <= 0 || c.Output < 0 || c.Rate < 0 {
		return nil, fmt.Errorf("bench: shared-prefix: bad size in %+v", c)
	}
	r := newRand(c.Seed)
	systems := make([][]int32, c.Groups)
	for g := range systems {
		systems[g] = tokens(r, c.System)
	}
	out := make([]Request, 0, c.Groups*c.PerGroup)
	for g := range c.Groups {
		for range c.PerGroup {
			p := append(append(make([]int32, 0, c.System+c.Question), systems[g]...), tokens(r, c.Question)...)
			out = append(out, Request{Prompt: p, MaxTokens: c.Output})
		}
	}
	r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	var at time.Duration
	for i := range out {
		if c.Rate > 0 && i > 0 {
			at += time.Duration(r.ExpFloat64() / c.Rate * float64(time.Second))
		}
		out[i].Arrival = at
	}
	return out, nil
}

// ChatConfig shapes the multi-turn chat workload: Conversations chats of
// Turns turns, all starting at once; each opens with a System-token system
// prompt, each user message has Message tokens and each reply Reply tokens.
// A conversation's next turn is submitted Think after its reply.
type ChatConfig struct {
	Conversations, Turns int // defaults 8 and 4
	System, Message      int // defaults 128 and 48
	Reply                int // default 32
	Seed                 uint64
}

// Chat returns the conversations.
func Chat(c ChatConfig) ([]Conversation, error) {
	orDefault(&c.Conversations, 8)
	orDefault(&c.Turns, 4)
	orDefault(&c.System, 128)
	orDefault(&c.Message, 48)
	orDefault(&c.Reply, 32)
	if c.Conversations < 0 || c.Turns < 0 || c.System < 0 || c.Message <= 0 || c.Reply <= 0 {
		return nil, fmt.Errorf("bench: chat: bad size in %+v", c)
	}
	r := newRand(c.Seed)
	out := make([]Conversation, c.Conversations)
	for i := range out {
		msgs := make([][]int32, c.Turns)
		for k := range msgs {
			msgs[k] = tokens(r, c.Message)
		}
		if c.Turns > 0 {
			msgs[0] = append(tokens(r, c.System), msgs[0]...)
		}
		out[i] = Conversation{Messages: msgs, Reply: c.Reply}
	}
	return out, nil
}

// BeamConfig shapes the beam workload: Requests beam searches of width
// Width, all at once, whose prompts share a Shared-token prefix followed by
// Unique tokens of their own; each generates up to Output tokens.
type BeamConfig struct {
	Requests, Width int // defaults 8 and 4
	Shared, Unique  int // defaults 384 and 32
	Output          int // default 32
	Seed            uint64
}

// Beam returns the beam workload's requests.
func Beam(c BeamConfig) ([]Request, error) {
	orDefault(&c.Requests, 8)
	orDefault(&c.Width, 4)
	orDefault(&c.Shared, 384)
	orDefault(&c.Unique, 32)
	orDefault(&c.Output, 32)
	if c.Requests < 0 || c.Width < 2 || c.Shared < 0 || c.Unique <= 0 || c.Output <= 0 {
		return nil, fmt.Errorf("bench: beam: bad size in %+v", c)
	}
	r := newRand(c.Seed)
	shared := tokens(r, c.Shared)
	out := make([]Request, c.Requests)
	for i := range out {
		p := append(append(make([]int32, 0, c.Shared+c.Unique), shared...), tokens(r, c.Unique)...)
		out[i] = Request{Prompt: p, MaxTokens: c.Output, Beam: c.Width}
	}
	return out, nil
}

// KVConfig shapes the KV-allocation workload: Requests requests at once
// into a fixed pool, each with a Prompt-token prompt and an output length
// drawn uniformly from [OutputMin, OutputMax], while max_tokens is Factor
// times the mean output, as clients that cannot predict their output ask
// for. The scripted model ends each request after its output length, so
// contiguous allocation reserves Factor times what paging uses.
type KVConfig struct {
	Requests             int // default 64
	Prompt               int // default 32; at least 3 (two tokens carry the script)
	OutputMin, OutputMax int // defaults 24 and 40
	Factor               int // default 8
	Seed                 uint64
}

// KV returns the KV-allocation workload's requests; see KVConfig.
func KV(c KVConfig) ([]Request, error) {
	orDefault(&c.Requests, 64)
	orDefault(&c.Prompt, 32)
	orDefault(&c.OutputMin, 24)
	orDefault(&c.OutputMax, 40)
	orDefault(&c.Factor, 8)
	if c.Requests < 0 || c.Prompt < 3 || c.OutputMin < 1 || c.OutputMax < c.OutputMin || c.Factor < 1 {
		return nil, fmt.Errorf("bench: kv: bad size in %+v", c)
	}
	r := newRand(c.Seed)
	maxTokens := c.Factor * (c.OutputMin + c.OutputMax) / 2
	out := make([]Request, c.Requests)
	for i := range out {
		n := c.OutputMin + r.IntN(c.OutputMax-c.OutputMin+1)
		p := tokens(r, c.Prompt)
		if err := script(p, len(p)+n); err != nil {
			return nil, err
		}
		out[i] = Request{Prompt: p, MaxTokens: maxTokens, Output: n}
	}
	return out, nil
}

// orDefault sets *v to d when it is zero: a config field left out.
func orDefault(v *int, d int) {
	if *v == 0 {
		*v = d
	}
}
