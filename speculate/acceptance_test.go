package speculate_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prefixd/prefixd/engine"
	"github.com/prefixd/prefixd/kernels/cpu"
	"github.com/prefixd/prefixd/model"
	"github.com/prefixd/prefixd/speculate"
)

// story is a sequence stories260K generated: its prompt and its output.
type story struct{ prompt, output []int32 }

const (
	storyCount  = 12  // sequences per sampling setting
	storyTokens = 200 // most output tokens of each
)

var (
	storiesOnce sync.Once
	stories     map[string][]story // by sampling: "greedy", "t=0.8"
	storiesErr  error
)

// loadStories generates, once per test binary, storyCount sequences from
// BOS at temperature 0.8 (seeds 1 to storyCount) and as many greedy ones,
// each from BOS and one of the sampled sequences' first token (greedy from
// BOS alone is a single sequence). Generation stops at BOS or EOS, which
// delimit TinyStories' stories.
func loadStories(tb testing.TB) map[string][]story {
	path := filepath.Join("..", "..", "shared", "models", "stories260K.bin")
	if _, err := os.Stat(path); err != nil {
		tb.Skipf("test model stories260K.bin not available: %v", err)
	}
	storiesOnce.Do(func() { stories, storiesErr = generateStories(path) })
	if storiesErr != nil {
		tb.Fatal(storiesErr)
	}
	return stories
}

func generateStories(path string) (map[string][]story, error) {
	m, err := model.Load(path)
	if err != nil {
		return nil, err
	}
	w := cpu.NewWorkers(2)
	defer w.Close()
	e, err := engine.New(engine.Config{Model: model.NewRunner(m, w), EOS: 2, NumBlocks: 1024, BlockSize: 16})
	if err != nil {
		return nil, err
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		e.Close(ctx)
	}()
	run := func(prompts [][]int32, temp float32) ([]story, error) {
		var streams []*engine.Stream
		for i, p := range prompts {
			st, err := e.Submit(context.Background(), engine.Request{
				Prompt: p, MaxTokens: storyTokens, StopTokens: []int32{1},
				Sampling: engine.Sampling{Temperature: temp, Seed: uint64(i + 1)},
			})
			if err != nil {
				return nil, err
			}
			streams = append(streams, st)
		}
		var out []story
		for i, st := range streams {
			<-st.Done()
			r := st.Result()
			if r.Err != nil {
				return nil, r.Err
			}
			out = append(out, story{prompts[i], r.Tokens})
		}
		return out, nil
	}
	bos := make([][]int32, storyCount)
	for i := range bos {
		bos[i] = []int32{1}
	}
	sampled, err := run(bos, 0.8)
	if err != nil {
		return nil, err
	}
	var firsts [][]int32
	for _, s := range sampled {
		if p := []int32{1, s.output[0]}; len(s.output) > 0 && !slices.ContainsFunc(firsts, func(q []int32) bool { return slices.Equal(p, q) }) {
			firsts = append(firsts, p)
		}
	}
	greedy, err := run(firsts, 0)
	if err != nil {
		return nil, err
	}
	return map[string][]story{"greedy": greedy, "t=0.8": sampled}, nil
}

// replayStats is what a replay counted.
type replayStats struct {
	steps, drafted, accepted, tokens int
}

func (r replayStats) String() string {
	return fmt.Sprintf("acceptance %.3f, %.3f accepted tokens per step, %.3f tokens per step (%d steps, %d drafted, %d accepted)",
		r.rate(), r.perStep(), float64(r.tokens)/float64(r.steps), r.steps, r.drafted, r.accepted)
}

func (r replayStats) rate() float64    { return float64(r.accepted) / float64(max(1, r.drafted)) }
func (r replayStats) perStep() float64 { return float64(r.accepted) / float64(max(1, r.steps)) }

