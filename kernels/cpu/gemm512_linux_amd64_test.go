//go:build !purego

package cpu

import (
	"math/rand/v2"
	"os"
	"syscall"
	"testing"
	"unsafe"

	"github.com/prefixd/prefixd/kernels"
)

// TestGemmReadsNothingPastB runs every AVX-512 kernel, for every type of
// b, on a b that ends where its mapping ends, before a page that may not
// be read, with k not a multiple of 16: the loads of the rows'
// ends, masked or not, must not touch that page (weights mapped from a
// file may end at its last byte). The products are checked against gemm
// on a copy.
func TestGemmReadsNothingPastB(t *testing.T) {
	if !useAVX512 {
		t.Skip("this CPU has no AVX-512")
	}
	page := os.Getpagesize()
	mem, err := syscall.Mmap(-1, 0, 2*page, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		t.Skip("mmap:", err)
	}
	defer syscall.Munmap(mem)
	if err := syscall.Mprotect(mem[page:], syscall.PROT_NONE); err != nil {
		t.Skip("mprotect:", err)
	}
	r := rand.New(rand.NewPCG(17, 18))
	const m, n = 5, 17 // a 4-row panel and a row: 4x6, 1x16 and 1x6 tiles
	for _, typ := range append([]kernels.DType{kernels.F32}, directTypes...) {
		const k = 37
		a := randVec(r, m*k)
		got, want := make([]float32, m*n), make([]float32, m*n)
		if typ == kernels.F32 {
			bf := randVec(r, n*k)
			b := unsafe.Slice((*float32)(unsafe.Pointer(&mem[page-4*n*k])), n*k)
			copy(b, bf)
			gemm(got, n, a, k, b, k, m, n, k)
			gemm(want, n, a, k, bf, k, m, n, k)
		} else {
			h, f := directWeights(r, typ, n*k)
			b := mem[page-len(h) : page]
			copy(b, h)
			directGemmCols(got, a, b, typ, m, 0, n, n, k)
			gemm(want, n, a, k, f, k, m, n, k)
		}
		checkClose(t, typ.String(), got, want, 0)
	}
}
