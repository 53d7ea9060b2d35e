package quant

import (
	"encoding/binary"
	"math"
)

// Quantize encodes the row src as type t into dst, which must be exactly
// the bytes of len(src) values (whole blocks). It follows ggml's reference
// quantizers (quantize_row_*_ref) for the block layouts and the choice of
// d and quants; for the K-quants it takes each sub-block's scale and
// minimum from its range instead of ggml's iterative search, so the bytes
// can differ from ggml's while decoding by the same formulas. It is meant
// for tests that build random-weight models, not for producing model files
// of the best quality. Values must be finite.
func Quantize(t Type, dst []byte, src []float32) error {
	if err := checkRow(t, len(src), len(dst)); err != nil {
		return err
	}
	bb, bs := t.BlockBytes(), t.BlockSize()
	for b := range len(src) / bs {
		x, y := src[b*bs:(b+1)*bs], dst[b*bb:(b+1)*bb]
		switch t {
		case F32:
			binary.LittleEndian.PutUint32(y, math.Float32bits(x[0]))
		case F16:
			putHalf(y, x[0])
		case BF16:
			binary.LittleEndian.PutUint16(y, F32ToBF16(x[0]))
		case Q8_0:
			quantQ8_0(y, x)
		case Q4_0, Q5_0:
			quantSymmetric(t, y, x)
		case Q4_1, Q5_1:
			quantAffine(t, y, x)
		case Q4_K, Q5_K:
			quantQ45K(t, y, x)
		case Q6_K:
			quantQ6K(y, x)
		case Q8_K:
			quantQ8K(y, x)
		}
	}
	return nil
}

// nearestInt rounds as ggml's nearest_int does (to nearest, ties to even).
func nearestInt(f float32) int32 { return int32(math.RoundToEven(float64(f))) }

// absMax returns the value of x with the largest magnitude, sign kept, and
// that magnitude.
func absMax(x []float32) (maxv, amax float32) {
	for _, v := range x {
		if a := float32(math.Abs(float64(v))); a > amax {
			amax, maxv = a, v
		}
	}
	return maxv, amax
}

func inverse(d float32) float32 {
	if d == 0 {
		return 0
	}
	return 1 / d
}

func quantQ8_0(y []byte, x []float32) {
	_, amax := absMax(x)
	d := amax / 127
	id := inverse(d)
	putHalf(y, d)
	for j, v := range x {
		y[2+j] = byte(int8(math.Round(float64(v * id))))
	}
}

// packLegacy writes 32 unsigned quants (4 or 5 bits) as qs nibbles, value
// j in the low nibble of qs[j] and value j+16 in its high nibble, with the
// fifth bits into the uint32 qh (bit j for value j) when qh is not nil.
func packLegacy(qs, qh []byte, q *[QK]uint8) {
	var h uint32
	for j := range QK / 2 {
		qs[j] = q[j]&0xf | q[j+16]<<4
		h |= uint32(q[j]>>4&1)<<j | uint32(q[j+16]>>4&1)<<(j+16)
	}
	if qh != nil {
		binary.LittleEndian.PutUint32(qh, h)
	}
}

// quantSymmetric is quantize_row_q4_0_ref and q5_0_ref: d = max/−8 (−16)
// where max is the signed value of largest magnitude, so it maps to quant
// 0, and q = min(15 (31), trunc(x/d + 8.5 (16.5))).
func quantSymmetric(t Type, y []byte, x []float32) {
	maxv, _ := absMax(x)
	levels := float32(8)
	if t == Q5_0 {
		levels = 16
	}
	d := maxv / -levels
	id := inverse(d)
	putHalf(y, d)
	var q [QK]uint8
	for j, v := range x {
		q[j] = uint8(min(2*levels-1, float32(int8(v*id+levels+0.5))))
	}
	if t == Q4_0 {
		packLegacy(y[2:18], nil, &q)
	} else {
		packLegacy(y[6:22], y[2:6], &q)
	}
}

// quantAffine is quantize_row_q4_1_ref and q5_1_ref: m = min(x),
// d = (max − min)/15 (31), q = min(15 (31), trunc((x − m)/d + 0.5)).
func quantAffine(t Type, y []byte, x []float32) {
	lo, hi := x[0], x[0]
	for _, v := range x {
		lo, hi = min(lo, v), max(hi, v)
	}
	top := float32(15)
	if t == Q5_1 {
		top = 31
	}
	d := (hi - lo) / top
	id := inverse(d)
	putHalf(y, d)
	putHalf(y[2:], lo)
	var q [QK]uint8
	for j, v := range x {
		q[j] = uint8(min(top, float32(int8((v-lo)*id+0.5))))
	}
	if t == Q4_1 {
		packLegacy(y[4:20], nil, &q)
	} else {
		packLegacy(y[8:24], y[4:8], &q)
	}
}

