//go:build !amd64 || purego

package cpu

// The F16 K/V cache's conversions have no assembly in this build: the
// pure-Go loops in half.go do all the work.

func simdHalfRows(dst []float32, src []uint16, lds, rows, n int) int { return 0 }

func simdToHalf(dst []uint16, src []float32) int { return 0 }

func prefetchHalf(p []uint16, stride, rows, n int) {}
