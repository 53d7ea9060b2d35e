//go:build !amd64 || purego

package quant

// dotSIMD has no assembly kernels to offer in this build: the pure-Go
// ones do all the work.
func dotSIMD(Type, []byte, *actRow) (float32, bool) { return 0, false }
