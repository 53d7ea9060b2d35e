package cpu

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"

	"github.com/prefixd/prefixd/batch"
	"github.com/prefixd/prefixd/kernels"
	"github.com/prefixd/prefixd/kernels/quant"
)

func TestBackendUploadRejectsWhatItCannotCompute(t *testing.T) {
	b := NewBackend(nil)
	for _, tc := range []struct {
		name string
		t    kernels.Tensor
	}{
		{"activation type Q8_K", kernels.Tensor{Type: kernels.DType(15), Rows: 1, Cols: 256, Data: make([]byte, 292)}},
		{"unknown type", kernels.Tensor{Type: kernels.DType(99), Rows: 1, Cols: 32, Data: make([]byte, 34)}},
		{"partial block", kernels.Tensor{Type: kernels.Q8_0, Rows: 1, Cols: 16, Data: make([]byte, 17)}},
		{"short quantized data", kernels.Tensor{Type: kernels.Q4_K, Rows: 2, Cols: 256, Data: make([]byte, 144)}},
		{"short data", kernels.Tensor{Type: kernels.F32, Rows: 2, Cols: 3, Data: make([]byte, 20)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := b.Upload(tc.t); err == nil {
				t.Fatal("Upload succeeded")
			}
		})
	}
	w, err := b.Upload(kernels.FromF32([]float32{1, 2, 3, 4, 5, 6}, 2, 3))
	if err != nil || w == kernels.NoWeight {
		t.Fatalf("Upload of an F32 tensor = %v, %v; want a handle other than NoWeight", w, err)
	}
	if _, err := b.NewKV(kernels.KVConfig{}); !errors.Is(err, ErrBadConfig) {
		t.Fatalf("NewKV of a zero config: %v, want ErrBadConfig", err)
	}
}

// TestBackendRoPEFactors checks the RoPE op's per-pair frequency factors
// against the rotation written out: pair i of each head of a row at
// position p turns by p·theta^(-2i/hd)/factors[i], whichever layout pairs
// the elements; without factors the op equals the exported RoPE.
func TestBackendRoPEFactors(t *testing.T) {
	const heads, hd, theta = 3, 8, 500000
	factors := []float32{1, 1.5, 4, 8}
	r := rand.New(rand.NewPCG(21, 22))
	b := NewBackend(nil)
	fw, err := b.Upload(kernels.FromF32(factors, 1, hd/2))
	if err != nil {
		t.Fatal(err)
	}
	x := b.Buffer(heads * hd)
	rows := []batch.Row{{Tokens: []int32{0, 0}, Start: 5}, {Tokens: []int32{0}, Start: 4000}}
	positions := []int{5, 6, 4000}
	for _, layout := range []kernels.RopeLayout{kernels.RopeAdjacent, kernels.RopeHalves} {
		b.Begin(rows)
		in := randVec(r, len(positions)*heads*hd)
		copy(b.bufs[x].f, in)
		b.RoPE(x, heads, theta, layout, fw)
		want := slices.Clone(in)
		for row, pos := range positions {
			for h := range heads {
				for i := range hd / 2 {
					a, c := 2*i, 2*i+1
					if layout == kernels.RopeHalves {
						a, c = i, i+hd/2
					}
					a, c = row*heads*hd+h*hd+a, row*heads*hd+h*hd+c
					ang := float64(pos) * math.Pow(theta, -float64(2*i)/hd) / float64(factors[i])
					x0, x1 := float64(in[a]), float64(in[c])
					want[a] = float32(x0*math.Cos(ang) - x1*math.Sin(ang))
					want[c] = float32(x0*math.Sin(ang) + x1*math.Cos(ang))
				}
			}
		}
		checkClose(t, "RoPE with factors", b.bufs[x].f, want, 1e-5)
		withFactors := slices.Clone(b.bufs[x].f)

		copy(b.bufs[x].f, in)
		b.RoPE(x, heads, theta, layout, kernels.NoWeight)
		for row, pos := range positions {
			seg := want[row*heads*hd : (row+1)*heads*hd]
			copy(seg, in[row*heads*hd:(row+1)*heads*hd])
			rope(seg, pos, heads, hd, theta, layout, nil)
		}
		checkClose(t, "RoPE without factors", b.bufs[x].f, want, 0)

		// The step's angles are kept per theta and factors: switching
		// back must not reuse those of the last call.
		copy(b.bufs[x].f, in)
		b.RoPE(x, heads, theta, layout, fw)
		checkClose(t, "RoPE with factors again", b.bufs[x].f, withFactors, 0)
	}
	short, err := b.Upload(kernels.FromF32(factors[:3], 1, 3))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("RoPE with factors of the wrong width did not panic")
		}
	}()
	b.RoPE(x, heads, theta, kernels.RopeAdjacent, short)
}

