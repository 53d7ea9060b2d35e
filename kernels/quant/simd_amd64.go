//go:build amd64 && !purego

package quant

import "github.com/prefixd/prefixd/internal/cpufeat"

// haveSIMD reports whether the AVX2 kernels run: cpufeat allows AVX2, FMA
// and F16C.
var haveSIMD = cpufeat.Kernels() >= cpufeat.AVX2

// have512 reports whether the kernels of simd512_amd64.s run: the
// single-row dot products in place of the AVX2 ones, and the
// dequantizers. They use masks and byte and word ops of AVX512BW and VL,
// VPDPBUSD and VPDPWSSD (AVX512_VNNI) and VPERMT2B (AVX512_VBMI): cpufeat's
// AVX512 level. The tests clear it to run the AVX2 kernels on a CPU that
// has both.
var have512 = cpufeat.Kernels() >= cpufeat.AVX512

// The single-row kernels multiply nrows consecutive weight rows (at
// least 1) by one activation row into out[0:nrows]: n is in values for
// the float types (a multiple of 8, at least 8) and nb in blocks for the
// quantized ones (at least 1). ad holds the activations' per-block scales,
// as their Q4_1/Q5_1 block sums, bs the Q8_K 16-value sums.

//go:noescape
func quantQ8AVX(x *float32, qs *int8, d *float32, sums *int32, nb, bsize int)

//go:noescape
func dotF32AVX(w *byte, x *float32, n, nrows int, out *float32)

//go:noescape
func dotF16AVX(w *byte, x *float32, n, nrows int, out *float32)

//go:noescape
func dotBF16AVX(w *byte, x *float32, n, nrows int, out *float32)

//go:noescape
func dotQ8_0AVX(w *byte, a *int8, ad *float32, nb, nr int, dst *float32)

//go:noescape
func dotQ4_0AVX(w *byte, a *int8, ad *float32, nb, nrows int, out *float32)

//go:noescape
func dotQ5_0AVX(w *byte, a *int8, ad *float32, nb, nrows int, out *float32)

//go:noescape
func dotQ4_1AVX(w *byte, a *int8, ad, as *float32, nb, nrows int, out *float32)

//go:noescape
func dotQ5_1AVX(w *byte, a *int8, ad, as *float32, nb, nrows int, out *float32)

//go:noescape
func dotQ4KAVX(w *byte, a *int8, ad *float32, bs *int16, nb, nrows int, out *float32)

//go:noescape
func dotF16AVX512(w *byte, x *float32, n, nrows int, out *float32)

//go:noescape
func dotBF16AVX512(w *byte, x *float32, n, nrows int, out *float32)

//go:noescape
func dotQ5KAVX512(w *byte, a *int8, ad *float32, bs *int16, nb, nr int, dst *float32)

//go:noescape
func dotQ4_0AVX512(w *byte, a *int8, ad *float32, nb, nrows int, out *float32)

//go:noescape
func dotQ8_0AVX512(w *byte, a *int8, ad *float32, nb, nr int, dst *float32)

//go:noescape
func dotQ6KAVX512(w *byte, a *int8, ad *float32, bs *int16, nb, nr int, dst *float32)

//go:noescape
func dotQ4KAVX512(w *byte, a *int8, ad *float32, bs *int16, nb, nr int, dst *float32)

//go:noescape
func dequantF16AVX(src *byte, dst *float32, n int)

//go:noescape
func dequantBF16AVX(src *byte, dst *float32, n int)

//go:noescape
func dequantQ8_0AVX(src *byte, dst *float32, nb int)

//go:noescape
func dequantF16AVX512(src *byte, dst *float32, n int)

//go:noescape
func dequantBF16AVX512(src *byte, dst *float32, n int)

//go:noescape
func dequantQ8_0AVX512(src *byte, dst *float32, nb int)

//go:noescape
func dequantQ4KAVX512(src *byte, dst *float32, nb int)

//go:noescape
func dequantQ6KAVX512(src *byte, dst *float32, nb int)

//go:noescape
func dequantQ5KAVX512(src *byte, dst *float32, nb int)

