package quant

import (
	"encoding/binary"
	"math"
)

// dotRow returns the dot product of the weight row w (in values of type t)
// with the activation row a, using the assembly kernel when there is one.
func dotRow(t Type, w []byte, a *actRow) float32 {
	if v, ok := dotSIMD(t, w, a); ok {
		return v
	}
	return dotGo(t, w, a)
}

// dotGo is the pure-Go dot product of every type: the reference the
// assembly kernels are tested against, and the kernel without AVX2.
func dotGo(t Type, w []byte, a *actRow) float32 {
	switch t {
	case F32:
		var s float32
		for i, x := range a.x {
			s += math.Float32frombits(binary.LittleEndian.Uint32(w[4*i:])) * x
		}
		return s
	case F16:
		var s float32
		for i, x := range a.x {
			s += f16Table[binary.LittleEndian.Uint16(w[2*i:])] * x
		}
		return s
	case BF16:
		var s float32
		for i, x := range a.x {
			s += BF16ToF32(binary.LittleEndian.Uint16(w[2*i:])) * x
		}
		return s
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

func dotQ8_0Go(w []byte, a *actRow) float32 {
	var sum float32
	for b, ad := range a.d {
		blk, q := w[b*34:(b+1)*34], a.qs[b*QK:(b+1)*QK]
		var isum int32
		for j, v := range blk[2:34] {
			isum += int32(int8(v)) * int32(q[j])
		}
		sum += half(blk) * ad * float32(isum)
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
		aq := a.qs[b*QK : (b+1)*QK]
		var isum int32
		for j := range QK {
			isum += (q[j] - off) * int32(aq[j])
		}
		sum += d*ad*float32(isum) + m*a.s[b]
	}
	return sum
}

// dotQ45KGo: per block, d·d_a·Σ_j sc_j·Σ q·q_a − dmin·d_a·Σ_j m_j·Σ q_a,
// the second sum read from the activations' 16-value sums.
func dotQ45KGo(t Type, w []byte, a *actRow) float32 {
	bb := t.BlockBytes()
	var sum float32
	for b, ad := range a.d {
		blk := w[b*bb : (b+1)*bb]
		scales := blk[4:16]
		var qh, qs []byte
		if t == Q4_K {
			qs = blk[16:144]
		} else {
			qh, qs = blk[16:48], blk[48:176]
		}
		aq, bs := a.qs[b*QKK:(b+1)*QKK], a.bs[b*16:(b+1)*16]
		var isum, msum int32
		for i := range 4 {
			var s1, s2 int32
			for l := range 32 {
				q1, q2 := int32(qs[32*i+l]&0xf), int32(qs[32*i+l]>>4)
				if qh != nil {
					q1 |= int32(qh[l]>>(2*i)&1) << 4
					q2 |= int32(qh[l]>>(2*i+1)&1) << 4
				}
				s1 += q1 * int32(aq[64*i+l])
				s2 += q2 * int32(aq[64*i+32+l])
			}
			sc1, m1 := scaleMinK4(2*i, scales)
			sc2, m2 := scaleMinK4(2*i+1, scales)
			isum += int32(sc1)*s1 + int32(sc2)*s2
			msum += int32(m1)*int32(bs[4*i]+bs[4*i+1]) + int32(m2)*int32(bs[4*i+2]+bs[4*i+3])
		}
		sum += half(blk)*ad*float32(isum) - half(blk[2:])*ad*float32(msum)
	}
	return sum
}

func dotQ6KGo(w []byte, a *actRow) float32 {
	var sum float32
	for b, ad := range a.d {
		blk := w[b*210 : (b+1)*210]
		ql, qh, sc := blk[0:128], blk[128:192], blk[192:208]
		aq := a.qs[b*QKK : (b+1)*QKK]
		var isum int32
		for k := range 16 {
			var s int32
			for j := 16 * k; j < 16*k+16; j++ {
				s += (q6Quant(ql, qh, j) - 32) * int32(aq[j])
			}
			isum += int32(int8(sc[k])) * s
		}
		sum += half(blk[208:]) * ad * float32(isum)
	}
	return sum
}