// TestBackendRoPELlama3Golden turns one pair by Llama 3.1's scaled
// frequency, with values computed by hand (not by this package): head
// width 128, theta 500000, pair 32 has frequency 500000^(-1/2), wavelength
// 2π·√500000 = 4442.883, inside llama3's smoothing band (2048, 8192) for
// factor 8, low_freq_factor 1, high_freq_factor 4, original context 8192:
// smooth = (8192/4442.883 - 1)/3 = 0.2812826, divisor 8/(1+7·smooth) =
// 2.6945297. At position 1000 the pair turns by 1000/(√500000·2.6945297)
// = 0.5248462 rad: (1, 0) becomes (cos, sin) = (0.8654010, 0.5010799).
func TestBackendRoPELlama3Golden(t *testing.T) {
	const hd = 128
	factors := make([]float32, hd/2)
	for i := range factors {
		factors[i] = 1
	}
	factors[32] = 2.6945297
	b := NewBackend(nil)
	fw, err := b.Upload(kernels.FromF32(factors, 1, hd/2))
	if err != nil {
		t.Fatal(err)
	}
	x := b.Buffer(hd)
	b.Begin([]batch.Row{{Tokens: []int32{0}, Start: 1000}})
	b.bufs[x].f[64] = 1 // pair 32 in the adjacent layout: elements 64 and 65
	b.RoPE(x, 1, 500000, kernels.RopeAdjacent, fw)
	checkClose(t, "pair 32", b.bufs[x].f[64:66], []float32{0.8654010, 0.5010799}, 1e-6)
}

// quantTensor returns rows×cols random values quantized to typ, and those
// values as the tensor holds them (dequantized).
func quantTensor(t *testing.T, r *rand.Rand, typ kernels.DType, rows, cols int) (kernels.Tensor, []float32) {
	t.Helper()
	x := randVec(r, rows*cols)
	rowBytes, err := typ.RowSize(cols)
	if err != nil {
		t.Fatal(err)
	}
	w := kernels.Tensor{Type: typ, Rows: rows, Cols: cols, Data: make([]byte, rows*rowBytes)}
	for i := range rows {
		if err := quant.Quantize(typ, w.Row(i), x[i*cols:(i+1)*cols]); err != nil {
			t.Fatal(err)
		}
	}
	f, err := w.Float32s()
	if err != nil {
		t.Fatal(err)
	}
	return w, f
}