//go:noescape
func dequantQ4_0AVX512(src *byte, dst *float32, nb int)

//go:noescape
func dequantQ4_1AVX512(src *byte, dst *float32, nb int)

//go:noescape
func dequantQ5_0AVX512(src *byte, dst *float32, nb int)

//go:noescape
func dequantQ5_1AVX512(src *byte, dst *float32, nb int)

// The two-row kernels multiply nr consecutive weight rows (at least 1)
// by two activation rows, the second's values (x), quants (a) astride
// bytes and scales (ad) adstride bytes after the first's (its 16-value
// sums bs 8·adstride bytes after), setting dst[o] and dst[dstStride+o]
// for weight row o. The K-quant ones fold each block into a row's sum as
// the single- and four-row kernels do, to the same bits.

//go:noescape
func dotF32x2AVX(w *byte, x *float32, xstride, n, nr int, dst *float32, dstStride int)

//go:noescape
func dotF16x2AVX(w *byte, x *float32, xstride, n, nr int, dst *float32, dstStride int)

//go:noescape
func dotBF16x2AVX(w *byte, x *float32, xstride, n, nr int, dst *float32, dstStride int)

//go:noescape
func dotQ4Kx2AVX(w *byte, a *int8, ad *float32, bs *int16, astride, adstride, nb, nr int, dst *float32, dstStride int)

//go:noescape
func dotQ5Kx2AVX(w *byte, a *int8, ad *float32, bs *int16, astride, adstride, nb, nr int, dst *float32, dstStride int)

//go:noescape
func dotQ6Kx2AVX(w *byte, a *int8, ad *float32, bs *int16, astride, adstride, nb, nr int, dst *float32, dstStride int)

//go:noescape
func dotQ8_0x4AVX512(w *byte, a *int8, ad *float32, nb, nr int, dst *float32, dstStride int)

//go:noescape
func dotQ4Kx4AVX512(w *byte, a *int8, ad *float32, bs *int16, nb, nr int, dst *float32, dstStride int)

//go:noescape
func dotQ6Kx4AVX512(w *byte, a *int8, ad *float32, bs *int16, nb, nr int, dst *float32, dstStride int)

//go:noescape
func dotQ4_0x4AVX512(w *byte, a *int8, ad *float32, nb, nr int, dst *float32, dstStride int)

//go:noescape
func dotQ5Kx4AVX512(w *byte, a *int8, ad *float32, bs *int16, nb, nr int, dst *float32, dstStride int)

//go:noescape
func dotQ8_0x8AVX512(w *byte, a *int8, ad *float32, nb, nr int, dst *float32, dstStride int)

//go:noescape
func dotQ4_0x8AVX512(w *byte, a *int8, ad *float32, nb, nr int, dst *float32, dstStride int)

//go:noescape
func dotQ4Kx8AVX512(w *byte, a *int8, ad *float32, bs *int16, nb, nr int, dst *float32, dstStride int)

//go:noescape
func dotQ5Kx8AVX512(w *byte, a *int8, ad *float32, bs *int16, nb, nr int, dst *float32, dstStride int)

//go:noescape
func dotQ6Kx8AVX512(w *byte, a *int8, ad *float32, bs *int16, nb, nr int, dst *float32, dstStride int)

// The AVX2 four-row kernels: the AVX-512 ones' contract (see
// dotQ8_0x4AVX512, dotQ4Kx4AVX512) on 32-byte registers.

// dotQ8_0x4AVX and dotQ8_0x8AVX take the activations' scales block-major
// (acts.dt, from row r on, dtStride floats per block), so one load brings
// the four or eight rows'.
//
//go:noescape
func dotQ8_0x4AVX(w *byte, a *int8, dt *float32, dtStride, nb, nr int, dst *float32, dstStride int)

//go:noescape
func dotQ8_0x8AVX(w *byte, a *int8, dt *float32, dtStride, nb, nr int, dst *float32, dstStride int)

//go:noescape
func dotQ4Kx4AVX(w *byte, a *int8, ad *float32, bs *int16, nb, nr int, dst *float32, dstStride int)

