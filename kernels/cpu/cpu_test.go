package cpu

import (
	"math"
	"math/rand/v2"
	"sync/atomic"
	"testing"

	"prefixd/blockstore"
)

func randVec(r *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	return v
}

func maxDiff(a, b []float32) float64 {
	d := 0.0
	for i := range a {
		d = math.Max(d, math.Abs(float64(a[i]-b[i])))
	}
	return d
}

func TestWorkersCoverEveryIndexOnce(t *testing.T) {
	w := NewWorkers(3)
	defer w.Close()
	for _, n := range []int{0, 1, 2, 3, 7, 100} {
		hits := make([]atomic.Int32, n)
		w.For(n, func(part, lo, hi int) {
			if part < 0 || part >= w.N() {
				t.Errorf("part %d out of range", part)
			}
			for i := lo; i < hi; i++ {
				hits[i].Add(1)
			}
		})
		for i := range hits {
			if hits[i].Load() != 1 {
				t.Fatalf("n=%d: index %d ran %d times", n, i, hits[i].Load())
			}
		}
	}
}

func TestMatMulMatchesNaive(t *testing.T) {
	w := NewWorkers(2)
	defer w.Close()
	r := rand.New(rand.NewPCG(1, 2))
	for _, s := range []struct{ m, n, k int }{{1, 1, 1}, {1, 7, 3}, {3, 5, 9}, {4, 33, 17}, {9, 64, 64}, {64, 40, 130}} {
		a, b := randVec(r, s.m*s.k), randVec(r, s.n*s.k)
		got := make([]float32, s.m*s.n)
		MatMul(w, got, a, b, s.m, s.n, s.k)
		want := make([]float32, s.m*s.n)
		for i := range s.m {
			for j := range s.n {
				var acc float64
				for x := range s.k {
					acc += float64(a[i*s.k+x]) * float64(b[j*s.k+x])
				}
				want[i*s.n+j] = float32(acc)
			}
		}
		if d := maxDiff(got, want); d > 1e-4 {
			t.Fatalf("%+v: max diff %g", s, d)
		}
	}
}

func TestRowOps(t *testing.T) {
	x := []float32{1, -2, 3, 0.5}
	w := []float32{1, 2, 0.5, 1}
	out := make([]float32, 4)
	RMSNorm(out, x, w, 1e-5)
	rms := math.Sqrt((1+4+9+0.25)/4.0 + 1e-5)
	for i := range x {
		if want := float64(x[i]) / rms * float64(w[i]); math.Abs(float64(out[i])-want) > 1e-6 {
			t.Fatalf("RMSNorm[%d] = %v, want %v", i, out[i], want)
		}
	}
	p := []float32{1, 2, 3, 4, 5, 6, 7, 8} // 2 heads of 4
	RoPE(p, 3, 2, 4, 10000)
	for h := range 2 {
		for i := 0; i < 4; i += 2 {
			ang := 3 * math.Pow(10000, -float64(i)/4)
			x0, x1 := float64(h*4+i+1), float64(h*4+i+2)
			w0, w1 := x0*math.Cos(ang)-x1*math.Sin(ang), x0*math.Sin(ang)+x1*math.Cos(ang)
			if math.Abs(float64(p[h*4+i])-w0) > 1e-5 || math.Abs(float64(p[h*4+i+1])-w1) > 1e-5 {
				t.Fatalf("RoPE head %d pair %d = %v %v, want %v %v", h, i, p[h*4+i], p[h*4+i+1], w0, w1)
			}
		}
	}
	g, u := []float32{-1, 0, 2}, []float32{3, 4, 5}
	SwiGLU(out[:3], g, u)
	for i := range g {
		want := float64(g[i]) / (1 + math.Exp(-float64(g[i]))) * float64(u[i])
		if math.Abs(float64(out[i])-want) > 1e-6 {
			t.Fatalf("SwiGLU[%d] = %v, want %v", i, out[i], want)
		}
	}
	sm := []float32{1000, 1001, 999}
	Softmax(sm)
	if s := sm[0] + sm[1] + sm[2]; math.Abs(float64(s)-1) > 1e-6 || sm[1] < sm[0] || sm[0] < sm[2] {
		t.Fatalf("Softmax = %v", sm)
	}
}

// naiveAttention is softmax(q kᵀ / sqrt(d)) v over contiguous K/V with a
// causal mask and grouped heads.
func naiveAttention(q, k, v []float32, start, rows, nHeads, kvHeads, hd int) []float32 {
	out := make([]float32, rows*nHeads*hd)
	group := nHeads / kvHeads
	for r := range rows {
		pos := start + r
		for h := range nHeads {
			kh := h / group
			scores := make([]float64, pos+1)
			m := math.Inf(-1)
			for p := 0; p <= pos; p++ {
				var s float64
				for d := range hd {
					s += float64(q[(r*nHeads+h)*hd+d]) * float64(k[(p*kvHeads+kh)*hd+d])
				}
				scores[p] = s / math.Sqrt(float64(hd))
				m = math.Max(m, scores[p])
			}
			var sum float64
			for p := range scores {
				scores[p] = math.Exp(scores[p] - m)
				sum += scores[p]
			}
			for d := range hd {
				var acc float64
				for p := range scores {
					acc += scores[p] / sum * float64(v[(p*kvHeads+kh)*hd+d])
				}
				out[(r*nHeads+h)*hd+d] = float32(acc)
			}
		}
	}
	return out
}

