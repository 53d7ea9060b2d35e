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
