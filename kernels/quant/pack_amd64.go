//go:build amd64 && !purego

package quant

// havePacked reports whether the packed Q8_0 kernels run: AVX-512 with
// VNNI, cpufeat's AVX512 level (the tests clear have512 to run the AVX2
// kernels, and then the row-major weights).
func havePacked() bool { return have512 }

//go:noescape
func dotQ8_0P16x1AVX512(w *byte, a *int8, ad *float32, ac *int32, nb, ng, rows int, dst *float32, dstStride int)

//go:noescape
func dotQ8_0P16x4AVX512(w *byte, a *int8, ad *float32, ac *int32, nb, ng, rows int, dst *float32, dstStride int)

//go:noescape
func dotQ8_0P16x8AVX512(w *byte, a *int8, ad *float32, ac *int32, nb, ng, rows int, dst *float32, dstStride int)

// dotPacked multiplies ng packed groups of nb blocks (w) by n activation
// rows (1, 4 or 8) of a block-major batch of rows rows, starting at q, d
// and c (see packActs), into dst[r·stride+o] for r < n, o < 16·ng.
func dotPacked(n int, w []byte, q []int8, d []float32, c []int32, nb, ng, rows int, dst []float32, stride int) {
	// The bounds of the last values read and written checked, the
	// assembly stays inside them.
	last := (nb-1)*rows + n - 1
	_, _, _, _ = w[ng*nb*packBlockBytes-1], q[last*QK+QK-1], d[last], c[last]
	_ = dst[(n-1)*stride+ng*packRows-1]
	switch n {
	case 8:
		dotQ8_0P16x8AVX512(&w[0], &q[0], &d[0], &c[0], nb, ng, rows, &dst[0], stride)
	case 4:
		dotQ8_0P16x4AVX512(&w[0], &q[0], &d[0], &c[0], nb, ng, rows, &dst[0], stride)
	default:
		dotQ8_0P16x1AVX512(&w[0], &q[0], &d[0], &c[0], nb, ng, rows, &dst[0], stride)
	}
}