// quantQ45K follows quantize_row_q4_K_ref / q5_K_ref: eight sub-blocks of
// 32 values, each with a scale and a minimum quantized to 6 bits relative
// to the block's largest (d = max scale/63, dmin = max minimum/63), then
// the values requantized with the decoded scales.
func quantQ45K(t Type, y []byte, x []float32) {
	top := float32(15)
	if t == Q5_K {
		top = 31
	}
	var scales, mins [8]float32
	for j := range 8 {
		sub := x[32*j : 32*j+32]
		lo, hi := min(float32(0), sub[0]), sub[0]
		for _, v := range sub {
			lo, hi = min(lo, v), max(hi, v)
		}
		scales[j], mins[j] = (hi-lo)/top, -lo
	}
	maxScale, maxMin := float32(0), float32(0)
	for j := range 8 {
		maxScale, maxMin = max(maxScale, scales[j]), max(maxMin, mins[j])
	}
	invScale, invMin := inverse(maxScale/63), inverse(maxMin/63)
	sc := y[4:16]
	clear(sc)
	for j := range 8 {
		ls := uint8(min(63, nearestInt(invScale*scales[j])))
		lm := uint8(min(63, nearestInt(invMin*mins[j])))
		if j < 4 {
			sc[j], sc[j+4] = ls, lm
		} else {
			sc[j+4] = ls&0xf | (lm&0xf)<<4
			sc[j-4] |= (ls >> 4) << 6
			sc[j] |= (lm >> 4) << 6
		}
	}
	putHalf(y, maxScale/63)
	putHalf(y[2:], maxMin/63)
	d, dmin := half(y), half(y[2:])
	var q [QKK]uint8
	for j := range 8 {
		s, m := scaleMinK4(j, sc)
		ds := d * float32(s)
		if ds == 0 {
			continue
		}
		dm := dmin * float32(m)
		for l := range 32 {
			q[32*j+l] = uint8(max(0, min(int32(top), nearestInt((x[32*j+l]+dm)/ds))))
		}
	}
	qs := y[16:144]
	if t == Q5_K {
		qs = y[48:176]
		qh := y[16:48]
		clear(qh)
		for i := range 4 {
			for l := range 32 {
				qh[l] |= (q[64*i+l]>>4)<<(2*i) | (q[64*i+32+l]>>4)<<(2*i+1)
			}
		}
	}
	for i := range 4 {
		for l := range 32 {
			qs[32*i+l] = q[64*i+l]&0xf | (q[64*i+32+l]&0xf)<<4
		}
	}
}

// quantQ6K follows quantize_row_q6_K_ref: sixteen sub-blocks of 16 values,
// each scale (max/−32) quantized to a signed byte relative to the largest
// (d = 1/(−128/max scale)), values requantized to 0..63 around 32.
func quantQ6K(y []byte, x []float32) {
	var scales [16]float32
	maxScale, amaxScale := float32(0), float32(0)
	for ib := range 16 {
		m, _ := absMax(x[16*ib : 16*ib+16])
		scales[ib] = m / -32
		if a := float32(math.Abs(float64(scales[ib]))); a > amaxScale {
			amaxScale, maxScale = a, scales[ib]
		}
	}
	ql, qh, sc := y[0:128], y[128:192], y[192:208]
	clear(y)
	if amaxScale == 0 {
		return
	}
	iscale := -128 / maxScale
	putHalf(y[208:], 1/iscale)
	d := half(y[208:])
	var q [QKK]uint8
	for ib := range 16 {
		s := int8(min(127, nearestInt(iscale*scales[ib])))
		sc[ib] = byte(s)
		ds := d * float32(s)
		if ds == 0 {
			continue
		}
		for l := range 16 {
			q[16*ib+l] = uint8(max(-32, min(31, nearestInt(x[16*ib+l]/ds))) + 32)
		}
	}
	for h := range 2 {
		for l := range 32 {
			v := q[128*h+l : 128*h+128]
			ql[64*h+l] = v[0]&0xf | (v[64]&0xf)<<4
			ql[64*h+l+32] = v[32]&0xf | (v[96]&0xf)<<4
			qh[32*h+l] = v[0]>>4 | (v[32]>>4)<<2 | (v[64]>>4)<<4 | (v[96]>>4)<<6
		}
	}
}

// quantQ8K follows quantize_row_q8_K_ref: d = max/−127 for the signed
// value of largest magnitude, q = round(x/d), and bsums, the sums of each
// 16 quants, that the K-quant dot products use for their offsets.
func quantQ8K(y []byte, x []float32) {
	clear(y)
	var q [QKK]int8
	d := q8KBlock(&q, x)
	binary.LittleEndian.PutUint32(y, math.Float32bits(d))
	for j, v := range q {
		y[4+j] = byte(v)
	}
	for k := range 16 {
		var s int16
		for _, v := range q[16*k : 16*k+16] {
			s += int16(v)
		}
		binary.LittleEndian.PutUint16(y[4+QKK+2*k:], uint16(s))
	}
}

// q8KBlock quantizes 256 values as Q8_K does and returns d.
func q8KBlock(q *[QKK]int8, x []float32) float32 {
	maxv, amax := absMax(x[:QKK])
	if amax == 0 {
		clear(q[:])
		return 0
	}
	iscale := -127 / maxv
	for j, v := range x[:QKK] {
		q[j] = int8(min(127, nearestInt(iscale*v)))
	}
	return 1 / iscale
}
