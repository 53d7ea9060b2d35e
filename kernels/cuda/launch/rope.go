package launch

import (
	"errors"
	"fmt"
	"math"
)

// RoPETable returns the cosines and sines RoPEAppendKV reads: float32
// [positions][headDim/2][cos, sin], pair i at position p turned by
// p·theta^(-2i/headDim)/factors[i] radians (factors nil: all 1), each
// computed in float64 and rounded once, as the CPU backend computes its
// angles. Upload it as float32s.
func RoPETable(positions, headDim int, theta float32, factors []float32) []float32 {
	half := headDim / 2
	freq := make([]float64, half)
	for i := range freq {
		freq[i] = math.Pow(float64(theta), -float64(2*i)/float64(headDim))
		if factors != nil {
			freq[i] /= float64(factors[i])
		}
	}
	cs := make([]float32, positions*headDim)
	for p := range positions {
		row := cs[p*headDim : (p+1)*headDim]
		for i, f := range freq {
			sin, cos := math.Sincos(float64(p) * f)
			row[2*i], row[2*i+1] = float32(cos), float32(sin)
		}
	}
	return cs
}

// RoPEKV describes one layer's RoPEAppendKV over a step.
type RoPEKV struct {
	QOut   Ptr // float32 [rows][NHeads·HeadDim]: the rotated queries; may be Q when LDQ is NHeads·HeadDim
	Q      Ptr // float32 queries, NHeads heads a row, row stride LDQ floats
	LDQ    int
	K, V   Ptr // float32 keys and values, KVHeads heads a row, row stride LDKV floats
	LDKV   int
	NHeads int
	Layer  int
	Layout RoPELayout
	Table  Ptr // RoPETable for at least MaxPos+1 positions of the step, uploaded
	// QNorm and KNorm, when set (both or neither), are the per-head q and
	// k norms' weights (float32 [HeadDim] each): every query and key head
	// is normalised as RMSNormF32 does a row, with Eps, before its
	// rotation.
	QNorm, KNorm Ptr
	Eps          float32
}

// MaxNormHeads is the most query and key heads a row may have, together,
// for RoPEAppendKV to normalise them (the kernel's ROPE_NORM_HEADS).
const MaxNormHeads = 256

// RoPEAppendKV rotates each row's query heads into a.QOut and its key
// heads by the row's position, as RoPE does, and stores the rotated key
// and the value in the row's slot of layer a.Layer, as AppendKV does:
// three launches in one (five with a.QNorm and a.KNorm, which replace
// two RMSNormF32 launches over the heads), its angles read from a.Table.
// Q, K and V may be the column ranges of one fused QKV product (LDQ =
// LDKV, its width).
func RoPEAppendKV(d Device, kv Ptr, lay KVLayout, st Step, a RoPEKV) error {
	if err := errors.Join(lay.layerOK(a.Layer), st.check(), positive("query heads", a.NHeads)); err != nil {
		return err
	}
	hd, kd := lay.HeadDim, lay.KVDim()
	if hd%2 != 0 || a.NHeads*hd > a.LDQ || kd > a.LDKV {
		return fmt.Errorf("%w: %d query heads in rows of %d, %d KV heads of %d in rows of %d (head dim must be even)",
			ErrShape, a.NHeads, a.LDQ, lay.KVHeads, hd, a.LDKV)
	}
	if (a.QNorm == 0) != (a.KNorm == 0) || a.QNorm != 0 && a.NHeads+lay.KVHeads > MaxNormHeads {
		return fmt.Errorf("%w: q norm %#x and k norm %#x over %d query and %d key heads (both or neither norm, at most %d heads)",
			ErrShape, a.QNorm, a.KNorm, a.NHeads, lay.KVHeads, MaxNormHeads)
	}
	halves := 0
	if a.Layout == Halves {
		halves = 1
	}
	return d.Launch("rope_kv_append", row(st.Rows), threads(rowThreads), P(a.QOut), P(a.Q), I(a.LDQ), P(a.K), P(a.V), I(a.LDKV),
		P(a.Table), P(kv), L(lay.BlockElems()), L(lay.LayerOffset(a.Layer)), P(st.RowPos), P(st.RowBT), P(st.BT),
		I(lay.BlockSize), I(a.NHeads), I(lay.KVHeads), I(hd), I(halves), P(a.QNorm), P(a.KNorm), F(a.Eps))
}
