package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/prefixd/prefixd/kernels"
	"github.com/prefixd/prefixd/kernels/quant"
)

// TestGemmMatchesFloat64 checks gemm against a float64 reference on every
// kernel path over shapes that cover the remainders of the tiles (m % 4,
// m % 3, m % 6, n % 6, n % 4, n % 16, k % 16, k % 8), strided operands,
// and b blocks (a long k makes them a few tiles wide, so tails fall
// inside a block), and checks that it writes nothing outside c's m×n
// region.
func TestGemmMatchesFloat64(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	type shape struct{ m, n, k int }
	var shapes []shape
	for _, m := range []int{1, 2, 3, 4, 5, 7, 8, 13} {
		for _, n := range []int{1, 5, 6, 7, 12, 13, 29} {
			for _, k := range []int{1, 2, 15, 16, 17, 33, 100} {
				shapes = append(shapes, shape{m, n, k})
			}
		}
	}
	// The last three take k in blocks (kBlocks: 2051 in three of 704,
	// 704 and 643), and the last, without AVX-512, is two blocks of a
	// (gemmABlockBytes: 93 rows of 704 values), the second of 2 rows.
	shapes = append(shapes, shape{5, 29, 5000}, shape{16, 40, 768}, shape{9, 31, 2051}, shape{40, 13, 2051}, shape{95, 13, 2051})
	// From panelRows rows and 16 columns the AVX2 kernels pack b in
	// panels: every m % 6 (the last rows go through a padded copy), n %
	// 16 (the dot-product tiles take the last columns), k % 8 (packPanel
	// packs those terms in Go), and k in blocks.
	for m := panelRows; m < panelRows+6; m++ {
		shapes = append(shapes, shape{m, 16, 1}, shape{m, 17, 15}, shape{m, 35, 100}, shape{m, 48, 33})
	}
	shapes = append(shapes, shape{47, 50, 2051}, shape{96, 40, 776})
	eachKernel(t, func(t testing.TB) {
		for _, s := range shapes {
			lda, ldb, ldc := s.k+3, s.k+1, s.n+2
			a, b := randVec(r, s.m*lda), randVec(r, s.n*ldb)
			c := make([]float32, s.m*ldc)
			for i := range c {
				c[i] = float32(math.NaN()) // gemm must overwrite, and only its region
			}
			gemm(c, ldc, a, lda, b, ldb, s.m, s.n, s.k)
			for i := range s.m {
				for j := range ldc {
					got := c[i*ldc+j]
					if j >= s.n {
						if got == got {
							t.Fatalf("%v: c[%d][%d] = %v outside the product", s, i, j, got)
						}
						continue
					}
					var want float64
					for p := range s.k {
						want += float64(a[i*lda+p]) * float64(b[j*ldb+p])
					}
					if d := math.Abs(float64(got) - want); !(d <= matMulTol(s.k)) {
						t.Fatalf("%v: c[%d][%d] = %v, want %v (diff %g)", s, i, j, got, want, d)
					}
				}
			}
		}
	})
}

