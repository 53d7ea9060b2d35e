//go:build !purego

package cpu

import (
	"unsafe"

	"github.com/prefixd/prefixd/internal/cpufeat"
	"github.com/prefixd/prefixd/kernels"
)

// The kernels, in gemm512_amd64.s, read b as float32, F16 or BF16 values
// by their names; lda and ldc count values, ldb bytes.

//go:noescape
func gemm4x6AVX512(a *float32, lda int, b unsafe.Pointer, ldb int, k int, c *float32, ldc int, kmask, cmask, amask uint16, pfdist, pfevery, pfphase int)

//go:noescape
func gemm4x6F16AVX512(a *float32, lda int, b unsafe.Pointer, ldb int, k int, c *float32, ldc int, kmask, cmask, amask uint16, pfdist, pfevery, pfphase int)

//go:noescape
func gemm4x6BF16AVX512(a *float32, lda int, b unsafe.Pointer, ldb int, k int, c *float32, ldc int, kmask, cmask, amask uint16, pfdist, pfevery, pfphase int)

//go:noescape
func gemm1x16AVX512(a *float32, b unsafe.Pointer, ldb int, k int, c *float32, kmask, amask uint16)

//go:noescape
func gemm1x16F16AVX512(a *float32, b unsafe.Pointer, ldb int, k int, c *float32, kmask, amask uint16)

//go:noescape
func gemm1x16BF16AVX512(a *float32, b unsafe.Pointer, ldb int, k int, c *float32, kmask, amask uint16)

//go:noescape
func gemm1x6AVX512(a *float32, lda int, b unsafe.Pointer, ldb int, k int, c *float32, ldc int, kmask, cmask, amask uint16)

//go:noescape
func gemm1x6F16AVX512(a *float32, lda int, b unsafe.Pointer, ldb int, k int, c *float32, ldc int, kmask, cmask, amask uint16)

//go:noescape
func gemm1x6BF16AVX512(a *float32, lda int, b unsafe.Pointer, ldb int, k int, c *float32, ldc int, kmask, cmask, amask uint16)

// useAVX512 selects the AVX-512 GEMM kernels. It is true when cpufeat
// lets the kernels use AVX-512F (and AVX2); tests turn it off to check
// the AVX2 and pure-Go kernels on the same machine.
var useAVX512 = haveAVX512()

// haveAVX512 reports whether this build, the CPU and PREFIXD_CPU allow
// the AVX-512 kernels.
func haveAVX512() bool { return cpufeat.Kernels() >= cpufeat.AVX512F }

// gemmBlockBytes is the size of the block of b rows that every 4-row panel
// of a passes over before the next block starts: it stays in L2 while
// the panel stays in L1. (On Zen 4, 128 KiB measured 10% slower at k =
// 768; 512 and 768 KiB no faster.)
const gemmBlockBytes = 256 << 10

// simdGemm computes gemm's product with the AVX-512 kernels and reports
// whether it did: false when they are off or n < 6 (narrower than one
// tile).
func simdGemm(c []float32, ldc int, a []float32, lda int, b []float32, ldb int, m, n, k int) bool {
	if !useAVX512 || n < 6 || m <= 0 || k <= 0 {
		return false
	}
	bb := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(b))), 4*len(b))
	gemmCols(c, ldc, a, lda, gemmB{bb, kernels.F32, ldb}, m, 0, n, n, k)
	return true
}

// directGemm reports whether products on n weight rows of type t run the
// GEMM on the weights as they are, converting each value as it loads it:
// F16 and BF16 with the AVX-512 kernels, n >= 6 (one tile).
func directGemm(t kernels.DType, n int) bool {
	return useAVX512 && n >= 6 && (t == kernels.F16 || t == kernels.BF16)
}

// directGemmCols sets columns [j0, j1) of c[m×n] = a[m×k]·bᵀ, b being
// the bytes of n rows of k values of type t, for which directGemm(t, n)
// must hold.
func directGemmCols(c, a []float32, b []byte, t kernels.DType, m, j0, j1, n, k int) {
	if m > 0 && k > 0 {
		gemmCols(c, n, a, k, gemmB{b, t, k}, m, j0, j1, n, k)
	}
}

// gemmB is the b operand of the AVX-512 kernels: the bytes of rows of
// values of type t (F32, F16 or BF16), ld values apart.
type gemmB struct {
	data []byte
	t    kernels.DType
	ld   int
}