func TestPagedAttentionMatchesNaive(t *testing.T) {
	const layers, kvHeads, hd, bs, nHeads = 2, 2, 8, 4, 4
	w := NewWorkers(2)
	defer w.Close()
	c, err := NewKVCache(KVConfig{Layers: layers, KVHeads: kvHeads, HeadDim: hd, BlockSize: bs, NumBlocks: 64})
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(3, 4))
	// Three sequences: a prefill chunk over a cached prefix, and two
	// decodes; physical blocks deliberately out of order.
	type sq struct {
		start, rows int
		blocks      []blockstore.BlockID
		k, v        []float32
	}
	var seqs []sq
	next := 63
	for _, s := range []struct{ start, rows int }{{10, 7}, {20, 1}, {0, 1}} {
		n := s.start + s.rows
		x := sq{start: s.start, rows: s.rows, k: randVec(r, n*kvHeads*hd), v: randVec(r, n*kvHeads*hd)}
		for range (n + bs - 1) / bs {
			x.blocks = append(x.blocks, blockstore.BlockID(next))
			next -= 3
		}
		for p := range n {
			c.Put(1, x.blocks[p/bs], p%bs, x.k[p*kvHeads*hd:(p+1)*kvHeads*hd], x.v[p*kvHeads*hd:(p+1)*kvHeads*hd])
		}
		seqs = append(seqs, x)
	}
	var attn []AttnSeq
	var q []float32
	for _, s := range seqs {
		attn = append(attn, AttnSeq{Blocks: s.blocks, Start: s.start, Rows: s.rows})
		q = append(q, randVec(r, s.rows*nHeads*hd)...)
	}
	out := make([]float32, len(q))
	var scratch AttnScratch
	c.Attention(w, 1, q, out, attn, nHeads, &scratch)
	row := 0
	for i, s := range seqs {
		want := naiveAttention(q[row*nHeads*hd:], s.k, s.v, s.start, s.rows, nHeads, kvHeads, hd)
		if d := maxDiff(out[row*nHeads*hd:(row+s.rows)*nHeads*hd], want); d > 1e-5 {
			t.Fatalf("sequence %d: max diff %g", i, d)
		}
		row += s.rows
	}
	if n := testing.AllocsPerRun(20, func() { c.Attention(w, 1, q, out, attn, nHeads, &scratch) }); n > 1 {
		t.Fatalf("Attention allocates %.1f times per call", n)
	}
}

func TestKVCacheBytes(t *testing.T) {
	c, err := NewKVCache(KVConfig{Layers: 2, KVHeads: 1, HeadDim: 2, BlockSize: 2, NumBlocks: 3})
	if err != nil {
		t.Fatal(err)
	}
	c.Put(0, 1, 0, []float32{1, 2}, []float32{3, 4})
	c.Put(1, 1, 1, []float32{5, 6}, []float32{7, 8})
	buf := make([]byte, c.BlockBytes())
	if err := c.ReadBlock(1, buf); err != nil {
		t.Fatal(err)
	}
	if err := c.WriteBlock(2, buf); err != nil {
		t.Fatal(err)
	}
	again := make([]byte, c.BlockBytes())
	if err := c.ReadBlock(2, again); err != nil || string(again) != string(buf) {
		t.Fatal("write/read round trip changed bytes")
	}
	if err := c.CopyBlocks([]blockstore.BlockCopy{{Src: 1, Dst: 0, Slots: 1}}); err != nil {
		t.Fatal(err)
	}
	if c.k[0][0] != 1 || c.v[0][1] != 4 || c.k[1][2] != 0 {
		t.Fatalf("1-slot copy: layer0 %v layer1 %v", c.k[0][:4], c.k[1][:4])
	}
	for name, err := range map[string]error{
		"read out of range": c.ReadBlock(3, buf),
		"read short buffer": c.ReadBlock(0, buf[:3]),
		"write negative":    c.WriteBlock(-1, buf),
		"copy too many":     c.CopyBlocks([]blockstore.BlockCopy{{Src: 0, Dst: 1, Slots: 3}}),
		"copy bad dst":      c.CopyBlocks([]blockstore.BlockCopy{{Src: 0, Dst: 9, Slots: 1}}),
	} {
		if err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := NewKVCache(KVConfig{}); err == nil {
		t.Error("empty KVConfig accepted")
	}
}
