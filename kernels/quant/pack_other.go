//go:build !amd64 || purego

package quant

// havePacked reports whether packed Q8_0 kernels run: none in this build.
func havePacked() bool { return false }

// dotPacked is never called in this build: PackQ8_0 packs nothing.
func dotPacked(int, []byte, []int8, []float32, []int32, int, int, int, []float32, int) {
	panic("quant: no packed kernels in this build")
}