// replay decodes each story again as greedy verification would: at each
// step it drafts k tokens, accepts the ones equal to the story's next
// tokens and then the story's next token; each finished story is given to
// Finished before the next is replayed.
func replay(s *speculate.Speculator, ss []story, k int) replayStats {
	var r replayStats
	var buf []int32
	for _, st := range ss {
		d := s.NewDrafter("ns", st.prompt, nil)
		for i := 0; i < len(st.output); {
			buf, _ = d.Draft(buf[:0], k)
			n := 0
			for n < len(buf) && i+n < len(st.output) && buf[n] == st.output[i+n] {
				n++
			}
			step := min(n+1, len(st.output)-i)
			d.Accept(st.output[i : i+step])
			r.steps++
			r.drafted += len(buf)
			r.accepted += n
			r.tokens += step
			i += step
		}
		s.Finished("ns", slices.Concat(st.prompt, st.output))
	}
	return r
}

// BenchmarkAcceptance reports, for ngram and suffix drafts of k = 4 and 8
// tokens on stories260K's own text, the acceptance rate (accepted of
// drafted tokens) and the accepted tokens per decoding step under greedy
// verification; suffix-again replays every story a second time.
func BenchmarkAcceptance(b *testing.B) {
	all := loadStories(b)
	for _, sampling := range []string{"greedy", "t=0.8"} {
		for _, mode := range []speculate.Mode{speculate.Ngram, speculate.Suffix} {
			for _, k := range []int{4, 8} {
				b.Run(fmt.Sprintf("%s/%v/k=%d", sampling, mode, k), func(b *testing.B) {
					var r replayStats
					for b.Loop() {
						s, err := speculate.New(speculate.Config{Mode: mode, K: k})
						if err != nil {
							b.Fatal(err)
						}
						r = replay(s, all[sampling], k)
					}
					b.ReportMetric(r.rate(), "accept-rate")
					b.ReportMetric(r.perStep(), "accepted/step")
					b.ReportMetric(float64(r.tokens)/float64(r.steps), "tokens/step")
				})
			}
		}
		// The agent-loop case: every story requested again, after Finished saw
		// them all once.
		b.Run(sampling+"/suffix-again/k=8", func(b *testing.B) {
			var r replayStats
			for b.Loop() {
				s, err := speculate.New(speculate.Config{Mode: speculate.Suffix, K: 8})
				if err != nil {
					b.Fatal(err)
				}
				replay(s, all[sampling], 8)
				r = replay(s, all[sampling], 8)
			}
			b.ReportMetric(r.rate(), "accept-rate")
			b.ReportMetric(r.perStep(), "accepted/step")
			b.ReportMetric(float64(r.tokens)/float64(r.steps), "tokens/step")
		})
	}
}

// TestAcceptanceOnStories replays stories260K's text and logs the figures,
// which must be consistent counts; a story replayed again after Finished
// saw it (the agent-loop case of a repeated request) must be drafted almost
// whole by Suffix mode.
func TestAcceptanceOnStories(t *testing.T) {
	all := loadStories(t)
	for _, sampling := range []string{"greedy", "t=0.8"} {
		ss := all[sampling]
		if len(ss) < 2 {
			t.Fatalf("%s: %d stories generated", sampling, len(ss))
		}
		for _, mode := range []speculate.Mode{speculate.Ngram, speculate.Suffix} {
			s, err := speculate.New(speculate.Config{Mode: mode, K: 8})
			if err != nil {
				t.Fatal(err)
			}
			r := replay(s, ss, 8)
			t.Logf("%s %v k=8: %v", sampling, mode, r)
			total := 0
			for _, st := range ss {
				total += len(st.output)
			}
			if r.accepted <= 0 || r.accepted > r.drafted || r.tokens != total || r.tokens > r.steps+r.accepted {
				t.Errorf("%s %v: inconsistent counts %+v", sampling, mode, r)
			}
		}
		s, err := speculate.New(speculate.Config{Mode: speculate.Suffix, K: 8})
		if err != nil {
			t.Fatal(err)
		}
		replay(s, ss, 8)
		again := replay(s, ss[:1], 8)
		t.Logf("%s suffix k=8, the first story again: %v", sampling, again)
		if again.rate() < 0.9 || again.perStep() < 4 {
			t.Errorf("%s: a repeated story replayed with %v", sampling, again)
		}
		if err := s.Check(); err != nil {
			t.Fatal(err)
		}
	}
}
