package bench

import (
	"errors"
	"math"
	"sync"
	"time"

	"github.com/prefixd/prefixd/blockstore"
	"github.com/prefixd/prefixd/engine"
	"github.com/prefixd/prefixd/sample"
)

// NullModel is an engine.Model that computes nothing: it keeps no K/V and
// returns zero logits, so greedy decoding always picks token 0 (never EOS,
// unless EOS is 0). It measures the scheduler and the KV accounting alone.
// If StepCost or TokenCost is set, each forward pass sleeps
// StepCost + TokenCost x tokens, a stand-in for an accelerator whose pass
// time barely grows with the batch (memory-bound decoding). It is not safe
// for concurrent use; an engine calls it from one goroutine.
type NullModel struct {
	Vocab, MaxLen       int // defaults 258 and 4096, the built-in model's
	StepCost, TokenCost time.Duration
	logits              []float32
}

// VocabSize returns the vocabulary size.
func (m *NullModel) VocabSize() int { return cmp0(m.Vocab, 258) }

// MaxSeqLen returns the longest sequence.
func (m *NullModel) MaxSeqLen() int { return cmp0(m.MaxLen, 4096) }

// NewKV returns nil: the model keeps no K/V.
func (m *NullModel) NewKV(numBlocks, blockSize int) (blockstore.Storage, error) { return nil, nil }

// Forward returns zero logits for every position that asks for them.
func (m *NullModel) Forward(rows []engine.Row) ([]float32, error) {
	n, toks := 0, 0
	for i := range rows {
		toks += len(rows[i].Tokens)
		n += rows[i].LogitRows()
	}
	if d := m.StepCost + time.Duration(toks)*m.TokenCost; d > 0 {
		time.Sleep(d)
	}
	v := m.VocabSize()
	if cap(m.logits) < n*v {
		m.logits = make([]float32, n*v)
	}
	m.logits = m.logits[:n*v]
	clear(m.logits)
	return m.logits, nil
}

func cmp0(v, d int) int {
	if v == 0 {
		return d
	}
	return v
}

// script writes into prompt the position at which the scripted model ends
// the sequence: prompt tokens 1 and 2 hold end in base 256.
func script(prompt []int32, end int) error {
	if len(prompt) < 3 || end >= 256*256 || end <= len(prompt) {
		return errors.New("bench: cannot script this prompt's end")
	}
	prompt[1], prompt[2] = int32(end/256), int32(end%256)
	return nil
}

// scripted wraps a model so that each sequence emits EOS once it is end
// tokens long, end being written in its prompt by script, and never
// before. The engine's rows do not say which request they belong to, so a
// sequence is known by its first physical block, which it owns alone when
// the prefix cache is off: workloads that use this model must turn the
// cache off. Forward learns a sequence's end from its first prefill chunk
// (Start 0), which preemption replays.
type scripted struct {
	engine.Model
	eos  int32
	ends map[blockstore.BlockID]int
}

func newScripted(m engine.Model, eos int32) *scripted {
	return &scripted{Model: m, eos: eos, ends: map[blockstore.BlockID]int{}}
}

func (s *scripted) Forward(rows []engine.Row) ([]float32, error) {
	for _, r := range rows {
		if r.Start == 0 && len(r.Tokens) >= 3 {
			s.ends[r.Blocks[0]] = int(r.Tokens[1])*256 + int(r.Tokens[2])
		}
	}
	logits, err := s.Model.Forward(rows)
	if err != nil {
		return logits, err
	}
	v, li := s.VocabSize(), 0
	for i := range rows {
		r := &rows[i]
		for j := r.LogitRows() - 1; j >= 0; j-- { // j positions before the last
			row := logits[li*v : (li+1)*v]
			li++
			end, ok := s.ends[r.Blocks[0]]
			if !ok {
				continue
			}
			if r.Start+len(r.Tokens)-j >= end {
				top := float32(0)
				for _, x := range row {
					top = max(top, x)
				}
				row[s.eos] = top + 1e3
			} else {
				row[s.eos] = -math.MaxFloat32
			}
		}
	}
	return logits, nil
}

// gate holds a run's first forward pass until open is called: a run
// submits its first requests behind that pass, so they all arrive before
// the scheduler forms its first real batch.
type gate struct {
	once sync.Once
	ch   chan struct{}
}

func (g *gate) wait() { <-g.ch }
func (g *gate) open() { g.once.Do(func() { close(g.ch) }) }

// newGated returns m behind a closed gate, with the capabilities m has
// (engine.GreedyModel, engine.SamplingModel): a GPU's runner then picks
// greedy and sampled tokens on the device as it does when serving, instead
// of sending every row's logits back to be sampled here.
func newGated(m engine.Model) (engine.Model, *gate) {
	g := &gate{ch: make(chan struct{})}
	base := gated{m, g}
	switch x := m.(type) {
	case engine.SamplingModel:
		return gatedSampling{gatedGreedy{base, x}, x}, g
	case engine.GreedyModel:
		return gatedGreedy{base, x}, g
	}
	return base, g
}

// gated, gatedGreedy and gatedSampling are a model behind a gate.
type gated struct {
	engine.Model
	*gate
}

func (g gated) Forward(rows []engine.Row) ([]float32, error) {
	g.wait()
	return g.Model.Forward(rows)
}

type gatedGreedy struct {
	gated
	gm engine.GreedyModel
}

func (g gatedGreedy) ForwardGreedy(rows []engine.Row, greedy []bool) ([]float32, []int32, error) {
	g.wait()
	return g.gm.ForwardGreedy(rows, greedy)
}

type gatedSampling struct {
	gatedGreedy
	sm engine.SamplingModel
}

func (g gatedSampling) Draws() bool { return g.sm.Draws() }

func (g gatedSampling) ForwardSample(rows []engine.Row, greedy []bool, draws []*sample.Draw) ([]float32, []int32, error) {
	g.wait()
	return g.sm.ForwardSample(rows, greedy, draws)
}
