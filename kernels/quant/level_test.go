package quant

import (
	"os"
	"testing"

	"github.com/prefixd/prefixd/internal/cpufeat"
)

// TestKernelLevel checks that the AVX-512 kernels follow cpufeat,
// PREFIXD_CPU's cap included. (Reading the variable in a test also makes
// go test's cache tell runs under different caps apart.)
func TestKernelLevel(t *testing.T) {
	l := cpufeat.Kernels()
	t.Logf("%s=%q: the kernels use %v of %v", cpufeat.EnvVar, os.Getenv(cpufeat.EnvVar), l, cpufeat.Detected())
	if have512 != (l >= cpufeat.AVX512) {
		t.Errorf("have512 %v at level %v", have512, l)
	}
}
