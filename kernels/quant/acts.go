package quant

import (
	"math"
	"slices"
)

// acts is a batch of activation rows prepared for one weight type: left in
// float32 for the float weight types, quantized to 8 bits per block of 32
// for Q4_0 ... Q8_0 (ggml's Q8_0, with Q8_1's block sums), per block of
// 256 for the K-quants (ggml's Q8_K, 16-value sums included). The quants
// of row r are qs[r*in:(r+1)*in]; the per-block fields follow at the same
// stride.
type acts struct {
	blk int // values per block: 0 (float32 rows), QK or QKK; set once

	x  []float32 // float weights: the caller's rows, not copied
	qs []int8
	d  []float32 // per block: the scale
	s  []float32 // Q8_0 family: d·Σqs per block, for Q4_1/Q5_1's minimums
	bs []int16   // Q8_K: Σqs per 16 values, for the K-quants' offsets
	dt []float32 // Q8_0 with the AVX2 four-row kernel: d block-major, dt[b*rows+r]

	// spread is d spread out for the AVX-512 Q8_0 and Q4_0 kernels of four
	// and eight rows (see spreadScales), set by MatMuls where they run.
	spread []float32

	sums []int32 // Σqs per 16 values: quantizeBlocks' scratch

	// Q8_0 block-major for the packed kernels (see packActs), set by
	// MatMuls where they run.
	pq []int8
	pd []float32
	pc []int32
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
	switch a.blk {
	case 0:
		return actRow{x: a.x[r*in : (r+1)*in]}
	case QKK:
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

// prepare sizes a for n values (rows×in) of activations of block size
// a.blk, reusing its buffers, and points it at x for the float types.
func (a *acts) prepare(x []float32, n int) {
	if a.blk == 0 {
		a.x = x[:n]
		return
	}
	a.x = nil
	a.qs = slices.Grow(a.qs[:0], n)[:n]
	a.d = slices.Grow(a.d[:0], n/a.blk)[:n/a.blk]
	a.sums = slices.Grow(a.sums[:0], n/16)[:n/16]
	if a.blk == QKK {
		a.bs = slices.Grow(a.bs[:0], n/16)[:n/16]
	} else {
		a.s = slices.Grow(a.s[:0], n/a.blk)[:n/a.blk]
	}
}

// quantizeBlocks quantizes the blocks [lo, hi) of x (already prepared):
// d = amax/127 per block, q = round(x/d) to nearest even, and the sums of
// each 16 quants, kept per block for Q4_1/Q5_1 (as d·Σq) and per 16
// values for the K-quants. Ggml's Q8_K takes d = max/−127 for the signed
// maximum instead; the dot products only need x ≈ d·q with |q| ≤ 127, so
// one quantizer serves both.
func (a *acts) quantizeBlocks(x []float32, lo, hi int) {
	bsize := a.blk
	per := bsize / 16
	sums := a.sums[lo*per : hi*per]
	q8Blocks(x[lo*bsize:hi*bsize], a.qs[lo*bsize:hi*bsize], a.d[lo:hi], sums, bsize)
	if bsize == QKK {
		for i, s := range sums {
			a.bs[lo*per+i] = int16(s)
		}
		return
	}
	for b := lo; b < hi; b++ {
		a.s[b] = a.d[b] * float32(a.sums[2*b]+a.sums[2*b+1])
	}
}

// q8BlocksGo is quantizeBlocks' pure-Go kernel, bit for bit the same as
// the assembly one: len(d) blocks of bsize values of x into qs, d and the
// sums of each 16 quants.
func q8BlocksGo(x []float32, qs []int8, d []float32, sums []int32, bsize int) {
	for b := range d {
		xb, qb := x[b*bsize:(b+1)*bsize], qs[b*bsize:(b+1)*bsize]
		var amax float32
		for _, v := range xb {
			amax = max(amax, math.Float32frombits(math.Float32bits(v)&^(1<<31)))
		}
		db := amax / 127
		id := inverse(db)
		d[b] = db
		for k := 0; k < bsize; k += 16 {
			var s int32
			for j := k; j < k+16; j++ {
				qb[j] = int8(math.RoundToEven(float64(xb[j] * id)))
				s += int32(qb[j])
			}
			sums[(b*bsize+k)/16] = s
		}
	}
}

// scalesByBlock fills a.dt with the scales of a's rows (already
// quantized) block-major: dt[b*rows+r] = d[r*nb+b], where the AVX2
// four-row Q8_0 kernel loads four consecutive rows' at once.
func (a *acts) scalesByBlock(rows int) {
	nb := len(a.d) / rows
	a.dt = slices.Grow(a.dt[:0], len(a.d))[:len(a.d)]
	for r := range rows {
		for b, d := range a.d[r*nb : (r+1)*nb] {
			a.dt[b*rows+r] = d
		}
	}
}

// spreadScales sets a.spread from the scales of rows rows of in values
// (QK blocks): each pair of blocks' scales as sixteen floats, the first's
// in eight and the second's in eight, an odd last block's in all sixteen,
// each row 16·⌈nb/2⌉ floats; the AVX-512 four- and eight-row Q8_0 and
// Q4_0 kernels multiply by them in one operation.
func (a *acts) spreadScales(rows, in int) {
	nb := in / QK
	per := spreadRow(nb)
	a.spread = slices.Grow(a.spread[:0], rows*per)[:rows*per]
	for r := range rows {
		sp := a.spread[r*per : (r+1)*per]
		for j, d := range a.d[r*nb : (r+1)*nb] {
			lo, n := j/2*16+j%2*8, 8
			if j == nb-1 && j%2 == 0 {
				n = 16
			}
			for i := lo; i < lo+n; i++ {
				sp[i] = d
			}
		}
	}
}

// spreadRow is the length of a row's spread scales for nb blocks.
func spreadRow(nb int) int { return (nb + 1) / 2 * 16 }