// bytes is the bytes of n of b's values along a row.
func (b gemmB) bytes(n int) int {
	if b.t == kernels.F32 {
		return 4 * n
	}
	return 2 * n
}

// base returns the address of b's first value after checking that b
// holds n rows of k values: the tiles' addresses are offsets from it,
// inside those bounds by construction (a tile's columns lie in [0, n)
// and its terms in [0, k)), so no tile checks its own (which, per 4x6
// tile, was 6% of a Q4_K_M prompt's samples).
func (b gemmB) base(n, k int) unsafe.Pointer {
	_ = b.data[(n-1)*b.bytes(b.ld)+b.bytes(k)-1]
	return unsafe.Pointer(unsafe.SliceData(b.data))
}

// gemmCols computes columns [j0, j1) of gemm's product (n columns in all,
// n >= 6) with the AVX-512 kernels for b's type.
func gemmCols(c []float32, ldc int, a []float32, lda int, b gemmB, m, j0, j1, n, k int) {
	// k of every block but the last: whole groups of 32, the kernels'
	// loop, and the same for every type of b, which so computes bit for
	// bit what F32 computes on its values. Fewer than 4 rows have no a
	// panel to keep in L1.
	kc := k
	if m >= 4 {
		kc = kBlocks(k, m)
	}
	nb := max(6, gemmBlockBytes/(4*kc)/6*6)
	base := b.base(n, k)
	for jb := j0; jb < j1; jb += nb {
		je := min(jb+nb, j1)
		for p0 := 0; p0 < k; p0 += kc {
			gemmBlock(c, ldc, a, lda, b, base, m, jb, je, n, p0, min(kc, k-p0))
		}
	}
}

// gemmTileMajorBytes is the most bytes of a (its rows' part of k in a
// block) for which gemmBlock runs each tile of b through all the 4-row
// panels before it moves on: the tile, 6 rows of b, stays in L1 and a in
// L2, and b comes from memory once while the panels keep the core busy.
// With more rows the panels go one by one over the block, a panel staying
// in L1 and the block in L2, and only the first panel's pass waits on
// memory. Measured on one Zen 4 core over BenchmarkDecodeGemm's weights
// (GFLOP/s, medians of 3, both with the prefetches): at 16 rows F32 125
// panel by panel against 150-155 tile by tile, F16 and BF16 179-188
// against 185-191; at 32 rows F32 151 against 184; at 64 and 128 rows
// still 1-15% better. It is half Zen 4's 1 MiB L2.
const gemmTileMajorBytes = 512 << 10

// tileCols places a 6-column tile for columns from j on, of [j, j1) in an
// n-wide product: a tile that would pass n moves left to start at jj,
// onto columns done already, and cmask names the columns it stores, of
// [j, j1) only.
func tileCols(j, j1, n int) (jj int, cmask uint16) {
	jj = min(j, n-6)
	return jj, uint16(0x3f<<(j-jj)) & (1<<(min(j+6, j1)-jj) - 1)
}

// gemmPrefetchBytes is the least bytes of b in a block for which its
// 4×6 tiles prefetch: a smaller b (attention's few K rows) is in cache
// already, where the prefetches cost 5-15% of the products' speed.
const gemmPrefetchBytes = 64 << 10

