//go:build cuda || nvrtc

package src

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"

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

// compiled caches Compile's PTX by element type and architecture for the
// life of the process: NVRTC takes about 180 ms a translation unit, and a
// test binary opens a device (compiling its kernels) dozens of times.
var compiled struct {
	sync.Mutex
	ptx map[compileKey]string
}

type compileKey struct {
	t    DType
	arch string
}

// compiles counts NVRTC compilations, for the cache's test.
var compiles atomic.Int64

// Compile compiles every kernel for element type t and virtual
// architecture arch (for example "compute_90") and returns the PTX,
// compiling each pair once per process. A compile error is a
// *CompileError carrying NVRTC's log; it is not cached. Compile is safe
// for concurrent use.
func Compile(t DType, arch string) (string, error) {
	compiled.Lock()
	defer compiled.Unlock()
	key := compileKey{t, arch}
	if ptx, ok := compiled.ptx[key]; ok {
		return ptx, nil
	}
	ptx, err := compile(Source(t), "prefixd_"+t.String()+".cu", arch)
	var ce *CompileError
	if errors.As(err, &ce) {
		ce.DType = t
	}
	if err != nil {
		return "", err
	}
	if compiled.ptx == nil {
		compiled.ptx = map[compileKey]string{}
	}
	compiled.ptx[key] = ptx
	return ptx, nil
}

func compile(source, name, arch string) (string, error) {
	compiles.Add(1)
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

// Resources is what ptxas allots one kernel on a real architecture.
type Resources struct {
	Registers   int // per thread
	StackFrame  int // bytes of local memory per thread
	SpillStores int // bytes
	SpillLoads  int // bytes
}

// ptxasInfo matches the lines of ptxas -v that Usage reads.
var ptxasInfo = regexp.MustCompile(`(?m)Compiling entry function '(\w+)'|(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads|Used (\d+) registers`)

// Usage compiles every kernel for element type t to machine code for sm
// (for example "sm_90"), with ptxas reporting, and returns each kernel's
// registers and local memory as NVRTC 11.8's ptxas allots them: what the
// launch bounds must leave room for (a GPU's driver, compiling the PTX
// itself, may allot a few registers more or less; its counts are the
// device's kernel attributes). For tests and tooling: the GPU loads PTX.
func Usage(t DType, sm string) (map[string]Resources, error) {
	prog, err := nvrtc.CreateProgram(Source(t), "prefixd_"+t.String()+".cu")
	if err != nil {
		return nil, fmt.Errorf("src: NVRTC create program: %w", err)
	}
	defer prog.Destroy()
	err = prog.Compile("--gpu-architecture="+sm, "--use_fast_math", "--std=c++14", "--ptxas-options=-v")
	log, _ := prog.GetLog()
	if err != nil {
		return nil, &CompileError{DType: t, Arch: sm, Log: log, Err: err}
	}
	res := map[string]Resources{}
	kernel := ""
	atoi := func(s string) int { n, _ := strconv.Atoi(s); return n } // digits only
	for _, m := range ptxasInfo.FindAllStringSubmatch(log, -1) {
		switch {
		case m[1] != "":
			kernel = m[1]
		case kernel == "":
		case m[2] != "":
			r := res[kernel]
			r.StackFrame, r.SpillStores, r.SpillLoads = atoi(m[2]), atoi(m[3]), atoi(m[4])
			res[kernel] = r
		case m[5] != "":
			r := res[kernel]
			r.Registers = atoi(m[5])
			res[kernel] = r
			kernel = "" // the entry's report ends here; device functions follow
		}
	}
	return res, nil
}
