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
func dequantQ4KAVX512(dst *float32, src *byte, sm *float32, nb int)

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
		dequantQ4K(dst, src)
	case kernels.Q6_K:
		if n%256 != 0 || len(src) != n/256*210 {
			return false
		}
		dequantQ6KAVX512(&dst[0], &src[0], n/256)
	}
	return true
}

// q4kChunk is how many Q4_K blocks dequantQ4K unpacks the scales of per
// assembly call.
const q4kChunk = 32

// dequantQ4K sets dst to the values of the whole Q4_K blocks src (lengths
// checked): the 6-bit sub-block scales and minimums unpacked here, the
// rest in the assembly.
func dequantQ4K(dst []float32, src []byte) {
	var sm [q4kChunk * 16]float32
	nb := len(src) / 144
	for b0 := 0; b0 < nb; b0 += q4kChunk {
		b1 := min(b0+q4kChunk, nb)
		for b := b0; b < b1; b++ {
			scales := src[b*144+4 : b*144+16]
			for j := range 8 {
				sc, m := scaleMinK4(j, scales)
				sm[(b-b0)*16+2*j], sm[(b-b0)*16+2*j+1] = float32(sc), float32(m)
			}
		}
		dequantQ4KAVX512(&dst[b0*256], &src[b0*144], &sm[0], b1-b0)
	}
}

// scaleMinK4 unpacks the 6-bit scale and minimum of sub-block j (0..7)
// from the 12 scale bytes s of a Q4_K block, as ggml's get_scale_min_k4
// (and kernels/quant's unexported twin) does: sub-blocks 0..3 keep theirs
// in the low six bits of bytes j and j+4; 4..7 split theirs into a nibble
// of byte j+4 and the top two bits of bytes j-4 and j.
func scaleMinK4(j int, s []byte) (sc, m uint8) {
	if j < 4 {
		return s[j] & 63, s[j+4] & 63
	}
	return s[j+4]&0xf | (s[j-4]>>6)<<4, s[j+4]>>4 | (s[j]>>6)<<4
}

// simdDequantType reports whether simdDequant converts rows of type t.
func simdDequantType(t kernels.DType) bool {
	return useAVX512 && (t == kernels.F16 || t == kernels.BF16 || t == kernels.Q8_0 || t == kernels.Q4_K || t == kernels.Q6_K)
}