// gemmBlock is gemmCols's product over columns [j0, j1) and the kb terms
// of k from p0, added to c if p0 > 0, else stored: 4×6 tiles, and rows
// short of a 4-row panel one at a time. base is b.base's.
//
// The 4×6 kernel prefetches the tile after its own, 6 rows of b on, so
// that b streams from memory ahead of the products instead of stalling
// them: the cores' own prefetchers do not keep six short rows read at
// once streaming. BenchmarkDecodeGemm (85M weights, 2 workers, medians of 3) ran at
// 16 rows 144 GFLOP/s without (F16; BF16 141, F32 160) against 287 with
// (291, 248), at 4 rows 46 against 222 (F32 55 against 80). The
// prefetches are spread over the passes that read the tile from memory:
// tile by tile, the steps of the k loop take turns across the panels;
// panel by panel, the first panel does them all.
func gemmBlock(c []float32, ldc int, a []float32, lda int, b gemmB, base unsafe.Pointer, m, j0, j1, n, p0, kb int) {
	kmask := uint16(1)<<(kb%16) - 1
	ldb, off := b.bytes(b.ld), b.bytes(p0)
	next := 6 * ldb // from a tile's b rows to the next tile's
	pf := (j1-j0)*b.bytes(kb) >= gemmPrefetchBytes
	tileMajor := pf && 4*m*kb <= gemmTileMajorBytes
	panels, tiles := m/4, (j1-j0+5)/6
	outer, inner := panels, tiles
	if tileMajor {
		outer, inner = tiles, panels
	}
	for o := range outer {
		for in := range inner {
			p, t := o, in
			pfevery, pfphase := 0, 0
			switch {
			case tileMajor:
				p, t = in, o
				pfevery, pfphase = panels, p
			case pf && p == 0:
				pfevery = 1 // later panels find b in L2
			}
			i, j := 4*p, j0+6*t
			jj, cmask := tileCols(j, j1, n)
			amask := uint16(0)
			if p0 > 0 {
				amask = cmask
			}
			_, _ = a[(i+3)*lda+p0+kb-1], c[(i+3)*ldc+jj+5] // bounds the assembly relies on
			tile4x6(&a[i*lda+p0], lda, b.t, unsafe.Add(base, jj*ldb+off), ldb, kb, &c[i*ldc+jj], ldc,
				kmask, cmask, amask, next, pfevery, pfphase)
		}
	}
	for i := 4 * panels; i < m; i++ {
		gemmRow(c[i*ldc:], a[i*lda+p0:], b, base, j0, j1, n, p0, kb)
	}
}

// gemmRow is gemmBlock's product for the single row a (to c) over columns
// [j0, j1): 16 at a time, whose sums reduce together, then 6 at a time.
func gemmRow(c []float32, a []float32, b gemmB, base unsafe.Pointer, j0, j1, n, p0, kb int) {
	kmask := uint16(1)<<(kb%16) - 1
	ldb, off := b.bytes(b.ld), b.bytes(p0)
	amask := uint16(0)
	if p0 > 0 {
		amask = 0xffff
	}
	j := j0
	for ; j+16 <= j1; j += 16 {
		_, _ = a[kb-1], c[j+15] // bounds the assembly relies on
		tile1x16(&a[0], b.t, unsafe.Add(base, j*ldb+off), ldb, kb, &c[j], kmask, amask)
	}
	for ; j < j1; j += 6 {
		jj, cmask := tileCols(j, j1, n)
		_, _ = a[kb-1], c[jj+5]
		tile1x6(&a[0], b.t, unsafe.Add(base, jj*ldb+off), ldb, kb, &c[jj], kmask, cmask, amask&cmask)
	}
}

// tile4x6, tile1x6 and tile1x16 call the kernel of their shape for b's
// type t; ldb is in bytes.
func tile4x6(a *float32, lda int, t kernels.DType, b unsafe.Pointer, ldb, k int, c *float32, ldc int, kmask, cmask, amask uint16, pfdist, pfevery, pfphase int) {
	switch t {
	case kernels.F16:
		gemm4x6F16AVX512(a, lda, b, ldb, k, c, ldc, kmask, cmask, amask, pfdist, pfevery, pfphase)
	case kernels.BF16:
		gemm4x6BF16AVX512(a, lda, b, ldb, k, c, ldc, kmask, cmask, amask, pfdist, pfevery, pfphase)
	default:
		gemm4x6AVX512(a, lda, b, ldb, k, c, ldc, kmask, cmask, amask, pfdist, pfevery, pfphase)
	}
}

func tile1x6(a *float32, t kernels.DType, b unsafe.Pointer, ldb, k int, c *float32, kmask, cmask, amask uint16) {
	switch t {
	case kernels.F16:
		gemm1x6F16AVX512(a, 0, b, ldb, k, c, 0, kmask, cmask, amask)
	case kernels.BF16:
		gemm1x6BF16AVX512(a, 0, b, ldb, k, c, 0, kmask, cmask, amask)
	default:
		gemm1x6AVX512(a, 0, b, ldb, k, c, 0, kmask, cmask, amask)
	}
}

func tile1x16(a *float32, t kernels.DType, b unsafe.Pointer, ldb, k int, c *float32, kmask, amask uint16) {
	switch t {
	case kernels.F16:
		gemm1x16F16AVX512(a, b, ldb, k, c, kmask, amask)
	case kernels.BF16:
		gemm1x16BF16AVX512(a, b, ldb, k, c, kmask, amask)
	default:
		gemm1x16AVX512(a, b, ldb, k, c, kmask, amask)
	}
}
