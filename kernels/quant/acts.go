package quant

import (
	"math"
	"slices"
)

// acts is a batch of activation rows prepared for one weight type: left in
// float32 for the float weight types, quantized per block of 32 to 8 bits
// for Q4_0 ... Q8_0 (ggml's Q8_0, with Q8_1's block sums), per block of
// 256 for the K-quants (ggml's Q8_K). The quants of row r are
// qs[r*in:(r+1)*in]; the per-block fields follow at the same stride.
type acts struct {
	x  []float32 // float weights: the caller's rows, not copied
	qs []int8
	d  []float32 // per block: the scale
	s  []float32 // Q8_0 family: d·Σqs per block, for Q4_1/Q5_1's minimums
	bs []int16   // Q8_K: Σqs per 16 values, for the K-quants' offsets
}

// actRow is one row of acts.
type actRow struct {
	x  []float32
	qs []int8
	d  []float32
	s  []float32
	bs []int16
}

func (a *acts) row(r, in int) actRow {
	switch {
	case a.x != nil:
		return actRow{x: a.x[r*in : (r+1)*in]}
	case a.bs != nil:
		nb := in / QKK
		return actRow{qs: a.qs[r*in : (r+1)*in], d: a.d[r*nb : (r+1)*nb], bs: a.bs[r*in/16 : (r+1)*in/16]}
	}
	nb := in / QK
	return actRow{qs: a.qs[r*in : (r+1)*in], d: a.d[r*nb : (r+1)*nb], s: a.s[r*nb : (r+1)*nb]}
}

// actBlock is the block size activations take for weights of type t: 0
// for the float types, which use them as they are.
func actBlock(t Type) int {
	switch t {
	case F32, F16, BF16:
		return 0
	case Q4_K, Q5_K, Q6_K:
		return QKK
	}
	return QK
}

// prepare sizes a for n values (rows×in) of activations for type t,
// reusing its buffers, and points it at x for the float types.
func (a *acts) prepare(t Type, x []float32, n int) {
	bs := actBlock(t)
	if bs == 0 {
		a.x = x[:n]
		return
	}
	a.x = nil
	a.qs = slices.Grow(a.qs[:0], n)[:n]
	a.d = slices.Grow(a.d[:0], n/bs)[:n/bs]
	if bs == QKK {
		a.bs = slices.Grow(a.bs[:0], n/16)[:n/16]
		a.s = a.s[:0]
	} else {
		a.s = slices.Grow(a.s[:0], n/bs)[:n/bs]
		a.bs = nil
	}
}

// quantizeBlocks quantizes the blocks [lo, hi) of x (already prepared).
func (a *acts) quantizeBlocks(x []float32, lo, hi int) {
	if a.bs != nil {
		for b := lo; b < hi; b++ {
			q := (*[QKK]int8)(a.qs[b*QKK:])
			a.d[b] = q8KBlock(q, x[b*QKK:])
			for k := range QKK / 16 {
				var s int16
				for _, v := range q[16*k : 16*k+16] {
					s += int16(v)
				}
				a.bs[b*16+k] = s
			}
		}
		return
	}
	for b := lo; b < hi; b++ {
		xb, q := x[b*QK:(b+1)*QK], a.qs[b*QK:(b+1)*QK]
		var amax float32
		for _, v := range xb {
			amax = max(amax, float32(math.Abs(float64(v))))
		}
		d := amax / 127
		id := inverse(d)
		var sum int32
		for j, v := range xb {
			q[j] = int8(math.Round(float64(v * id)))
			sum += int32(q[j])
		}
		a.d[b], a.s[b] = d, d*float32(sum)
	}
}
