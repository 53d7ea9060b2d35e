// Package cpufeat decides which instruction set prefixd's CPU kernels
// (kernels/cpu and kernels/quant) use: the best that both this build and
// the CPU support, capped by the environment variable PREFIXD_CPU, which
// is read once, when the package initializes.
//
// PREFIXD_CPU=avx2 keeps the kernels off AVX-512 on a CPU that has it, to
// measure or debug the AVX2 paths that an AVX2-only CPU runs;
// PREFIXD_CPU=generic runs the pure-Go kernels even on amd64; avx512 (or
// unset, or empty) caps nothing. A cap above what the CPU has changes
// nothing, and any other value panics at start-up, naming the values.
package cpufeat

import (
	"fmt"
	"os"
)

// Level is an instruction set the kernels may use; each includes the ones
// below it.
type Level uint8

const (
	// Generic is no SIMD: the pure-Go kernels.
	Generic Level = iota
	// AVX2 is AVX2 with FMA and F16C, the OS saving the YMM registers:
	// every AVX2 CPU since Haswell and Zen 1.
	AVX2
	// AVX512F is AVX2's set and AVX-512 Foundation, the OS saving the ZMM
	// and opmask registers: kernels/cpu's float GEMM needs no more.
	AVX512F
	// AVX512 is AVX512F's set and AVX512BW, VL, VNNI and VBMI, which
	// kernels/quant's AVX-512 kernels use: Zen 4 and later, Intel since
	// Ice Lake.
	AVX512
)

// EnvVar names the environment variable that caps the level.
const EnvVar = "PREFIXD_CPU"

// names are the values of PREFIXD_CPU, by the level they cap at.
var names = [...]string{Generic: "generic", AVX2: "avx2", AVX512F: "avx512f", AVX512: "avx512"}

// String returns l's name, as PREFIXD_CPU spells it.
func (l Level) String() string {
	if int(l) < len(names) {
		return names[l]
	}
	return fmt.Sprintf("Level(%d)", uint8(l))
}

// Parse returns the level that a value of PREFIXD_CPU caps the kernels
// at: the empty string caps nothing (AVX512).
func Parse(s string) (Level, error) {
	if s == "" {
		return AVX512, nil
	}
	for l, name := range names {
		if s == name {
			return Level(l), nil
		}
	}
	return 0, fmt.Errorf("cpufeat: %s=%q: want generic, avx2, avx512f or avx512", EnvVar, s)
}

// detected is the best level this build and CPU support; used is the one
// the kernels use, detected capped at PREFIXD_CPU's.
var (
	detected = detect()
	used     = min(detected, mustParse(os.Getenv(EnvVar)))
)

// Kernels returns the instruction set that the kernels use: the best the
// build and CPU support, at most PREFIXD_CPU's.
func Kernels() Level { return used }

// Detected returns the best instruction set this build and CPU support,
// whatever PREFIXD_CPU says.
func Detected() Level { return detected }

func mustParse(s string) Level {
	l, err := Parse(s)
	if err != nil {
		panic(err)
	}
	return l
}
