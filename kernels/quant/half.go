package quant

import (
	"encoding/binary"
	"math"
)

// f16Table maps every IEEE 754 half-precision bit pattern to its float32
// value: the dequantizers read one or two halves per block, and F16
// weights one per value, so a lookup beats the bit arithmetic.
var f16Table = func() *[1 << 16]float32 {
	var t [1 << 16]float32
	for i := range t {
		t[i] = halfToFloat(uint16(i))
	}
	return &t
}()

// F16ToF32 converts an IEEE 754 half-precision value (as its bits) to
// float32; the conversion is exact.
func F16ToF32(h uint16) float32 { return f16Table[h] }

// halfToFloat converts by rebuilding the float32 bit pattern: exponent
// rebias for normals, normalisation of subnormals, Inf kept, and NaN kept
// with its payload but made quiet, as the F16C instruction VCVTPH2PS
// (which the assembly kernels use) makes it.
func halfToFloat(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f && mant != 0: // NaN
		return math.Float32frombits(sign | 0xff<<23 | 1<<22 | mant<<13)
	case exp == 0x1f: // Inf
		return math.Float32frombits(sign | 0xff<<23)
	case exp == 0 && mant == 0:
		return math.Float32frombits(sign)
	case exp == 0: // subnormal: mant × 2^-24
		f := float32(mant) * (1.0 / (1 << 24))
		if sign != 0 {
			f = -f
		}
		return f
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
}

// F32ToF16 converts f to the nearest half-precision value (ties to even),
// overflowing to infinity and underflowing through the subnormals to zero,
// as the F16C instruction and ggml's GGML_FP32_TO_FP16 do.
func F32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23) & 0xff
	mant := b & 0x7fffff
	if exp == 0xff { // Inf or NaN (a NaN keeps a mantissa bit set)
		if mant != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	}
	e := exp - 127 + 15
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e <= 0 {
		if e < -10 {
			return sign
		}
		// Subnormal: shift the mantissa with its implicit bit into place.
		m := mant | 0x800000
		shift := uint32(14 - e)
		half := m >> shift
		rem := m & (1<<shift - 1)
		mid := uint32(1) << (shift - 1)
		if rem > mid || (rem == mid && half&1 == 1) {
			half++
		}
		return sign | uint16(half)
	}
	half := uint32(e)<<10 | mant>>13
	rem := mant & 0x1fff
	if rem > 0x1000 || (rem == 0x1000 && half&1 == 1) {
		half++ // may carry into the exponent, up to Inf: still correct
	}
	return sign | uint16(half)
}

// BF16ToF32 converts a bfloat16 (the top half of a float32's bits) to
// float32; the conversion is exact.
func BF16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// F32ToBF16 rounds f to the nearest bfloat16 (ties to even), keeping NaN a
// NaN, as ggml's GGML_FP32_TO_BF16 does.
func F32ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 0x40
	}
	return uint16((b + 0x7fff + (b>>16)&1) >> 16)
}

// half reads the little-endian half at b[0:2] as float32.
func half(b []byte) float32 { return f16Table[binary.LittleEndian.Uint16(b)] }

// putHalf writes f as a little-endian half at b[0:2].
func putHalf(b []byte, f float32) { binary.LittleEndian.PutUint16(b, F32ToF16(f)) }