//go:noescape
func dotQ5Kx4AVX(w *byte, a *int8, ad *float32, bs *int16, nb, nr int, dst *float32, dstStride int)

//go:noescape
func dotQ6Kx4AVX(w *byte, a *int8, ad *float32, bs *int16, nb, nr int, dst *float32, dstStride int)

//go:noescape
func dotQ5KAVX(w *byte, a *int8, ad *float32, bs *int16, nb, nrows int, out *float32)

//go:noescape
func dotQ6KAVX(w *byte, a *int8, ad *float32, bs *int16, nb, nrows int, out *float32)

// dotRowsSIMD sets dst[i] to the dot product of weight row i of w (len(dst)
// rows, consecutive) with the activation row a, in one assembly call; it
// returns false for a type without an AVX2 kernel, or on a CPU without
// AVX2, leaving dst alone. w must hold at least len(dst) rows of a's
// length.
func dotRowsSIMD(t Type, w []byte, a *actRow, dst []float32) bool {
	nr := len(dst)
	if !haveSIMD || nr == 0 {
		return false
	}
	switch t {
	case F32, F16, BF16:
		n := len(a.x)
		if n%8 != 0 {
			return false
		}
		_ = w[nr*n*t.BlockBytes()-1]
		switch t {
		case F32:
			dotF32AVX(&w[0], &a.x[0], n, nr, &dst[0])
		case F16:
			if have512 {
				dotF16AVX512(&w[0], &a.x[0], n, nr, &dst[0])
			} else {
				dotF16AVX(&w[0], &a.x[0], n, nr, &dst[0])
			}
		default:
			if have512 {
				dotBF16AVX512(&w[0], &a.x[0], n, nr, &dst[0])
			} else {
				dotBF16AVX(&w[0], &a.x[0], n, nr, &dst[0])
			}
		}
	case Q8_0, Q4_0, Q5_0, Q4_1, Q5_1:
		nb := len(a.d)
		_, _, _ = w[nr*nb*t.BlockBytes()-1], a.qs[nb*QK-1], a.s[nb-1]
		switch t {
		case Q8_0:
			if have512 {
				dotQ8_0AVX512(&w[0], &a.qs[0], &a.d[0], nb, nr, &dst[0])
			} else {
				dotQ8_0AVX(&w[0], &a.qs[0], &a.d[0], nb, nr, &dst[0])
			}
		case Q4_0:
			if have512 {
				dotQ4_0AVX512(&w[0], &a.qs[0], &a.d[0], nb, nr, &dst[0])
			} else {
				dotQ4_0AVX(&w[0], &a.qs[0], &a.d[0], nb, nr, &dst[0])
			}
		case Q5_0:
			dotQ5_0AVX(&w[0], &a.qs[0], &a.d[0], nb, nr, &dst[0])
		case Q4_1:
			dotQ4_1AVX(&w[0], &a.qs[0], &a.d[0], &a.s[0], nb, nr, &dst[0])
		default:
			dotQ5_1AVX(&w[0], &a.qs[0], &a.d[0], &a.s[0], nb, nr, &dst[0])
		}
	case Q4_K, Q5_K, Q6_K:
		nb := len(a.d)
		_, _, _ = w[nr*nb*t.BlockBytes()-1], a.qs[nb*QKK-1], a.bs[nb*16-1]
		switch t {
		case Q4_K:
			if have512 {
				dotQ4KAVX512(&w[0], &a.qs[0], &a.d[0], &a.bs[0], nb, nr, &dst[0])
			} else {
				dotQ4KAVX(&w[0], &a.qs[0], &a.d[0], &a.bs[0], nb, nr, &dst[0])
			}
		case Q5_K:
			if have512 {
				dotQ5KAVX512(&w[0], &a.qs[0], &a.d[0], &a.bs[0], nb, nr, &dst[0])
			} else {
				dotQ5KAVX(&w[0], &a.qs[0], &a.d[0], &a.bs[0], nb, nr, &dst[0])
			}
		case Q6_K:
			if have512 {
				dotQ6KAVX512(&w[0], &a.qs[0], &a.d[0], &a.bs[0], nb, nr, &dst[0])
			} else {
				dotQ6KAVX(&w[0], &a.qs[0], &a.d[0], &a.bs[0], nb, nr, &dst[0])
			}
		}
	default:
		return false
	}
	return true
}

