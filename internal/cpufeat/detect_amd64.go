//go:build !purego

package cpufeat

import "golang.org/x/sys/cpu"

// detect returns the best level of the CPU that the OS supports
// (x/sys/cpu reports AVX and AVX-512 features only where the OS saves
// their registers).
func detect() Level {
	x := cpu.X86
	switch {
	case !x.HasAVX2 || !x.HasFMA || !x.HasF16C:
		return Generic
	case !x.HasAVX512F:
		return AVX2
	case !x.HasAVX512BW || !x.HasAVX512VL || !x.HasAVX512VNNI || !x.HasAVX512VBMI:
		return AVX512F
	}
	return AVX512
}
