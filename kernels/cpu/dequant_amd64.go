//go:build !purego

package cpu

import (
	"encoding/binary"

	"github.com/prefixd/prefixd/kernels"
	"github.com/prefixd/prefixd/kernels/quant"
)

//go:noescape
func dequantF16AVX512(dst *float32, src *byte, n16 int)

//go:noescape
func dequantBF16AVX512(dst *float32, src *byte, n16 int)

//go:noescape
func dequantQ8_0AVX512(dst *float32, src *byte, nb int)

//go:noescape
func dequantQ4KAVX512(dst *float32, src *byte, dm *float32, nb int)

//go:noescape
func dequantQ6KAVX512(dst *float32, src *byte, ds *float32, nb int)

// simdDequant sets dst to the values of the weight row src of type t with
// the AVX-512 converters and reports whether it did: false when they are
// off, t is not F16, BF16, Q8_0, Q4_K or Q6_K, or the lengths are not whole blocks of
// t (16 values for F16 and BF16) that match, for quant.Dequantize to
// handle or report.
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
		dequantQ6K(dst, src)
	}
	return true
}

// q4kChunk is how many K-quant blocks dequantQ4K and dequantQ6K prepare
// the scales of per assembly call.
const q4kChunk = 32

// dequantQ6K sets dst to the values of the whole Q6_K blocks src (lengths
// checked): d·scale for each 16 values here, the quants in the assembly.
func dequantQ6K(dst []float32, src []byte) {
	var ds [q4kChunk * 16]float32
	nb := len(src) / 210
	for b0 := 0; b0 < nb; b0 += q4kChunk {
		b1 := min(b0+q4kChunk, nb)
		for b := b0; b < b1; b++ {
			blk := src[b*210 : (b+1)*210]
			d := quant.F16ToF32(binary.LittleEndian.Uint16(blk[208:]))
			for i, sc := range blk[192:208] {
				ds[(b-b0)*16+i] = d * float32(int8(sc))
			}
		}
		dequantQ6KAVX512(&dst[b0*256], &src[b0*210], &ds[0], b1-b0)
	}
}

// dequantQ4K sets dst to the values of the whole Q4_K blocks src (lengths
// checked): the sub-block scales and minimums unpacked and multiplied by
// d and dmin here, the quants in the assembly.
func dequantQ4K(dst []float32, src []byte) {
	var dm [q4kChunk * 16]float32
	nb := len(src) / 144
	for b0 := 0; b0 < nb; b0 += q4kChunk {
		b1 := min(b0+q4kChunk, nb)
		for b := b0; b < b1; b++ {
			blk := src[b*144 : (b+1)*144]
			d := quant.F16ToF32(binary.LittleEndian.Uint16(blk))
			dmin := quant.F16ToF32(binary.LittleEndian.Uint16(blk[2:]))
			for j := range 8 {
				sc, m := scaleMinK4(j, blk[4:16])
				dm[(b-b0)*16+2*j], dm[(b-b0)*16+2*j+1] = d*float32(sc), dmin*float32(m)
			}
		}
		dequantQ4KAVX512(&dst[b0*256], &src[b0*144], &dm[0], b1-b0)
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
