//go:build !purego

package cpu

import "unsafe"

// The F16 K/V cache's kernels use the F16C conversions (VCVTPH2PS,
// VCVTPS2PH), which cpufeat's AVX2 level includes: AVX2 CPUs have had them
// since Haswell.

//go:noescape
func halfRowsF16C(dst *float32, src *uint16, lds, rows, n8, n int)

//go:noescape
func toHalfF16C(dst *uint16, src *float32, n8 int)

// simdHalfRows converts the first n0 values of each of rows rows of n
// halves, lds apart in src, into dst (rows×n floats, contiguous), and
// returns n0, a multiple of 8 (0 when the assembly kernels are off).
func simdHalfRows(dst []float32, src []uint16, lds, rows, n int) int {
	n8 := n &^ 7
	if !useAVX2 || n8 == 0 || rows == 0 {
		return 0
	}
	_, _ = dst[(rows-1)*n+n8-1], src[(rows-1)*lds+n8-1]
	halfRowsF16C(&dst[0], &src[0], lds, rows, n8, n)
	return n8
}

// simdToHalf rounds the first n0 values of src to halves in dst and
// returns n0, a multiple of 8 (0 when the assembly kernels are off).
func simdToHalf(dst []uint16, src []float32) int {
	n8 := len(src) &^ 7
	if !useAVX2 || n8 == 0 {
		return 0
	}
	_ = dst[n8-1]
	toHalfF16C(&dst[0], &src[0], n8)
	return n8
}

// prefetchHalf asks for rows rows of n halves at p, stride halves apart,
// to be brought into cache ahead of use.
func prefetchHalf(p []uint16, stride, rows, n int) {
	if !useAVX2 || rows == 0 || n == 0 {
		return
	}
	_ = p[(rows-1)*stride+n-1]
	prefetchBytes((*byte)(unsafe.Pointer(&p[0])), 2*stride, rows, 2*n)
}
