package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/prefixd/prefixd/kernels"
	"github.com/prefixd/prefixd/kernels/quant"
)

// TestDequantRowMatchesQuant checks dequantRow against quant.Dequantize,
// whose golden tests pin the formats, bit for bit on random bytes (so
// every half, subnormals, infinities and NaNs included, comes up), on
// every kernel path and for lengths with and without a 16-value tail.
func TestDequantRowMatchesQuant(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, typ := range []kernels.DType{kernels.F16, kernels.BF16, kernels.Q8_0, kernels.Q4_K, kernels.Q6_K, kernels.Q5_K} {
		for _, n := range []int{32, 256, 768, 2048} {
			if n%typ.BlockSize() != 0 {
				continue
			}
			src := make([]byte, n/typ.BlockSize()*typ.BlockBytes())
			for i := range src {
				src[i] = byte(r.Uint32())
			}
			want := make([]float32, n)
			if err := quant.Dequantize(typ, want, src); err != nil {
				t.Fatalf("%v: %v", typ, err)
			}
			t.Run(fmt.Sprintf("%v/%d", typ, n), func(t *testing.T) {
				eachKernel(t, func(t testing.TB) {
					got := make([]float32, n)
					if err := dequantRow(typ, got, src); err != nil {
						t.Fatal(err)
					}
					for i := range got {
						g, w := got[i], want[i]
						if math.Float32bits(g) != math.Float32bits(w) && !(g != g && w != w) {
							t.Fatalf("value %d = %v (%#x), want %v (%#x)", i, g, math.Float32bits(g), w, math.Float32bits(w))
						}
					}
				})
			})
		}
	}
}

func TestDequantRowRejectsShortRows(t *testing.T) {
	eachKernel(t, func(t testing.TB) {
		for _, typ := range []kernels.DType{kernels.F16, kernels.Q8_0} {
			if err := dequantRow(typ, make([]float32, 64), make([]byte, 10)); err == nil {
				t.Errorf("%v: no error for a short row", typ)
			}
		}
	})
}

// BenchmarkDequantRow measures dequantRow on 96 rows of 768 values (a
// deqGroup of a 110M-class model), in values per second.
func BenchmarkDequantRow(b *testing.B) {
	const rows, k = 96, 768
	dst := make([]float32, k)
	for _, typ := range []kernels.DType{kernels.F16, kernels.BF16, kernels.Q8_0, kernels.Q4_K, kernels.Q6_K} {
		src := make([]byte, rows*k/typ.BlockSize()*typ.BlockBytes())
		rb := len(src) / rows
		b.Run(fmt.Sprint(typ), func(b *testing.B) {
			for b.Loop() {
				for j := range rows {
					if err := dequantRow(typ, dst, src[j*rb:(j+1)*rb]); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(rows*k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "Gvalues/s")
		})
	}
}
