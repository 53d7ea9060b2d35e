//go:build cuda || nvrtc

package src

import (
	"errors"
	"fmt"

	"gorgonia.org/cu/nvrtc"
)

// Arches are the virtual architectures prefixd compiles for: Ampere
// (A100, compute_80) and Hopper (H100, compute_90). PTX for compute_80 also
// runs, JIT-compiled by the driver, on later GPUs.
var Arches = []string{"compute_80", "compute_90"}

// CompileError is an NVRTC compile failure with the compiler's log.
type CompileError struct {
	DType DType
	Arch  string
	Log   string
	Err   error
}

// Error implements error; it includes NVRTC's log, which names the file
// and line of each error.
func (e *CompileError) Error() string {
	return fmt.Sprintf("src: NVRTC compile for %s, %s: %v\n%s", e.Arch, e.DType, e.Err, e.Log)
}

// Unwrap returns NVRTC's error.
func (e *CompileError) Unwrap() error { return e.Err }

// Compile compiles every kernel for element type t and virtual
// architecture arch (for example "compute_90") and returns the PTX. A
// compile error is a *CompileError carrying NVRTC's log.
func Compile(t DType, arch string) (string, error) {
	ptx, err := compile(Source(t), "prefixd_"+t.String()+".cu", arch)
	var ce *CompileError
	if errors.As(err, &ce) {
		ce.DType = t
	}
	return ptx, err
}

func compile(source, name, arch string) (string, error) {
	prog, err := nvrtc.CreateProgram(source, name)
	if err != nil {
		return "", fmt.Errorf("src: NVRTC create program: %w", err)
	}
	defer prog.Destroy()
	if err := prog.Compile("--gpu-architecture="+arch, "--use_fast_math", "--std=c++14"); err != nil {
		log, _ := prog.GetLog()
		return "", &CompileError{Arch: arch, Log: log, Err: err}
	}
	return prog.GetPTX()
}
