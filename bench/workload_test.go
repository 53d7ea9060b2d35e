package bench

import (
	"reflect"
	"slices"
	"testing"
)

func TestGeneratorsDeterministic(t *testing.T) {
	gens := map[string]func(seed uint64) (any, error){
		"skew":     func(s uint64) (any, error) { return Skew(SkewConfig{Dist: "longtail", Seed: s}) },
		"shared":   func(s uint64) (any, error) { return SharedPrefix(SharedPrefixConfig{Rate: 10, Seed: s}) },
		"chat":     func(s uint64) (any, error) { return Chat(ChatConfig{Seed: s}) },
		"beam":     func(s uint64) (any, error) { return Beam(BeamConfig{Seed: s}) },
		"kv":       func(s uint64) (any, error) { return KV(KVConfig{Seed: s}) },
		"synth":    func(s uint64) (any, error) { return Synth(SynthConfig{Prefixes: 3, Seed: s}) },
		"suite":    func(s uint64) (any, error) { return Suite(Tiny, s) },
		"suiteDef": func(s uint64) (any, error) { return Suite(Default, s, SharedPref) },
	}
	for name, gen := range gens {
		t.Run(name, func(t *testing.T) {
			a, err := gen(7)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := gen(7)
			c, _ := gen(8)
			if !reflect.DeepEqual(a, b) {
				t.Fatal("the same seed gave different workloads")
			}
			if reflect.DeepEqual(a, c) {
				t.Fatal("different seeds gave the same workload")
			}
		})
	}
}

func TestSkewShape(t *testing.T) {
	reqs, err := Skew(SkewConfig{Requests: 10, Prompt: 5})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range reqs {
		if r.MaxTokens != SeedLengths[i%4] || len(r.Prompt) != 5 || r.Arrival != 0 || r.Output != 0 {
			t.Fatalf("request %d: %+v", i, r)
		}
	}
	long, err := Skew(SkewConfig{Requests: 2000, Dist: "longtail"})
	if err != nil {
		t.Fatal(err)
	}
	lens := make([]int, len(long))
	for i, r := range long {
		lens[i] = r.MaxTokens
		if r.MaxTokens < 8 || r.MaxTokens > 512 {
			t.Fatalf("length %d outside [8, 512]", r.MaxTokens)
		}
	}
	slices.Sort(lens)
	if med := lens[len(lens)/2]; med < 40 || med > 56 {
		t.Fatalf("median length %d, want about 48", med)
	}
	if p99 := lens[len(lens)*99/100]; p99 < 300 {
		t.Fatalf("p99 length %d: the tail is not long", p99)
	}
	if _, err := Skew(SkewConfig{Dist: "nope"}); err == nil {
		t.Fatal("unknown distribution accepted")
	}
}

func TestSharedPrefixShape(t *testing.T) {
	c := SharedPrefixConfig{Groups: 3, PerGroup: 5, System: 40, Question: 8, Output: 4, Rate: 100, Seed: 1}
	reqs, err := SharedPrefix(c)
	if err != nil {
		t.Fatal(err)
	}
	if len(reqs) != 15 {
		t.Fatalf("%d requests", len(reqs))
	}
	systems := map[string]int{}
	for i, r := range reqs {
		if len(r.Prompt) != 48 || r.MaxTokens != 4 {
			t.Fatalf("request %d: prompt %d, max %d", i, len(r.Prompt), r.MaxTokens)
		}
		if i > 0 && r.Arrival < reqs[i-1].Arrival {
			t.Fatal("arrivals out of order")
		}
		systems[string(int32Bytes(r.Prompt[:40]))]++
	}
	if len(systems) != 3 {
		t.Fatalf("%d distinct system prompts, want 3", len(systems))
	}
	for _, n := range systems {
		if n != 5 {
			t.Fatalf("group sizes %v", systems)
		}
	}
	if reqs[14].Arrival == 0 {
		t.Fatal("open-loop arrivals all at 0")
	}
	burst, _ := SharedPrefix(SharedPrefixConfig{Groups: 2, PerGroup: 2})
	for _, r := range burst {
		if r.Arrival != 0 {
			t.Fatal("rate 0 must mean all at once")
		}
	}
}

func int32Bytes(s []int32) []byte {
	b := make([]byte, 0, 4*len(s))
	for _, v := range s {
		b = append(b, byte(v), byte(v>>8), byte(v>>16), byte(v>>24))
	}
	return b
}

func TestChatBeamKVShape(t *testing.T) {
	chats, err := Chat(ChatConfig{Conversations: 2, Turns: 3, System: 10, Message: 4, Reply: 6})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range chats {
		if len(c.Messages) != 3 || len(c.Messages[0]) != 14 || len(c.Messages[1]) != 4 || c.Reply != 6 {
			t.Fatalf("conversation %+v", c)
		}
	}
	beams, err := Beam(BeamConfig{Requests: 3, Width: 4, Shared: 32, Unique: 8, Output: 5})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range beams {
		if r.Beam != 4 || len(r.Prompt) != 40 || !slices.Equal(r.Prompt[:32], beams[0].Prompt[:32]) {
			t.Fatalf("beam request %+v", r)
		}
	}
	if slices.Equal(beams[0].Prompt, beams[1].Prompt) {
		t.Fatal("beam prompts identical past the shared part")
	}
	kv, err := KV(KVConfig{Requests: 50, Prompt: 20, OutputMin: 10, OutputMax: 30, Factor: 8})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range kv {
		end := int(r.Prompt[1])*256 + int(r.Prompt[2])
		if r.MaxTokens != 160 || r.Output < 10 || r.Output > 30 || end != 20+r.Output {
			t.Fatalf("kv request: max %d, output %d, scripted end %d", r.MaxTokens, r.Output, end)
		}
	}
}

func TestSuiteNames(t *testing.T) {
	ws, err := Suite(Tiny, 1)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, w := range ws {
		names = append(names, w.Name)
		if len(w.Modes) < 2 {
			t.Fatalf("%s compares %d modes", w.Name, len(w.Modes))
		}
	}
	if !slices.Equal(names, Names) {
		t.Fatalf("suite runs %v, Names says %v", names, Names)
	}
	if _, err := Suite(Tiny, 1, "nope"); err == nil {
		t.Fatal("unknown workload accepted")
	}
	ws, _ = Suite(Tiny, 1, KVName)
	if len(ws) != 1 || ws[0].Name != KVName {
		t.Fatalf("only kv-alloc gave %v", ws)
	}
}
