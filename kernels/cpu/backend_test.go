package cpu

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/prefixd/prefixd/batch"
	"github.com/prefixd/prefixd/kernels"
)

func TestBackendUploadRejectsWhatItCannotCompute(t *testing.T) {
	b := NewBackend(nil)
	for _, tc := range []struct {
		name string
		t    kernels.Tensor
	}{
		{"quantized type", kernels.Tensor{Type: kernels.DType(8), Rows: 1, Cols: 32, Data: make([]byte, 34)}},
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

		copy(b.bufs[x].f, in)
		b.RoPE(x, heads, theta, layout, kernels.NoWeight)
		for row, pos := range positions {
			seg := want[row*heads*hd : (row+1)*heads*hd]
			copy(seg, in[row*heads*hd:(row+1)*heads*hd])
			rope(seg, pos, heads, hd, theta, layout, nil)
		}
		checkClose(t, "RoPE without factors", b.bufs[x].f, want, 0)
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