// dot2SIMD sets dst[o] and dst[stride+o] to the dot products of weight
// row o of w (one or more whole rows, consecutive) with activation rows r
// and r+1 of a (rows of in values), in one assembly call that unpacks
// each weight row once for both; stride is at least the number of weight
// rows. It returns false for a type or row length without such a kernel
// (Q8_0 has none, nor have the K-quants with AVX-512, whose two rows go one
// at a time; every K-quant kernel gives a row the same bits), or on a CPU
// without AVX2, leaving dst alone.
func dot2SIMD(t Type, w []byte, a *acts, r, in int, dst []float32, stride int) bool {
	switch t {
	case F32, F16, BF16:
	case Q4_K, Q5_K, Q6_K:
		if have512 {
			return false
		}
	default:
		return false
	}
	bs := t.BlockSize()
	if !haveSIMD || in == 0 || in%max(bs, 8) != 0 {
		return false
	}
	rowBytes := in / bs * t.BlockBytes()
	nr := len(w) / rowBytes
	if stride < nr {
		panic("quant: dot2SIMD's output rows overlap")
	}
	// The bounds of the last rows checked, the assembly reads inside them.
	_, _ = w[nr*rowBytes-1], dst[stride+nr-1]
	if bs == 1 {
		_ = a.x[(r+2)*in-1]
		x := &a.x[r*in]
		switch t {
		case F32:
			dotF32x2AVX(&w[0], x, 4*in, in, nr, &dst[0], stride)
		case F16:
			dotF16x2AVX(&w[0], x, 4*in, in, nr, &dst[0], stride)
		default:
			dotBF16x2AVX(&w[0], x, 4*in, in, nr, &dst[0], stride)
		}
		return true
	}
	nb := in / bs
	_, _ = a.qs[(r+2)*in-1], a.d[(r+2)*nb-1]
	q, d := &a.qs[r*in], &a.d[r*nb]
	_ = a.bs[(r+2)*in/16-1]
	sums := &a.bs[r*in/16]
	switch t {
	case Q4_K:
		dotQ4Kx2AVX(&w[0], q, d, sums, in, 4*nb, nb, nr, &dst[0], stride)
	case Q5_K:
		dotQ5Kx2AVX(&w[0], q, d, sums, in, 4*nb, nb, nr, &dst[0], stride)
	default:
		dotQ6Kx2AVX(&w[0], q, d, sums, in, 4*nb, nb, nr, &dst[0], stride)
	}
	return true
}

