// Package src holds prefixd's CUDA kernels as CUDA C source, embedded in
// the binary, and compiles them with NVRTC (Compile, behind the `cuda` or
// `nvrtc` build tag, which needs the CUDA SDK's NVRTC: scripts/cuda-sdk.sh).
//
// The same files are compiled two ways: by NVRTC into PTX for the GPU
// (kernels/cuda loads it at start), and by the host C++ compiler into the
// CPU emulator (kernels/cuda/emu), which runs every kernel's threads on the
// CPU so that CI checks their arithmetic and indexing without a GPU.
// Compile imports only gorgonia.org/cu/nvrtc, which, unlike gorgonia.org/cu,
// runs on a machine without a GPU.
package src

import (
	"embed"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// files are the sources in the order they are compiled: the shared header
// first.
//
//go:embed common.cuh rows.cu kv.cu attention.cu tensor.cu decode.cu prefill.cu decode_tc.cu sample.cu
var files embed.FS

var order = []string{"common.cuh", "rows.cu", "kv.cu", "attention.cu", "tensor.cu", "decode.cu", "prefill.cu", "decode_tc.cu", "sample.cu"}

// DType is the element type of K/V blocks, weights and matrix-product
// inputs; activations between kernels are float32 whatever it is.
type DType int

// The element types. BF16 is the default; F32 serves exactness tests.
const (
	BF16 DType = iota
	F16
	F32
)

// DTypes lists every DType, for tests and for compiling them all.
var DTypes = []DType{BF16, F16, F32}

// String returns the type's name: bf16, f16 or f32.
func (t DType) String() string {
	switch t {
	case BF16:
		return "bf16"
	case F16:
		return "f16"
	case F32:
		return "f32"
	}
	return fmt.Sprintf("DType(%d)", int(t))
}

// Size returns the bytes of one element.
func (t DType) Size() int {
	if t == F32 {
		return 4
	}
	return 2
}

// ParseDType returns the DType named s (bf16, f16 or f32).
func ParseDType(s string) (DType, error) {
	for _, t := range DTypes {
		if t.String() == s {
			return t, nil
		}
	}
	return 0, fmt.Errorf("src: unknown element type %q (want bf16, f16 or f32)", s)
}

// Kernels names every kernel the sources define (each is `extern "C"` in
// the PTX, so these are its entry names).
var Kernels = []string{
	"embed", "rmsnorm", "rmsnorm_f32", "rope_gguf", "rope_halves", "swiglu", "add", "add_bias", "gather_rows", "argmax",
	"kv_append", "copy_blocks", "rope_kv_append", "attn", "attn_wide",
	"attn_decode8", "attn_decode16", "attn_decode32", "tc_check", "attn_prefill64", "attn_prefill128",
	"attn_decode_tc8", "attn_decode_tc16", "attn_decode_tc32", "sample_rows",
}

// kernelDef matches a kernel's definition, which must declare its launch
// bounds (a literal thread count, and optionally the blocks per
// multiprocessor it is compiled for) so that MaxThreads knows them.
var kernelDef = regexp.MustCompile(`(?m)^KERNEL void __launch_bounds__\((\d+)(?:, \d+)?\) (\w+)\(`)

// maxThreads is each kernel's launch bound, read from the sources once.
var maxThreads = func() map[string]int {
	m := map[string]int{}
	for _, name := range order {
		data, err := files.ReadFile(name)
		if err != nil {
			panic(err) // embedded at build time: cannot happen
		}
		for _, d := range kernelDef.FindAllStringSubmatch(string(data), -1) {
			n, err := strconv.Atoi(d[1])
			if err != nil {
				panic(err) // the pattern takes digits only
			}
			m[d[2]] = n
		}
	}
	return m
}()

// MaxThreads returns the most threads per block kernel may launch with:
// its __launch_bounds__, which the GPU enforces (a launch over it fails)
// and the emulator with it. It returns 0 for a name that is not a kernel.
func MaxThreads(kernel string) int { return maxThreads[kernel] }

// Source returns one translation unit of every kernel for element type t.
func Source(t DType) string {
	var b strings.Builder
	fmt.Fprintf(&b, "#define PREFIXD_KV_%s 1\n", strings.ToUpper(t.String()))
	for _, name := range order {
		data, err := files.ReadFile(name)
		if err != nil {
			panic(err) // embedded at build time: cannot happen
		}
		fmt.Fprintf(&b, "#line 1 %q\n", name)
		b.Write(data)
	}
	return b.String()
}

// File returns one embedded source file by name, for tests that read the
// kernels' definitions.
func File(name string) ([]byte, error) { return files.ReadFile(name) }

// Files lists the embedded source files in compile order.
func Files() []string { return append([]string(nil), order...) }
