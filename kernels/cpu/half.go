package cpu

import "github.com/prefixd/prefixd/kernels/quant"

// halfRows sets dst, rows×n floats, to the values of rows rows of n
// halves in src, lds halves apart: one block's K or V vectors of one head
// of an F16 cache, made float32 for attention. The conversion is exact.
func halfRows(dst []float32, src []uint16, lds, rows, n int) {
	n0 := simdHalfRows(dst, src, lds, rows, n)
	if n0 == n {
		return
	}
	for r := range rows {
		s, d := src[r*lds+n0:r*lds+n], dst[r*n+n0:(r+1)*n]
		for i, h := range s {
			d[i] = quant.F16ToF32(h)
		}
	}
}

// toHalf sets dst[i] to src[i] rounded to the nearest half, ties to even
// (overflowing to infinity), as an F16 cache stores K and V.
func toHalf(dst []uint16, src []float32) {
	dst = dst[:len(src)]
	for i := simdToHalf(dst, src); i < len(src); i++ {
		dst[i] = quant.F32ToF16(src[i])
	}
}