// dotNSIMD sets dst[i*stride+o] to the dot product of weight row o of w
// (one or more whole rows, consecutive) with activation row r+i of a
// (rows of in values), for i < n, in one assembly call that unpacks each
// weight block once for the n activation rows; n is 4 or 8, stride at
// least the number of weight rows. An eight-row kernel's results equal
// the four-row one's bit for bit. It returns false for a type without
// such a kernel on this CPU (AVX-512: Q8_0, Q4_0 and the K-quants, four
// or eight rows; AVX2: Q8_0 four or eight rows, the K-quants four),
// leaving dst alone.
func dotNSIMD(n int, t Type, w []byte, a *acts, r, in int, dst []float32, stride int) bool {
	switch t {
	case Q8_0, Q4_0, Q4_K, Q5_K, Q6_K:
	default:
		return false
	}
	nb := in / a.blk
	if nb == 0 || (n != 4 && n != 8) {
		return false
	}
	if !have512 {
		return dot4AVX(n, t, w, a, r, in, dst, stride)
	}
	nr := len(w) / (nb * t.BlockBytes())
	if stride < nr {
		panic("quant: dotNSIMD's output rows overlap")
	}
	// The bounds of the last rows checked, the assembly reads inside them.
	_, _, _ = w[nr*nb*t.BlockBytes()-1], dst[(n-1)*stride+nr-1], a.d[(r+n)*nb-1]
	_ = a.qs[(r+n)*in-1]
	if t == Q8_0 || t == Q4_0 {
		// They take the scales spread out (acts.spreadScales, which
		// MatMuls sets).
		per := spreadRow(nb)
		_ = a.spread[(r+n)*per-1]
		q, d := &a.qs[r*in], &a.spread[r*per]
		switch {
		case t == Q8_0 && n == 8:
			dotQ8_0x8AVX512(&w[0], q, d, nb, nr, &dst[0], stride)
		case t == Q8_0:
			dotQ8_0x4AVX512(&w[0], q, d, nb, nr, &dst[0], stride)
		case n == 8:
			dotQ4_0x8AVX512(&w[0], q, d, nb, nr, &dst[0], stride)
		default:
			dotQ4_0x4AVX512(&w[0], q, d, nb, nr, &dst[0], stride)
		}
		return true
	}
	_ = a.bs[(r+n)*in/16-1]
	q, d, bs := &a.qs[r*in], &a.d[r*nb], &a.bs[r*in/16]
	switch {
	case t == Q4_K && n == 8:
		dotQ4Kx8AVX512(&w[0], q, d, bs, nb, nr, &dst[0], stride)
	case t == Q4_K:
		dotQ4Kx4AVX512(&w[0], q, d, bs, nb, nr, &dst[0], stride)
	case t == Q5_K && n == 8:
		dotQ5Kx8AVX512(&w[0], q, d, bs, nb, nr, &dst[0], stride)
	case t == Q5_K:
		dotQ5Kx4AVX512(&w[0], q, d, bs, nb, nr, &dst[0], stride)
	case n == 8:
		dotQ6Kx8AVX512(&w[0], q, d, bs, nb, nr, &dst[0], stride)
	default:
		dotQ6Kx4AVX512(&w[0], q, d, bs, nb, nr, &dst[0], stride)
	}
	return true
}

// have4AVX2 reports whether dot4AVX runs the AVX2 four-row kernels: on
// where the AVX2 kernels run. Benchmarks clear it to time the two-row
// kernels that take those rows without it.
var have4AVX2 = haveSIMD

// q8ScalesByBlock reports whether MatMul keeps a block-major copy of the
// Q8_0 activations' scales (acts.dt) for the AVX2 multi-row Q8_0 kernels.
func q8ScalesByBlock() bool { return have4AVX2 && !have512 }

// dot4AVX is dotNSIMD below AVX-512: eight or four rows of Q8_0, or four
// of a K-quant, through the AVX2 multi-row kernels, whose results equal
// the pure-Go ones up to float rounding (the integer sums exact in both);
// Q8_0's equal its single-row kernel's bit for bit.
func dot4AVX(n int, t Type, w []byte, a *acts, r, in int, dst []float32, stride int) bool {
	if !have4AVX2 || t == Q4_0 || n != 4 && (n != 8 || t != Q8_0) {
		return false
	}
	nb := in / a.blk
	nr := len(w) / (nb * t.BlockBytes())
	if stride < nr {
		panic("quant: dotNSIMD's output rows overlap")
	}
	// The bounds of the last rows checked, the assembly reads inside them.
	_, _, _ = w[nr*nb*t.BlockBytes()-1], dst[(n-1)*stride+nr-1], a.d[(r+n)*nb-1]
	_ = a.qs[(r+n)*in-1]
	q, d := &a.qs[r*in], &a.d[r*nb]
	if t == Q8_0 {
		rows := len(a.d) / nb
		_ = a.dt[(nb-1)*rows+r+n-1]
		if n == 8 {
			dotQ8_0x8AVX(&w[0], q, &a.dt[r], rows, nb, nr, &dst[0], stride)
		} else {
			dotQ8_0x4AVX(&w[0], q, &a.dt[r], rows, nb, nr, &dst[0], stride)
		}
		return true
	}
	_ = a.bs[(r+4)*in/16-1]
	bs := &a.bs[r*in/16]
	switch t {
	case Q4_K:
		dotQ4Kx4AVX(&w[0], q, d, bs, nb, nr, &dst[0], stride)
	case Q5_K:
		dotQ5Kx4AVX(&w[0], q, d, bs, nb, nr, &dst[0], stride)
	default:
		dotQ6Kx4AVX(&w[0], q, d, bs, nb, nr, &dst[0], stride)
	}
	return true
}

