package launch

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/prefixd/prefixd/kernels/cuda/src"
)

// ToBF16 rounds f to bfloat16 bits, to nearest even like the GPU's
// cvt.rn.bf16.f32; a NaN stays a NaN.
func ToBF16(f float32) uint16 {
	u := math.Float32bits(f)
	if u&0x7fffffff > 0x7f800000 {
		return uint16(u>>16 | 0x40)
	}
	u += 0x7fff + (u>>16)&1
	return uint16(u >> 16)
}

// FromBF16 widens bfloat16 bits to a float32, exactly.
func FromBF16(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// ToF16 rounds f to IEEE half bits, to nearest even like the GPU's
// cvt.rn.f16.f32: values from 65,520 up become infinity, values below
// 2^-14 become subnormals (or zero below 2^-25).
func ToF16(f float32) uint16 {
	x := math.Float32bits(f)
	sign, ax := uint16(x>>16)&0x8000, x&0x7fffffff
	switch {
	case ax > 0x7f800000:
		return sign | 0x7e00
	case ax >= 0x477ff000:
		return sign | 0x7c00
	case ax < 0x38800000:
		e := int(ax >> 23)
		if e < 102 {
			return sign
		}
		m, shift := ax&0x7fffff|0x800000, uint(126-e)
		q, rem, half := m>>shift, m&(1<<shift-1), uint32(1)<<(shift-1)
		if rem > half || rem == half && q&1 == 1 {
			q++
		}
		return sign | uint16(q)
	}
	r := ax - 0x38000000
	r += 0xfff + (r>>13)&1
	return sign | uint16(r>>13)
}

// FromF16 widens IEEE half bits to a float32, exactly.
func FromF16(h uint16) float32 {
	sign, e, m := uint32(h&0x8000)<<16, uint32(h>>10)&0x1f, uint32(h&0x3ff)
	switch {
	case e == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | m<<13)
	case e == 0:
		v := float32(m) * 0x1p-24
		if sign != 0 {
			return -v
		}
		return v
	}
	return math.Float32frombits(sign | (e+112)<<23 | m<<13)
}

// Encode writes f into dst as little-endian elements of t, rounding as
// the GPU does. dst must be len(f)·t.Size() bytes.
func Encode(t src.DType, dst []byte, f []float32) {
	if len(dst) != len(f)*t.Size() {
		panic(fmt.Sprintf("launch: Encode of %d floats into %d bytes of %v", len(f), len(dst), t))
	}
	for i, v := range f {
		switch t {
		case BF16:
			binary.LittleEndian.PutUint16(dst[2*i:], ToBF16(v))
		case F16:
			binary.LittleEndian.PutUint16(dst[2*i:], ToF16(v))
		default:
			binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(v))
		}
	}
}

// Decode reads len(dst) little-endian elements of t from b into dst.
func Decode(t src.DType, dst []float32, b []byte) {
	if len(b) != len(dst)*t.Size() {
		panic(fmt.Sprintf("launch: Decode of %d bytes of %v into %d floats", len(b), t, len(dst)))
	}
	for i := range dst {
		switch t {
		case BF16:
			dst[i] = FromBF16(binary.LittleEndian.Uint16(b[2*i:]))
		case F16:
			dst[i] = FromF16(binary.LittleEndian.Uint16(b[2*i:]))
		default:
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
	}
}

// Round returns f as it reads back after a round trip through t.
func Round(t src.DType, f float32) float32 {
	switch t {
	case BF16:
		return FromBF16(ToBF16(f))
	case F16:
		return FromF16(ToF16(f))
	}
	return f
}

// The element types, re-exported so callers of this package need not
// import src for them.
const (
	BF16 = src.BF16
	F16  = src.F16
	F32  = src.F32
)
