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