// q8Blocks quantizes len(d) activation blocks of bsize values (a multiple
// of 32); see q8BlocksGo, which it matches bit for bit.
func q8Blocks(x []float32, qs []int8, d []float32, sums []int32, bsize int) {
	nb := len(d)
	if !haveSIMD || nb == 0 {
		q8BlocksGo(x, qs, d, sums, bsize)
		return
	}
	_, _, _ = x[nb*bsize-1], qs[nb*bsize-1], sums[nb*bsize/16-1]
	quantQ8AVX(&x[0], &qs[0], &d[0], &sums[0], nb, bsize)
}

// dequantSIMD decodes the leading whole blocks of src into dst with an
// assembly kernel, bit for bit as dequantGo would, and returns how many
// values it wrote: 0 for a type without a kernel on this CPU (AVX2 has
// ones for F16, BF16 and Q8_0, AVX-512 for every type it dequantizes), and for
// F16 and BF16 a multiple of 16 (AVX-512) or 8 (AVX2), the rest left to
// Go.
func dequantSIMD(t Type, dst []float32, src []byte) int {
	if !have512 {
		return dequantAVX(t, dst, src)
	}
	var n int
	switch t {
	case F16, BF16:
		if n = len(dst) &^ 15; n == 0 {
			return 0
		}
		_ = src[2*n-1]
		if t == F16 {
			dequantF16AVX512(&src[0], &dst[0], n)
		} else {
			dequantBF16AVX512(&src[0], &dst[0], n)
		}
	case Q8_0, Q4_0, Q4_1, Q5_0, Q5_1:
		nb := len(dst) / QK
		if nb == 0 {
			return 0
		}
		_ = src[nb*t.BlockBytes()-1]
		switch t {
		case Q8_0:
			dequantQ8_0AVX512(&src[0], &dst[0], nb)
		case Q4_0:
			dequantQ4_0AVX512(&src[0], &dst[0], nb)
		case Q4_1:
			dequantQ4_1AVX512(&src[0], &dst[0], nb)
		case Q5_0:
			dequantQ5_0AVX512(&src[0], &dst[0], nb)
		default:
			dequantQ5_1AVX512(&src[0], &dst[0], nb)
		}
		n = nb * QK
	case Q4_K, Q5_K, Q6_K:
		nb := len(dst) / QKK
		if nb == 0 {
			return 0
		}
		_ = src[nb*t.BlockBytes()-1]
		switch t {
		case Q4_K:
			dequantQ4KAVX512(&src[0], &dst[0], nb)
		case Q5_K:
			dequantQ5KAVX512(&src[0], &dst[0], nb)
		default:
			dequantQ6KAVX512(&src[0], &dst[0], nb)
		}
		n = nb * QKK
	}
	return n
}

// dequantAVX is dequantSIMD without AVX-512: the AVX2 kernels decode
// F16 and BF16 rows 8 values at a time, and Q8_0's whole blocks.
func dequantAVX(t Type, dst []float32, src []byte) int {
	if !haveSIMD {
		return 0
	}
	if t == Q8_0 {
		nb := len(dst) / QK
		if nb == 0 {
			return 0
		}
		_ = src[nb*t.BlockBytes()-1]
		dequantQ8_0AVX(&src[0], &dst[0], nb)
		return nb * QK
	}
	n := len(dst) &^ 7
	if n == 0 || (t != F16 && t != BF16) {
		return 0
	}
	_ = src[2*n-1]
	if t == F16 {
		dequantF16AVX(&src[0], &dst[0], n)
	} else {
		dequantBF16AVX(&src[0], &dst[0], n)
	}
	return n
}
