package quant

import (
	"encoding/binary"
	"math"
)

// Dequantize sets dst to the values of the row src of type t. src must be
// exactly the bytes of len(dst) values (whole blocks); any bit pattern is
// accepted and decoded by the format's formula, so a corrupt file gives
// wrong numbers, never a panic. It allocates nothing.
func Dequantize(t Type, dst []float32, src []byte) error {
	if err := checkRow(t, len(dst), len(src)); err != nil {
		return err
	}
	n := dequantSIMD(t, dst, src)
	dequantGo(t, dst[n:], src[n/t.BlockSize()*t.BlockBytes():])
	return nil
}

// FastDequantize reports whether Dequantize decodes rows of type t with
// vector kernels on this CPU and build (tens of Gvalues/s a core) rather
// than in Go (about one): whether dequantizing weights to multiply a
// small batch by them in float32 can pay.
func FastDequantize(t Type) bool {
	switch t {
	case F16, BF16, Q8_0:
		return haveSIMD
	case Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K:
		return have512
	}
	return false
}

// dequantGo is Dequantize's pure-Go decoder, checks done: the reference
// the assembly ones are tested against bit for bit, and the decoder of
// the rows (or their ends) they leave.
func dequantGo(t Type, dst []float32, src []byte) {
	switch t {
	case F32:
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
		}
	case F16:
		for i := range dst {
			dst[i] = half(src[2*i:])
		}
	case BF16:
		for i := range dst {
			dst[i] = BF16ToF32(binary.LittleEndian.Uint16(src[2*i:]))
		}
	case Q4_0, Q4_1, Q5_0, Q5_1, Q8_0:
		bb := t.BlockBytes()
		for b := range len(dst) / QK {
			dequantLegacy(t, dst[b*QK:(b+1)*QK], src[b*bb:(b+1)*bb])
		}
	case Q4_K, Q5_K:
		bb := t.BlockBytes()
		for b := range len(dst) / QKK {
			dequantQ45K(t, dst[b*QKK:(b+1)*QKK], src[b*bb:(b+1)*bb])
		}
	case Q6_K:
		for b := range len(dst) / QKK {
			dequantQ6K(dst[b*QKK:(b+1)*QKK], src[b*210:(b+1)*210])
		}
	case Q8_K:
		for b := range len(dst) / QKK {
			blk := src[b*292 : (b+1)*292]
			d := math.Float32frombits(binary.LittleEndian.Uint32(blk))
			for j, q := range blk[4 : 4+QKK] {
				dst[b*QKK+j] = d * float32(int8(q))
			}
		}
	}
}

// legacyQuants sets q[j] to the unsigned quant of value j of a Q4_0 ...
// Q5_1 block (0..15 or 0..31, before any offset) and returns d, the
// minimum m (Q4_1, Q5_1; else 0) and the offset subtracted from each quant
// (8, 16 or 0). Value j < 16 is the low nibble of qs[j], value j+16 its
// high nibble; bit j of the little-endian uint32 qh is the fifth bit of
// value j.
func legacyQuants(t Type, q *[QK]int32, blk []byte) (d, m float32, off int32) {
	var qh uint32
	var qs []byte
	d = half(blk)
	switch t {
	case Q4_0:
		qs, off = blk[2:18], 8
	case Q4_1:
		m, qs = half(blk[2:]), blk[4:20]
	case Q5_0:
		qh, qs, off = binary.LittleEndian.Uint32(blk[2:]), blk[6:22], 16
	case Q5_1:
		m, qh, qs = half(blk[2:]), binary.LittleEndian.Uint32(blk[4:]), blk[8:24]
	}
	for j := range QK / 2 {
		q[j] = int32(qs[j]&0xf) | int32(qh>>j&1)<<4
		q[j+16] = int32(qs[j]>>4) | int32(qh>>(j+16)&1)<<4
	}
	return d, m, off
}

