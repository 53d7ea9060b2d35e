package kerneltest

import (
	"testing"

	"github.com/prefixd/prefixd/kernels/cuda/launch"
	"github.com/prefixd/prefixd/kernels/cuda/src"
)

// TensorCores runs tc_check in bf16 and f16 on random matrices (16x16 A,
// 16x8 B, rounded to the type) and compares both of its products, through
// ldmatrix and through ldmatrix.trans, with a scalar product in float64:
// cp.async, ldmatrix (plain and transposed) and mma.sync m16n8k16 with the
// fragment layouts PTX defines. The sums are exact in float64 and differ
// in float32 only by the order of the accumulation.
func TensorCores(t *testing.T, e *Env) {
	for _, typ := range []src.DType{src.BF16, src.F16} {
		a, b := e.randF32(16*16), e.randF32(16*8)
		for i := range a {
			a[i] = launch.Round(typ, a[i])
		}
		bt := make([]float32, 8*16)
		for i := range b {
			b[i] = launch.Round(typ, b[i])
			bt[(i%8)*16+i/8] = b[i] // B[k][n] at Bt[n][k]
		}
		out := e.alloc(4 * 2 * 16 * 8)
		e.launch(launch.TensorCoreCheck(e.d, out, e.upload(typ, a), e.upload(typ, bt), e.upload(typ, b), typ == src.F16))
		want := make([]float32, 16*8)
		for r := range 16 {
			for c := range 8 {
				var s float64
				for k := range 16 {
					s += float64(a[r*16+k]) * float64(b[k*8+c])
				}
				want[r*8+c] = float32(s)
			}
		}
		got := e.readFloats(out, 2*16*8)
		for i, name := range []string{"ldmatrix", "ldmatrix.trans"} {
			if err := RelErr(got[i*128:(i+1)*128], want); err > 1e-5 {
				t.Errorf("%v through %s: relative error %.3g (got %v, want %v)", typ, name, err, got[i*128 : (i+1)*128][:8], want[:8])
			}
		}
	}
}
