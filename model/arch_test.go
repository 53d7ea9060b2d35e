package model

import (
	"math"
	"strings"
	"testing"

	"github.com/prefixd/prefixd/kernels"
	"github.com/prefixd/prefixd/kernels/cpu"
)

// archQKV applies to one token's q, k and v what comes between their
// products and attention in the reference: the Arch's biases and per-head
// norms, then RoPE in its layout.
func (r *reference) archQKV(l Layer, q, k, v []float64, pos int) {
	c := r.m.Config
	hd, theta := c.HeadDim(), float64(c.RopeTheta)
	if c.Arch.QKVBias {
		for _, p := range []struct {
			x []float64
			b []float32
		}{{q, fl(l.Bq)}, {k, fl(l.Bk)}, {v, fl(l.Bv)}} {
			for i := range p.x {
				p.x[i] += float64(p.b[i])
			}
		}
	}
	if c.Arch.QKNorm {
		for h := 0; h < len(q); h += hd {
			copy(q[h:h+hd], refNorm(q[h:h+hd], fl(l.QNorm), float64(c.NormEps)))
		}
		for h := 0; h < len(k); h += hd {
			copy(k[h:h+hd], refNorm(k[h:h+hd], fl(l.KNorm), float64(c.NormEps)))
		}
	}
	rope := refRope
	if c.Arch.Rope == kernels.RopeHalves {
		rope = refRopeHalves
	}
	rope(q, pos, hd, theta, fl(r.m.RopeFactors))
	rope(k, pos, hd, theta, fl(r.m.RopeFactors))
}

// refRopeHalves is the rotate-half RoPE of Hugging Face's Llama
// (q·cos + rotate_half(q)·sin, rotate_half(x) = [-x2, x1]), written from
// its definition: element i of a head and element i+hd/2 turn together by
// pos·theta^(-2i/hd), divided by factors[i] when factors is not nil (the
// inv_freq that HF's llama3 rope scaling rescales).
func refRopeHalves(x []float64, pos, headDim int, theta float64, factors []float32) {
	half := headDim / 2
	for h := 0; h < len(x); h += headDim {
		for i := range half {
			a := float64(pos) / math.Pow(theta, float64(2*i)/float64(headDim))
			if factors != nil {
				a /= float64(factors[i])
			}
			x1, x2 := x[h+i], x[h+i+half]
			x[h+i] = x1*math.Cos(a) - x2*math.Sin(a)
			x[h+i+half] = x2*math.Cos(a) + x1*math.Sin(a)
		}
	}
}

// randomArchModel returns a small random model of arch (see randomModel).
func randomArchModel(arch Arch, seed uint64) *Model {
	return Random(Config{Dim: 32, Hidden: 48, Layers: 2, Heads: 4, KVHeads: 2, Vocab: 40, MaxSeqLen: 64,
		RopeTheta: 10000, NormEps: 1e-5, BOS: -1, EOS: -1, Arch: arch}, seed)
}

// TestArchOptionsMatchReference runs each Arch option, and all together,
// against the float64 reference: a 7-token prefill then decode steps, so
// both the batched and the single-row paths see every option.
func TestArchOptionsMatchReference(t *testing.T) {
	for _, tc := range []struct {
		name    string
		arch    Arch
		factors []float32 // Model.RopeFactors
	}{
		{"llama", Arch{}, nil},
		{"rope halves", Arch{Rope: kernels.RopeHalves}, nil},
		{"qkv bias", Arch{QKVBias: true}, nil},
		{"qk norm", Arch{QKNorm: true}, nil},
		{"all", Arch{Rope: kernels.RopeHalves, QKVBias: true, QKNorm: true}, nil},
		{"rope factors", Arch{}, []float32{1, 0.25, 3, 8}},
		{"all with rope factors", Arch{Rope: kernels.RopeHalves, QKVBias: true, QKNorm: true}, []float32{0.5, 2, 5, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := randomArchModel(tc.arch, 3)
			m.RopeFactors = vecT(tc.factors)
			if err := m.check(); err != nil {
				t.Fatal(err)
			}
			compareWithReference(t, m, newReference(m), []int32{3, 14, 15, 9, 26, 5, 35})
		})
	}
}

// TestArchTensorsChecked: an option's tensors must be present exactly
// when the option is on, so none is silently ignored.
func TestArchTensorsChecked(t *testing.T) {
	for _, tc := range []struct {
		name  string
		arch  Arch
		edit  func(*Layer)
		wants string
	}{
		{"bias missing", Arch{QKVBias: true}, func(l *Layer) { l.Bk = kernels.Tensor{} }, "k bias"},
		{"bias without the option", Arch{}, func(l *Layer) { l.Bv = vecT(make([]float32, 16)) }, "v bias"},
		{"q norm missing", Arch{QKNorm: true}, func(l *Layer) { l.QNorm = vecT(fl(l.QNorm)[:3]) }, "q norm"},
		{"k norm without the option", Arch{}, func(l *Layer) { l.KNorm = vecT(make([]float32, 8)) }, "k norm"},
		{"unknown rope layout", Arch{Rope: 7}, func(*Layer) {}, "RoPE layout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := randomArchModel(tc.arch, 4)
			tc.edit(&m.Layers[1])
			err := m.check()
			if err == nil || !strings.Contains(err.Error(), tc.wants) {
				t.Fatalf("check() = %v, want an error naming %q", err, tc.wants)
			}
		})
	}
}

func TestNewRunnerOnRejectsBadModels(t *testing.T) {
	w := cpu.NewWorkers(1)
	t.Cleanup(w.Close)
	m := randomArchModel(Arch{QKVBias: true}, 5)
	m.Layers[0].Bq = kernels.Tensor{}
	if _, err := NewRunnerOn(m, cpu.NewBackend(w)); err == nil || !strings.Contains(err.Error(), "q bias") {
		t.Fatalf("NewRunnerOn of a model without its q bias: %v", err)
	}
	if _, err := NewRunnerOn(randomArchModel(Arch{}, 5), cpu.NewBackend(w)); err != nil {
		t.Fatal(err)
	}
}

// TestArchForwardAllocatesNothing pins the zero-allocation step with every
// option and RoPE factors on: a decode row rewriting one slot and a
// 3-token chunk.
func TestArchForwardAllocatesNothing(t *testing.T) {
	m := randomArchModel(Arch{Rope: kernels.RopeHalves, QKVBias: true, QKNorm: true}, 6)
	m.RopeFactors = vecT([]float32{1, 2, 4, 8})
	h := newHarness(t, m, 8, 4)
	a, b := h.pool.NewTable(), h.pool.NewTable()
	if err := a.Append(5); err != nil {
		t.Fatal(err)
	}
	if err := b.Append(3); err != nil {
		t.Fatal(err)
	}
	seqs := []Seq{
		{Tokens: []int32{7}, Start: 4, Blocks: a.Blocks(), Logits: true},
		{Tokens: []int32{1, 2, 3}, Blocks: b.Blocks(), Logits: true},
	}
	allocs := testing.AllocsPerRun(10, func() {
		if _, err := h.r.Forward(seqs); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per Forward", allocs)
	}
}