func dequantLegacy(t Type, y []float32, blk []byte) {
	if t == Q8_0 {
		d := half(blk)
		for j, q := range blk[2 : 2+QK] {
			y[j] = d * float32(int8(q))
		}
		return
	}
	var q [QK]int32
	d, m, off := legacyQuants(t, &q, blk)
	for j := range QK {
		y[j] = float32(d*float32(q[j]-off)) + m // rounded, never fused, as the assembly does it
	}
}

// scaleMinK4 unpacks the 6-bit scale and minimum of sub-block j (0..7)
// from the 12 scale bytes of a Q4_K or Q5_K block: sub-blocks 0..3 keep
// theirs in the low six bits of bytes j and j+4; 4..7 split theirs into
// a nibble of byte j+4 and the top two bits of bytes j-4 and j.
func scaleMinK4(j int, s []byte) (sc, m uint8) {
	if j < 4 {
		return s[j] & 63, s[j+4] & 63
	}
	return s[j+4]&0xf | (s[j-4]>>6)<<4, s[j+4]>>4 | (s[j]>>6)<<4
}

// dequantQ45K decodes one Q4_K (d, dmin, scales[12], qs[128]) or Q5_K
// (d, dmin, scales[12], qh[32], qs[128]) block: each 64 values share 32
// bytes of qs, the first 32 in the low nibbles, the next 32 in the high;
// Q5_K's fifth bits for values 64i+l and 64i+32+l are bits 2i and 2i+1 of
// qh[l]. Value = d·sc·q − dmin·m.
func dequantQ45K(t Type, y []float32, blk []byte) {
	d, dmin := half(blk), half(blk[2:])
	scales := blk[4:16]
	var qh, qs []byte
	if t == Q4_K {
		qs = blk[16:144]
	} else {
		qh, qs = blk[16:48], blk[48:176]
	}
	for i := range 4 {
		sc1, m1 := scaleMinK4(2*i, scales)
		sc2, m2 := scaleMinK4(2*i+1, scales)
		d1, mm1 := d*float32(sc1), dmin*float32(m1)
		d2, mm2 := d*float32(sc2), dmin*float32(m2)
		for l := range 32 {
			q1, q2 := qs[32*i+l]&0xf, qs[32*i+l]>>4
			if qh != nil {
				q1 |= (qh[l] >> (2 * i) & 1) << 4
				q2 |= (qh[l] >> (2*i + 1) & 1) << 4
			}
			// Each product is rounded before the subtraction (no fused
			// multiply-add), as the assembly decoder does it.
			y[64*i+l] = float32(d1*float32(q1)) - mm1
			y[64*i+32+l] = float32(d2*float32(q2)) - mm2
		}
	}
}

// q6Quant returns the 6-bit quant (0..63) of value j of a Q6_K block: in
// each half of 128 values, ql[l] holds values l and l+64 in its nibbles,
// ql[l+32] values l+32 and l+96, and qh[l]'s bit pairs 0, 2, 4, 6 the top
// two bits of values l, l+32, l+64, l+96.
func q6Quant(ql, qh []byte, j int) int32 {
	h, r := j/128, j%128
	l, part := r%32, r/32 // part 0..3: which of the four values of ql/qh
	lo := ql[64*h+l+32*(part&1)]
	if part >= 2 {
		lo >>= 4
	}
	return int32(lo&0xf) | int32(qh[32*h+l]>>(2*part)&3)<<4
}

// dequantQ6K decodes one Q6_K block (ql[128], qh[64], int8 scales[16],
// d): value j = d·scales[j/16]·(q − 32).
func dequantQ6K(y []float32, blk []byte) {
	ql, qh, sc := blk[0:128], blk[128:192], blk[192:208]
	d := half(blk[208:])
	for j := range QKK {
		y[j] = d * float32(int8(sc[j/16])) * float32(q6Quant(ql, qh, j)-32)
	}
}
