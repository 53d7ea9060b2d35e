package quant

import (
	"encoding/binary"
	"math"
)

// dotRows sets dst[i] to the dot product of weight row i of w (rows of
// rowBytes bytes) with the activation row a.
func dotRows(t Type, w []byte, rowBytes int, a *actRow, dst []float32) {
	if dotRowsSIMD(t, w, a, dst) {
		return
	}
	for i := range dst {
		dst[i] = dotGo(t, w[i*rowBytes:(i+1)*rowBytes], a)
	}
}

// dotGo is the pure-Go dot product of every type: the reference the
// assembly kernels are tested against, and the kernel without AVX2. The
// loops index fixed-size arrays so the compiler drops their bounds checks,
// and keep several sums so no add waits on the one before.
func dotGo(t Type, w []byte, a *actRow) float32 {
	switch t {
	case F32, F16, BF16:
		return dotFloatGo(t, w, a.x)
	case Q8_0:
		return dotQ8_0Go(w, a)
	case Q4_0, Q4_1, Q5_0, Q5_1:
		return dotLegacyGo(t, w, a)
	case Q4_K, Q5_K:
		return dotQ45KGo(t, w, a)
	case Q6_K:
		return dotQ6KGo(w, a)
	}
	panic("quant: no dot product for " + t.String())
}

// floatAt returns value i of a float row of type t.
func floatAt(t Type, w []byte, i int) float32 {
	switch t {
	case F32:
		return math.Float32frombits(binary.LittleEndian.Uint32(w[4*i:]))
	case F16:
		return f16Table[binary.LittleEndian.Uint16(w[2*i:])]
	}
	return BF16ToF32(binary.LittleEndian.Uint16(w[2*i:]))
}

func dotFloatGo(t Type, w []byte, x []float32) float32 {
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(x); i += 4 {
		s0 += floatAt(t, w, i) * x[i]
		s1 += floatAt(t, w, i+1) * x[i+1]
		s2 += floatAt(t, w, i+2) * x[i+2]
		s3 += floatAt(t, w, i+3) * x[i+3]
	}
	for ; i < len(x); i++ {
		s0 += floatAt(t, w, i) * x[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// dot32 is the integer dot product of 32 weight quants (int8 values) and
// 32 activation quants.
func dot32(q *[QK]int32, a *[QK]int8) int32 {
	var s0, s1, s2, s3 int32
	for j := 0; j < QK; j += 4 {
		s0 += q[j] * int32(a[j])
		s1 += q[j+1] * int32(a[j+1])
		s2 += q[j+2] * int32(a[j+2])
		s3 += q[j+3] * int32(a[j+3])
	}
	return s0 + s1 + s2 + s3
}

func dotQ8_0Go(w []byte, a *actRow) float32 {
	var sum float32
	for b, ad := range a.d {
		blk := (*[34]byte)(w[b*34:])
		qa := (*[QK]int8)(a.qs[b*QK:])
		var s0, s1, s2, s3 int32
		for j := 0; j < QK; j += 4 {
			s0 += int32(int8(blk[2+j])) * int32(qa[j])
			s1 += int32(int8(blk[3+j])) * int32(qa[j+1])
			s2 += int32(int8(blk[4+j])) * int32(qa[j+2])
			s3 += int32(int8(blk[5+j])) * int32(qa[j+3])
		}
		sum += half(blk[:]) * ad * float32(s0+s1+s2+s3)
	}
	return sum
}

// dotLegacyGo: each block contributes d_w·d_a·Σ(q−off)·q_a, plus m·d_a·Σq_a
// for the types with a minimum.
func dotLegacyGo(t Type, w []byte, a *actRow) float32 {
	bb := t.BlockBytes()
	var sum float32
	var q [QK]int32
	for b, ad := range a.d {
		d, m, off := legacyQuants(t, &q, w[b*bb:(b+1)*bb])
		for j := range q {
			q[j] -= off
		}
		sum += d*ad*float32(dot32(&q, (*[QK]int8)(a.qs[b*QK:]))) + m*a.s[b]
	}
	return sum
}

// dotQ45KGo: per block, d·d_a·Σ_j sc_j·Σ q·q_a − dmin·d_a·Σ_j m_j·Σ q_a,
// the second sum read from the activations' 16-value sums.
func dotQ45KGo(t Type, w []byte, a *actRow) float32 {
	bb := t.BlockBytes()
	var sum float32
	var lo, hi [QK]int32
	for b, ad := range a.d {
		blk := w[b*bb : (b+1)*bb]
		scales := blk[4:16]
		var qh *[32]byte
		qs := (*[128]byte)(blk[16:])
		if t == Q5_K {
			qh, qs = (*[32]byte)(blk[16:]), (*[128]byte)(blk[48:])
		}
		aq, bs := (*[QKK]int8)(a.qs[b*QKK:]), (*[16]int16)(a.bs[b*16:])
		var isum, msum int32
		for i := range 4 {
			for l := range 32 {
				lo[l], hi[l] = int32(qs[32*i+l]&0xf), int32(qs[32*i+l]>>4)
			}
			if qh != nil {
				for l := range 32 {
					lo[l] |= int32(qh[l]>>(2*i)&1) << 4
					hi[l] |= int32(qh[l]>>(2*i+1)&1) << 4
				}
			}
			sc1, m1 := scaleMinK4(2*i, scales)
			sc2, m2 := scaleMinK4(2*i+1, scales)
			isum += int32(sc1)*dot32(&lo, (*[QK]int8)(aq[64*i:])) + int32(sc2)*dot32(&hi, (*[QK]int8)(aq[64*i+32:]))
			msum += int32(m1)*int32(bs[4*i]+bs[4*i+1]) + int32(m2)*int32(bs[4*i+2]+bs[4*i+3])
		}
		sum += half(blk)*ad*float32(isum) - half(blk[2:])*ad*float32(msum)
	}
	return sum
}

// dotQ6KGo decodes each half of a block (128 values) into four runs of 32
// quants, as q6Quant lays them out, and multiplies each 16 by its scale.
func dotQ6KGo(w []byte, a *actRow) float32 {
	var sum float32
	var q [4][QK]int32
	for b, ad := range a.d {
		blk := (*[210]byte)(w[b*210:])
		aq := (*[QKK]int8)(a.qs[b*QKK:])
		var isum int32
		for h := range 2 {
			ql, qh := (*[64]byte)(blk[64*h:]), (*[32]byte)(blk[128+32*h:])
			for l := range 32 {
				q[0][l] = int32(ql[l]&0xf|(qh[l]&3)<<4) - 32
				q[1][l] = int32(ql[l+32]&0xf|(qh[l]>>2&3)<<4) - 32
				q[2][l] = int32(ql[l]>>4|(qh[l]>>4&3)<<4) - 32
				q[3][l] = int32(ql[l+32]>>4|(qh[l]>>6&3)<<4) - 32
			}
			for p := range 4 {
				qa := (*[QK]int8)(aq[128*h+32*p:])
				var s0, s1 int32
				for l := range 16 {
					s0 += q[p][l] * int32(qa[l])
					s1 += q[p][16+l] * int32(qa[16+l])
				}
				isum += int32(int8(blk[192+8*h+2*p]))*s0 + int32(int8(blk[192+8*h+2*p+1]))*s1
			}
		}
		sum += half(blk[208:]) * ad * float32(isum)
	}
	return sum
}
