package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// The row operations are checked against float64 references; the stated
// tolerances are absolute on inputs of standard normals.

func TestRMSNorm(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, n := range []int{1, 4, 7, 64, 288} {
		x, w := randVec(r, n), randVec(r, n)
		var ss float64
		for _, v := range x {
			ss += float64(v) * float64(v)
		}
		const eps = 1e-5
		inv := 1 / math.Sqrt(ss/float64(n)+eps)
		want := make([]float32, n)
		for i := range x {
			want[i] = float32(float64(x[i]) * inv * float64(w[i]))
		}
		got := make([]float32, n)
		RMSNorm(got, x, w, eps)
		checkClose(t, "RMSNorm", got, want, 1e-5)
		RMSNorm(x, x, w, eps) // in place
		checkClose(t, "RMSNorm in place", x, want, 1e-5)
	}
}

func TestRoPE(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for _, tc := range []struct {
		name                string
		pos, heads, headDim int
		theta               float32
	}{
		{"position zero is identity", 0, 2, 8, 10000},
		{"llama2 head", 17, 3, 64, 10000},
		{"long position", 4000, 1, 128, 500000},
		{"tiny head", 3, 2, 2, 10000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Pair i of a head turns by pos·theta^(-2i/headDim): in the
			// adjacent form its elements are 2i and 2i+1, in the
			// rotate-half form i and i+headDim/2.
			for _, layout := range []struct {
				name string
				rope func(x []float32, pos, nHeads, headDim int, theta float32)
				pair func(i, headDim int) (int, int)
			}{
				{"adjacent", RoPE, func(i, _ int) (int, int) { return 2 * i, 2*i + 1 }},
				{"halves", RoPEHalves, func(i, hd int) (int, int) { return i, i + hd/2 }},
			} {
				x := randVec(r, tc.heads*tc.headDim)
				want := make([]float32, len(x))
				for h := range tc.heads {
					for i := range tc.headDim / 2 {
						ang := float64(tc.pos) * math.Pow(float64(tc.theta), -float64(2*i)/float64(tc.headDim))
						a, b := layout.pair(i, tc.headDim)
						a, b = a+h*tc.headDim, b+h*tc.headDim
						x0, x1 := float64(x[a]), float64(x[b])
						want[a] = float32(x0*math.Cos(ang) - x1*math.Sin(ang))
						want[b] = float32(x0*math.Sin(ang) + x1*math.Cos(ang))
					}
				}
				layout.rope(x, tc.pos, tc.heads, tc.headDim, tc.theta)
				checkClose(t, "RoPE "+layout.name, x, want, 1e-5)
			}
		})
	}
}

func TestSwiGLUSoftmaxAdd(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for _, n := range []int{1, 3, 8, 17, 64, 1000} {
		gate, up := randVec(r, n), randVec(r, n)
		gate[0] = -120 // exp(120) overflows float32; silu must still be ~0
		if n > 9 {
			gate[5] = -88.5 // past the kernels' clamp of e's argument at 88
			gate[9], up[9] = 30, 0.25
		}
		want := make([]float32, n)
		for i := range gate {
			g := float64(gate[i])
			want[i] = float32(g / (1 + math.Exp(-g)) * float64(up[i]))
		}
		t.Run(fmt.Sprintf("n=%d", n), func(t *testing.T) {
			eachKernel(t, func(t testing.TB) {
				got := make([]float32, n)
				SwiGLU(got, gate, up)
				checkClose(t, "SwiGLU", got, want, 1e-5)
				got = slices.Clone(gate) // out may alias gate
				SwiGLU(got, got, up)
				checkClose(t, "SwiGLU in place", got, want, 1e-5)
			})
		})
		if n > 1 {
			nan := slices.Clone(gate)
			nan[n-1] = float32(math.NaN())
			SwiGLU(nan, nan, up)
			if v := nan[n-1]; v == v {
				t.Errorf("n=%d: SwiGLU of a NaN gate = %v, want NaN", n, v)
			}
		}

		logits := randVec(r, n)
		logits[n-1] = 3000 // would overflow without the max shift
		wantP := make([]float32, n)
		m := math.Inf(-1)
		for _, v := range logits {
			m = math.Max(m, float64(v))
		}
		var sum float64
		for _, v := range logits {
			sum += math.Exp(float64(v) - m)
		}
		for i, v := range logits {
			wantP[i] = float32(math.Exp(float64(v)-m) / sum)
		}
		Softmax(logits)
		checkClose(t, "Softmax", logits, wantP, 1e-6)

		dst, x := randVec(r, n), randVec(r, n)
		wantSum := make([]float32, n)
		for i := range dst {
			wantSum[i] = dst[i] + x[i]
		}
		Add(dst, x)
		checkClose(t, "Add", dst, wantSum, 0)
	}
}

// BenchmarkSwiGLU measures SwiGLU on the FFN width of a 110M-class model
// (2048) over 64 rows, on each kernel path.
func BenchmarkSwiGLU(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	gate, up := randVec(r, 64*2048), randVec(r, 64*2048)
	out := make([]float32, len(gate))
	saved := useAVX2
	defer func() { useAVX2 = saved }()
	for _, avx2 := range []bool{false, true} {
		b.Run(fmt.Sprintf("avx2=%v", avx2), func(b *testing.B) {
			if avx2 && !haveAVX2() {
				b.Skip("this build or CPU has no AVX2 kernels")
			}
			useAVX2 = avx2
			b.SetBytes(int64(12 * len(gate)))
			for b.Loop() {
				SwiGLU(out, gate, up)
			}
		})
	}
}
