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