// BenchmarkGemm measures gemm on one core, with the AVX2 and the AVX-512
// kernels, for the shapes of a 110M-class model (dim 768, hidden 2048,
// vocabulary 32000) at batched decode (m = 16), a small prefill chunk (64)
// and a long one (512).
func BenchmarkGemm(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	saved := useAVX512
	defer func() { useAVX512 = saved }()
	for _, m := range []int{16, 64, 512} {
		for _, nk := range []struct{ n, k int }{{768, 768}, {2048, 768}, {768, 2048}, {32000, 768}} {
			n, k := nk.n, nk.k
			a, bm, c := randVec(r, m*k), randVec(r, n*k), make([]float32, m*n)
			for _, kern := range []struct {
				name string
				have bool
			}{{"avx2", haveAVX2()}, {"avx512", haveAVX512()}} {
				b.Run(fmt.Sprintf("m%d_n%d_k%d/%s", m, n, k, kern.name), func(b *testing.B) {
					if !kern.have {
						b.Skipf("this build or CPU has no %s kernels", kern.name)
					}
					useAVX512 = kern.name == "avx512"
					for b.Loop() {
						gemm(c, n, a, k, bm, k, m, n, k)
					}
					b.ReportMetric(2*float64(m*n*k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
				})
			}
		}
	}
}

// BenchmarkQuantizedMatMul compares, per weight type and activation rows,
// the paths of a product on weights other than F32: kernels/quant's
// products on the weights as uploaded ("quant"), and the GEMM ("gemm"):
// on the weights as they are for the types it converts on load
// (directGemm), else on groups of rows dequantized for it, which
// "deqgemm" measures for those types too. gemmRows is where the GEMM
// starts to win. The weight is the 2048×768 of a 110M-class model's FFN.
func BenchmarkQuantizedMatMul(b *testing.B) {
	const n, k = 2048, 768
	w := NewWorkers(0)
	defer w.Close()
	r := rand.New(rand.NewPCG(9, 9))
	wf := randVec(r, n*k)
	for _, typ := range []kernels.DType{kernels.F16, kernels.BF16, kernels.Q8_0, kernels.Q4_0, kernels.Q4_1, kernels.Q5_0, kernels.Q5_1, kernels.Q4_K, kernels.Q5_K, kernels.Q6_K} {
		rowBytes, err := typ.RowSize(k)
		if err != nil {
			b.Fatal(err)
		}
		wt := kernels.Tensor{Type: typ, Rows: n, Cols: k, Data: make([]byte, n*rowBytes)}
		for i := range n {
			if err := quant.Quantize(typ, wt.Row(i), wf[i*k:(i+1)*k]); err != nil {
				b.Fatal(err)
			}
		}
		be := NewBackend(w)
		for _, m := range []int{1, 2, 3, 4, 6, 8, 12, 16, 20, 24, 32, 64, 128, 256, 512} {
			a, c := randVec(r, m*k), make([]float32, m*n)
			paths := []string{"quant", "gemm"}
			if directGemm(typ, n) {
				paths = append(paths, "deqgemm")
			}
			for _, path := range paths {
				b.Run(fmt.Sprintf("%v/m%d/%s", typ, m, path), func(b *testing.B) {
					for b.Loop() {
						switch {
						case path == "gemm" && directGemm(typ, n):
							matMulDirect(w, c, a, wt.Data, typ, m, n, k)
						case path != "quant":
							be.deqMatMul(c, a, wt, m)
						default:
							if err := be.q.MatMul(c, a, wt.Data, typ, m, n, k); err != nil {
								b.Fatal(err)
							}
						}
					}
					b.ReportMetric(2*float64(m*n*k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
				})
			}
		}
	}
}

// BenchmarkDecodeGemm measures the products of one decode step of m rows
// over the weights of a 110M-class model's 12 layers (q, k, v and o
// 768×768, gate and up 2048×768, down 768×2048: 85M weights, more than
// the caches hold), on every worker, for each type the GEMM reads: the
// weights stream from memory once a step, as they do in a batched decode.
// For the types other than F32 it measures kernels/quant's products too
// ("quant", up to 8 rows), for gemmRows, and from 8 rows the GEMM on
// groups of rows dequantized first ("deqgemm").
func BenchmarkDecodeGemm(b *testing.B) {
	w := NewWorkers(0)
	defer w.Close()
	be := NewBackend(w)
	r := rand.New(rand.NewPCG(10, 10))
	type mat struct{ off, n, k int }
	var mats []mat
	total := 0
	for range 12 {
		for _, nk := range [][2]int{{768, 768}, {768, 768}, {768, 768}, {768, 768}, {2048, 768}, {2048, 768}, {768, 2048}} {
			mats = append(mats, mat{total, nk[0], nk[1]})
			total += nk[0] * nk[1]
		}
	}
	src := randVec(r, 2048*768)
	for _, typ := range []kernels.DType{kernels.F32, kernels.F16, kernels.BF16} {
		if typ != kernels.F32 && !directGemm(typ, 6) {
			continue
		}
		var f []float32
		var h []byte
		bytes := func(n int) int { // of n values of typ
			size, err := typ.RowSize(n)
			if err != nil {
				b.Fatal(err)
			}
			return size
		}
		if typ == kernels.F32 {
			f = make([]float32, total)
			for i := 0; i < total; i += len(src) {
				copy(f[i:], src)
			}
		} else {
			h = make([]byte, bytes(total))
			if err := quant.Quantize(typ, h[:bytes(len(src))], src); err != nil {
				b.Fatal(err)
			}
			for i := bytes(len(src)); i < len(h); i += bytes(len(src)) {
				copy(h[i:], h[:bytes(len(src))])
			}
		}
		for _, m := range []int{1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64} {
			a, c := randVec(r, m*2048), make([]float32, m*2048)
			paths := []string{"gemm"}
			if typ != kernels.F32 && m <= 8 {
				paths = append(paths, "quant")
			}
			if typ != kernels.F32 && m >= 8 {
				paths = append(paths, "deqgemm")
			}
			for _, path := range paths {
				b.Run(fmt.Sprintf("%v/m%d/%s", typ, m, path), func(b *testing.B) {
					for b.Loop() {
						for _, x := range mats {
							wx := kernels.Tensor{Type: typ, Rows: x.n, Cols: x.k}
							if typ != kernels.F32 {
								wx.Data = h[bytes(x.off):bytes(x.off+x.n*x.k)]
							}
							switch {
							case typ == kernels.F32:
								MatMul(w, c, a, f[x.off:x.off+x.n*x.k], m, x.n, x.k)
							case path == "gemm":
								matMulDirect(w, c, a, wx.Data, typ, m, x.n, x.k)
							case path == "deqgemm":
								be.deqMatMul(c, a, wx, m)
							default:
								if err := be.q.MatMul(c, a, wx.Data, typ, m, x.n, x.k); err != nil {
									b.Fatal(err)
								}
							}
						}
					}
					b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/step")
					b.ReportMetric(2*float64(m*total)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
				})
			}
		}
	}
}