// TestBackendQuantizedWeights runs Embed, MatMul, RMSNorm and Logits on
// weights of every type as uploaded, against float32 arithmetic on their
// dequantized values: Embed exactly (a gathered row is dequantized), the
// products within what quantizing the activations to 8 bits costs, and a
// prefill chunk's within float32 rounding.
func TestBackendQuantizedWeights(t *testing.T) {
	const vocab, in, out = 12, 512, 40
	w := NewWorkers(2)
	defer w.Close()
	r := rand.New(rand.NewPCG(5, 6))
	for _, typ := range []kernels.DType{kernels.F32, kernels.F16, kernels.BF16, kernels.Q4_0, kernels.Q4_1, kernels.Q5_0,
		kernels.Q5_1, kernels.Q8_0, kernels.Q4_K, kernels.Q5_K, kernels.Q6_K} {
		t.Run(typ.String(), func(t *testing.T) {
			b := NewBackend(w)
			emb, embF := quantTensor(t, r, typ, vocab, in)
			mat, matF := quantTensor(t, r, typ, out, in)
			norm, normF := quantTensor(t, r, typ, 1, in)
			var hs [3]kernels.Weight
			for i, x := range []kernels.Tensor{emb, mat, norm} {
				h, err := b.Upload(x)
				if err != nil {
					t.Fatal(err)
				}
				hs[i] = h
			}
			x, y := b.Buffer(in), b.Buffer(out)
			tokens := []int32{3, 0, 11}
			b.Begin([]batch.Row{{Tokens: tokens, Logits: true}})
			b.Embed(x, hs[0])
			for i, tok := range tokens {
				if got, want := b.bufs[x].f[i*in:(i+1)*in], embF[int(tok)*in:(int(tok)+1)*in]; !slices.Equal(got, want) {
					t.Fatalf("Embed row %d differs from the dequantized table", i)
				}
			}
			xs := slices.Clone(b.bufs[x].f)
			b.MatMul(y, x, hs[1])
			float := typ == kernels.F32 || typ == kernels.F16 || typ == kernels.BF16
			checkProduct(t, "MatMul", b.bufs[y].f, xs, matF, len(tokens), out, in, float)
			b.RMSNorm(x, x, hs[2], 1e-5)
			last := xs[2*in:]
			wantNorm := make([]float32, in)
			RMSNorm(wantNorm, last, normF, 1e-5)
			checkClose(t, "RMSNorm", b.bufs[x].f[2*in:], wantNorm, 1e-5)
			copy(b.bufs[x].f[2*in:], last)
			logits, err := b.Logits(x, hs[2], hs[1], 1e-5)
			if err != nil {
				t.Fatal(err)
			}
			checkProduct(t, "Logits", logits, wantNorm, matF, 1, out, in, float)

			// A prefill chunk (gemmRows(typ) rows or more) runs the GEMM on
			// the weights as they are (directGemm) or on float32 groups of
			// the dequantized rows: float32 rounding only either way. A
			// type whose integer kernels always win (gemmRows MaxInt)
			// stays on them, also for a long chunk.
			for _, n := range []int{min(gemmRows(typ), 200) + 5, 205} {
				long := make([]int32, n)
				for i := range long {
					long[i] = int32(i % vocab)
				}
				b.Begin([]batch.Row{{Tokens: long}})
				b.Embed(x, hs[0])
				xs = slices.Clone(b.bufs[x].f)
				b.MatMul(y, x, hs[1])
				checkProduct(t, fmt.Sprintf("MatMul of %d rows", n), b.bufs[y].f, xs, matF, n, out, in, float || n >= gemmRows(typ))
			}
		})
	}
}

// TestBackendMatMulsMatchesMatMul: MatMuls gives each buffer the bits
// MatMul gives it, for a decode row, a small batch and a prefill chunk,
// on groups that share one parallel loop (every weight on kernels/quant,
// of mixed types, Q8_0 packed among them) and on groups that fall back to
// one MatMul each (an F32 weight among them, or rows past gemmRows).
func TestBackendMatMulsMatchesMatMul(t *testing.T) {
	const in = 512
	w := NewWorkers(2)
	defer w.Close()
	r := rand.New(rand.NewPCG(12, 13))
	b := NewBackend(w)
	for _, group := range [][]kernels.DType{
		{kernels.Q5_K, kernels.Q5_K, kernels.Q6_K},
		{kernels.Q4_K, kernels.Q8_0},
		{kernels.Q8_0, kernels.F16, kernels.F32},
	} {
		ws := make([]kernels.Weight, len(group))
		grouped, single := make([]kernels.Buf, len(group)), make([]kernels.Buf, len(group))
		for i, typ := range group {
			out := 40 + 24*i
			m, _ := quantTensor(t, r, typ, out, in)
			h, err := b.Upload(m)
			if err != nil {
				t.Fatal(err)
			}
			ws[i], grouped[i], single[i] = h, b.Buffer(out), b.Buffer(out)
		}
		x := b.Buffer(in)
		for _, rows := range []int{1, 3, 300} {
			b.Begin([]batch.Row{{Tokens: make([]int32, rows), Logits: true}})
			copy(b.bufs[x].f, randVec(r, rows*in))
			b.MatMuls(grouped, x, ws)
			for i := range ws {
				b.MatMul(single[i], x, ws[i])
				got, want := b.bufs[grouped[i]].f[:rows*b.bufs[grouped[i]].cols], b.bufs[single[i]].f[:rows*b.bufs[single[i]].cols]
				if !slices.Equal(got, want) {
					t.Fatalf("%v, %d rows: weight %d (%v) differs from its MatMul", group, rows, i, group[i])
				}
			}
		}
	}
}

