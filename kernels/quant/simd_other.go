//go:build !amd64 || purego

package quant

// dotRowsSIMD and dot2SIMD have no assembly kernels to offer in this
// build: the pure-Go ones do all the work.
func dotRowsSIMD(Type, []byte, *actRow, []float32) bool { return false }

func dot2SIMD(Type, []byte, *acts, int, int, []float32, int) bool { return false }

// q8Blocks quantizes activation blocks; see q8BlocksGo.
func q8Blocks(x []float32, qs []int8, d []float32, sums []int32, bsize int) {
	q8BlocksGo(x, qs, d, sums, bsize)
}

// haveSIMD, have512 and have4AVX2 are never set in this build: there are no kernels
// to choose.
var haveSIMD, have512, have4AVX2 = false, false, false

// dequantSIMD has no kernels to offer in this build: Dequantize decodes
// every value in Go.
func dequantSIMD(Type, []float32, []byte) int { return 0 }

// dotNSIMD has no four- or eight-row kernels to offer in this build.
func dotNSIMD(int, Type, []byte, *acts, int, int, []float32, int) bool { return false }

// q8ScalesByBlock is false in this build: no kernel reads acts.dt.
func q8ScalesByBlock() bool { return false }
