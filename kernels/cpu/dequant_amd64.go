//go:build !purego

package cpu

import "github.com/prefixd/prefixd/kernels"

//go:noescape
func dequantF16AVX512(dst *float32, src *byte, n16 int)

//go:noescape
func dequantBF16AVX512(dst *float32, src *byte, n16 int)

//go:noescape
func dequantQ8_0AVX512(dst *float32, src *byte, nb int)

//go:noescape
func dequantQ4KAVX512(dst *float32, src *byte, nb int)

//go:noescape
func dequantQ6KAVX512(dst *float32, src *byte, nb int)

// simdDequant sets dst to the values of the weight row src of type t with
// the AVX-512 converters and reports whether it did: false when they are
// off, t is not one they convert (simdDequantType), or the lengths are
// not whole blocks of t (16 values for F16 and BF16) that match, for
// quant.Dequantize to handle or report.
func simdDequant(t kernels.DType, dst []float32, src []byte) bool {
	n := len(dst)
	if !simdDequantType(t) || n == 0 {
		return false
	}
	switch t {
	case kernels.F16, kernels.BF16:
		if n%16 != 0 || len(src) != 2*n {
			return false
		}
		if t == kernels.F16 {
			dequantF16AVX512(&dst[0], &src[0], n/16)
		} else {
			dequantBF16AVX512(&dst[0], &src[0], n/16)
		}
	case kernels.Q8_0:
		if n%32 != 0 || len(src) != n/32*34 {
			return false
		}
		dequantQ8_0AVX512(&dst[0], &src[0], n/32)
	case kernels.Q4_K:
		if n%256 != 0 || len(src) != n/256*144 {
			return false
		}
		dequantQ4KAVX512(&dst[0], &src[0], n/256)
	case kernels.Q6_K:
		if n%256 != 0 || len(src) != n/256*210 {
			return false
		}
		dequantQ6KAVX512(&dst[0], &src[0], n/256)
	}
	return true
}

// simdDequantType reports whether simdDequant converts rows of type t.
func simdDequantType(t kernels.DType) bool {
	return useAVX512 && (t == kernels.F16 || t == kernels.BF16 || t == kernels.Q8_0 || t == kernels.Q4_K || t == kernels.Q6_K)
}
