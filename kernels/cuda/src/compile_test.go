//go:build cuda || nvrtc

package src

import (
	"errors"
	"strings"
	"testing"
)

// TestCompileAll compiles every kernel for every element type and
// architecture with NVRTC and checks each kernel's entry is in the PTX.
func TestCompileAll(t *testing.T) {
	for _, dt := range DTypes {
		for _, arch := range Arches {
			t.Run(dt.String()+"/"+arch, func(t *testing.T) {
				ptx, err := Compile(dt, arch)
				if err != nil {
					t.Fatal(err)
				}
				for _, k := range Kernels {
					if !strings.Contains(ptx, ".entry "+k+"(") {
						t.Errorf("PTX has no entry %s", k)
					}
				}
			})
		}
	}
}

// TestCompileErrorLog checks that a compile error comes back with NVRTC's
// log naming the file and the undefined name.
func TestCompileErrorLog(t *testing.T) {
	_, err := compile(Source(F32)+"KERNEL void broken() { undefined_name = 1; }\n", "broken.cu", "compute_90")
	var ce *CompileError
	if !errors.As(err, &ce) {
		t.Fatalf("got %v, want a *CompileError", err)
	}
	if !strings.Contains(ce.Log, "undefined_name") {
		t.Errorf("log does not name the undefined identifier:\n%s", ce.Log)
	}
}

// TestCompileCached checks that a second Compile of the same element type
// and architecture returns the first's PTX without running NVRTC again,
// and that another architecture is compiled.
func TestCompileCached(t *testing.T) {
	first, err := Compile(BF16, "compute_80")
	if err != nil {
		t.Fatal(err)
	}
	n := compiles.Load()
	again, err := Compile(BF16, "compute_80")
	if err != nil {
		t.Fatal(err)
	}
	if again != first || compiles.Load() != n {
		t.Errorf("second Compile: same PTX %v, NVRTC runs %d -> %d", again == first, n, compiles.Load())
	}
	if _, err := Compile(BF16, "compute_86"); err != nil {
		t.Fatal(err)
	}
	if compiles.Load() != n+1 {
		t.Errorf("a new architecture: NVRTC runs %d -> %d, want one more", n, compiles.Load())
	}
}

// TestRegistersFitBounds compiles every kernel to machine code for Ampere
// and Hopper and checks that the registers ptxas allots each kernel fit
// its launch bound's threads in a block's 65,536 (so the GPU can launch
// every block size launch uses up to the bound), that attn keeps all it
// wants under its 512-thread bound on Hopper (80 registers, where
// attn_wide has 64 and spills), that the tensor-core prefill kernels
// (their Q fragments and output accumulators in registers: 94 and 164 on
// both) and attn_decode_tc (93 on sm_80, 92 on sm_90, under the 102 its
// bound of 5 blocks allows) never spill, and logs each kernel's spills.
func TestRegistersFitBounds(t *testing.T) {
	for _, sm := range []string{"sm_80", "sm_90"} {
		t.Run(sm, func(t *testing.T) {
			res, err := Usage(BF16, sm)
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range Kernels {
				r, ok := res[k]
				if !ok || r.Registers == 0 {
					t.Errorf("%s: no register count in ptxas's report", k)
					continue
				}
				if r.Registers*MaxThreads(k) > 65536 {
					t.Errorf("%s: %d registers × %d threads (its launch bound) > 65,536", k, r.Registers, MaxThreads(k))
				}
				t.Logf("%s: %d registers, %d bytes stack frame, %d/%d bytes spilled/reloaded", k, r.Registers, r.StackFrame,
					r.SpillStores, r.SpillLoads)
			}
			// On Hopper, which the headline benchmarks run on (ptxas for
			// sm_80 settles on 64 registers and spills a few bytes).
			if r := res["attn"]; sm == "sm_90" && r.SpillStores != 0 {
				t.Errorf("attn spills %d bytes under its 512-thread bound", r.SpillStores)
			}
			for _, k := range []string{"attn_prefill64", "attn_prefill128", "attn_decode_tc8", "attn_decode_tc16", "attn_decode_tc32"} {
				if r := res[k]; r.SpillStores != 0 || r.StackFrame != 0 {
					t.Errorf("%s spills %d bytes (stack frame %d) under its launch bound", k, r.SpillStores, r.StackFrame)
				}
			}
		})
	}
}