// checkProduct checks got against x·wᵀ (rows×in times out×in): within
// float32 rounding when the weights are floats, else within the bound of
// quantizing x to 8 bits: each activation moves by at most half a step,
// amax/127/2 of its block (bounded here by its row's amax), so output o
// moves by at most Σ_i |w[o][i]|·amax/254.
func checkProduct(t *testing.T, what string, got, x, w []float32, rows, out, in int, float bool) {
	t.Helper()
	want := naiveMatMul(x, w, rows, out, in)
	for r := range rows {
		var amax float64
		for _, v := range x[r*in : (r+1)*in] {
			amax = math.Max(amax, math.Abs(float64(v)))
		}
		for o := range out {
			tol := matMulTol(in)
			if !float {
				var sum float64
				for _, v := range w[o*in : (o+1)*in] {
					sum += math.Abs(float64(v))
				}
				tol += sum * amax / 254
			}
			if d := math.Abs(float64(got[r*out+o]) - float64(want[r*out+o])); !(d <= tol) {
				t.Fatalf("%s: [%d][%d] = %v, want %v (diff %g > %g)", what, r, o, got[r*out+o], want[r*out+o], d, tol)
			}
		}
	}
}

// TestBackendPackedArena: Q8_0 matrices multiplied in another order than
// uploaded, one uploaded only after the first product (past the arena
// that product reserved), give bit for bit the products of the same
// matrices packed on the heap (quant.PackQ8_0), also when multiplied
// again, and no two packed copies overlap.
func TestBackendPackedArena(t *testing.T) {
	const in = 512
	w := NewWorkers(2)
	defer w.Close()
	r := rand.New(rand.NewPCG(8, 9))
	b := NewBackend(w)
	outs := []int{40, 48, 16, 33}
	mats := make([]kernels.Tensor, len(outs))
	hs := make([]kernels.Weight, len(outs))
	upload := func(i int) {
		mats[i], _ = quantTensor(t, r, kernels.Q8_0, outs[i], in)
		h, err := b.Upload(mats[i])
		if err != nil {
			t.Fatal(err)
		}
		hs[i] = h
	}
	for i := range 3 {
		upload(i)
	}
	x := b.Buffer(in)
	ys := make([]kernels.Buf, len(outs))
	for i, out := range outs {
		ys[i] = b.Buffer(out)
	}
	b.Begin([]batch.Row{{Tokens: []int32{1, 2}, Logits: true}})
	copy(b.bufs[x].f, randVec(r, 2*in))
	ref := quant.NewMultiplier(nil)
	// The second pass multiplies each matrix again: a later matrix packed
	// over an earlier one's bytes would show there.
	for step, i := range []int{2, 0, 3, 1, 0, 1, 2, 3} {
		if i == 3 {
			upload(3)
		}
		y := ys[i]
		b.MatMul(y, x, hs[i])
		want := make([]float32, 2*outs[i])
		p := quant.Product{Dst: want, W: mats[i].Data, Type: kernels.Q8_0, Out: outs[i], Packed: quant.PackQ8_0(mats[i].Data, outs[i], in)}
		if err := ref.MatMuls(b.bufs[x].f, 2, in, p); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(b.bufs[y].f, want) {
			t.Errorf("step %d, matrix %d: the product differs from the heap-packed one", step, i)
		}
	}
	for i := range b.weights {
		for j := range i {
			pi, pj := b.weights[i].packed, b.weights[j].packed
			if len(pi) > 0 && len(pj) > 0 &&
				uintptr(unsafe.Pointer(&pi[0])) < uintptr(unsafe.Pointer(&pj[0]))+uintptr(len(pj)) &&
				uintptr(unsafe.Pointer(&pj[0])) < uintptr(unsafe.Pointer(&pi[0]))+uintptr(len(pi)) {
				t.Errorf("weights %d and %d share packed bytes", i, j)
			}
		}
	}
}
